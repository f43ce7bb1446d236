// Package mcp is aiod's Model Context Protocol endpoint: the ten built-in
// sandbox tools, each a thin adapter over the engine of the HTTP plane that
// does the same work, the loopback upstreams of EXTRA_MCP_SERVERS, and the
// ways of reaching them: POST /mcp (stateless JSON-RPC as the daemon
// documents it, or the streamable-HTTP transport for clients that open a
// session) and an in-memory transport for a Computer in the same process
// ([Server.Connect]).
//
// # One dispatcher
//
// Every path reaches the same two functions: the tool list (the built-ins
// in their published order, then each upstream's tools) and the call
// dispatcher (a built-in by name, else an upstream by prefix, else the
// JSON-RPC error -32602 "unknown tool: <name>"). The SDK's sessions get
// them through a receiving middleware on the SDK server, so a session
// client, a plain client and an in-process Computer see the same bytes.
// Everything that happens inside a tool, bad arguments included, is a
// result with isError true; only an unparsable body (-32700), a malformed
// request (-32600), an unknown method (-32601) and an unknown or missing
// tool name (-32602) are JSON-RPC errors, always on HTTP 200.
//
// # Routing of POST /mcp
//
// A request carrying Mcp-Session-Id, a GET or a DELETE, or a POST whose
// Accept lists text/event-stream belongs to the streamable-HTTP transport
// and goes to the Go SDK's handler (sessions, SSE, idle sessions closed
// after [SessionIdle]). Every other POST is the plain path: no session,
// no handshake needed, no Accept requirement; one JSON answer per body,
// 202 with an empty body when the body held only notifications or
// responses. JSON-RPC batches (arrays) are accepted on the plain path, each
// element answered on its own (MCP 2025-06-18 dropped them, JSON-RPC 2.0
// has them; the SDK path refuses them for 2025-06-18 and later). Bodies
// are limited to [MaxBody] (8 MiB, 413). initialize answers the client's
// protocolVersion when it is one of the handshake-era revisions the Go SDK
// speaks, else the newest of them; the capabilities are
// {"tools":{"listChanged":false}} and serverInfo is {"name":"aiod"}.
//
// # Cancellation
//
// A call ends, and a running command is killed with its whole process
// tree (the commands engine's Command.Kill, as the sync route does when its
// client leaves), when its client goes away (the HTTP request ends), when
// a notifications/cancelled names it (on the plain path: a notification
// POSTed separately whose requestId matches a call in flight; plain ids
// are not scoped to a client), when its SDK session or in-memory
// connection ends, or when the server is closed. A forwarded call's
// upstream POST ends with it.
//
// # DNS-rebinding protection
//
// A request that arrived on a loopback address (the connection's local
// address) must name a loopback host in Host and in Origin when it sends
// one (localhost, 127.0.0.0/8, ::1, any port, or [Config.AllowedHosts]);
// otherwise 403. See [Server.ServeHTTP].
//
// # Upstreams
//
// [Config.Upstreams] (EXTRA_MCP_SERVERS) names loopback MCP servers:
// {"name": {"url": "http://127.0.0.1:PORT/mcp", "prefix": "p"}}. Only
// http:// on 127.0.0.1, localhost or [::1] is used; other entries are
// skipped with a warning ([Server.Warnings]). There is no handshake and
// no session: one POST per request. tools/list asks every upstream at
// once on every list, each within a few seconds, and leaves out one that
// does not answer. With a prefix, tools are published as <prefix>_<tool>
// and the prefix is stripped on forwarding; without one, only tools whose
// names start with <name>_ are published. A built-in name wins a
// collision; between upstreams the first registered wins. Calls are
// routed by prefix, not by the last list: a call to an upstream that is
// down is a result with isError; a name no prefix matches is -32602.
// Answers, results and JSON-RPC errors alike, pass back unedited.
package mcp
