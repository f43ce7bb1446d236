// Package server is the A2C-SMCP signalling server: the hub that Agents and
// Computers connect to over Socket.IO (namespace /smcp).
//
// Before anything else, every HTTP request (Engine.IO handshakes and
// polling, /healthz, /metrics, the console, whatever [Server.Handle]
// mounts) meets the Host and Origin rule of [Config].Origins (package
// origin): a Host the hub does not answer to gets 421, a page of another
// origin 403, both as the flat ErrorPayload, and nothing runs.
//
// It owns the handshake gate (a2c_version checked at the HTTP layer, before
// Socket.IO, on polling and WebSocket alike, answering 400 or 400/4008),
// the authentication hook ([Authenticator]), the offices (one Agent and
// any number of uniquely named Computers each, with enter and leave
// notifications), the relay of the eight client:* requests from an Agent
// to one Computer of its office with per-call deadlines, the server:*
// events, the operators' office listing (GET /api/offices/{office}), and
// the server's Prometheus metrics. It also keeps each joined Computer's
// a2c:management_state, an extension event of this implementation that
// no Agent ever sees, for the console ([Server.Management]).
//
// With [Config].Cluster set, a server is one node of a cluster of servers
// that act as one hub through Redis: package cluster holds the Redis side
// (leases, the office rules as scripts, membership copies, frames between
// nodes) and clustered.go joins it to the server. Without it, no cluster
// code runs at all.
//
// It does not know what a tool is: payloads are validated and routed,
// never interpreted, and Computers' answers are relayed byte for byte.
package server
