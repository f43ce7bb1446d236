// Package smcp holds the wire vocabulary of the A2C-SMCP protocol, version
// [ProtocolVersion], as spoken between an Agent, the signaling Server and a
// Computer over the Socket.IO namespace [Namespace].
//
// The package owns:
//
//   - the 23 event names ([EventToolCall] … [NotifyCancelToolCall]) and the
//     two session roles ([RoleAgent], [RoleComputer]);
//   - this implementation's one extension event, [EventManagementState]
//     (Computer to Server only, never seen by an Agent), with its payload
//     [ManagementState];
//   - the payload structs of every event, with the protocol's snake_case JSON
//     names, and the MCP [CallToolResult] with its A2C result markers;
//   - the error codes ([CodeBadRequest] … [CodeCrossRoom]) and the flat
//     ErrorPayload, modelled by [Error] and recognised by [DecodeError];
//   - protocol versions: [ParseVersion], [Compatible] and the connect-time
//     gate [CheckVersion] with its 400 / 4008 answers;
//   - bundle_id derivation ([NormalizeBundleName], [Identity],
//     [DeriveBundleID]) and exposed tool names ([ExposedName]);
//   - edge validation of request payloads ([Decode], the Validate methods and
//     the limits [MaxNameLen], [MaxReqIDLen], [MaxToolNameLen], [MaxTimeout]).
//
// The package is pure: it performs no I/O, starts no goroutines and depends
// only on the standard library. Transport, routing and behaviour live in the
// packages that import it.
//
// # Decoding and encoding
//
// Optional fields are pointers, or carry omitempty/omitzero, so that a value
// decoded from the wire re-encodes without gaining fields it did not have.
// Unknown fields are ignored on decode (the protocol adds optional fields in
// MINOR versions), except on [Error], which keeps them in [Error.Extra].
//
// Validation happens once, at the edge: [Decode] turns malformed JSON into a
// 400 [Error], and each request type's Validate method checks field presence,
// lengths and ranges. Neither ever echoes more than a short, escaped prefix of
// the offending input.
package smcp
