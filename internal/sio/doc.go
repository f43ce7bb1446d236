// Package sio is the project's one Socket.IO implementation: a server and a
// client for the Socket.IO v4 wire format (Engine.IO protocol 4 with
// long-polling and WebSocket, Socket.IO protocol 5 with namespaces,
// acknowledgements and binary attachments).
//
// It is written for the A2C-SMCP signalling path, where the server relays
// opaque JSON between peers: event arguments stay [encoding/json.RawMessage]
// from the wire to the handler and back, so a relayed payload is never
// decoded into maps and re-encoded. Handlers are typed interfaces rather
// than the variadic ...any callbacks of general-purpose libraries.
//
// Each WebSocket connection costs one reader goroutine; writes are queued
// and drained by a short-lived goroutine that exists only while there is
// something to write, so a slow peer never blocks the sender and an idle
// connection holds no writer. Long-polling connections hold no goroutine
// between requests.
//
// No other package in the module talks Socket.IO directly.
package sio
