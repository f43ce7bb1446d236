// Package gateway is the hub's MCP gateway: it serves each office of an
// A2C-SMCP hub as one MCP server, so that an MCP client (a desktop
// assistant, an IDE, an agent SDK) reaches the office's Computers without
// an A2C SDK. It is mounted by the server's [server.Server.HandleMCP] at
// /offices/{office}/mcp and at /mcp ([Config.DefaultOffice], "default"
// unless set: a2c up sets its --office).
//
// # One Agent per office
//
// An MCP client of the gateway is an Agent of the office with no
// Socket.IO connection ([server.Caller], the way the console makes its
// calls): its requests go through the hub's relay, its tool calls are in
// the console's call log and traced as any Agent's (named
// [DefaultAgent]), and it takes no seat, so an office with an Agent still
// serves it. Every office the gateway is asked for gets its own MCP server
// (the Go SDK's, which speaks the handshake-era revisions with sessions
// and 2026-07-28 without) and its own streamable-HTTP handler, so a
// session id is only good on the route of its office.
//
// # Tools
//
// tools/list is every Computer's client:get_tools, each tool under its
// exposed name (bundle_id + "__" + tool). When two Computers of the
// office expose the same name, neither takes it: each is listed as
// "<computer>.<exposed name>" instead (left out, with a warning in the
// log, when that is no valid MCP tool name: longer than 128 bytes or
// holding a character other than A-Z a-z 0-9 _ - .), so that a call never
// reaches another Computer than the one its name meant. A tool's input
// schema is its params_schema ({"type":"object"} when that is not a JSON
// object of type object); _meta holds a2c_computer, a2c_bundle_id, the
// tool's A2C meta and its return_schema (a2c_return_schema; MCP's
// outputSchema is not set, as a Computer's results need not carry
// structured content).
//
// The list is read again when the office changes: a Computer enters or
// leaves, or sends server:update_tool_list, update_desktop or
// update_skills (the hub reports its offices' events to the gateway, see
// [server.Server.WatchOffice]). A call of a listed tool does not wait for
// a reading; a Computer that does not list in time keeps its listing and
// is skipped for 30 s. A change reaches the clients as
// notifications/tools/list_changed (and resources/list_changed): on a
// handshake-era session's stream, or to a 2026-07-28 client's
// subscriptions/listen stream. In a cluster a node hears only of the
// offices where it holds members, so the gateway also reads the office
// again every [ClusterPoll] while the office has MCP clients.
//
// # Calls
//
// tools/call relays client:tool_call to the tool's Computer with a budget
// of [Config.CallTimeout] (the relay's deadline is that plus the hub's
// slack). The Computer's CallToolResult comes back as MCP's: content,
// structuredContent and isError as they are, and the A2C result markers
// (a2c_timeout, a2c_cancelled, error_code, mcp_server, auth_hint...) in
// the result's _meta. A refusal of the relay (no such Computer any more,
// the hub shutting down) is a result with isError, its text the
// ErrorPayload's message and its code in _meta.error_code. A name the
// gateway does not list is JSON-RPC -32602. When the client cancels the
// call (notifications/cancelled on a session; the end of its POST in
// 2026-07-28) the gateway sends the Computer notify:tool_call_cancel
// ([server.Server.Cancel]), which stops the tool and its processes.
//
// # Confirmation
//
// A Computer whose approval policy leaves confirmation to the Agent
// (a2c computer --approve agent) refuses a tool without auto_apply with
// error_code 4005 unless the call carries confirmed. The gateway then
// asks its client's user: an elicitation (a form with one boolean,
// "confirm") on a handshake-era session, asked by the call's handler
// within the call's budget and the office's life; an InputRequiredResult
// in 2026-07-28, whose requestState names the Computer, the tool and the
// arguments (confirmState), so an answer counts only for the call it was
// shown. An accepted confirmation sends the call again with confirmed
// set; a declined or dismissed one, no answer in time, or a client that
// cannot be asked (no elicitation capability), is a result with isError
// whose text says the call was not run, error_code 4005.
//
// # The fast path
//
// The Go SDK's JSON decoding allocates a 32 KiB buffer for each value it
// decodes, about twenty a tools/call: more than the gateway may add to a
// call. A plainly valid tools/call (2026-07-28, or in a handshake-era
// session) is answered by fast.go without the SDK, with the bytes the
// SDK would write; anything else goes to the SDK, so the protocol's
// refusals live there only. Calls of sessions are tracked by session
// (track), so notifications/cancelled and the session's end stop them
// whichever path ran them; the gateway closes idle sessions itself
// (closeIdle), since the SDK's timer does not see the fast path.
//
// # Resources
//
// Every Computer's desktop windows (client:get_desktop: window:// URIs)
// and skills (client:get_skills: their skill:// URI, or
// skill://<name>/SKILL.md) are MCP resources, read through
// client:get_desktop and client:get_skill. A URI two Computers list goes
// to the one whose name sorts first. A skill file the Computer serves as
// a blob (too large or binary for its answer) is not read through the
// gateway: resources/read answers -32603 saying so.
//
// # Guard
//
// Each request meets, in order: the hub's Host and Origin rule (421 or
// 403, as on every route of the hub, with a JSON-RPC error body), the
// hub's token ([server.Server.Authorized]: Authorization: Bearer or the
// auth field's header; 401 with a JSON-RPC error and WWW-Authenticate),
// the office id (400 when empty, longer than [server.MaxOfficeID] or not
// valid UTF-8), and the count of offices served ([MaxOffices]: 503) and of
// sessions open ([MaxSessions]: 503).
package gateway
