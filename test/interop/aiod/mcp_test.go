package aiod

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// POST /mcp answers JSON-RPC, not the envelope, and the published
// documents declare no schema for it: the contract gate counts it among
// the implemented routes, as exercised and schema-less, and the tests
// below hold its answers byte for byte.
func init() {
	implemented = append(implemented, "/mcp")
	schemaless["POST /mcp"] = "JSON-RPC 2.0 answers (not the envelope), no schema published; TestAiodMCP* check them byte for byte"
}

// rpc posts a raw body to /mcp and returns the status and body; hdr is
// pairs of header names and values ("Host" sets the request's host).
func (a *aio) rpc(body string, hdr ...string) (int, string) {
	a.t.Helper()
	var host []string
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			host = []string{hdr[i+1]}
		}
	}
	if host != nil {
		return a.rpcHost(host[0], body, hdr...)
	}
	resp, out := a.raw("POST", "/mcp", body, hdr...)
	a.covered("POST", "/mcp")
	return resp.StatusCode, string(out)
}

// rpcHost sends the request with another Host header (net/http takes it
// from Request.Host, not from the header map).
func (a *aio) rpcHost(host, body string, hdr ...string) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest("POST", a.base+"/mcp", strings.NewReader(body))
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] != "Host" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	a.covered("POST", "/mcp")
	return resp.StatusCode, string(out)
}

// callText posts a tools/call and returns the result's text and isError.
func (a *aio) callText(name string, args any) (string, bool) {
	a.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	status, out := a.rpc(string(body))
	var r struct {
		Result *struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if status != 200 || json.Unmarshal([]byte(out), &r) != nil || r.Result == nil || len(r.Result.Content) != 1 {
		a.t.Fatalf("%s: %d %s", name, status, out)
	}
	return r.Result.Content[0].Text, r.Result.IsError
}

// TestAiodMCPPlain holds the plain JSON-RPC path of the real binary to
// the documented answers: every error shape, tool failures as isError,
// 202, the 8 MiB limit (past the 2 MiB of the other routes), the
// DNS-rebinding guard and the metrics.
func TestAiodMCPPlain(t *testing.T) {
	d := startAiod(t, nil)
	a := &aio{t: t, base: d.URL}
	cases := []struct {
		name, body string
		status     int
		want       string
	}{
		{"not JSON", `not json`, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`, 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: \"prompts/list\""}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sandbox_execute","arguments":{}}}`, 200,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown tool: sandbox_execute"}}`},
		{"missing tool name", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}`, 200, `{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"unknown tool: "}}`},
		{"malformed request", `{"jsonrpc":"2.0","id":7,"method":["ping"]}`, 200, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: method must be a string"}}`},
		{"ping", `{"jsonrpc":"2.0","id":"p","method":"ping"}`, 200, `{"jsonrpc":"2.0","id":"p","result":{}}`},
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}`, 200,
			`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-06-18","serverInfo":{"name":"aiod","version":"0.9.2"}}}`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ``},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, 200, `[{"jsonrpc":"2.0","id":1,"result":{}}]`},
	}
	for _, c := range cases {
		if status, body := a.rpc(c.body); status != c.status || body != c.want {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, status, body, c.status, c.want)
		}
	}

	// Failures inside tools are results.
	if text, isErr := a.callText("sandbox_execute_bash", map[string]any{}); !isErr || text != "cmd is required" {
		t.Errorf("no cmd: %v %q", isErr, text)
	}
	missing := filepath.Join(t.TempDir(), "agent-missing.txt")
	want := `{"action":"read","error":{"errno":2,"errno_name":"ENOENT","error_type":"not_found","exception_type":"FileNotFoundError",` +
		`"message":"Failed to read file: No such file or directory (os error 2)","operation":"read","path":"` + missing + `","retryable":false},` +
		`"message":"Failed to read file: No such file or directory (os error 2)","path":"` + missing + `","success":false}`
	if text, isErr := a.callText("sandbox_file_operations", map[string]any{"action": "read", "path": missing}); !isErr || text != want {
		t.Errorf("missing file:\n got %v %s\nwant %s", isErr, text, want)
	}
	if text, isErr := a.callText("browser_get_info", nil); !isErr || !strings.HasPrefix(text, "browser: ") {
		t.Errorf("browser: %v %q", isErr, text)
	}
	// The documented workflow's commands, and the cwd handed back.
	dir := t.TempDir()
	if text, isErr := a.callText("sandbox_execute_bash", map[string]any{"cmd": "mkdir -p w && cd w && echo hello", "cwd": dir}); isErr ||
		text != `{"cwd":"`+filepath.Join(dir, "w")+`","exit_code":0,"output":"hello\n","status":"completed"}` {
		t.Errorf("bash: %v %s", isErr, text)
	}

	// Bodies: 3 MiB passes (the other routes stop at 2 MiB), past 8 MiB is 413.
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if status, body := a.rpc(ping + strings.Repeat(" ", 3<<20)); status != 200 || body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("3 MiB: %d %s", status, body)
	}
	if status, body := a.rpc(ping + strings.Repeat(" ", 8<<20)); status != 413 {
		t.Errorf("over 8 MiB: %d %.200s", status, body)
	}

	// DNS rebinding (a Host that is not a loopback name: 421) and pages
	// of other origins, another loopback port's included (403).
	for _, c := range []struct {
		hdr    []string
		status int
	}{
		{[]string{"Host", "evil.example.com", "Origin", "http://evil.example.com"}, 421},
		{[]string{"Host", "evil.example.com"}, 421},
		{[]string{"Origin", "http://evil.example.com"}, 403},
		{[]string{"Host", "evil.example.com", "Accept", "application/json, text/event-stream"}, 421},
		{[]string{"Host", "127.0.0.1:18091", "Origin", "http://127.0.0.1:3000"}, 403},
		{[]string{"Host", "localhost", "Origin", "http://localhost"}, 200},
		{[]string{"Host", "127.0.0.1:18091", "Origin", "http://127.0.0.1:18091"}, 200},
	} {
		if status, body := a.rpc(ping, c.hdr...); status != c.status {
			t.Errorf("%v: %d %s", c.hdr, status, body)
		}
	}

	// Calls are counted.
	if code, body := get(t, d.URL+"/metrics"); code != 200 ||
		!strings.Contains(body, `mcp_tool_calls_total{outcome="error",tool="sandbox_execute_bash"} 1`) ||
		!strings.Contains(body, `mcp_tool_calls_total{outcome="unknown_tool",tool="(unknown)"} 2`) {
		t.Errorf("metrics: %d\n%s", code, grepLines(body, "mcp_tool_calls_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAiodMCPKey: with AIO_API_KEY, /mcp without the key is the 401
// envelope on both paths; with it, it answers.
func TestAiodMCPKey(t *testing.T) {
	d := startAiod(t, []string{"AIO_API_KEY=mcp-secret"})
	a := &aio{t: t, base: d.URL}
	for _, accept := range []string{"application/json", "application/json, text/event-stream"} {
		if status, body := a.rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Accept", accept); status != 401 ||
			strings.TrimSpace(body) != `{"success":false,"message":"Unauthorized","data":null,"hint":null}` {
			t.Errorf("no key (%s): %d %s", accept, status, body)
		}
	}
	a.key = "mcp-secret"
	if status, body := a.rpc(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != 200 || body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("with key: %d %s", status, body)
	}
}

// TestAiodMCPGoSDKClient: the official Go SDK's client with its defaults
// (server/discover, then MCP 2026-07-28: no session) and over a
// streamable-HTTP session of a handshake-era revision (2025-11-25, SSE):
// the ten tools, a command, the same isError and unknown-tool answers as
// the plain path.
func TestAiodMCPGoSDKClient(t *testing.T) {
	d := startAiod(t, nil)
	for _, tc := range []struct {
		name    string
		version string // asked of the client; "": its default
		want    string // negotiated
		session bool
	}{
		{"default: 2026-07-28", "", "2026-07-28", false},
		{"session: 2025-11-25", "2025-11-25", "2025-11-25", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var opts *sdk.ClientSessionOptions
			if tc.version != "" {
				opts = &sdk.ClientSessionOptions{ProtocolVersion: tc.version}
			}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "interop", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: d.URL + "/mcp"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			(&aio{t: t}).covered("POST", "/mcp")
			if info := cs.InitializeResult(); info.ServerInfo.Name != "aiod" || info.ProtocolVersion != tc.want || (cs.ID() != "") != tc.session {
				t.Errorf("initialize: %+v at %s, session %q", info.ServerInfo, info.ProtocolVersion, cs.ID())
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(mcpBuiltins) {
				t.Errorf("tools: %v", names)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: map[string]any{"cmd": "echo via-sdk"}})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"output":"via-sdk\n"`) {
				t.Errorf("call: %+v %v", res, err)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: map[string]any{}})
			if err != nil || !res.IsError || res.Content[0].(*sdk.TextContent).Text != "cmd is required" {
				t.Errorf("no cmd: %+v %v", res, err)
			}
			_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "nope"})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32602 || je.Message != "unknown tool: nope" {
				t.Errorf("unknown tool: %v", err)
			}
		})
	}
}

// TestAiodMCPCancelKillsTree: a plain client that goes away while
// sandbox_execute_bash runs ends the command's whole tree within a second.
func TestAiodMCPCancelKillsTree(t *testing.T) {
	d := startAiod(t, nil)
	a := &aio{t: t, base: d.URL}
	marker := "301.734" // a sleep only this test runs
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_execute_bash","arguments":{"cmd":"sleep %s & sh -c 'sleep %s' & wait","timeout":120}}}`, marker, marker)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	running(t, "sleep "+marker, 2)
	cancel()
	<-done
	a.covered("POST", "/mcp")
	deadline := time.Now().Add(time.Second)
	for len(processesWith("sleep "+marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still running 1 s after the client left: %v", processesWith("sleep "+marker))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAiodMCPPeers is the documented aggregation run: a daemon whose
// EXTRA_MCP_SERVERS names a second daemon (prefix peer) and a dead port
// (prefix gone) lists 20 tools, forwards peer_ calls, answers isError for
// gone_ and -32602 for a name no prefix matches; a remote entry is
// skipped with a warning at start.
func TestAiodMCPPeers(t *testing.T) {
	peer := startAiod(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	servers := fmt.Sprintf(`{"peer":{"url":"%s/mcp","prefix":"peer"},"gone":{"url":"http://%s/mcp","prefix":"gone"},"far":{"url":"http://example.com/mcp","prefix":"far"}}`, peer.URL, dead)
	d := startAiod(t, []string{"EXTRA_MCP_SERVERS=" + servers})
	a := &aio{t: t, base: d.URL}

	_, body := a.rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	names := toolNames(body)
	want := append([]string{}, mcpBuiltins...)
	for _, n := range mcpBuiltins {
		want = append(want, "peer_"+n)
	}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("tools:\n got %v\nwant %v", names, want)
	}

	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "peer.txt"), []byte("from the peer\n"), 0o644)
	if text, isErr := a.callText("peer_sandbox_execute_bash", map[string]any{"cmd": "cat peer.txt", "cwd": dir}); isErr || !strings.Contains(text, `"output":"from the peer\n"`) {
		t.Errorf("peer call: %v %s", isErr, text)
	}
	if text, isErr := a.callText("peer_sandbox_execute_bash", map[string]any{}); !isErr || text != "cmd is required" {
		t.Errorf("peer isError passed back: %v %s", isErr, text)
	}
	if text, isErr := a.callText("gone_hello", map[string]any{}); !isErr || !strings.Contains(text, `"gone"`) || !strings.Contains(text, "connection refused") {
		t.Errorf("dead upstream: %v %s", isErr, text)
	}
	if status, body := a.rpc(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nowhere_hello","arguments":{}}}`); status != 200 ||
		body != `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool: nowhere_hello"}}` {
		t.Errorf("no prefix: %d %s", status, body)
	}
	if logs := d.Logs(); !strings.Contains(logs, "EXTRA_MCP_SERVERS entry skipped") || !strings.Contains(logs, `MCP server \"far\"`) {
		t.Errorf("no warning for the remote entry:\n%s", logs)
	}
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// toolNames lists the names of a tools/list answer.
func toolNames(body string) []string {
	var list struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(body), &list)
	var names []string
	for _, tl := range list.Result.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestAiodMCPRouting: on the real binary, only what needs the
// streamable-HTTP transport reaches it: a POST asking for an event
// stream gets the plain answers (a list, -32601, -32700 on 200, the 413
// JSON), an unknown session is 404 with a JSON-RPC error (not the REST
// envelope), a GET without a session a JSON 400; at most 256 sessions
// are open (one more: 503). Text items always carry text, and a tiny
// bash timeout still bounds the command.
func TestAiodMCPRouting(t *testing.T) {
	d := startAiod(t, nil)
	a := &aio{t: t, base: d.URL}
	sse := []string{"Accept", "application/json, text/event-stream"}
	notFound := `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"session not found"}}`
	cases := []struct {
		name, body string
		hdr        []string
		status     int
		want       string
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"nope"}`, sse, 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: \"nope\""}}`},
		{"not JSON", `nope`, sse, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"}}`},
		{"over 8 MiB", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + strings.Repeat(" ", 8<<20), sse, 413,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body too large: /mcp accepts at most 8 MiB"}}`},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, append([]string{"Mcp-Session-Id", "gone"}, sse...), 404, notFound},
		{"batch of 101", "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 101), ",") + "]", nil, 200,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batch too large (101 elements; at most 100)"}}`},
	}
	for _, c := range cases {
		if status, body := a.rpc(c.body, c.hdr...); status != c.status || body != c.want {
			t.Errorf("%s: %d %.300s\nwant %d %s", c.name, status, body, c.status, c.want)
		}
	}
	if status, body := a.rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, sse...); status != 200 || fmt.Sprint(toolNames(body)) != fmt.Sprint(mcpBuiltins) {
		t.Errorf("tools/list asking for SSE: %d %.300s", status, body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		resp, body := a.raw(m, "/mcp", "", "Accept", "text/event-stream")
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(body), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: `+m+` requires an Mcp-Session-Id header"}}`) {
			t.Errorf("%s without a session: %d %s", m, resp.StatusCode, body)
		}
		resp, body = a.raw(m, "/mcp", "", "Accept", "text/event-stream", "Mcp-Session-Id", "gone")
		if resp.StatusCode != 404 || strings.TrimSpace(string(body)) != notFound {
			t.Errorf("%s, unknown session: %d %s", m, resp.StatusCode, body)
		}
	}

	// 256 sessions, then 503; ending one makes room.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cap","version":"1"}}}`
	var first string
	for i := range 256 {
		resp, body := a.raw("POST", "/mcp", init, append([]string{"Content-Type", "application/json"}, sse...)...)
		if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("session %d: %d %s", i, resp.StatusCode, body)
		}
		if i == 0 {
			first = resp.Header.Get("Mcp-Session-Id")
		}
	}
	resp, body := a.raw("POST", "/mcp", init, append([]string{"Content-Type", "application/json"}, sse...)...)
	if resp.StatusCode != 503 || string(body) != `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Too many sessions: 256 streamable-HTTP sessions are open; end one (DELETE /mcp) or use /mcp without a session"}}` {
		t.Errorf("session 257: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.raw("DELETE", "/mcp", "", "Mcp-Session-Id", first); resp.StatusCode != 204 {
		t.Errorf("DELETE: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.raw("POST", "/mcp", init, append([]string{"Content-Type", "application/json"}, sse...)...); resp.StatusCode != 200 {
		t.Errorf("after a DELETE: %d %s", resp.StatusCode, body)
	}

	// An empty text still has its text member.
	if _, body := a.rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_execute_code","arguments":{"code":"x = 1"}}}`); !strings.Contains(body, `"isError":true`) &&
		body != `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""}],"isError":false}}` {
		t.Errorf("empty text: %s", body)
	}
	// A timeout under a nanosecond bounds the command.
	start := time.Now()
	if text, _ := a.callText("sandbox_execute_bash", map[string]any{"cmd": "sleep 30", "timeout": 1e-10, "new_session": true}); !strings.Contains(text, `"status":"timed_out"`) || time.Since(start) > 10*time.Second {
		t.Errorf("timeout 1e-10: %s after %s", text, time.Since(start))
	}
	// The editor names its five commands.
	if text, isErr := a.callText("sandbox_str_replace_editor", map[string]any{"command": "nope", "path": filepath.Join(t.TempDir(), "f")}); !isErr ||
		!strings.Contains(text, `"message":"Unrecognized command nope. The allowed commands are: view, create, str_replace, insert, undo_edit"`) {
		t.Errorf("editor: %s", text)
	}
}

// TestAiodMCPPeerLoops: a daemon peered with itself, and two daemons
// peered both ways, answer tools/list in one round (the hop marker stops
// the second): 20 tools each; a call forwarded once runs, one that would
// be forwarded again is isError.
func TestAiodMCPPeerLoops(t *testing.T) {
	port := freePort(t)
	self := startAiod(t, []string{fmt.Sprintf(`EXTRA_MCP_SERVERS={"self":{"url":"http://LOCALHOST:%s/mcp","prefix":"self"}}`, port)}, "--port", port)
	a := &aio{t: t, base: self.URL}
	want := append([]string{}, mcpBuiltins...)
	for _, n := range mcpBuiltins {
		want = append(want, "self_"+n)
	}
	start := time.Now()
	if _, body := a.rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); fmt.Sprint(toolNames(body)) != fmt.Sprint(want) || time.Since(start) > 5*time.Second {
		t.Errorf("self: %v after %s", toolNames(body), time.Since(start))
	}
	if text, isErr := a.callText("self_sandbox_execute_bash", map[string]any{"cmd": "echo once"}); isErr || !strings.Contains(text, `"output":"once\n"`) {
		t.Errorf("self call: %v %s", isErr, text)
	}
	if text, isErr := a.callText("self_self_sandbox_execute_bash", map[string]any{"cmd": "echo twice"}); !isErr || !strings.Contains(text, "is not forwarded") {
		t.Errorf("self call again: %v %s", isErr, text)
	}

	pa, pb := freePort(t), freePort(t)
	da := startAiod(t, []string{fmt.Sprintf(`EXTRA_MCP_SERVERS={"b":{"url":"http://127.0.0.1.:%s/mcp","prefix":"b"}}`, pb)}, "--port", pa)
	db := startAiod(t, []string{fmt.Sprintf(`EXTRA_MCP_SERVERS={"a":{"url":"http://127.0.0.1:%s/mcp","prefix":"a"}}`, pa)}, "--port", pb)
	for _, c := range []struct {
		d      string
		prefix string
	}{{da.URL, "b"}, {db.URL, "a"}} {
		want := append([]string{}, mcpBuiltins...)
		for _, n := range mcpBuiltins {
			want = append(want, c.prefix+"_"+n)
		}
		if _, body := (&aio{t: t, base: c.d}).rpc(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); fmt.Sprint(toolNames(body)) != fmt.Sprint(want) {
			t.Errorf("%s lists %v", c.d, toolNames(body))
		}
	}
}
