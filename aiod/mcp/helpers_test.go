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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2c-smcp/a2c-go/aiod/code"
	"github.com/a2c-smcp/a2c-go/aiod/commands"
	"github.com/a2c-smcp/a2c-go/aiod/files"
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

func postCtx(t *testing.T, ctx context.Context, url string, body any, hdr ...string) (int, string) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
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
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
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
