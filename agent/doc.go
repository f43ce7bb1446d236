// Package agent is the Go SDK for the Agent side of A2C-SMCP: it connects
// to a signalling server (polling first, protocol version added by the
// SDK), joins an office, and asks the office's Computers for their tools,
// configuration, desktop, resources, skills and blobs, and runs tool calls
// with timeouts and cancellation.
//
// Errors keep their protocol meaning: a flat ErrorPayload from the server
// or a Computer is a *[smcp.Error] (test it with errors.As or errors.Is), a
// version refusal is a *[ProtocolVersionError] and is never retried, and a
// tool's own failure is a result with IsError set, not an error.
package agent
