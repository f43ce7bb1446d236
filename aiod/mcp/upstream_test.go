package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
)

// fakeUpstream is a stateless MCP server for the upstream tests: its
// tools, and a record of the calls it got. The tool "slow" waits for its
// request to end and reports that it did on ended. With sse set it
// answers as an event stream and insists on both media types, as a
// stateless streamable-HTTP server does.
type fakeUpstream struct {
	url   string
	tools []string
	sse   bool
	calls chan string
	ended chan struct{}
	lists atomic.Int64
}

func newFakeUpstream(t *testing.T, sse bool, tools ...string) *fakeUpstream {
	u := &fakeUpstream{tools: tools, sse: sse, calls: make(chan string, 16), ended: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if u.sse && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must contain both", http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &req)
	var result string
	switch req.Method {
	case "tools/list":
		u.lists.Add(1)
		var ts []string
		for _, n := range u.tools {
			ts = append(ts, fmt.Sprintf(`{"name":%q,"description":"from upstream","inputSchema":{"type":"object"},"x-extra":true}`, n))
		}
		result = `{"tools":[` + strings.Join(ts, ",") + `]}`
	case "tools/call":
		u.calls <- req.Params.Name + " " + string(req.Params.Arguments)
		switch req.Params.Name {
		case "slow":
			<-r.Context().Done()
			u.ended <- struct{}{}
			return
		case "null_result", "string_result", "array_result":
			u.reply(w, req.ID, `"result":`+map[string]string{"null_result": "null", "string_result": `"a string"`, "array_result": "[]"}[req.Params.Name])
			return
		case "wrong_id":
			u.reply(w, json.RawMessage(`"`+string(req.ID)+`"`), `"result":{"content":[],"isError":false}`)
			return
		case "fail":
			result = ""
			u.reply(w, req.ID, `"error":{"code":-32602,"message":"unknown tool: fail","data":{"why":"upstream"}}`)
			return
		}
		result = `{"content":[{"type":"text","text":"echo ` + req.Params.Name + `"}],"isError":false,"structuredContent":{"kept":1}}`
	default:
		u.reply(w, req.ID, `"error":{"code":-32601,"message":"nope"}`)
		return
	}
	u.reply(w, req.ID, `"result":`+result)
}

func (u *fakeUpstream) reply(w http.ResponseWriter, id json.RawMessage, member string) {
	msg := `{"jsonrpc":"2.0","id":` + string(id) + `,` + member + `}`
	if u.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\nevent: message\ndata: %s\n\n", msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, msg)
}

// TestUpstreamConfig: which EXTRA_MCP_SERVERS entries are used, which
// are skipped and why.
func TestUpstreamConfig(t *testing.T) {
	cases := []struct {
		raw   string
		names []string
		warns []string
	}{
		{``, nil, nil},
		{`{"a":{"url":"http://127.0.0.1:1/mcp","prefix":"p"},"b":{"url":"http://localhost:2/mcp"},"c":{"url":"http://[::1]:3/x"}}`, []string{"a", "b", "c"}, nil},
		{`{"r":{"url":"http://example.com/mcp"},"s":{"url":"https://127.0.0.1/mcp"},"t":{"url":"http://127.0.0.2/mcp"}}`, nil, []string{
			`MCP server "r": url "http://example.com/mcp" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`,
			`MCP server "s": url "https://127.0.0.1/mcp" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`,
			`MCP server "t": url "http://127.0.0.2/mcp" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`}},
		{`{"io":{"command":"npx","args":["x"]}}`, nil, []string{`MCP server "io": stdio servers ("command") are not supported; give an http:// url on loopback`}},
		{`{"n":5,"u":{},"p":{"url":"http://127.0.0.1:1","prefix":3},"":{"url":"http://127.0.0.1:1"}}`, nil, []string{
			`MCP server "n": the entry is not an object`, `MCP server "u": "url" is missing or not a string`,
			`MCP server "p": "prefix" is not a string`, `an MCP server entry has an empty name`}},
		{`{"a":{"url":"http://127.0.0.1:1"},"a":{"url":"http://127.0.0.1:2"}}`, []string{"a"}, []string{`MCP server "a" appears twice; the first entry is kept`}},
		{`{"secret":{"url":"http://user:pw@example.com/mcp?token=t0k#frag"}}`, nil, []string{`MCP server "secret": url "http://******@example.com/mcp?token=******#******" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`}},
		{`{"a":{"url":"http://LOCALHOST:2/mcp"},"b":{"url":"http://127.0.0.1.:3/mcp"},"c":{"url":"http://LocalHost./x"},"d":{"url":"http://[::1]:4/x"}}`, []string{"a", "b", "c", "d"}, nil},
		{`{"e":{"url":"http://127.0.0.1..:1/"},"f":{"url":"http://localhost.evil.example/"},"g":{"url":"http://[::1].:1/"},"h":{"url":"HTTP://localhost.:1/"}}`, []string{"h"}, []string{
			`MCP server "e": url "http://127.0.0.1..:1/" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`,
			`MCP server "f": url "http://localhost.evil.example/" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`,
			`MCP server "g": url "http://[::1].:1/" skipped: only http:// on 127.0.0.1, localhost or [::1] is accepted`}},
		{`[1]`, nil, []string{`EXTRA_MCP_SERVERS is not a JSON object ({"name": {"url": ..., "prefix": ...}}); no MCP server registered`}},
		{`{"a":`, nil, []string{`EXTRA_MCP_SERVERS is not valid JSON; no MCP server registered`}},
	}
	for _, c := range cases {
		ups, warns := parseUpstreams(c.raw)
		var names []string
		for _, u := range ups {
			names = append(names, u.name)
		}
		if fmt.Sprint(names) != fmt.Sprint(c.names) || fmt.Sprint(warns) != fmt.Sprint(c.warns) {
			t.Errorf("%s:\n got %v %q\nwant %v %q", c.raw, names, warns, c.names, c.warns)
		}
	}
	// Requests go to the name as checked; logs and messages show user
	// information and query values masked.
	ups, _ := parseUpstreams(`{"a":{"url":"http://LOCALHOST.:2/mcp"},"b":{"url":"http://user:pw@127.0.0.1.:3/mcp?token=t0k"},"c":{"url":"http://[::1]/x"}}`)
	for i, want := range [][2]string{{"http://localhost:2/mcp", "http://localhost:2/mcp"},
		{"http://user:pw@127.0.0.1:3/mcp?token=t0k", "http://******@127.0.0.1:3/mcp?token=******"}, {"http://[::1]/x", "http://[::1]/x"}} {
		if i >= len(ups) || ups[i].url != want[0] || ups[i].display != want[1] {
			t.Errorf("%d: %+v, want %q", i, ups, want)
		}
	}
	var logs strings.Builder
	f := newFixture(t, func(c *Config) {
		c.Upstreams = `{"down":{"url":"http://user:s3cret@127.0.0.1:1/mcp?token=t0k","prefix":"d"},"far":{"url":"http://user:s3cret@example.com/?token=t0k"}}`
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	text, _ := f.callTool(t, "d_x", nil)
	if all := logs.String() + text + fmt.Sprint(f.s.Warnings()); strings.Contains(all, "s3cret") || strings.Contains(all, "t0k") || !strings.Contains(all, "127.0.0.1:1/mcp?token=******") {
		t.Errorf("a password or a query shows:\n%s", all)
	}
	s := New(Config{Upstreams: `{"io":{"command":"npx"}}`})
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "stdio") {
		t.Errorf("Warnings: %q", w)
	}
}

// TestUpstreams: the list fans out (prefix added, unprefixed names kept
// only under their server's name, built-ins and earlier upstreams win),
// calls are routed by prefix and answered unedited (an "unknown tool"
// error names the name the client sent), a dead upstream is
// left out of the list and its calls are isError, an unknown prefix is
// -32602, and the caller's cancellation ends the upstream request.
func TestUpstreams(t *testing.T) {
	up := newFakeUpstream(t, false, "echo", "slow", "fail", "sandbox_execute_bash")
	bare := newFakeUpstream(t, true, "bare_one", "other", "up_echo")
	shadow := newFakeUpstream(t, false, "sandbox_execute_bash", "sandbox_other")
	later := newFakeUpstream(t, false, "echo", "extra")
	cfg := fmt.Sprintf(`{"up":{"url":%q,"prefix":"up"},"bare":{"url":%q},"dead":{"url":"http://127.0.0.1:1/mcp","prefix":"dead"},`+
		`"sandbox":{"url":%q},"later":{"url":%q,"prefix":"up"}}`, up.url, bare.url, shadow.url, later.url)
	f := newFixture(t, func(c *Config) { c.Upstreams = cfg })

	_, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var list struct {
		Result struct {
			Tools []map[string]any `json:"tools"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(body), &list)
	var names []string
	for _, tl := range list.Result.Tools {
		names = append(names, tl["name"].(string))
	}
	want := []string{"sandbox_execute_bash", "sandbox_execute_code", "sandbox_file_operations", "sandbox_str_replace_editor",
		"sandbox_get_context", "sandbox_get_packages", "sandbox_load_skill", "browser_get_info", "browser_gui_screenshot",
		"browser_gui_execute_action", "up_echo", "up_slow", "up_fail", "up_sandbox_execute_bash", "bare_one", "sandbox_other"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("tools:\n got %v\nwant %v", names, want)
	}
	if last := list.Result.Tools[len(want)-1]; last["description"] != "from upstream" || last["x-extra"] != true {
		t.Errorf("an upstream tool is passed on as listed: %v", last)
	}

	// Routed by prefix, the prefix stripped; the answer unedited.
	_, body = post(t, f.url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up_echo","arguments":{"a":1}}}`)
	if want := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"echo echo"}],"isError":false,"structuredContent":{"kept":1}}}`; body != want {
		t.Errorf("forwarded:\n got %s\nwant %s", body, want)
	}
	if got := <-up.calls; got != `echo {"a":1}` {
		t.Errorf("upstream got %q", got)
	}
	// Unprefixed, through an event-stream upstream.
	_, body = post(t, f.url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bare_one"}}`)
	if !strings.Contains(body, `"text":"echo bare_one"`) || <-bare.calls != "bare_one " {
		t.Errorf("unprefixed: %s", body)
	}
	// A built-in name is never forwarded.
	if text, _ := f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "echo local"}); !strings.Contains(text, `"output":"local\n"`) {
		t.Errorf("built-in: %s", text)
	}
	// Routed by prefix, the first registered on a tie (so "later", whose
	// prefix is taken, lists nothing), not by who listed it.
	if text, _ := f.callTool(t, "up_extra", nil); text != "echo extra" || <-up.calls != "extra " {
		t.Errorf("up_extra went elsewhere: %s", text)
	}
	// An upstream's JSON-RPC error comes back as it was.
	_, body = post(t, f.url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up_fail"}}`)
	if want := `{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown tool: up_fail","data":{"why":"upstream"}}}`; body != want {
		t.Errorf("upstream error: %s", body)
	}
	<-up.calls
	// A dead upstream: isError; an unknown prefix: -32602.
	text, isErr := f.callTool(t, "dead_hello", map[string]any{})
	if !isErr || text != `MCP server "dead" (http://127.0.0.1:1/mcp) did not answer: connection refused` {
		t.Errorf("dead: %v %q", isErr, text)
	}
	if n := planetest.MetricValue(t, f.reg, "mcp_tool_calls_total", "tool", "upstream:dead", "outcome", "error"); n != 1 {
		t.Errorf("upstream calls are counted per upstream: %v", n)
	}
	_, body = post(t, f.url, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gone_hello"}}`)
	if body != `{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown tool: gone_hello"}}` {
		t.Errorf("no prefix: %s", body)
	}

	// The caller's cancellation (its request ends) ends the upstream's.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		postCtx(t, ctx, f.url, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up_slow"}}`)
	}()
	<-up.calls
	cancel()
	select {
	case <-up.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request did not end with the caller's")
	}
	<-done
	// So does a notifications/cancelled naming the call.
	go func() {
		postCtx(t, context.Background(), f.url, `{"jsonrpc":"2.0","id":"slow-7","method":"tools/call","params":{"name":"up_slow"}}`)
	}()
	<-up.calls
	post(t, f.url, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-7","reason":"test"}}`)
	select {
	case <-up.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("notifications/cancelled did not end the upstream request")
	}
}

// TestUpstreamRedirect: an upstream answering a redirect is a bad
// upstream (left out of the list, its calls isError); the redirect is
// never followed, so its target gets nothing.
func TestUpstreamRedirect(t *testing.T) {
	target := newFakeUpstream(t, false, "echo")
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusMovedPermanently, http.StatusFound, http.StatusPermanentRedirect} {
		redir := httptest.NewServer(http.RedirectHandler(target.url, code))
		defer redir.Close()
		f := newFixture(t, func(c *Config) { c.Upstreams = fmt.Sprintf(`{"r":{"url":%q,"prefix":"r"}}`, redir.URL+"/mcp") })
		_, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if strings.Contains(body, `"r_echo"`) {
			t.Errorf("%d: a redirected upstream is listed: %s", code, body)
		}
		text, isErr := f.callTool(t, "r_echo", map[string]any{})
		if want := fmt.Sprintf(`MCP server "r" (%s/mcp) did not answer: HTTP %d, a redirect (not followed)`, redir.URL, code); !isErr || text != want {
			t.Errorf("%d: call: %v %q\nwant %q", code, isErr, text, want)
		}
	}
	if n := target.lists.Load(); n != 0 || len(target.calls) != 0 {
		t.Errorf("the redirect was followed: %d lists, %d calls", n, len(target.calls))
	}
}

// relay is a loopback server that passes every request to h (set after
// the server it fronts is built) and counts them.
type relay struct {
	url string
	h   atomic.Pointer[http.Handler]
	n   atomic.Int64
}

func newRelay(t *testing.T) *relay {
	r := &relay{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.n.Add(1)
		if h := r.h.Load(); h != nil && r.n.Load() < 1000 {
			(*h).ServeHTTP(w, req)
			return
		}
		http.Error(w, "loop", http.StatusLoopDetected)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/mcp"
	return r
}

func (r *relay) to(h http.Handler) { r.h.Store(&h) }

// TestHop: requests to upstreams carry the hop marker, and a request
// that carries it is answered from the built-ins only, so a daemon peered
// with itself and two daemons peered both ways answer in one round: 20
// tools each, a forwarded call runs once, a call that would be forwarded
// again is isError.
func TestHop(t *testing.T) {
	names := func(body string) []string {
		var list struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(body), &list)
		var out []string
		for _, tl := range list.Result.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	var builtins []string
	for _, tl := range New(Config{}).tools {
		builtins = append(builtins, tl.name)
	}
	with := func(prefix string) []string {
		out := slices.Clone(builtins)
		for _, n := range builtins {
			out = append(out, prefix+"_"+n)
		}
		return out
	}

	t.Run("self", func(t *testing.T) {
		self := newRelay(t)
		f := newFixture(t, func(c *Config) { c.Upstreams = fmt.Sprintf(`{"self":{"url":%q,"prefix":"self"}}`, self.url) })
		self.to(f.s)
		_, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if got := names(body); fmt.Sprint(got) != fmt.Sprint(with("self")) || self.n.Load() != 1 {
			t.Errorf("list (%d relayed): %v", self.n.Load(), got)
		}
		text, isErr := f.callTool(t, "self_sandbox_execute_bash", map[string]any{"cmd": "echo once"})
		if isErr || !strings.Contains(text, `"output":"once\n"`) || self.n.Load() != 2 {
			t.Errorf("call (%d relayed): %v %s", self.n.Load(), isErr, text)
		}
		text, isErr = f.callTool(t, "self_self_sandbox_execute_bash", map[string]any{"cmd": "echo twice"})
		if want := "self_sandbox_execute_bash is not forwarded: this request came from another aiod (X-Aiod-Mcp-Hop), and a forwarded request is answered from the built-in tools only"; !isErr || text != want || self.n.Load() != 3 {
			t.Errorf("call again (%d relayed): %v %s", self.n.Load(), isErr, text)
		}
	})

	t.Run("both ways", func(t *testing.T) {
		toA, toB := newRelay(t), newRelay(t)
		a := newFixture(t, func(c *Config) { c.Upstreams = fmt.Sprintf(`{"b":{"url":%q,"prefix":"b"}}`, toB.url) })
		b := newFixture(t, func(c *Config) { c.Upstreams = fmt.Sprintf(`{"a":{"url":%q,"prefix":"a"}}`, toA.url) })
		toA.to(a.s)
		toB.to(b.s)
		_, body := post(t, a.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if got := names(body); fmt.Sprint(got) != fmt.Sprint(with("b")) {
			t.Errorf("a lists %v", got)
		}
		_, body = post(t, b.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if got := names(body); fmt.Sprint(got) != fmt.Sprint(with("a")) {
			t.Errorf("b lists %v", got)
		}
		if toA.n.Load() != 1 || toB.n.Load() != 1 {
			t.Errorf("relayed %d to a, %d to b", toA.n.Load(), toB.n.Load())
		}
		// A request with the marker lists the built-ins only, on both paths.
		_, _, body = do(t, "POST", a.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, HopHeader, "1")
		if got := names(body); fmt.Sprint(got) != fmt.Sprint(builtins) {
			t.Errorf("a with the marker lists %v", got)
		}
		sid := openSession(t, a.url)
		_, _, body = do(t, "POST", a.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, HopHeader, "1", "Mcp-Session-Id", sid,
			"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
		if _, data, _ := strings.Cut(body, "data: "); fmt.Sprint(names(data)) != fmt.Sprint(builtins) {
			t.Errorf("a's session with the marker lists %v", names(data))
		}
		if toA.n.Load() != 1 || toB.n.Load() != 1 {
			t.Errorf("relayed %d to a, %d to b", toA.n.Load(), toB.n.Load())
		}
	})
}

// TestPrefixCollision: when one upstream's prefix starts another's, a
// call goes to the longest matching prefix, and the list leaves out the
// names a call would not reach: listing and routing agree.
func TestPrefixCollision(t *testing.T) {
	p1 := newFakeUpstream(t, false, "a_x", "y_z", "b")
	p2 := newFakeUpstream(t, false, "x", "c")
	bare := newFakeUpstream(t, false, "a_y_w", "a_q")
	f := newFixture(t, func(c *Config) {
		c.Upstreams = fmt.Sprintf(`{"p1":{"url":%q,"prefix":"a"},"p2":{"url":%q,"prefix":"a_y"},"a":{"url":%q}}`, p1.url, p2.url, bare.url)
	})
	_, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var list struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(body), &list)
	var names []string
	for _, tl := range list.Result.Tools[10:] {
		names = append(names, tl.Name)
	}
	// a_y_z would be routed to p2 (as z), a_y_w to p2 too; the bare
	// upstream "a" ties with p1's prefix and p1 came first.
	if want := []string{"a_a_x", "a_b", "a_y_x", "a_y_c"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("tools: %v, want %v", names, want)
	}
	for _, c := range []struct {
		name string
		up   *fakeUpstream
		sent string
	}{{"a_a_x", p1, "a_x"}, {"a_b", p1, "b"}, {"a_y_x", p2, "x"}, {"a_y_c", p2, "c"}, {"a_y_z", p2, "z"}, {"a_q", p1, "q"}} {
		if text, isErr := f.callTool(t, c.name, map[string]any{}); isErr || text != "echo "+c.sent {
			t.Errorf("%s: %v %s", c.name, isErr, text)
		}
		select {
		case got := <-c.up.calls:
			if got != c.sent+" {}" {
				t.Errorf("%s: the upstream got %q, want %q", c.name, got, c.sent)
			}
		default:
			t.Errorf("%s: not sent to the upstream with the longest prefix", c.name)
		}
	}
	if len(bare.calls) != 0 {
		t.Errorf("the shadowed upstream got calls")
	}
}

// TestUpstreamAnswers: a forwarded call's result must be a JSON object
// answering the request sent (else isError), and arguments that are not
// an object are refused before anything is forwarded, as the built-ins
// refuse them.
func TestUpstreamAnswers(t *testing.T) {
	up := newFakeUpstream(t, false, "echo")
	f := newFixture(t, func(c *Config) { c.Upstreams = fmt.Sprintf(`{"up":{"url":%q,"prefix":"up"}}`, up.url) })
	for _, name := range []string{"null_result", "string_result", "array_result", "wrong_id"} {
		_, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up_`+name+`","arguments":{}}}`)
		if want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"MCP server \"up\" answered an invalid result"}],"isError":true}}`; body != want {
			t.Errorf("%s:\n got %s\nwant %s", name, body, want)
		}
		<-up.calls
	}
	for _, args := range []string{`[1]`, `"x"`, `5`, `true`} {
		_, body := post(t, f.url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up_echo","arguments":`+args+`}}`)
		if want := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"arguments must be a JSON object"}],"isError":true}}`; body != want {
			t.Errorf("arguments %s: %s", args, body)
		}
	}
	if len(up.calls) != 0 {
		t.Errorf("a call with bad arguments was forwarded: %q", <-up.calls)
	}
	// Absent or null arguments are forwarded without any.
	for _, args := range []string{``, `,"arguments":null`} {
		if _, body := post(t, f.url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up_echo"`+args+`}}`); !strings.Contains(body, `"echo echo"`) || <-up.calls != "echo " {
			t.Errorf("arguments %q: %s", args, body)
		}
	}
}
