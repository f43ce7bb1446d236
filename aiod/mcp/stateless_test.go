package mcp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// nextMeta is the _meta a 2026-07-28 request carries.
func nextMeta() map[string]any {
	return map[string]any{metaProtocolVersion: statelessProtocol, "io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "test", "version": "1"}}
}

// nextHeaders are the headers of a 2026-07-28 POST of method (and, for a
// tools/call, the tool name).
func nextHeaders(method, name string) []string {
	h := []string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", statelessProtocol, "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// TestNextWire holds /mcp's answers to MCP 2026-07-28 requests to their
// exact shape: server/discover, the list and call results with the
// revision's fields, and the refusals the revision specifies with their
// HTTP statuses; and the handshake-era plain path beside it unchanged.
func TestNextWire(t *testing.T) {
	f := newFixture(t, nil)
	meta := nextMeta()
	cases := []struct {
		name   string
		body   any
		hdr    []string
		status int
		want   string // the exact JSON answer, or a prefix ending in "..."
	}{
		{"discover", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{"_meta": meta}},
			nextHeaders("server/discover", ""), 200,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"aiod","version":"9.9.9"}},"ttlMs":0,"cacheScope":"public","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"capabilities":{"tools":{}}}}`},
		{"tools/list", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": map[string]any{"_meta": meta}},
			nextHeaders("tools/list", ""), 200, `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[{"name":"sandbox_execute_bash",...`},
		{"tools/call", map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": "sandbox_execute_bash", "arguments": map[string]any{"cmd": "echo next"}, "_meta": meta}},
			nextHeaders("tools/call", "sandbox_execute_bash"), 200, `{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[{"type":"text","text":"{\"cwd\":...`},
		{"unknown tool", map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": map[string]any{"name": "nope", "arguments": map[string]any{}, "_meta": meta}},
			nextHeaders("tools/call", "nope"), 400, `{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown tool: nope"}}`},
		{"header mismatch", map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": map[string]any{"name": "x", "_meta": meta}},
			nextHeaders("tools/list", ""), 400, `{"jsonrpc":"2.0","id":5,"error":{"code":-32020,"message":"header mismatch: Mcp-Method header value 'tools/list' does not match body value 'tools/call'"}}`},
		{"no _meta", map[string]any{"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
			nextHeaders("tools/list", ""), 400, `{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"missing or invalid _meta field \"io.modelcontextprotocol/protocolVersion\""}}`},
		{"initialize is gone", map[string]any{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": map[string]any{"_meta": meta}},
			nextHeaders("initialize", ""), 404, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found: \"initialize\""}}`},
		{"ping is gone", map[string]any{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": map[string]any{"_meta": meta}},
			nextHeaders("ping", ""), 404, `{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"method not found: \"ping\""}}`},
		{"prompts/list not served", map[string]any{"jsonrpc": "2.0", "id": 9, "method": "prompts/list", "params": map[string]any{"_meta": meta}},
			nextHeaders("prompts/list", ""), 404, `{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"method not found: \"prompts/list\""}}`},
		{"unsupported version", map[string]any{"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{metaProtocolVersion: "2099-01-01", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}},
			[]string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"}, 400,
			`{"jsonrpc":"2.0","id":10,"error":{"code":-32022,"message":"unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}}`},
		{"no batches", []any{map[string]any{"jsonrpc": "2.0", "id": 11, "method": "tools/list", "params": map[string]any{"_meta": meta}}},
			nextHeaders("tools/list", ""), 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not part of MCP 2026-07-28: send one request per POST"}}`},
		{"no Mcp-Method", map[string]any{"jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": map[string]any{"_meta": meta}},
			[]string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", statelessProtocol}, 400,
			`{"jsonrpc":"2.0","id":14,"error":{"code":-32020,"message":"missing required Mcp-Method header"}}`},
		{"Mcp-Name mismatch", map[string]any{"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": map[string]any{"name": "sandbox_get_context", "_meta": meta}},
			nextHeaders("tools/call", "sandbox_execute_bash"), 400,
			`{"jsonrpc":"2.0","id":15,"error":{"code":-32020,"message":"header mismatch: Mcp-Name header value 'sandbox_execute_bash' does not match body value 'sandbox_get_context'"}}`},
		{"no Mcp-Name", map[string]any{"jsonrpc": "2.0", "id": 16, "method": "tools/call", "params": map[string]any{"name": "sandbox_get_context", "_meta": meta}},
			nextHeaders("tools/call", ""), 400,
			`{"jsonrpc":"2.0","id":16,"error":{"code":-32020,"message":"missing required Mcp-Name header for method \"tools/call\""}}`},
		{"no capabilities", map[string]any{"jsonrpc": "2.0", "id": 17, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{metaProtocolVersion: statelessProtocol}}},
			nextHeaders("tools/list", ""), 400,
			`{"jsonrpc":"2.0","id":17,"error":{"code":-32602,"message":"missing or invalid _meta field \"io.modelcontextprotocol/clientCapabilities\""}}`},
		{"version header differs from _meta", map[string]any{"jsonrpc": "2.0", "id": 18, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{metaProtocolVersion: "2025-11-25", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}},
			nextHeaders("tools/list", ""), 400,
			`{"jsonrpc":"2.0","id":18,"error":{"code":-32020,"message":"MCP-Protocol-Version header \"2026-07-28\" does not match request io.modelcontextprotocol/protocolVersion \"2025-11-25\""}}`},
		{"_meta without the header", map[string]any{"jsonrpc": "2.0", "id": 19, "method": "tools/list", "params": map[string]any{"_meta": meta}},
			[]string{"Accept", "application/json, text/event-stream", "Mcp-Method", "tools/list"}, 400,
			`{"jsonrpc":"2.0","id":19,"error":{"code":-32020,"message":"MCP-Protocol-Version header is required for requests carrying \"io.modelcontextprotocol/protocolVersion\""}}`},
		{"Accept without event-stream", map[string]any{"jsonrpc": "2.0", "id": 20, "method": "tools/list", "params": map[string]any{"_meta": meta}},
			[]string{"Accept", "application/json", "MCP-Protocol-Version", statelessProtocol, "Mcp-Method", "tools/list"}, 400,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Accept must list both application/json and text/event-stream"}}`},
		{"a notification", map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized", "params": map[string]any{}},
			nextHeaders("notifications/initialized", ""), 202, ``},
		{"case-variant keys", map[string]any{"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": map[string]any{"NAME": "sandbox_get_context", "_META": meta}},
			nextHeaders("tools/call", "sandbox_get_context"), 400,
			`{"jsonrpc":"2.0","id":21,"error":{"code":-32020,"message":"header mismatch: Mcp-Name header value 'sandbox_get_context' does not match body value ''"}}`},
		{"a second spelling of name", `{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"sandbox_get_context","NAME":"sandbox_execute_bash","arguments":{"cmd":"echo ran"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			nextHeaders("tools/call", "sandbox_get_context"), 200, `{"jsonrpc":"2.0","id":22,"result":{"resultType":"complete","content":[{"type":"text","text":"{\"home_dir\":...`},
		{"clientInfo of the wrong shape", map[string]any{"jsonrpc": "2.0", "id": 23, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{metaProtocolVersion: statelessProtocol, "io.modelcontextprotocol/clientCapabilities": map[string]any{}, "io.modelcontextprotocol/clientInfo": map[string]any{"name": 5}}}},
			nextHeaders("tools/list", ""), 400,
			`{"jsonrpc":"2.0","id":23,"error":{"code":-32602,"message":"invalid _meta field \"io.modelcontextprotocol/clientInfo\""}}`},
		{"capabilities of the wrong shape", map[string]any{"jsonrpc": "2.0", "id": 24, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{metaProtocolVersion: statelessProtocol, "io.modelcontextprotocol/clientCapabilities": map[string]any{"roots": 5}}}},
			nextHeaders("tools/list", ""), 400,
			`{"jsonrpc":"2.0","id":24,"error":{"code":-32602,"message":"missing or invalid _meta field \"io.modelcontextprotocol/clientCapabilities\""}}`},
		{"a batch with the revision's _meta", []any{map[string]any{"jsonrpc": "2.0", "id": 25, "method": "tools/call", "params": map[string]any{"name": "sandbox_execute_bash", "arguments": map[string]any{"cmd": "echo ran"}, "_meta": meta}}},
			[]string{"Accept", "application/json, text/event-stream"}, 400,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not part of MCP 2026-07-28: send one request per POST"}}`},
		{"Accept */*", map[string]any{"jsonrpc": "2.0", "id": 26, "method": "tools/list", "params": map[string]any{"_meta": meta}},
			[]string{"Accept", "*/*", "MCP-Protocol-Version", statelessProtocol, "Mcp-Method", "tools/list"}, 200, `{"jsonrpc":"2.0","id":26,"result":{"resultType":"complete",...`},
		{"unknown method before _meta", map[string]any{"jsonrpc": "2.0", "id": 27, "method": "resources/list"},
			nextHeaders("resources/list", ""), 404, `{"jsonrpc":"2.0","id":27,"error":{"code":-32601,"message":"method not found: \"resources/list\""}}`},
		{"not JSON", `{"jsonrpc":`, nextHeaders("tools/list", ""), 400,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`},
		// A header that names no revision, or _meta naming an earlier
		// one, keeps the plain path.
		{"header not a revision", map[string]any{"jsonrpc": "2.0", "id": 28, "method": "tools/list"},
			[]string{"MCP-Protocol-Version", "latest"}, 200, `{"jsonrpc":"2.0","id":28,"result":{"tools":[...`},
		{"_meta of an earlier revision", map[string]any{"jsonrpc": "2.0", "id": 29, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{metaProtocolVersion: "2025-11-25"}}},
			[]string{"MCP-Protocol-Version", "2025-11-25"}, 200, `{"jsonrpc":"2.0","id":29,"result":{"tools":[...`},
		// Beside it, the handshake-era plain path: no header, no _meta.
		{"plain tools/list", map[string]any{"jsonrpc": "2.0", "id": 12, "method": "tools/list"},
			nil, 200, `{"jsonrpc":"2.0","id":12,"result":{"tools":[{"name":"sandbox_execute_bash",...`},
		{"plain initialize", map[string]any{"jsonrpc": "2.0", "id": 13, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-06-18"}},
			[]string{"MCP-Protocol-Version", "2025-06-18"}, 200, `{"jsonrpc":"2.0","id":13,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-06-18",...`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, f.url, tc.body, tc.hdr...)
			got := body
			ok := got == tc.want
			if prefix, cut := strings.CutSuffix(tc.want, "..."); cut {
				ok = strings.HasPrefix(got, prefix) && json.Valid([]byte(got))
			}
			if status != tc.status || !ok {
				t.Errorf("HTTP %d %s\nwant %d %s", status, got, tc.status, tc.want)
			}
		})
	}
}

// TestNextRouting: which POSTs newEra sends to the 2026-07-28 handler.
func TestNextRouting(t *testing.T) {
	msg := func(method, params string) []message {
		msgs, _, _ := parseBody([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`))
		return msgs
	}
	for _, tc := range []struct {
		name   string
		header string
		msgs   []message
		batch  bool
		want   bool
	}{
		{"header", statelessProtocol, msg("tools/list", `{}`), false, true},
		{"later header", "2099-01-01", msg("tools/list", `{}`), false, true},
		{"a word", "latest", msg("tools/list", `{}`), false, false},
		{"earlier meta", "", msg("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`), false, false},
		{"batch with meta", "", msg("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), true, true},
		{"earlier header", "2025-11-25", msg("tools/list", `{}`), false, false},
		{"meta", "", msg("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), false, true},
		{"other meta", "", msg("tools/list", `{"_meta":{"traceparent":"00-x"}}`), false, false},
		{"discover", "", msg("server/discover", `{}`), false, true},
		{"listen", "", msg("subscriptions/listen", `{}`), false, true},
		{"plain", "", msg("tools/call", `{"name":"x"}`), false, false},
		{"batch", "", msg("server/discover", `{}`), true, false},
		{"params not an object", "", msg("tools/list", `[1]`), false, false},
	} {
		r, _ := newRequest(tc.header)
		if got := newEra(r, tc.msgs, tc.batch); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func newRequest(version string) (*http.Request, error) {
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	if version != "" {
		r.Header.Set("MCP-Protocol-Version", version)
	}
	return r, err
}

// TestNextCancelIsPerPOST: at 2026-07-28 a call is its POST. A
// notifications/cancelled naming its id, from another POST of this
// revision or of the plain path, does not end it (two clients number
// their requests alike: the Go SDK's client sends one after every cancel
// of its own); its own POST ending does (TestCancelKillsTree).
func TestNextCancelIsPerPOST(t *testing.T) {
	f := newFixture(t, nil)
	done := make(chan string, 1)
	go func() {
		_, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "sandbox_execute_bash", "arguments": map[string]any{"cmd": "sleep 0.5; echo survived", "new_session": true}, "_meta": nextMeta()}},
			nextHeaders("tools/call", "sandbox_execute_bash")...)
		done <- body
	}()
	time.Sleep(150 * time.Millisecond) // the call is running
	for _, c := range []struct {
		body any
		hdr  []string
	}{
		{map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 1}}, nextHeaders("notifications/cancelled", "")},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, nil},
	} {
		if status, body := post(t, f.url, c.body, c.hdr...); status != http.StatusAccepted || body != "" {
			t.Fatalf("cancel: %d %q", status, body)
		}
	}
	select {
	case body := <-done:
		if !strings.Contains(body, `survived\\n`) {
			t.Fatalf("the call was ended by another POST's cancel: %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
}
