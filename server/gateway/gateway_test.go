package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/computer"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// rig is a hub with the gateway mounted, on 127.0.0.1.
type rig struct {
	hub   *server.Server
	gw    *Gateway
	base  string // http://127.0.0.1:PORT
	token string
}

func newRig(t testing.TB, token string, callTimeout time.Duration) *rig {
	t.Helper()
	cfg := server.Config{Calls: true}
	if token != "" {
		cfg.Auth = server.TokenAuth(token, "x-api-key")
	}
	hub, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	gw, err := New(Config{Hub: hub, CallTimeout: callTimeout, ListTimeout: 3 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hub.HandleMCP(gw)
	ts := httptest.NewServer(hub.Handler())
	t.Cleanup(func() {
		gw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
		ts.Close()
	})
	return &rig{hub: hub, gw: gw, base: ts.URL, token: token}
}

// pids receives the process ids the sleep tool starts.
type pids chan int

// testTools is the local MCP server of a test Computer: echo, sleep (a
// real process, killed when the call's context ends), and a window.
func testTools(started pids) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	s.AddTool(&sdk.Tool{Name: "echo", Description: "echoes", InputSchema: obj}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo " + string(req.Params.Arguments)}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "sleep", InputSchema: obj}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		cmd := exec.CommandContext(ctx, "sleep", "30")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		if started != nil {
			started <- cmd.Process.Pid
		}
		_ = cmd.Wait()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "slept"}}}, nil
	})
	s.AddResource(&sdk.Resource{URI: "window://t/main", Name: "main", MIMEType: "text/plain"}, func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "window://t/main", Text: "the main window"}}}, nil
	})
	return s
}

// computer joins a Computer named name to office, serving tools as
// bundle "t", and returns its stop (which waits for it to end).
func (r *rig) computer(t testing.TB, office, name string, approval computer.Approval, tools *sdk.Server) (stop func()) {
	t.Helper()
	return r.computerWith(t, office, name, approval, tools, nil)
}

// computerWith is computer with its options changed by opt.
func (r *rig) computerWith(t testing.TB, office, name string, approval computer.Approval, tools *sdk.Server, opt func(*computer.Options)) (stop func()) {
	t.Helper()
	joined := make(chan struct{})
	var once sync.Once
	o := computer.Options{Server: r.base, Office: office, Name: name, Config: &config.File{}, Approval: approval,
		OnJoined: func() { once.Do(func() { close(joined) }) },
		Local: []computer.LocalServer{{BundleID: "t", Connect: func(ctx context.Context) (sdk.Transport, error) {
			ct, st := sdk.NewInMemoryTransports()
			if _, err := tools.Connect(ctx, st, nil); err != nil {
				return nil, err
			}
			return ct, nil
		}}}}
	if r.token != "" {
		o.Auth = map[string]any{"x-api-key": r.token}
	}
	if opt != nil {
		opt(&o)
	}
	c, err := computer.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	select {
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("the Computer did not join")
	}
	var stopOnce sync.Once
	stop = func() { stopOnce.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// era is one way an MCP client speaks to the gateway.
type era struct {
	name    string
	version string // the client's protocol version
}

var eras = []era{{"2025-11-25 session", "2025-11-25"}, {"2026-07-28", ""}}

// client connects the Go SDK's client to an office's route.
func (r *rig) client(t testing.TB, path string, e era, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &sdk.StreamableClientTransport{Endpoint: r.base + path}
	if r.token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{r.token}}
	}
	var so *sdk.ClientSessionOptions
	if e.version != "" {
		so = &sdk.ClientSessionOptions{ProtocolVersion: e.version}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, tr, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	want := e.version
	if want == "" {
		want = "2026-07-28"
	}
	if v := cs.InitializeResult().ProtocolVersion; v != want {
		t.Fatalf("negotiated %q, want %q", v, want)
	}
	return cs
}

// bearer adds the hub's token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestGatewayTools: in both eras the office's tools are listed under
// their exposed names with their Computer in _meta, a call reaches the
// Computer and comes back, a name not listed is -32602, and the
// Computer's window is a resource.
func TestGatewayTools(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	r.computer(t, "o1", "c1", computer.ApproveAll, testTools(nil))
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			cs := r.client(t, "/offices/o1/mcp", e, nil)
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var echo *sdk.Tool
			for _, tool := range res.Tools {
				if tool.Name == "t__echo" {
					echo = tool
				}
			}
			if len(res.Tools) != 2 || echo == nil || echo.Meta["a2c_computer"] != "c1" || echo.Meta["a2c_bundle_id"] != "t" || echo.Description != "echoes" {
				t.Fatalf("tools: %s", marshal(res.Tools))
			}
			if got := string(marshal(echo.InputSchema)); !strings.Contains(got, `"text"`) {
				t.Errorf("input schema %s", got)
			}
			out, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || out.IsError || text(out) != `echo {"text":"hi"}` {
				t.Fatalf("call: %v %s", err, marshal(out))
			}
			_, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "nope__x"})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("unknown tool: %v", err)
			}
			rl, err := cs.ListResources(t.Context(), nil)
			if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != "window://t/main" || rl.Resources[0].Meta["a2c_computer"] != "c1" {
				t.Fatalf("resources: %v %s", err, marshal(rl))
			}
			rr, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "window://t/main"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "the main window" {
				t.Fatalf("read: %v %s", err, marshal(rr))
			}
		})
	}
	// The call is in the hub's call log as the gateway's.
	calls, _, err := r.hub.Calls("o1")
	if err != nil || len(calls) == 0 || calls[len(calls)-1].Agent != DefaultAgent || calls[len(calls)-1].Console || calls[len(calls)-1].Tool != "t__echo" {
		t.Errorf("call log: %s", marshal(calls))
	}
}

// TestGatewaySkills: a Computer's skills are resources, read through
// client:get_skill.
func TestGatewaySkills(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "audit-guide"), 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: audit-guide\ndescription: How to audit.\n---\nStep one: look.\n"
	if err := os.WriteFile(filepath.Join(dir, "audit-guide", "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	r.computerWith(t, "o1", "c1", computer.ApproveAll, testTools(nil), func(o *computer.Options) { o.SkillsDir = dir })
	for _, e := range eras {
		cs := r.client(t, "/offices/o1/mcp", e, nil)
		rl, err := cs.ListResources(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var skill *sdk.Resource
		for _, res := range rl.Resources {
			if res.URI == "skill://audit-guide/SKILL.md" {
				skill = res
			}
		}
		if skill == nil || skill.Description != "How to audit." || skill.Meta["a2c_skill"] != "audit-guide" {
			t.Fatalf("%s: resources %s", e.name, marshal(rl.Resources))
		}
		rr, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: skill.URI})
		if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "Step one: look.") {
			t.Fatalf("%s: read %v %s", e.name, err, marshal(rr))
		}
	}
}

// TestGatewayDefaultRoute: /mcp serves office "default".
func TestGatewayDefaultRoute(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	r.computer(t, "default", "c1", computer.ApproveAll, testTools(nil))
	cs := r.client(t, "/mcp", eras[0], nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"t__echo", "t__sleep"}) {
		t.Fatalf("tools %v", got)
	}
	cs2 := r.client(t, "/offices/other/mcp", eras[0], nil)
	if got := toolNames(t, cs2); len(got) != 0 {
		t.Fatalf("another office's tools %v", got)
	}
}

// gone waits up to d for process pid to be gone.
func gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		// A zombie counts as gone once its parent reaped it.
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestGatewayCancel: a client's cancel reaches the Computer, whose tool's
// process is gone within 1 s, in both eras.
func TestGatewayCancel(t *testing.T) {
	r := newRig(t, "", 20*time.Second)
	started := make(pids, 1)
	r.computer(t, "o1", "c1", computer.ApproveAll, testTools(started))
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			cs := r.client(t, "/offices/o1/mcp", e, nil)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "t__sleep"})
				errc <- err
			}()
			var pid int
			select {
			case pid = <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the tool did not start")
			}
			cancel()
			t0 := time.Now()
			defer func() { t.Logf("gone after %v", time.Since(t0)) }()
			if !gone(pid, time.Second) {
				t.Fatalf("process %d still there 1 s after the cancel", pid)
			}
			if err := <-errc; err == nil {
				t.Error("the cancelled call returned no error")
			}
		})
	}
}

// TestGatewayTimeout: a call past the gateway's budget comes back as a
// result with isError and a2c_timeout in _meta.
func TestGatewayTimeout(t *testing.T) {
	r := newRig(t, "", time.Second)
	started := make(pids, 1)
	r.computer(t, "o1", "c1", computer.ApproveAll, testTools(started))
	cs := r.client(t, "/offices/o1/mcp", eras[0], nil)
	out, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__sleep"})
	if err != nil || !out.IsError || out.Meta[smcp.MetaTimeout] != true {
		t.Fatalf("%v %s", err, marshal(out))
	}
	if !gone(<-started, time.Second) {
		t.Error("the timed-out tool's process is still there")
	}
}

// TestGatewayComputerLeaves: a Computer that leaves mid-call ends the
// call with isError; its tools leave the list, and the client is told
// (list_changed) when a Computer enters and when it leaves.
func TestGatewayComputerLeaves(t *testing.T) {
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) { testComputerLeaves(t, e) })
	}
}

func testComputerLeaves(t *testing.T, e era) {
	r := newRig(t, "", 20*time.Second)
	started := make(pids, 1)
	stop := r.computer(t, "o1", "c1", computer.ApproveAll, testTools(started))
	changed := make(chan struct{}, 8)
	cs := r.client(t, "/offices/o1/mcp", e, &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if got := toolNames(t, cs); len(got) != 2 {
		t.Fatalf("tools %v", got)
	}
	stop2 := r.computer(t, "o1", "c2", computer.ApproveAll, testTools(nil))
	// Two Computers exposing the same names: both qualified.
	waitTools(t, cs, changed, "c1.t__echo", "c1.t__sleep", "c2.t__echo", "c2.t__sleep")
	out, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "c2.t__echo", Arguments: map[string]any{}})
	if err != nil || text(out) != "echo {}" {
		t.Fatalf("qualified call: %v %s", err, marshal(out))
	}
	stop2()
	waitTools(t, cs, changed, "t__echo", "t__sleep")
	errc := make(chan *sdk.CallToolResult, 1)
	go func() {
		out, _ := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__sleep"})
		errc <- out
	}()
	<-started
	stop()
	select {
	case out := <-errc:
		if out == nil || !out.IsError {
			t.Fatalf("the call whose Computer left: %s", marshal(out))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call whose Computer left did not end")
	}
	waitTools(t, cs, changed)
}

// waitTools waits for notifications/tools/list_changed until the tool
// list is want (a notification of an earlier change may come first).
func waitTools(t *testing.T, cs *sdk.ClientSession, changed chan struct{}, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var got []string
	for {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no notifications/tools/list_changed for the tools %v (last listed %v)", want, got)
		}
		if got = toolNames(t, cs); slices.Equal(got, want) || len(got) == 0 && len(want) == 0 {
			return
		}
	}
}

// TestGatewayApproval: a Computer that leaves confirmation to the Agent
// gets it from the MCP client's user (elicitation, or the 2026-07-28
// input-required round trip); a "no" and a client that cannot be asked
// are refusals with error_code 4005.
func TestGatewayApproval(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	r.computer(t, "o1", "c1", computer.ApproveAgent, testTools(nil))
	for _, e := range eras {
		for _, answer := range []string{"accept", "decline", "no capability"} {
			t.Run(e.name+"/"+answer, func(t *testing.T) {
				var asked []string
				var opts *sdk.ClientOptions
				if answer != "no capability" {
					opts = &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
						asked = append(asked, req.Params.Message)
						if answer == "accept" {
							return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
						}
						return &sdk.ElicitResult{Action: "decline"}, nil
					}}
				}
				cs := r.client(t, "/offices/o1/mcp", e, opts)
				out, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__echo", Arguments: map[string]any{"text": "x"}})
				if err != nil {
					t.Fatal(err)
				}
				switch answer {
				case "accept":
					if out.IsError || text(out) != `echo {"text":"x"}` || len(asked) != 1 || !strings.Contains(asked[0], "t__echo") {
						t.Fatalf("%s asked %q", marshal(out), asked)
					}
				default:
					if !out.IsError || fmt.Sprint(out.Meta[smcp.MetaErrorCode]) != "4005" {
						t.Fatalf("%s", marshal(out))
					}
				}
			})
		}
	}
}

// TestGatewayGuard: the hub's token and its Host and Origin rule guard
// the gateway, and the refusals are JSON-RPC errors.
func TestGatewayGuard(t *testing.T) {
	r := newRig(t, "s3cret", 10*time.Second)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"no token", nil, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		{"x-api-key", map[string]string{"x-api-key": "s3cret"}, 200},
		{"cross-site origin", map[string]string{"x-api-key": "s3cret", "Origin": "http://evil.example"}, 403},
		{"foreign host", map[string]string{"x-api-key": "s3cret", "Host": "evil.example"}, 421},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/mcp", "/offices/o1/mcp"} {
				req, _ := http.NewRequest("POST", r.base+path, strings.NewReader(init))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range c.header {
					if k == "Host" {
						req.Host = v
						continue
					}
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status {
					t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
				}
				if c.status == 200 {
					continue
				}
				var e struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if json.Unmarshal(body, &e) != nil || e.JSONRPC != "2.0" || string(e.ID) != "null" || e.Error.Code != -32000 || e.Error.Message == "" {
					t.Fatalf("%s: body %s", path, body)
				}
				if c.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s: no WWW-Authenticate", path)
				}
			}
		})
	}
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
