package watch

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// client bounds every test request, streams included.
var client = &http.Client{Timeout: 30 * time.Second}

// env is a plane behind a real HTTP server, with a temporary tree.
type env struct {
	planetest.Client
	t     *testing.T
	plane *Plane
	srv   *httptest.Server
	dir   string
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = dir
	}
	p := New(cfg)
	srv := planetest.Serve(t, p)
	return &env{Client: planetest.Client{T: t, URL: srv.URL}, t: t, plane: p, srv: srv, dir: dir}
}

// call sends a request and decodes the reply.
func (e *env) call(method, path string, body any) (int, api.Reply) {
	e.t.Helper()
	st, r, _ := e.Do(method, path, body)
	return st, r
}

// create starts a watcher on the env's tree with extra fields.
func (e *env) create(fields map[string]any) WatcherCreatedResult {
	e.t.Helper()
	body := map[string]any{"path": e.dir, "debounce": 50}
	for k, v := range fields {
		body[k] = v
	}
	var res WatcherCreatedResult
	e.OK("POST", "/v2/watch", body, &res)
	return res
}

func (e *env) poll(id string, cursor uint64, timeout int) PollWatchResult {
	e.t.Helper()
	var res PollWatchResult
	e.OK("GET", fmt.Sprintf("/v2/watch/%s/poll?cursor=%d&timeout=%d&limit=1000", id, cursor, timeout), nil, &res)
	return res
}

// line is an event as the tests compare it: "type rel" or
// "rename old -> rel"; a directory's rel ends in "/".
func line(ev FileWatchEvent) string {
	rel := *ev.RelativePath
	if ev.IsDir {
		rel += "/"
	}
	if ev.OldPath != nil {
		return fmt.Sprintf("%s %s -> %s", ev.Type, *ev.OldPath, rel)
	}
	return ev.Type + " " + rel
}

// expect polls until want's count of events arrived, then checks that
// exactly those came (and nothing more after a quiet spell). It returns
// the next cursor.
func (e *env) expect(id string, cursor uint64, want ...string) uint64 {
	e.t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		res := e.poll(id, cursor, 1)
		for _, ev := range res.Events {
			got = append(got, line(ev))
		}
		cursor = res.Cursor
	}
	time.Sleep(200 * time.Millisecond)
	res := e.poll(id, cursor, 0)
	for _, ev := range res.Events {
		got = append(got, line(ev))
	}
	cursor = res.Cursor
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		e.t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return cursor
}

func (e *env) path(rel string) string { return filepath.Join(e.dir, rel) }

// fs runs a filesystem step or fails the test.
func (e *env) fs(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) mv(from, to string) { e.t.Helper(); e.fs(os.Rename(from, to)) }
func (e *env) mkdir(rel string)   { e.t.Helper(); e.fs(os.MkdirAll(e.path(rel), 0o755)) }

func (e *env) write(rel, content string) {
	e.t.Helper()
	e.fs(os.WriteFile(e.path(rel), []byte(content), 0o644))
}

// sse is an open event stream.
type sse struct {
	resp *http.Response
	rd   *bufio.Reader
}

type frame struct{ id, event, data string }

func (e *env) stream(path string, header map[string]string) *sse {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return &sse{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next reads the next frame, skipping comments; io.EOF at the end.
func (s *sse) next(t *testing.T) (frame, error) {
	t.Helper()
	var f frame
	for {
		l, err := s.rd.ReadString('\n')
		if err != nil {
			return f, err
		}
		l = strings.TrimSuffix(l, "\n")
		switch {
		case l == "" && f.event != "":
			return f, nil
		case strings.HasPrefix(l, "id: "):
			f.id = l[4:]
		case strings.HasPrefix(l, "event: "):
			f.event = l[7:]
		case strings.HasPrefix(l, "data: "):
			f.data = l[6:]
		}
	}
}

// must reads the next frame or fails the test.
func (s *sse) must(t *testing.T) frame {
	t.Helper()
	f, err := s.next(t)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return f
}

// change reads a file_change frame and checks its SSE id and event.
func (s *sse) change(t *testing.T, id, want string) {
	t.Helper()
	f := s.must(t)
	var ev FileWatchEvent
	if f.event != "file_change" || json.Unmarshal([]byte(f.data), &ev) != nil {
		t.Fatalf("frame %+v, want file_change", f)
	}
	if f.id != id || (want != "" && line(ev) != want) {
		t.Fatalf("frame %s %s, want %s %s", f.id, line(ev), id, want)
	}
}

// until waits for cond, checked every few milliseconds, failing the test
// after 10 s: how a test waits on an event it cannot subscribe to.
func (e *env) until(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waiting waits until n long polls or waits block on their watcher.
func (e *env) waiting(n int64) {
	e.t.Helper()
	if !e.waitingFor(n) {
		e.t.Fatalf("timed out waiting for %d waiting requests", n)
	}
}

// waitingFor is waiting for a goroutine other than the test's: it
// reports whether n requests came to wait within 10 s.
func (e *env) waitingFor(n int64) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if e.plane.e.waiting.Load() >= n {
			return true
		}
	}
	return false
}

// end checks that the stream has ended: the server closed it (EOF), not
// a read that timed out or failed otherwise.
func (s *sse) end(t *testing.T) {
	t.Helper()
	f, err := s.next(t)
	if err != io.EOF {
		t.Fatalf("stream not ended: frame %+v, error %v", f, err)
	}
}

// keepAlive reads the stream's raw lines until a keep-alive comment.
func (s *sse) keepAlive(t *testing.T) {
	t.Helper()
	for {
		l, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before a keep-alive: %v", err)
		}
		if l == ": keep-alive\n" {
			return
		}
	}
}
