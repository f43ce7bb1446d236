// Package config owns the Computer's configuration file: parsing,
// validation, bundle_id resolution, inputs and placeholder substitution, and
// redaction. It never starts a process or opens a connection; the packages
// that do take a [Server] from here and act on it.
//
// # Documents
//
// [Load] and [Parse] accept JSON or YAML in any of these shapes, so that
// files written for the Python SDK load unchanged:
//
//   - a single server object: {"name": ..., "type": "stdio", "server_parameters": {...}};
//   - a list of server objects;
//   - a document {"inputs": [...], "servers": {"<key>": {server object}, ...}},
//     which is also what client:get_config returns. "servers" may be a list
//     instead of an object, and "mcp_servers" (the shape of the protocol's
//     conformance fixtures) is accepted in its place.
//
// A top-level "mcpServers" is rejected with an explicit error: in other
// tools that key holds server objects of a different shape (no "type", no
// "server_parameters"), and accepting the key would only move the error one
// level down.
//
// Servers keep the order in which the file lists them, for JSON and YAML
// alike. That order decides which server wins when two resolve to the same
// bundle_id in a list (the first; the others are dropped and reported as a
// [Diagnostic]). Two keys of one "servers" object that resolve to the same
// bundle_id are an error instead, because both were named deliberately.
//
// # Validation
//
// A problem that makes a server unusable stops loading with an [*Error] that
// names the file, the server and the field, for example
//
//	servers.yaml: server "weather": server_parameters.command: required
//
// Two identities that would read the same environment variable (see
// [EnvName]), such as inputs "api-key" and "api_key", are an error too.
//
// Problems that leave every kept server usable (a duplicate bundle_id, an
// alias in default_tool_meta, colliding aliases found by
// [Server.CheckAliases]) are reported as [Diagnostic] values instead. Unknown
// fields are ignored, so newer files load in older Computers; a known field
// of the wrong type is an error.
//
// # Placeholders and secrets
//
// Server fields may hold ${input:ID} and ${env:NAME} placeholders. Parsing
// keeps them literal: the bundle_id is derived from the raw text, and
// [Server.Raw] always holds what the file said. A [Resolver] substitutes
// them on demand ([Resolver.Render]), reading inputs from the environment
// (see [EnvName]), a command, the user's (stored or prompted) answer or
// the input's default. Each Render resolves afresh: the Computer renders a
// server's raw configuration before every real start of it, so that a
// restart never reuses an earlier start's values (protocol 0.3.2).
//
// # Inputs
//
// A pickString's options are {"label", "value"} objects (0.3.2): the label
// is shown, the value substituted. Label and value are required and
// non-empty; duplicates are allowed. The older form, a list of strings, is
// refused with an error that shows the new one, and a default must be the
// value of some option (null means no default). A value from the
// environment or the user that is the value of no option fails with
// [ErrInvalidSelection] (category "invalid_selection"); it is never
// replaced by the default or the first option. With no user value at all
// the default is taken, else the first option's value (never stored).
// Errors of Render carry the runtime contract's category
// ([Error.Category]) and the input's id ([Error].Input).
//
// # Tool metadata
//
// [Server.PublishedToolMeta] is the three-layer ToolMeta merge of 0.4.0:
// tool_meta[tool] over default_tool_meta over the tags an MCP server
// declares itself (see [smcp.MergeToolMeta]); alias and auto_apply only
// ever come from this file.
//
// No error, diagnostic or redacted configuration produced by this package
// contains a resolved input, an environment value, an env or header value
// from the file, or the default of a password input. [Server.Redact] and
// [Redacted] give the views that may leave the Computer.
package config
