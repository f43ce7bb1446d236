package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2c-smcp/a2c-go/aiod/code"
	"github.com/a2c-smcp/a2c-go/aiod/commands"
	"github.com/a2c-smcp/a2c-go/aiod/files"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// fixture is a Server over real engines in a temporary workspace,
// served on a loopback httptest server.
type fixture struct {
	s    *Server
	url  string
	ws   string
	reg  *prometheus.Registry
	cmds *commands.Engine
}

// newFixture builds the server; edit adjusts its Config first.
func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	ws := t.TempDir()
	cmds := commands.NewEngine(commands.Config{Workspace: ws, KillGrace: 200 * time.Millisecond})
	cells := code.NewEngine(code.Config{Workspace: ws, Python: os.Getenv("AIO_PYTHON_BIN")})
	reg := prometheus.NewRegistry()
	cfg := Config{
		Commands: cmds, Files: files.NewEngine(files.Config{Workspace: ws}), Code: cells,
		Context: func(context.Context) (any, error) { return map[string]any{"version": "test", "home_dir": ws}, nil },
		Packages: func(_ context.Context, lang string) (string, error) {
			if lang != "python" && lang != "nodejs" {
				return "", errString(`unknown lang "` + lang + `": expected python or nodejs`)
			}
			return "  - demo==1.0\n", nil
		},
		Version: "9.9.9", Registerer: reg,
	}
	if edit != nil {
		edit(&cfg)
	}
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		_ = s.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cmds.Close(ctx)
		_ = cells.Close(ctx)
	})
	return &fixture{s: s, url: srv.URL, ws: ws, reg: reg, cmds: cmds}
}

type errString string

func (e errString) Error() string { return string(e) }

// post sends body (a string, or JSON-encoded) to url; hdr is pairs.
func post(t *testing.T, url string, body any, hdr ...string) (int, string) {
	t.Helper()
	return postCtx(t, context.Background(), url, body, hdr...)
}

// postCtx is post under ctx. Any goroutine may call it: a failure is
// reported with t.Errorf (never t.Fatal) and answers status 0, except a
// request ended by ctx (the caller cancelled it on purpose), which
// answers 0 and the error's text without failing the test.
func postCtx(t *testing.T, ctx context.Context, url string, body any, hdr ...string) (int, string) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Errorf("post %s: %v", url, err)
			return 0, ""
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Errorf("post %s: %v", url, err)
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("post %s: %v", url, err)
		}
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil && ctx.Err() == nil {
		t.Errorf("post %s: reading the answer: %v", url, err)
	}
	return resp.StatusCode, string(out)
}

// callTool posts a tools/call on the plain path and returns the result's
// text (all text items joined) and isError; a JSON-RPC error fails.
func (f *fixture) callTool(t *testing.T, name string, args any) (string, bool) {
	t.Helper()
	status, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	if status != 200 {
		t.Fatalf("%s: HTTP %d %s", name, status, body)
	}
	return resultText(t, body)
}

func resultText(t *testing.T, body string) (string, bool) {
	t.Helper()
	var r struct {
		Result *struct {
			Content []struct{ Type, Text string }
			IsError *bool `json:"isError"`
		}
		Error *rpcError
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Result == nil || r.Result.IsError == nil {
		t.Fatalf("not a tool result: %s", body)
	}
	var text []string
	for _, c := range r.Result.Content {
		if c.Type == "text" {
			text = append(text, c.Text)
		}
	}
	return strings.Join(text, ""), *r.Result.IsError
}

// jsonText decodes a result text that is JSON.
func jsonText(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("result text is not JSON: %q", text)
	}
	return m
}

// waitPID reads a pid written to file by a command, waiting up to 10 s.
func waitPID(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no pid in %s", file) // may run on a goroutine: no Fatal
	return 0
}

// gone reports whether pid has ended (a zombie waiting for its reaper
// counts as ended: it runs nothing).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// waitGone fails unless every pid ends within d.
func waitGone(t *testing.T, d time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		alive := []int{}
		for _, p := range pids {
			if p > 0 && !gone(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("processes %v still alive %s after the cancellation", alive, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sessionPost posts body on the streamable-HTTP path (Accept lists both
// media types; sid, when set, is the Mcp-Session-Id) and returns the
// status, the answer's session id and the JSON-RPC message of the answer
// (the data of the event stream's message, or the JSON body).
func sessionPost(t *testing.T, url, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	msg := strings.TrimSpace(string(out))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = ""
		for l := range strings.SplitSeq(string(out), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				msg = d
			}
		}
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), msg
}

// openSession initializes a streamable-HTTP session by hand and returns
// its id.
func openSession(t *testing.T, url string) string {
	t.Helper()
	status, sid, msg := sessionPost(t, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if status != 200 || sid == "" {
		t.Fatalf("initialize: %d %q %s", status, sid, msg)
	}
	if status, _, _ := sessionPost(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d", status)
	}
	return sid
}

// pipeCall initializes an in-process connection (Server.Connect) by hand
// and returns the raw result of one tools/call on it.
func pipeCall(t *testing.T, s *Server, name string, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tr, err := s.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, _ := tr.Connect(ctx)
	defer conn.Close()
	send := func(m jsonrpc.Message) {
		if err := conn.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	id1, _ := jsonrpc.MakeID(float64(1))
	id2, _ := jsonrpc.MakeID(float64(2))
	send(&jsonrpc.Request{ID: id1, Method: "initialize", Params: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)})
	if _, err := conn.Read(ctx); err != nil {
		t.Fatal(err)
	}
	send(&jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
	send(&jsonrpc.Request{ID: id2, Method: "tools/call", Params: json.RawMessage(`{"name":` + strconv.Quote(name) + `,"arguments":` + args + `}`)})
	m, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := m.(*jsonrpc.Response)
	if !ok || r.Error != nil {
		t.Fatalf("answer: %#v", m)
	}
	return string(r.Result)
}

// do sends one request and returns the status, the answer's headers and
// its body; hdr is pairs.
func do(t *testing.T, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(out)
}

// mustOrigins is a loopback daemon's Host and Origin rule with hosts
// allowed too.
func mustOrigins(t *testing.T, hosts ...string) *origin.Policy {
	t.Helper()
	p, err := origin.New(origin.Config{Listen: "127.0.0.1:0", Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
