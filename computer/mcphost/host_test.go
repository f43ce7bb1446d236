package mcphost

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everything returns the path of server-everything's entry point, which
// the project's test command installs, or skips.
func everything(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "test", "peers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("A2C_REQUIRE_PEERS") == "1" {
			t.Fatalf("test peer missing: %s", p)
		}
		t.Skipf("test peer missing: %s (run make test)", p)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node missing")
	}
	abs, _ := filepath.Abs(p)
	return abs
}

func waitReady(t *testing.T, u *Upstream) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, _ := u.State(); st == Ready {
			return
		}
	}
	st, err := u.State()
	t.Fatalf("upstream not ready: %s %v", st, err)
}

// addTools gives s the two tools of the tests: add, and wait (until
// cancelled, at most 2 s).
func addTools(s *mcp.Server) {
	type in struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type out struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add"}, func(_ context.Context, _ *mcp.CallToolRequest, x in) (*mcp.CallToolResult, out, error) {
		return nil, out{x.A + x.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select { // bounded, so that closing the test server never waits on it
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		return nil, struct{}{}, ctx.Err()
	})
}

// inProcess serves a small Go MCP server over streamable HTTP.
func inProcess(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	addTools(s)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// useTools waits for u, then lists the tools of addTools, calls add, and
// cancels a call of wait: it ends in error within a second.
func useTools(t *testing.T, u *Upstream) {
	t.Helper()
	waitReady(t, u)
	if tools := u.Tools(); len(tools) != 2 {
		t.Fatalf("tools = %d", len(tools))
	}
	res, err := u.CallTool(context.Background(), "add", map[string]int{"a": 2, "b": 40})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "42") {
		t.Fatalf("add = %+v, %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := u.CallTool(ctx, "wait", map[string]any{}); err == nil || time.Since(start) > time.Second {
		t.Fatalf("cancelled call: %v after %v", err, time.Since(start))
	}
}

func TestStreamable(t *testing.T) {
	url := inProcess(t)
	var changes atomic.Int32
	u := Start(Spec{BundleID: "t", Type: "streamable", URL: url}, Options{OnChange: func() { changes.Add(1) }})
	defer u.Close()
	useTools(t, u)
	if changes.Load() == 0 {
		t.Error("no change reported")
	}
}

func TestStdioRestart(t *testing.T) {
	entry := everything(t)
	u := Start(Spec{BundleID: "ev", Type: "stdio", Command: "node", Args: []string{entry, "stdio"}},
		Options{MinBackoff: 50 * time.Millisecond})
	defer u.Close()
	waitReady(t, u)
	res, err := u.CallTool(context.Background(), "echo", map[string]string{"message": "hi"})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "Echo: hi" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	// Kill the server process: the Upstream restarts it and the tools return.
	u.mu.Lock()
	s := u.session
	u.mu.Unlock()
	s.Close()
	time.Sleep(100 * time.Millisecond)
	waitReady(t, u)
	if _, err := u.CallTool(context.Background(), "echo", map[string]string{"message": "again"}); err != nil {
		t.Fatal(err)
	}
	if u.restarts == 0 {
		t.Error("no restart counted")
	}
}

// eraServer serves the inProcess tools over streamable HTTP speaking only
// versions (a 2026-07-28-only server is stateless: the revision has no
// session), and records the MCP-Protocol-Version of every POST.
func eraServer(t *testing.T, versions []string) (url string, seen func() []string) {
	s := mcp.NewServer(&mcp.Implementation{Name: "era", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	addTools(s)
	stateless := len(versions) == 1 && versions[0] >= "2026-07-28"
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless, PropagateRequestCancellation: true})
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("MCP-Protocol-Version"); r.Method == http.MethodPost && v != "" {
			mu.Lock()
			got = append(got, v)
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
}

// TestStreamableEras: the Computer's upstream speaks to a streamable-HTTP
// MCP server of either era: one that speaks only 2026-07-28 (no
// handshake, no session) and one that speaks only a handshake-era
// revision; the Go SDK's client negotiates, and tools, calls and
// cancellation work the same.
func TestStreamableEras(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		want     string // the revision every request after the first must name
	}{
		{"2026-07-28 only", []string{"2026-07-28"}, "2026-07-28"},
		{"handshake only", []string{"2025-11-25"}, "2025-11-25"},
		{"older handshake only", []string{"2025-06-18"}, "2025-06-18"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, seen := eraServer(t, tc.versions)
			u := Start(Spec{BundleID: "era", Type: "streamable", URL: url}, Options{})
			defer u.Close()
			useTools(t, u)
			versions := seen()
			if len(versions) < 2 || versions[len(versions)-1] != tc.want {
				t.Fatalf("MCP-Protocol-Version of the requests: %v, want the last ones %s", versions, tc.want)
			}
		})
	}
}
