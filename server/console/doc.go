// Package console is the hub's web console: pages that show the offices
// and their members, what each Computer offers, the tool calls as they
// run, each call's trace as a timeline, a form to call a tool, and the
// sandboxes the hub knows (files, commands, python cells), and those of
// its sandbox pool with their CPU and memory use (pause, resume,
// delete). "a2c server --console" serves it, and "a2c up" always does, at
// / on the hub's port.
//
// The page is plain HTML, CSS and JavaScript written here and embedded in
// the binary (static/, go:embed): no framework, no build step, no request
// to any other host. A Content-Security-Policy of 'self' holds it to that.
//
// # Access
//
// When the hub has a token, everything but the login form and the static
// files asks for a session: POST /login with the token (form field
// "token") sets the cookie a2c_console (HttpOnly, SameSite=Strict, Path=/,
// Secure behind TLS), whose value is a random session id, never the
// token. Sessions last 12 hours; POST /logout ends one. A session that
// ends (logout, expiry, eviction) takes its open live streams and its
// running sandbox requests with it: a stream ends (an expiry is seen at
// the next ping), a proxied answer is cut, or answers 401 when it had not
// started. A request without a valid session gets the login form (GET
// /) or 401 with the console's error shape (the API). Requests that
// change anything (POST, PUT, DELETE) must also carry an Origin (or
// Referer) of the hub itself, or get 403. (The hub's Host and Origin rule,
// package origin, has refused a rebound Host with 421 and a foreign
// Origin with 403, in the hub's shape, before the console sees a request;
// the console judges a Referer by the same rule.) With no token the console is
// open, as the hub is.
//
// POST /login (and /logout) answer a plain form with 303: to / once
// logged in (or out), else to /?error=token (wrong token), /?error=limited
// (wait: 5 wrong tokens came from this address within a minute, or 100
// from all addresses together) or /?error=invalid. An address is an IPv4
// address or an IPv6 /64; past 4,096 addresses failing within a minute,
// the others share one count of 5. A login is counted when its token is
// compared, in one step with the check of the limits, so logins sent
// together (or with slow bodies) cannot pass the limit together; a right
// token is not counted. A request with "Accept: application/json" gets 204,
// or the error (401, 429, 400) in the console's shape instead. The
// cookie's Max-Age is the session's 12 hours; logout deletes it. At most
// 1,024 sessions are kept (a new login past that ends the oldest).
//
// # Routes (the contract between console.go and static/app.js)
//
// Errors are {"error":{"code":N,"message":"..."}} with the HTTP status N.
//
//	GET  /                          the app (or the login form)
//	POST /login, POST /logout
//	GET  /console/static/{file}     app.js, app.css (public, no data)
//	GET  /api/console/session       {"auth":bool,"node":"...","pool":bool,"version":"..."}
//	                                (auth: the hub has a token, so logout
//	                                means something; pool: the console has a
//	                                sandbox pool; version: the protocol)
//	GET  /api/console/offices       {"offices":[Office]}
//	GET  /api/console/offices/{office}
//	                                Office
//	GET  /api/console/offices/{office}/computers/{computer}
//	                                {"office","computer","tools":[Tool],"servers":[Server],
//	                                "management":Management|null}
//	POST /api/console/offices/{office}/computers/{computer}/call
//	                                body {"tool","arguments":{},"timeout":secs}
//	                                answer {"req_id","agent","trace_id","result":CallToolResult}
//	GET  /api/console/calls?office=ID
//	                                {"calls":[Call],"dropped":N} (N: ended calls
//	                                fallen out of the log, the last 1,000 kept)
//	GET  /api/console/calls/stream?office=ID
//	                                text/event-stream: "event: call" with a Call
//	                                (at its start and at its end), "event: dropped"
//	                                with {"dropped":N} when this page lost events
//	                                (N: its total so far; events wait in a
//	                                1,024-event buffer per page and are sent
//	                                every 10 ms at most); a ": ping"
//	                                comment every 15 s; 503 past 8 streams
//	                                of one session (of one address when the
//	                                console is open) or 64 in all
//	GET  /api/console/calls/{agent}/{req_id}
//	                                {"call":Call,"trace":[tracing.Span],"dropped_spans":N}
//	GET  /api/console/sandboxes     {"sandboxes":[{"name","url"}]}
//	ANY  /api/console/sandboxes/{name}/api/{path...}
//	                                the sandbox's own HTTP API (aiod), its token added;
//	                                only v1/file/*, v1/bash/*, v1/shell/* (not its
//	                                WebSocket), v1/code/*, v1/jupyter/*, v2/fs/*,
//	                                v2/commands*, v2/code/*, v2/watch* and GET
//	                                v1/sandbox, v2/sandbox; anything else 404
//	GET  /api/console/pool/sandboxes
//	                                {"sandboxes":[PoolSandbox]}
//	POST /api/console/pool/sandboxes/{id}/pause
//	POST /api/console/pool/sandboxes/{id}/resume
//	                                the sandbox object after it, or 204 when
//	                                the pool lists it no more
//	DELETE /api/console/pool/sandboxes/{id}
//	                                204
//
// The pool routes are there when the console has a sandbox pool
// (Config.Pool), else 404. An id is 20 characters of [a-z2-7], else 400.
// PoolSandbox is the pool's sandbox object (see package aiod/pool) with
// "metrics" (the pool's metrics object, or null when they could not be
// had: "metrics_error" then says why) and "sampled_at" (RFC 3339, when the
// console read them; null without metrics). The metrics of a list are
// read 8 at a time, each within 3 s; the list itself within 10 s, a
// pause, resume or delete within 30 s. The pool's refusals keep their
// status and message (404 no such sandbox, 409, 429, 503 ...); a pool
// that fails is 502, one that does not answer in time 504.
//
// The sandbox proxy waits at most 15 minutes for an answer to start (a
// command or a python cell that answers when done), else 502. Once it
// started, an answer is cut when the sandbox sends no byte for 5 minutes
// (aiod's streams send something far more often while a command prints
// nothing: a ping frame every 30 s on a command's NDJSON stream, a
// keep-alive comment every 15 s on a watch's events) or when the client
// reads nothing for 30 s (each write to it has that deadline); either
// ends the request to the sandbox too.
//
// GET /api/console/offices/{office} answers 404 for an office with no
// members.
//
// Office is {"office_id","members":[{"sid","name","role","a2c_version",
// "node","connected_since"}]} (connected_since: the member's join time,
// RFC 3339, omitted when unknown: a member held by another node of a
// cluster). The office list holds the offices where this node has
// members (every office of a hub that runs alone).
//
// Tool is one tool of client:get_tools in the console's shape:
// {"name","bundle_id","description","inputSchema":{JSON Schema},
// "meta":{"tags":[...],"auto_apply":bool}} (inputSchema is the tool's
// params_schema; tags [] and auto_apply false when the Computer sets
// none). Server is one MCP server of client:get_config:
// {"bundle_id","name","type","disabled","auto_apply","origin"} (auto_apply:
// the server's default_tool_meta says so; origin: where the server comes
// from, from Management: a settings scope (user, project, local, embed,
// flag, policy) or "plugin", "" when unknown), sorted by bundle_id.
//
// Management is the state the Computer's management plane sent the hub
// (smcp.ManagementState, the a2c:management_state extension event, which
// no Agent sees): {"computer","servers":[{"bundle_id","name","origin",
// "plugin" (the plugin "<plugin>@<marketplace>", origin plugin only),
// "verdict":"enabled"|"disabled"|"pending","served":bool}],"plugins":[{"id",
// "state":"installed_enabled"|"installed_disabled"|"not_installed",
// "enabled","active","reason" (why an enabled plugin is not active,
// omitted when none),"mcpServers":[bundle_id]}]}. It is null when the
// Computer sent none (it runs without the management plane, or another
// node of a cluster holds it). It never holds a server's parameters.
//
// Call is {"req_id","agent","computer","office","tool","start" (RFC 3339),
// "duration_ms" (so far while running),"state":"running"|"done",
// "outcome" ("" while running, else ok|error|timeout|cancelled|gone),
// "error_code" (0 when none),"console":bool,"trace_id","node"}. The list
// holds the running calls and the last 1,000 ended ones, newest first.
//
// The tool call's body: "tool" the exposed tool name, "arguments" a JSON
// object (absent: {}), "timeout" whole seconds 1..3600 (absent: 60). Its
// answer is 200 with the Computer's CallToolResult, failed or not; when
// the relay refuses or the Computer does not answer the answer is an
// error: 404 (no such Computer in the office), 400 (invalid request),
// 403 (the relay's 403), 503 (hub shutting down or cluster
// unavailable), 504 (no answer in time), 502 (any other error code a
// Computer answers with), with the relay's message. The computer page asks the Computer
// the same way (client:get_tools, client:get_config), with the same
// errors.
//
// The console's own calls go through the same relay as an Agent's, from a
// member of the office that has no socket (server.LocalRequest); the
// call log and the spans mark them console: true.
package console
