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
// On Linux the server serves WebSockets from a few epoll event loops
// instead of a goroutine per connection: the loop reads, parses frames and
// runs the handlers; any goroutine writes straight to the non-blocking
// socket, and what the kernel does not take waits in memory (bounded by
// [Options.MaxBuffered]) until the socket is writable. So an idle
// connection costs a few hundred bytes, a relayed message costs no
// goroutine switch, and a peer that stops reading never blocks a sender.
// Handlers therefore must not block; the namespace Connect hook, which may
// wait on an authenticator, runs on its own goroutine while the
// connection's later packets are held. Elsewhere, behind TLS, or with
// [Options.GoroutinePerConn], each WebSocket has a reader goroutine
// (gorilla/websocket) with the same semantics. Long-polling connections
// hold no goroutine between requests.
//
// What a peer can make the server hold is bounded: frames held while a
// namespace connect is decided plus the attachments of the binary packet
// being assembled (twice [Options.MaxPayload]; attachments for a namespace
// the peer has not joined are counted off, never kept), what waits for a
// peer that does not read ([Options.MaxBuffered], polling queue and
// WebSocket backlog alike), a POST body that stops arriving
// ([Options.BodyIdleTimeout]) and a polling answer the peer does not read
// ([Options.WriteTimeout]). Binary placeholders are checked against the
// attachments before a packet is delivered. Frames queued for a polling
// peer go out on the WebSocket, in order, before anything sent after the
// upgrade.
//
// The client (used by the Go Agent SDK, the Computer and the load tools)
// connects polling-first and upgrades, as the A2C-SMCP specification asks
// of SDKs, or straight over WebSocket.
//
// No other package in the module talks Socket.IO directly.
package sio
