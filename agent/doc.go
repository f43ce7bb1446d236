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
//
// # Connection loss
//
// A [Client] survives the loss of its connection (a server restart, a
// network cut, missed pings): it connects again with bounded exponential
// backoff and jitter, calls [Options].AuthFunc again so that a rotated
// credential is presented, and joins the office it had joined under the
// same name before it sends any other request. Notifications resume on
// the new connection. [ReconnectOptions] sets the backoff and the number
// of attempts, or turns reconnecting off.
//
// Requests in flight when the connection is lost end at once with an error
// matching [ErrConnectionLost]; they are not resent, because the Computer
// may already have acted on them (a tool call may still run there).
// Requests made while the Client reconnects wait for the rejoin, up to
// their own timeout and context.
//
// Each loss, reconnect and failed attempt is reported, in order, to
// [Options].OnDisconnect, OnReconnect and OnReconnectError. A permanent
// refusal (protocol version, credentials) or the last allowed attempt ends
// the Client: [Client.Done] closes and [Client.Err] returns a
// *[ReconnectError]. A refused rejoin (the office's Agent seat is still
// held, typically by the Client's own old session until the server sees
// it gone) is retried.
package agent
