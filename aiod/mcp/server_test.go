package mcp

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// TestPlainProtocol holds every protocol answer of the plain path to its
// exact bytes.
func TestPlainProtocol(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		name   string
		body   string
		status int
		want   string
	}{
		{"not JSON", `{"jsonrpc":`, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`},
		{"empty body", ``, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, 200,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: \"resources/list\""}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sandbox_execute","arguments":{}}}`, 200,
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"unknown tool: sandbox_execute"}}`},
		{"missing tool name", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}`, 200,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"unknown tool: "}}`},
		{"no params", `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`, 200,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool: "}}`},
		{"name not a string", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}`, 200,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool: 5"}}`},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":4,"method":"ping"}`, 200,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Invalid Request: jsonrpc must be \"2.0\""}}`},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id must be a string or a number"}}`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id must be a string or a number"}}`},
		{"method not a string", `{"jsonrpc":"2.0","id":5,"method":7}`, 200,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: method must be a string"}}`},
		{"no method", `{"jsonrpc":"2.0","id":5}`, 200,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: method is missing"}}`},
		{"params a string", `{"jsonrpc":"2.0","id":6,"method":"ping","params":"x"}`, 200,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"Invalid Request: params must be an object or an array"}}`},
		{"not an object", `42`, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC object"}}`},
		{"ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, 200, `{"jsonrpc":"2.0","id":7,"result":{}}`},
		{"ping, id kept as sent", `{"jsonrpc":"2.0","id": 1.50 ,"method":"ping"}`, 200, `{"jsonrpc":"2.0","id":1.50,"result":{}}`},
		{"initialize, known version", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, 200,
			`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-03-26","serverInfo":{"name":"aiod","version":"9.9.9"}}}`},
		{"initialize, unknown version", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`, 200,
			`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-11-25","serverInfo":{"name":"aiod","version":"9.9.9"}}}`},
		{"initialize, stateless revision", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`, 200,
			`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-11-25","serverInfo":{"name":"aiod","version":"9.9.9"}}}`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ``},
		{"cancellation of nothing", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, 202, ``},
		{"a client's response", `{"jsonrpc":"2.0","id":9,"result":{}}`, 202, ``},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"nope"}]`, 200,
			`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found: \"nope\""}}]`},
		{"batch of notifications", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, 202, ``},
		{"empty batch", `[]`, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`},
		{"batch with a bad element", `[1,{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 200,
			`[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC object"}},{"jsonrpc":"2.0","id":1,"result":{}}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, f.url, c.body)
			if status != c.status || body != c.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, c.status, c.want)
			}
		})
	}
}

// TestBodyLimit: /mcp reads up to 8 MiB; more is 413 before decoding.
func TestBodyLimit(t *testing.T) {
	f := newFixture(t, nil)
	pad := strings.Repeat(" ", 3<<20) // over the daemon's 2 MiB, under 8 MiB
	if status, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+pad); status != 200 || body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("3 MiB: %d %s", status, body)
	}
	status, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+strings.Repeat(" ", MaxBody))
	if status != 413 || body != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body too large: /mcp accepts at most 8 MiB"}}` {
		t.Errorf("over 8 MiB: %d %s", status, body)
	}
}

// TestToolsList: the ten built-ins in their order, each described, each
// with an object schema that decodes.
func TestToolsList(t *testing.T) {
	f := newFixture(t, nil)
	status, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var r struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	want := []string{"sandbox_execute_bash", "sandbox_execute_code", "sandbox_file_operations", "sandbox_str_replace_editor",
		"sandbox_get_context", "sandbox_get_packages", "sandbox_load_skill", "browser_get_info", "browser_gui_screenshot",
		"browser_gui_execute_action"}
	if len(r.Result.Tools) != len(want) || r.Result.NextCursor != nil {
		t.Fatalf("got %d tools (cursor %v), want %d", len(r.Result.Tools), r.Result.NextCursor, len(want))
	}
	for i, tl := range r.Result.Tools {
		var sch struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if tl.Name != want[i] || tl.Description == "" || json.Unmarshal(tl.InputSchema, &sch) != nil || sch.Type != "object" || sch.Properties == nil {
			t.Errorf("tool %d: %s %q %s", i, tl.Name, tl.Description, tl.InputSchema)
		}
		for _, req := range sch.Required {
			if _, ok := sch.Properties[req]; !ok {
				t.Errorf("%s: required %s is not a property", tl.Name, req)
			}
		}
	}
	if !strings.Contains(body, `"required":["cmd"]`) {
		t.Errorf("sandbox_execute_bash does not require cmd: %s", body)
	}
}

// TestMetrics: calls are counted by tool and outcome.
func TestMetrics(t *testing.T) {
	f := newFixture(t, nil)
	f.callTool(t, "sandbox_get_context", nil)
	f.callTool(t, "sandbox_execute_bash", map[string]any{})
	post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`)
	for _, c := range []struct {
		tool, outcome string
	}{{"sandbox_get_context", "ok"}, {"sandbox_execute_bash", "error"}, {unknownToolLabel, "unknown_tool"}} {
		if n := planetest.MetricValue(t, f.reg, "mcp_tool_calls_total", "tool", c.tool, "outcome", c.outcome); n != 1 {
			t.Errorf("%s %s: %v", c.tool, c.outcome, n)
		}
	}
	if n := planetest.MetricValue(t, f.reg, "mcp_tool_call_duration_seconds", "tool", "sandbox_get_context"); n != 1 {
		t.Errorf("duration count: %v", n)
	}
}

// TestRebinding: a Host that is not a loopback name or an allowed one is
// refused 421, an Origin other than the Host's own (or a listed one) 403,
// on every path, as JSON-RPC errors; the daemon's own origin is served.
func TestRebinding(t *testing.T) {
	pol, err := origin.New(origin.Config{Listen: "127.0.0.1:0", Hosts: []string{"sandbox.example"}, Origins: []string{"https://app.example"}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Origins = pol })
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	evilHost := `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Host \"evil.example.com\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host"}}`
	cases := []struct {
		name   string
		hdr    []string
		status int
		want   string
	}{
		{"evil host", []string{"Host", "evil.example.com"}, 421, evilHost},
		{"evil origin", []string{"Origin", "http://evil.example.com"}, 403,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Origin \"http://evil.example.com\" is not allowed (cross-origin request); allow it with --allowed-origin"}}`},
		{"evil host and origin", []string{"Host", "evil.example.com", "Origin", "http://evil.example.com"}, 421, evilHost},
		{"null origin", []string{"Origin", "null"}, 403, ""},
		{"evil host, session path", []string{"Host", "evil.example.com", "Accept", "application/json, text/event-stream"}, 421, evilHost},
		{"another loopback port", []string{"Host", "localhost:8080", "Origin", "http://localhost:3000"}, 403, ""},
		{"localhost", []string{"Host", "localhost", "Origin", "http://localhost"}, 200, ""},
		{"localhost with port", []string{"Host", "localhost:8080", "Origin", "http://localhost:8080"}, 200, ""},
		{"127.0.0.1", []string{"Host", "127.0.0.1:9", "Origin", "https://127.0.0.1:9"}, 200, ""},
		{"::1", []string{"Host", "[::1]:80", "Origin", "http://[::1]"}, 200, ""},
		{"allowed host", []string{"Host", "sandbox.example:443", "Origin", "https://sandbox.example"}, 200, ""},
		{"listed origin", []string{"Origin", "https://app.example"}, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, f.url, ping, c.hdr...)
			if status != c.status || (c.want != "" && strings.TrimSpace(body) != c.want) {
				t.Errorf("%d %s", status, body)
			}
			if status >= 400 && !strings.Contains(body, `"code":-32000`) {
				t.Errorf("refusal body: %s", body)
			}
		})
	}
}

// TestRouting: only what needs the streamable-HTTP transport goes to the
// SDK (a session id, GET, DELETE, or an initialize asking for a session);
// every other POST is the plain path whatever its Accept, with the same
// parse and size answers; the SDK's refusals are JSON-RPC errors, an
// unknown or ended session 404 with -32001.
func TestRouting(t *testing.T) {
	f := newFixture(t, nil)
	both := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	initPlain := `{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-06-18","serverInfo":{"name":"aiod","version":"9.9.9"}}}`
	notFound := `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"session not found"}}`
	cases := []struct {
		name, method, body string
		hdr                []string
		status             int
		want               string // the exact body; "" with session: check the session id only
		session            bool   // the answer opens a session
	}{
		{"ping asking for SSE", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, both, 200, `{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{"tools/list asking for SSE", "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, both, 200, "", false},
		{"unknown method asking for SSE", "POST", `{"jsonrpc":"2.0","id":1,"method":"nope"}`, both, 200,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: \"nope\""}}`, false},
		{"not JSON asking for SSE", "POST", `{`, both, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`, false},
		{"too large asking for SSE", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + strings.Repeat(" ", MaxBody), both, 413,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body too large: /mcp accepts at most 8 MiB"}}`, false},
		{"initialize asking for SSE", "POST", init, both, 200, "", true},
		{"initialize asking for JSON", "POST", init, []string{"Content-Type", "application/json", "Accept", "application/json"}, 200, initPlain, false},
		{"initialize asking for SSE only", "POST", init, []string{"Content-Type", "application/json", "Accept", "text/event-stream"}, 200, initPlain, false},
		{"initialize from curl", "POST", init, []string{"Content-Type", "application/x-www-form-urlencoded", "Accept", "*/*"}, 200, initPlain, false},
		{"initialize in a batch", "POST", "[" + init + "]", both, 200, "[" + initPlain + "]", false},
		{"unknown session", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, append([]string{"Mcp-Session-Id", "nope"}, both...), 404, notFound, false},
		{"not JSON in an unknown session", "POST", `{`, append([]string{"Mcp-Session-Id", "nope"}, both...), 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`, false},
		{"GET, unknown session", "GET", "", []string{"Mcp-Session-Id", "nope", "Accept", "text/event-stream"}, 404, notFound, false},
		{"DELETE, unknown session", "DELETE", "", []string{"Mcp-Session-Id", "nope"}, 404, notFound, false},
		{"GET without a session", "GET", "", []string{"Accept", "text/event-stream"}, 400,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: GET requires an Mcp-Session-Id header"}}`, false},
		{"DELETE without a session", "DELETE", "", nil, 400,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: DELETE requires an Mcp-Session-Id header"}}`, false},
		{"PUT", "PUT", "", nil, 405,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Method Not Allowed: /mcp takes POST (and GET and DELETE for streamable-HTTP sessions)"}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := do(t, c.method, f.url, c.body, c.hdr...)
			if status != c.status || (c.want != "" && body != c.want) || (h.Get("Mcp-Session-Id") != "") != c.session {
				t.Errorf("got %d (session %q) %s\nwant %d %s", status, h.Get("Mcp-Session-Id"), body, c.status, c.want)
			}
			if ct := h.Get("Content-Type"); status != 202 && ct != "application/json" && !(c.session && ct == "text/event-stream") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	// An ended session is 404 too.
	sid := openSession(t, f.url)
	if status, _, _ := do(t, "DELETE", f.url, "", "Mcp-Session-Id", sid); status != 204 {
		t.Fatalf("DELETE: %d", status)
	}
	if status, _, body := do(t, "POST", f.url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, append([]string{"Mcp-Session-Id", sid}, both...)...); status != 404 || body != notFound {
		t.Errorf("ended session: %d %s", status, body)
	}
}

// TestBatchLimits: a batch holds at most MaxBatch elements; its
// tools/list elements share one listing; once its answers reach
// MaxBatchAnswer the requests left are not run.
func TestBatchLimits(t *testing.T) {
	up := newFakeUpstream(t, false, "echo")
	f := newFixture(t, func(c *Config) { c.Upstreams = fmt.Sprintf(`{"up":{"url":%q,"prefix":"up"}}`, up.url) })
	batch := func(n int, elem string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if status, body := post(t, f.url, batch(MaxBatch+1, ping)); status != 200 ||
		body != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batch too large (101 elements; at most 100)"}}` {
		t.Errorf("101: %d %s", status, body)
	}
	if status, body := post(t, f.url, batch(170000, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)); status != 200 ||
		body != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batch too large (170000 elements; at most 100)"}}` || up.lists.Load() != 0 {
		t.Errorf("170000: %d %.300s (%d upstream lists)", status, body, up.lists.Load())
	}
	if status, body := post(t, f.url, batch(MaxBatch, ping)); status != 200 || body != batch(MaxBatch, `{"jsonrpc":"2.0","id":1,"result":{}}`) {
		t.Errorf("100: %d %.300s", status, body)
	}
	_, body := post(t, f.url, batch(MaxBatch, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	var lists []json.RawMessage
	if json.Unmarshal([]byte(body), &lists) != nil || len(lists) != MaxBatch || !strings.Contains(string(lists[99]), `"up_echo"`) || up.lists.Load() != 1 {
		t.Errorf("100 lists: %d answers, %d upstream lists", len(lists), up.lists.Load())
	}

	// 400 KiB a read, answers up to 1 MiB: the fourth read and the ping
	// after it are not run.
	f.s.maxBatch = 1 << 20
	big := strings.Repeat("a", 400<<10)
	if err := os.WriteFile(filepath.Join(f.ws, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	read := `{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"sandbox_file_operations","arguments":{"action":"read","path":"big.txt"}}}`
	_, body = post(t, f.url, "["+strings.Repeat(read+",", 4)+ping+`,{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	var out []struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || len(out) != 5 {
		t.Fatalf("%d answers: %v", len(out), err)
	}
	for i, o := range out {
		if i < 3 && (o.Error != nil || len(o.Result) < 400<<10) {
			t.Errorf("read %d: %v", i, o.Error)
		}
		want := "Batch answer too large: the answers before this request reached 1 MiB; it was not run (send it again)"
		if i >= 3 && (o.Result != nil || o.Error == nil || o.Error.Code != -32000 || o.Error.Message != want) {
			t.Errorf("element %d: %s %+v", i, o.ID, o.Error)
		}
	}
}

// TestSessionCap: at most maxSess streamable-HTTP sessions are open; one
// more initialize is 503 with a JSON-RPC error, the plain path and
// in-process connections still work, and ending a session makes room.
func TestSessionCap(t *testing.T) {
	f := newFixture(t, nil)
	f.s.maxSess = 3
	session(t, f, true) // in process: not counted
	var sids []string
	for range 3 {
		sids = append(sids, openSession(t, f.url))
	}
	init := `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	status, sid, body := sessionPost(t, f.url, "", init)
	if status != 503 || sid != "" ||
		body != `{"jsonrpc":"2.0","id":"i","error":{"code":-32000,"message":"Too many sessions: 3 streamable-HTTP sessions are open; end one (DELETE /mcp) or use /mcp without a session"}}` {
		t.Errorf("fourth: %d %q %s", status, sid, body)
	}
	if status, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != 200 || body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("plain: %d %s", status, body)
	}
	if _, _, msg := sessionPost(t, f.url, sids[0], `{"jsonrpc":"2.0","id":2,"method":"ping"}`); msg != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("open session: %s", msg)
	}
	session(t, f, true)
	if status, _, _ := do(t, "DELETE", f.url, "", "Mcp-Session-Id", sids[0]); status != 204 {
		t.Fatalf("DELETE: %d", status)
	}
	openSession(t, f.url)
}
