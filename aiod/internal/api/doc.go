// Package api holds what every aiod plane answers with: the
// {success, message, data, hint} envelope, the 422 validation body in the
// daemon's serde wording, the 2 MiB JSON body limit, and body and query
// decoding into request structs. Planes (aiod/commands, aiod/files,
// ...) import it; package aiod mounts them.
package api
