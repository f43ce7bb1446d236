package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
)

// envelope is a decoded answer: the envelope, or the 422 body.
type envelope struct {
	api.Reply
	raw map[string]json.RawMessage
}

type harness struct {
	planetest.Client
	t   testing.TB
	p   *Plane
	srv *httptest.Server
}

// newHarness mounts a plane on a real HTTP server; tweak lowers engine
// limits before anything runs.
func newHarness(t testing.TB, cfg Config, tweak func(*Engine)) *harness {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	p := New(cfg)
	if tweak != nil {
		tweak(p.e)
	}
	srv := planetest.Serve(t, p)
	return &harness{Client: planetest.Client{T: t, URL: srv.URL}, t: t, p: p, srv: srv}
}

// do sends a request and decodes the answer, keeping its raw members.
func (h *harness) do(method, path string, body any) (int, envelope) {
	h.t.Helper()
	st, r, raw := h.Do(method, path, body)
	env := envelope{Reply: r}
	_ = json.Unmarshal(raw, &env.raw)
	return st, env
}

// execData and outputData are the results as a client decodes them.
type (
	execData   = execResult
	outputData = outputResult
)

func (h *harness) run(body any) execData {
	h.t.Helper()
	var d execData
	h.OK("POST", "/v2/commands", body, &d)
	return d
}

// waitDone long-polls a command until it is no longer running.
func (h *harness) waitDone(id string) outputData {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var o outputData
		h.OK("GET", "/v2/commands/"+id+"?wait=true&wait_timeout=5&offset=0", nil, &o)
		if o.Command.Status != StatusRunning || time.Now().After(deadline) {
			return o
		}
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func code(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

// groupAlive reports whether any live (non-zombie) process is in pgid.
func groupAlive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(s[i+1:])
		if len(fs) > 2 && fs[2] == strconv.Itoa(pgid) && fs[0] != "Z" {
			return true
		}
	}
	return false
}

// eventually polls cond for up to d (for effects outside the engine,
// such as a process group disappearing from /proc).
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// stream posts body to /v2/commands (path overridable with a "_path"
// key) asking for NDJSON and collects the frames; each goes to fn first
// when fn is set, and fn returning false disconnects.
func (h *harness) stream(body map[string]any, fn func(map[string]any) bool) []map[string]any {
	h.t.Helper()
	path := "/v2/commands"
	if p, ok := body["_path"].(string); ok {
		path = p
		delete(body, "_path")
	}
	j, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+path, bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		h.t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var frames []map[string]any
	dec := json.NewDecoder(resp.Body)
	for {
		var f map[string]any
		if err := dec.Decode(&f); err != nil {
			if err != io.EOF {
				h.t.Fatalf("stream decode: %v", err)
			}
			return frames
		}
		frames = append(frames, f)
		if fn != nil && !fn(f) {
			return frames
		}
	}
}

func closePlane(t testing.TB, p *Plane) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// disconnectedAfter is the event a "was not killed" check waits for: it
// streams a sync command, disconnects, and waits until that command has
// been killed for it. A disconnect made before this call has been acted
// on by then too (the server notices each on its connection at once;
// this one's kill has a command start and a tree signal more to do).
func (h *harness) disconnectedAfter() {
	h.t.Helper()
	var started map[string]any
	h.stream(map[string]any{"command": "sleep 31"}, func(f map[string]any) bool { started = f; return false })
	if o := h.waitDone(started["command_id"].(string)); o.Command.Status != StatusCompleted {
		h.t.Fatalf("the reference disconnect did not kill: %+v", o.Command)
	}
}

// waitProc waits until a live process runs exactly argv, and returns it.
func waitProc(t testing.TB, args ...string) procInfo {
	t.Helper()
	var p procInfo
	eventually(t, 10*time.Second, strings.Join(args, " ")+" to run", func() bool {
		ps := procsWithArgv(args...)
		if len(ps) > 0 {
			p = ps[0]
		}
		return len(ps) > 0
	})
	return p
}

// noneRunning waits until no live process runs argv, looking again a few
// times after the first empty look (a process being forked may not be
// visible yet at one instant).
func noneRunning(t testing.TB, args ...string) {
	t.Helper()
	clean := 0
	eventually(t, 10*time.Second, "no "+strings.Join(args, " ")+" left", func() bool {
		if len(procsWithArgv(args...)) > 0 {
			clean = 0
			return false
		}
		clean++
		return clean >= 5
	})
}
