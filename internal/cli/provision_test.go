package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// fakePool is a sandboxPool in memory. Create waits on gate when set.
type fakePool struct {
	gate chan struct{}

	mu        sync.Mutex
	boxes     []pool.Sandbox
	creates   []pool.CreateRequest
	deleted   []string
	paused    []string
	listErr   error
	deleteErr error
	next      int
}

func (f *fakePool) Create(ctx context.Context, req pool.CreateRequest) (pool.Sandbox, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return pool.Sandbox{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req)
	f.next++
	sb := pool.Sandbox{ID: fmt.Sprintf("sb%d", f.next), State: pool.Running, Office: req.Office, Computer: req.Name, Metadata: req.Metadata, CreatedAt: time.Now()}
	f.boxes = append(f.boxes, sb)
	return sb, nil
}

// List filters by office only (the metadata filter is left to the
// adapter's own check).
func (f *fakePool) List(_ context.Context, lf pool.ListFilter) ([]pool.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []pool.Sandbox
	for _, sb := range f.boxes {
		if lf.Office == "" || sb.Office == lf.Office {
			out = append(out, sb)
		}
	}
	return out, nil
}

func (f *fakePool) Delete(_ context.Context, id string, keep bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if keep {
		return errors.New("keep_workspace asked")
	}
	f.deleted = append(f.deleted, id)
	if f.deleteErr != nil {
		return f.deleteErr
	}
	for i, sb := range f.boxes {
		if sb.ID == id {
			f.boxes = append(f.boxes[:i], f.boxes[i+1:]...)
			return nil
		}
	}
	return &pool.Error{Status: http.StatusNotFound, Message: "no such sandbox"}
}

func (f *fakePool) Pause(_ context.Context, id string) (pool.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = append(f.paused, id)
	for i := range f.boxes {
		if f.boxes[i].ID == id {
			f.boxes[i].State = pool.Paused
			return f.boxes[i], nil
		}
	}
	return pool.Sandbox{}, &pool.Error{Status: http.StatusNotFound, Message: "no such sandbox"}
}

func (f *fakePool) calls() (creates int, deleted, paused []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.creates), append([]string(nil), f.deleted...), append([]string(nil), f.paused...)
}

var marker = map[string]string{officeSandboxKey: "true"}

func newTestBoxes(t *testing.T, p sandboxPool, onTimeout string) *officeSandboxes {
	b := newOfficeSandboxes(p, onTimeout, slog.New(slog.DiscardHandler))
	t.Cleanup(b.Close)
	return b
}

func TestOfficeSandboxEnsure(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		have    []pool.Sandbox
		want    string
		creates int
	}{
		{"none: created", nil, "sandbox", 1},
		{"running: kept", []pool.Sandbox{{ID: "x", State: pool.Running, Office: "o1", Computer: "box", Metadata: marker}}, "box", 0},
		{"paused: kept as it is", []pool.Sandbox{{ID: "x", State: pool.Paused, Office: "o1", Computer: "box", Metadata: marker}}, "box", 0},
		{"running before paused, then the oldest", []pool.Sandbox{
			{ID: "p", State: pool.Paused, Office: "o1", Computer: "p", Metadata: marker, CreatedAt: old},
			{ID: "r2", State: pool.Running, Office: "o1", Computer: "r2", Metadata: marker, CreatedAt: time.Now()},
			{ID: "r1", State: pool.Running, Office: "o1", Computer: "r1", Metadata: marker, CreatedAt: old},
		}, "r1", 0},
		{"no computer name: the one it was created with", []pool.Sandbox{{ID: "x", State: pool.Running, Office: "o1", Metadata: marker}}, "sandbox", 0},
		{"ignored: stopped, unmarked, another office's", []pool.Sandbox{
			{ID: "s", State: pool.Stopped, Office: "o1", Computer: "s", Metadata: marker},
			{ID: "u", State: pool.Running, Office: "o1", Computer: "u"},
			{ID: "o", State: pool.Running, Office: "o2", Computer: "o", Metadata: marker},
		}, "sandbox", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakePool{boxes: tc.have}
			b := newTestBoxes(t, f, pool.OnTimeoutPause)
			got, err := b.Ensure(context.Background(), "o1")
			if err != nil || got != tc.want {
				t.Fatalf("Ensure = %q, %v; want %q", got, err, tc.want)
			}
			if n, _, _ := f.calls(); n != tc.creates {
				t.Fatalf("%d creates, want %d", n, tc.creates)
			}
			if tc.creates == 0 {
				return
			}
			zero := 0
			want := pool.CreateRequest{Office: "o1", Name: "sandbox", TimeoutS: &zero, OnTimeout: pool.OnTimeoutPause, Metadata: marker}
			if !reflect.DeepEqual(f.creates[0], want) {
				t.Fatalf("created %+v, want %+v", f.creates[0], want)
			}
		})
	}
}

func TestOfficeSandboxEnsureErrors(t *testing.T) {
	f := &fakePool{listErr: errors.New("pool down")}
	b := newTestBoxes(t, f, pool.OnTimeoutKill)
	if _, err := b.Ensure(context.Background(), "o1"); err == nil || !strings.Contains(err.Error(), "pool down") {
		t.Fatal(err)
	}
}

// TestOfficeSandboxEnsureShared: Ensures for one office while its
// creation runs share it; one whose ctx ends first returns, and the
// creation goes on for the next.
func TestOfficeSandboxEnsureShared(t *testing.T) {
	f := &fakePool{gate: make(chan struct{})}
	b := newTestBoxes(t, f, pool.OnTimeoutKill)
	short, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Ensure(short, "o1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ensure with an ended ctx: %v", err)
	}
	var wg sync.WaitGroup
	names := make([]string, 8)
	started := make(chan struct{}, len(names))
	for i := range names {
		wg.Go(func() {
			started <- struct{}{}
			n, err := b.Ensure(context.Background(), "o1")
			if err != nil {
				t.Error(err)
			}
			names[i] = n
		})
	}
	for range names {
		<-started
	}
	// The callers wait for the one creation under way (the first
	// Ensure's): there is one call, shared.
	b.mu.Lock()
	calls := len(b.calls)
	b.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d creations under way", calls)
	}
	close(f.gate)
	wg.Wait()
	if n, _, _ := f.calls(); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
	for _, n := range names {
		if n != "sandbox" {
			t.Fatal(names)
		}
	}
	// Another office has its own.
	if n, err := b.Ensure(context.Background(), "o2"); err != nil || n != "sandbox" {
		t.Fatal(n, err)
	}
	if n, _, _ := f.calls(); n != 2 {
		t.Fatalf("%d creates, want 2", n)
	}
}

func TestOfficeSandboxRelease(t *testing.T) {
	boxes := func() []pool.Sandbox {
		return []pool.Sandbox{
			{ID: "r", State: pool.Running, Office: "o1", Metadata: marker},
			{ID: "p", State: pool.Paused, Office: "o1", Metadata: marker},
			{ID: "mine", State: pool.Running, Office: "o1"}, // not the office's own
			{ID: "other", State: pool.Running, Office: "o2", Metadata: marker},
		}
	}
	t.Run("kill", func(t *testing.T) {
		f := &fakePool{boxes: boxes()}
		b := newTestBoxes(t, f, pool.OnTimeoutKill)
		b.Release("o1")
		if _, del, paused := f.calls(); !reflect.DeepEqual(del, []string{"r", "p"}) || paused != nil {
			t.Fatalf("deleted %v, paused %v", del, paused)
		}
		b.Release("o1") // again: nothing left, nothing done
		if _, del, _ := f.calls(); len(del) != 2 {
			t.Fatal(del)
		}
	})
	t.Run("pause", func(t *testing.T) {
		f := &fakePool{boxes: boxes()}
		b := newTestBoxes(t, f, pool.OnTimeoutPause)
		b.Release("o1")
		if _, del, paused := f.calls(); del != nil || !reflect.DeepEqual(paused, []string{"r"}) {
			t.Fatalf("deleted %v, paused %v", del, paused)
		}
		// The office's sandbox is found again, paused, by the next Agent.
		if n, err := b.Ensure(context.Background(), "o1"); err != nil || n != "sandbox" {
			t.Fatal(n, err)
		}
		if n, _, _ := f.calls(); n != 0 {
			t.Fatalf("%d creates after a pause", n)
		}
	})
	t.Run("gone meanwhile", func(t *testing.T) {
		f := &fakePool{boxes: boxes(), deleteErr: &pool.Error{Status: http.StatusNotFound, Message: "no such sandbox"}}
		var logs strings.Builder
		var mu sync.Mutex
		b := newOfficeSandboxes(f, pool.OnTimeoutKill, slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil)))
		defer b.Close()
		b.Release("o1")
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(logs.String(), "not released") || strings.Count(logs.String(), "office sandbox released") != 2 {
			t.Fatalf("a sandbox gone already is released, quietly:\n%s", logs.String())
		}
	})
	t.Run("waits for a creation", func(t *testing.T) {
		f := &fakePool{gate: make(chan struct{})}
		b := newTestBoxes(t, f, pool.OnTimeoutKill)
		short, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = b.Ensure(short, "o1") // the creation goes on
		done := make(chan struct{})
		go func() { b.Release("o1"); close(done) }()
		close(f.gate)
		<-done
		if n, del, _ := f.calls(); n != 1 || !reflect.DeepEqual(del, []string{"sb1"}) {
			t.Fatalf("%d creates, deleted %v", n, del)
		}
	})
}

func TestServerSandboxPoolFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sandbox-pool", "ftp://x"}, "bad --sandbox-pool ftp://x (want http://HOST:PORT or https://...)"},
		{[]string{"--sandbox-pool", "http://"}, "bad --sandbox-pool http:// (want http://HOST:PORT or https://...)"},
		{[]string{"--sandbox-pool", "127.0.0.1:18100"}, "bad --sandbox-pool 127.0.0.1:18100 (want http://HOST:PORT or https://...)"},
		{[]string{"--sandbox-pool", "http://127.0.0.1:18100", "--office-on-timeout", "stop"}, "bad --office-on-timeout stop (kill or pause)"},
		{[]string{"--sandbox-pool", "http://127.0.0.1:18100", "--office-idle", "-1m"}, "--office-idle must be greater than zero, got -1m0s"},
		{[]string{"--sandbox-pool", "http://127.0.0.1:18100", "--office-idle", "0s"}, "--office-idle must be greater than zero, got 0s"},
		{[]string{"--office-idle", "1m"}, "--office-idle needs --sandbox-pool"},
		{[]string{"--office-on-timeout", "pause"}, "--office-on-timeout needs --sandbox-pool"},
		{[]string{"--sandbox-pool-token", "t"}, "--sandbox-pool-token needs --sandbox-pool"},
	} {
		args := append([]string{"server", "--listen", "127.0.0.1:0"}, tc.args...)
		code, _, stderr := run(args...)
		if want := "a2c server: " + tc.want + "\n"; code != 2 || !strings.HasPrefix(stderr, want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, want)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// recorder is a Socket.IO client handler that records the events it
// receives, by name.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(_ *sio.Socket, e *sio.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e.Name+" "+string(e.Args[0]))
	if smcp.IsClientEvent(e.Name) {
		b, _ := json.Marshal(smcp.CallToolResult{Content: []json.RawMessage{smcp.TextContent("ok")}})
		_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
	}
}
func (r *recorder) Disconnect(*sio.Socket, string) {}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

// dialJoin connects to the hub at url and joins office as role name; it
// returns the socket and the join's answer, comma-joined.
func dialJoin(t *testing.T, url string, h sio.ClientHandler, role smcp.Role, name, office string) (*sio.Socket, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, url, sio.ClientOptions{Namespace: smcp.Namespace, Transport: sio.WebSocketOnly,
		Query: map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}}, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Disconnect)
	join, _ := json.Marshal(smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office})
	ch := make(chan string, 1)
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{join}}, 10*time.Second, func(m sio.Message, err error) {
		var parts []string
		for _, a := range m.Args {
			parts = append(parts, string(a))
		}
		if err != nil {
			parts = append(parts, err.Error())
		}
		ch <- strings.Join(parts, ",")
	})
	return s, <-ch
}

// TestServerSandboxPool: a2c server --sandbox-pool, against a stand-in
// pool whose sandboxes join the hub as Computers: an Agent's join is
// answered once its office's sandbox is in, the pool sees the token and
// the create it should, and the office's sandbox is killed once the
// Agent has left for --office-idle.
func TestServerSandboxPool(t *testing.T) {
	t.Setenv("A2C_TOKEN", "")
	var (
		mu      sync.Mutex
		hubURL  string
		reqs    []string
		sockets = map[string]*sio.Socket{}
		boxes   = map[string]pool.Sandbox{}
	)
	deleted := make(chan string, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-Api-Key"))
		hub := hubURL
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet:
			l := pool.List{Sandboxes: []pool.Sandbox{}}
			mu.Lock()
			for _, sb := range boxes {
				if sb.Office == r.URL.Query().Get("office") {
					l.Sandboxes = append(l.Sandboxes, sb)
				}
			}
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(l)
		case r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes":
			var req pool.CreateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			sb := pool.Sandbox{ID: "sb-" + req.Office, State: pool.Running, Office: req.Office, Computer: req.Name, Metadata: req.Metadata}
			mu.Lock()
			boxes[sb.ID] = sb
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(sb)
			// The sandbox joins its office, as the pool's do, a moment
			// after the create is answered.
			go func() {
				s, got := dialJoin(t, hub, &recorder{}, smcp.RoleComputer, req.Name, req.Office)
				if got != "true,null" {
					t.Errorf("the sandbox's join: %s", got)
				}
				mu.Lock()
				sockets["sb-"+req.Office] = s
				mu.Unlock()
			}()
		case r.Method == http.MethodDelete:
			id := strings.TrimPrefix(r.URL.Path, "/v2/sandboxes/")
			mu.Lock()
			if s := sockets[id]; s != nil {
				s.Disconnect()
			}
			delete(boxes, id)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			deleted <- id
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer ts.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	defer pr.Close()
	found := make(chan string, 1)
	listening := regexp.MustCompile(`a2c server listening.* url=(http://\S+)`)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	done := make(chan error, 1)
	go func() {
		err := runServer(ctx, &env{stdout: io.Discard, stderr: pw}, []string{"--listen", "127.0.0.1:0",
			"--sandbox-pool", ts.URL, "--sandbox-pool-token", "ptok", "--office-idle", "50ms"})
		pw.Close()
		done <- err
	}()
	select {
	case u := <-found:
		mu.Lock()
		hubURL = u
		mu.Unlock()
	case err := <-done:
		t.Fatalf("stopped before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no listening line logged")
	}

	agent := &recorder{}
	s, got := dialJoin(t, hubURL, agent, smcp.RoleAgent, "a", "t1")
	if got != "true,null" {
		t.Fatalf("join: %s", got)
	}
	if !strings.Contains(agent.String(), `"computer":"sandbox"`) {
		t.Fatalf("joined before the office's sandbox; the Agent got:\n%s", agent)
	}
	s.Disconnect()
	if id := recvID(t, deleted); id != "sb-t1" {
		t.Fatalf("deleted %q", id)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"GET /v2/sandboxes?metadata.a2c.office_sandbox=true&office=t1 ptok",
		"POST /v2/sandboxes ptok",
		"GET /v2/sandboxes?metadata.a2c.office_sandbox=true&office=t1 ptok",
	}
	if len(reqs) < 3 || !reflect.DeepEqual(reqs[:3], want) {
		t.Fatalf("the pool got\n%q\nwant first\n%q", reqs, want)
	}
}

func recvID(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatal("timed out")
		return ""
	}
}
