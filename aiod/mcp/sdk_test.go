package mcp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// session connects the Go SDK's client to f over streamable HTTP, or in
// memory through Connect.
func session(t *testing.T, f *fixture, inMemory bool) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var tr sdk.Transport = &sdk.StreamableClientTransport{Endpoint: f.url}
	if inMemory {
		var err error
		if tr, err = f.s.Connect(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Over HTTP a handshake-era session (the Go SDK's client would speak
	// 2026-07-28, see stateless); in memory the client's default, which
	// finds no server/discover there and initializes.
	var opts *sdk.ClientSessionOptions
	if !inMemory {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: protocolVersions[0]}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// stateless is the Go SDK's client with its defaults over HTTP: it asks
// server/discover and speaks MCP 2026-07-28, with no session.
func stateless(t *testing.T, f *fixture) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: f.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != statelessProtocol || cs.ID() != "" {
		t.Fatalf("negotiated %q with session %q, want %s without one", v, cs.ID(), statelessProtocol)
	}
	return cs
}

// sdkWays are the Go SDK client's three ways to /mcp.
var sdkWays = []struct {
	name string
	open func(*testing.T, *fixture) *sdk.ClientSession
}{
	{"session", func(t *testing.T, f *fixture) *sdk.ClientSession { return session(t, f, false) }},
	{"in memory", func(t *testing.T, f *fixture) *sdk.ClientSession { return session(t, f, true) }},
	{"2026-07-28", stateless},
}

// TestSDKClients: the Go SDK's client over a streamable-HTTP session, in
// memory and at MCP 2026-07-28 (no session) sees the same server: aiod's
// info, the ten tools, the same results and the same unknown-tool error.
func TestSDKClients(t *testing.T) {
	f := newFixture(t, nil)
	for _, way := range sdkWays {
		t.Run(way.name, func(t *testing.T) {
			cs := way.open(t, f)
			next := way.name == "2026-07-28"
			init := cs.InitializeResult()
			want := protocolVersions[0]
			if next {
				want = statelessProtocol
			}
			if init.ServerInfo.Name != "aiod" || init.ServerInfo.Version != "9.9.9" || init.Capabilities.Tools == nil || init.ProtocolVersion != want {
				t.Errorf("initialize: %+v %+v", init.ServerInfo, init)
			}
			if way.name == "session" && cs.ID() == "" {
				t.Error("no session id over streamable HTTP")
			}
			ctx := t.Context()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 10 || tools.Tools[0].Name != "sandbox_execute_bash" || tools.Tools[9].Name != "browser_gui_execute_action" {
				t.Fatalf("list: %v %v", tools, err)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: map[string]any{"cmd": "echo sdk"}})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"output":"sdk\n"`) {
				t.Fatalf("call: %+v %v", res, err)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: map[string]any{}})
			if err != nil || !res.IsError || res.Content[0].(*sdk.TextContent).Text != "cmd is required" {
				t.Fatalf("isError: %+v %v", res, err)
			}
			_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute"})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != codeInvalidParams || je.Message != "unknown tool: sandbox_execute" {
				t.Fatalf("unknown tool: %v", err)
			}
			if next {
				return // 2026-07-28 has no ping
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSessionConcurrentPOSTs: three calls in flight at once on one
// streamable-HTTP session (the conformance scenario
// server-sse-multiple-streams) all complete.
func TestSessionConcurrentPOSTs(t *testing.T) {
	f := newFixture(t, nil)
	cs := session(t, f, false)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Go(func() {
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "sandbox_execute_bash",
				Arguments: map[string]any{"cmd": fmt.Sprintf("sleep 0.3; echo %d", i), "new_session": true}})
			if err == nil && (res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, fmt.Sprintf(`"output":"%d\n"`, i))) {
				err = fmt.Errorf("call %d: %+v", i, res)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestCancelKillsTree: however a running sandbox_execute_bash call is
// cancelled (its plain client goes away, a notifications/cancelled names
// it, the SDK client cancels it over a session or in memory), its
// command's whole process tree is gone within a second.
func TestCancelKillsTree(t *testing.T) {
	f := newFixture(t, nil)
	detach := ""
	if _, err := exec.LookPath("setsid"); err == nil {
		detach = "setsid sh -c 'echo $$ > det.pid; exec sleep 300' & "
	}
	script := "echo $$ > sh.pid; sh -c 'echo $$ > kid.pid; exec sleep 300' & " + detach + "wait"
	ways := []struct {
		name string
		run  func(t *testing.T, args map[string]any, started <-chan struct{})
	}{
		{"plain client goes away", func(t *testing.T, args map[string]any, started <-chan struct{}) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-started; cancel() }()
			postCtx(t, ctx, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
				"params": map[string]any{"name": "sandbox_execute_bash", "arguments": args}})
		}},
		{"plain notifications/cancelled", func(t *testing.T, args map[string]any, started <-chan struct{}) {
			go func() {
				<-started
				post(t, f.url, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"run-1"}}`)
			}()
			_, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": "run-1", "method": "tools/call",
				"params": map[string]any{"name": "sandbox_execute_bash", "arguments": args}})
			if text, isErr := resultText(t, body); !isErr || !strings.HasPrefix(text, "cancelled") {
				t.Errorf("answer: %s", body)
			}
		}},
		{"session client cancels", func(t *testing.T, args map[string]any, started <-chan struct{}) {
			cs := session(t, f, false)
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-started; cancel() }()
			_, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: args})
		}},
		{"in-memory client cancels", func(t *testing.T, args map[string]any, started <-chan struct{}) {
			cs := session(t, f, true)
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-started; cancel() }()
			_, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: args})
		}},
		{"2026-07-28 client cancels", func(t *testing.T, args map[string]any, started <-chan struct{}) {
			cs := stateless(t, f)
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-started; cancel() }()
			_, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "sandbox_execute_bash", Arguments: args})
		}},
		{"2026-07-28 client goes away", func(t *testing.T, args map[string]any, started <-chan struct{}) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-started; cancel() }()
			postCtx(t, ctx, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
				"params": map[string]any{"name": "sandbox_execute_bash", "arguments": args, "_meta": nextMeta()}}, nextHeaders("tools/call", "sandbox_execute_bash")...)
		}},
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			dir := t.TempDir()
			started := make(chan struct{})
			var pids []int
			go func() {
				defer close(started)
				pids = []int{waitPID(t, filepath.Join(dir, "sh.pid")), waitPID(t, filepath.Join(dir, "kid.pid"))}
				if detach != "" {
					pids = append(pids, waitPID(t, filepath.Join(dir, "det.pid")))
				}
			}()
			w.run(t, map[string]any{"cmd": script, "cwd": dir, "timeout": 120}, started)
			<-started
			waitGone(t, time.Second, pids...)
		})
	}
}
