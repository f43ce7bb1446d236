// Package aiod is the sandbox daemon: it assembles the HTTP
// surface that every plane shares (the {success, message, data, hint}
// envelope, 422 validation in the daemon's serde wording, the 2 MiB JSON
// limit, request ids, the optional API key, 404/405 envelopes, health,
// OpenAPI and metrics) and mounts the planes, each in its own package
// under aiod/ (aiod/commands, aiod/files, ...); what only the planes
// share (the envelope and decoding, serde wording, accounts, the
// daemon's children, the file error) lives under aiod/internal. [Main] is
// the aiod command line; cmd/aiod only calls it. The published API (v2,
// plus the v1 compatibility surface) is the contract: clients written for
// aiod work unchanged.
package aiod
