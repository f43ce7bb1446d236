package pty

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

type harness struct {
	planetest.Client
	t   testing.TB
	p   *Plane
	srv *httptest.Server
}

// newHarness mounts a plane on a real HTTP server; tweak adjusts the
// engine before anything runs.
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

// do sends a request and decodes the answer.
func (h *harness) do(method, path string, body any) (int, api.Reply) {
	h.t.Helper()
	st, r, _ := h.Do(method, path, body)
	return st, r
}

// session creates a terminal with opts and returns its id.
func (h *harness) session(opts map[string]any) string {
	h.t.Helper()
	var c Created
	var body any
	if opts != nil {
		body = opts
	}
	h.OK("POST", "/v2/pty/sessions", body, &c)
	return c.SessionID
}

// exec runs a command in a terminal and returns the result.
func (h *harness) exec(id string, body map[string]any) Result {
	h.t.Helper()
	var r Result
	h.OK("POST", "/v2/pty/sessions/"+id+"/exec", body, &r)
	return r
}

func code(p *int) string {
	if p == nil {
		return "null"
	}
	return itoa(*p)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// dial opens a WebSocket on path (with its query).
func (h *harness) dial(path string) (*websocket.Conn, *http.Response, error) {
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(h.srv.URL, "http")+path, nil)
}

// wsFrame is a server frame as a client decodes it.
type wsFrame struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Transport string          `json:"transport"`
	Backend   string          `json:"backend"`
	Resumed   bool            `json:"resumed"`
	Data      string          `json:"data"`
	Timestamp json.RawMessage `json:"timestamp"`
	binary    []byte
}

// next reads one frame within d.
func next(t testing.TB, c *websocket.Conn, d time.Duration) (wsFrame, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	mt, msg, err := c.ReadMessage()
	if err != nil {
		return wsFrame{}, err
	}
	if mt == websocket.BinaryMessage {
		return wsFrame{Type: "binary", binary: msg}, nil
	}
	var f wsFrame
	if err := json.Unmarshal(msg, &f); err != nil {
		t.Fatalf("frame %q: %v", msg, err)
	}
	return f, nil
}

// until reads frames until one's output (data or binary) contains want;
// it returns the frames read.
func until(t testing.TB, c *websocket.Conn, want string, d time.Duration) []wsFrame {
	t.Helper()
	var got []wsFrame
	var all strings.Builder
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		f, err := next(t, c, time.Until(deadline))
		if err != nil {
			break
		}
		got = append(got, f)
		all.WriteString(f.Data)
		all.Write(f.binary)
		if strings.Contains(all.String(), want) {
			return got
		}
	}
	t.Fatalf("no %q within %v; got %q", want, d, all.String())
	return nil
}

// ends reads until the socket ends and checks how: a close frame with
// code want, or want = websocket.CloseAbnormalClosure for the connection
// dropped without one (EOF). With skip, frames before the end are read
// past; without, the next message must be the end. A read timeout (d)
// is a failure: a socket that went quiet has not closed.
func ends(t testing.TB, c *websocket.Conn, want int, skip bool, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	for {
		mt, msg, err := c.ReadMessage()
		if err == nil {
			if skip {
				continue
			}
			t.Fatalf("a frame (%d) %q where the socket should end with %d", mt, msg, want)
		}
		if ce := (*websocket.CloseError)(nil); !errors.As(err, &ce) || ce.Code != want {
			t.Fatalf("the socket did not end with %d: %v", want, err)
		}
		return
	}
}

// send writes a JSON client frame.
func send(t testing.TB, c *websocket.Conn, v any) {
	t.Helper()
	if err := c.WriteJSON(v); err != nil {
		t.Fatal(err)
	}
}

// procsWith lists the live processes whose command line contains s.
func procsWith(s string) []string {
	procs := child.Scan().Procs
	var out []string
	for pid, p := range procs {
		if !ours(procs, pid) {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
		if err == nil && p.State != 'Z' && strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), s) {
			out = append(out, itoa(pid)+":"+itoa(p.PID))
		}
	}
	return out
}

// ours reports whether pid descends from this test process. Other
// packages' tests run at the same time and start their own "sleep 30";
// TestMain makes this process a child subreaper, so what a terminal
// leaves behind is re-parented here rather than to init and still
// counts as ours.
func ours(procs map[int]child.Proc, pid int) bool {
	for range 64 { // a bound, in case of a cycle in a racy scan
		p, ok := procs[pid]
		if !ok || p.PPID <= 1 {
			return false
		}
		if p.PPID == os.Getpid() {
			return true
		}
		pid = p.PPID
	}
	return false
}

// eventually polls cond for up to 5 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// gone waits for every process whose command line contains s to end.
func gone(t testing.TB, s string) {
	t.Helper()
	eventually(t, "processes left with "+s, func() bool { return len(procsWith(s)) == 0 })
}

// running waits for n processes whose command line contains s.
func running(t testing.TB, s string, n int) {
	t.Helper()
	eventually(t, "not running: "+s, func() bool { return len(procsWith(s)) >= n })
}

// shells counts the live terminal shells of this test process: its
// children leading a session of their own. The package's tests do not
// run in parallel, and a test's shells end with its plane.
func shells() int {
	n := 0
	for pid, p := range child.Scan().Procs {
		if p.PPID == os.Getpid() && p.SID == pid && p.State != 'Z' {
			n++
		}
	}
	return n
}
