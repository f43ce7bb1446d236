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
// tool name (-32602) are JSON-RPC errors, always on HTTP 200. The methods
// served are initialize, ping, tools/list and tools/call (and the
// notifications); every other request, prompts/*, resources/*,
// logging/setLevel and completion/complete included, is -32601
// `method not found: "<method>"` on every path, as the declared
// capabilities (tools only) say. (A method the Go SDK does not know at
// all is refused by the SDK on a session before any handler runs: 400
// with -32600 and id null; the plain path answers it -32601.) The
// transport's own refusals (a body too large, a batch too large or whose
// answer is full, a session unknown or one too many) are described below.
//
// # Routing of POST /mcp
//
// A POST without a session that speaks MCP 2026-07-28 (its
// MCP-Protocol-Version header, its _meta, or server/discover; see
// newEra) is answered on its own stateless path (stateless.go), with
// the same dispatcher. What follows is the handshake-era routing.
//
// A request carrying Mcp-Session-Id, a GET or a DELETE belongs to the
// streamable-HTTP transport and goes to the Go SDK's handler (sessions,
// SSE, idle sessions closed after [SessionIdle]). A POST body is read
// first (at most [MaxBody]: 413 with a JSON-RPC error past it) and parsed
// (not JSON: -32700 on HTTP 200), whatever the path. A POST without a
// session goes to the SDK only when it opens one: a single (not batched)
// initialize request whose Accept lists text/event-stream and
// application/json (or a wildcard) and whose Content-Type is
// application/json. Every other POST is the plain path, whatever its
// Accept: no session, no handshake needed; one JSON answer per body, 202
// with an empty body when the body held only notifications or responses.
// The SDK's refusals come back as JSON-RPC errors on the SDK's status: an
// unknown or ended session is 404 with -32001 "session not found" (a
// client opens a new session on a 404), a GET or DELETE without one 400.
// At most [MaxSessions] sessions are open at once; one more initialize
// is 503 with -32000 (in-process connections do not count).
//
// JSON-RPC batches (arrays) are accepted on the plain path, each element
// answered on its own (MCP 2025-06-18 dropped them, JSON-RPC 2.0 has
// them; the SDK path refuses them for 2025-06-18 and later). A batch
// holds at most [MaxBatch] elements (more: one -32600, id null, nothing
// run); its elements run in order, its tools/list elements share one
// listing, and once its answers reach [MaxBatchAnswer] bytes the requests
// left are answered -32000 without being run. initialize answers the
// client's protocolVersion when it is one of the handshake-era revisions
// the Go SDK speaks, else the newest of them; the capabilities are
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
// Every request meets the daemon's Host and Origin rule first
// ([Config.Origins], package origin, the same rule as every other route
// of the daemon): a Host that is not a loopback name, the address the
// daemon listens on or an --allowed-host gets 421; an Origin that is not
// the daemon's own or an --allowed-origin gets 403; both as a JSON-RPC
// error -32000 with a null id. See [Server.ServeHTTP].
//
// # Browser tools
//
// browser_get_info, browser_gui_screenshot and browser_gui_execute_action
// drive [Config.Browser]. browser_get_info hands it the /mcp request the
// call came with ([Origin]: Host, X-Forwarded-* headers, the query), so
// its URLs are built as the info route builds them; on a streamable-HTTP
// session the request is rebuilt from the call's own POST (the SDK hands
// a call its headers only, so ServeHTTP records the host, query and
// scheme in X-Aiod-Mcp-Origin-* headers, a client's own copies removed
// first); through [Server.Connect] there is none. browser_gui_execute_action
// checks action_type against [ActionTypes] before the plane sees the
// action ("action_type is required", "Invalid action_type: X. Available
// types: ...") and answers {"status":"success","action_performed":"X"}.
// Every failure, a plane that is down included, is isError with the
// plane's text.
//
// # Upstreams
//
// [Config.Upstreams] (EXTRA_MCP_SERVERS) names loopback MCP servers:
// {"name": {"url": "http://127.0.0.1:PORT/mcp", "prefix": "p"}}. Only
// http:// on 127.0.0.1, localhost or [::1] (any case, one trailing dot
// allowed) is used; other entries are skipped with a warning
// ([Server.Warnings]). Logs, warnings and messages show an upstream's URL
// with its user information, query values and fragment masked
// (internal/redact). There is no handshake and no session: one POST per
// request, redirects not followed (a 3xx is a bad upstream). tools/list asks every upstream at once on every list, each
// within a few seconds, and leaves out one that does not answer. With a
// prefix, tools are published as <prefix>_<tool> and the prefix is
// stripped on forwarding; without one, only tools whose names start with
// <name>_ are published and the name is forwarded whole. A call goes to
// the upstream with the longest matching prefix (<prefix>_, or <name>_
// without one), the first registered on a tie, and the list applies the
// same rule: a tool whose published name would be routed to another
// upstream is not listed, and a built-in name wins a collision. Calls are
// routed by prefix, not by the last list: a call to an upstream that is
// down is a result with isError; a name no prefix matches is -32602.
// Arguments that are not an object are refused (isError) before
// forwarding; a result that is not a JSON object, or an answer whose id
// is not the request's, is isError; other results and JSON-RPC errors
// pass back unedited.
//
// Every request to an upstream carries [HopHeader]; a request that
// carries it is answered from the built-in tools only (its tools/list
// asks no upstream; a call under an upstream's prefix is isError, not
// forwarded), so a daemon peered with itself, or two daemons peered both
// ways, list their 10 + 10 tools in one round instead of recursing.
package mcp
