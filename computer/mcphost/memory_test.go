package mcphost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// memServer is an MCP server in this process reached through in-memory
// transports, as the sandbox's tools are reached by aiod's Computer.
type memServer struct {
	srv      *mcp.Server
	connects atomic.Int32
	// fail, while set, makes Connect fail (a server not yet up).
	fail atomic.Bool
	// cancelled receives a value when a call of "wait" sees its context
	// end (the client's notifications/cancelled arrived).
	cancelled chan struct{}

	mu       sync.Mutex
	sessions []*mcp.ServerSession
}

func newMemServer() *memServer {
	m := &memServer{srv: mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, nil), cancelled: make(chan struct{}, 4)}
	type in struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type out struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(m.srv, &mcp.Tool{Name: "add"}, func(_ context.Context, _ *mcp.CallToolRequest, x in) (*mcp.CallToolResult, out, error) {
		return nil, out{x.A + x.B}, nil
	})
	mcp.AddTool(m.srv, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select { // bounded, so that a broken cancel cannot hang the test
		case <-ctx.Done():
			m.cancelled <- struct{}{}
		case <-time.After(5 * time.Second):
		}
		return nil, struct{}{}, ctx.Err()
	})
	return m
}

// Connect follows the contract of Spec.Connect: the server end serves
// until ctx ends or the client closes.
func (m *memServer) Connect(ctx context.Context) (mcp.Transport, error) {
	m.connects.Add(1)
	if m.fail.Load() {
		return nil, errors.New("not up yet")
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := m.srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { ss.Close() })
	m.mu.Lock()
	m.sessions = append(m.sessions, ss)
	m.mu.Unlock()
	return ct, nil
}

// dropAll ends every server session, as a crashed server would.
func (m *memServer) dropAll() {
	m.mu.Lock()
	ss := m.sessions
	m.sessions = nil
	m.mu.Unlock()
	for _, s := range ss {
		s.Close()
	}
}

func TestMemory(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, m *memServer, u *Upstream)
	}{
		{"lists-and-calls", func(t *testing.T, m *memServer, u *Upstream) {
			if tools := u.Tools(); len(tools) != 2 || tools[0].Name != "add" || tools[1].Name != "wait" {
				t.Fatalf("tools = %v", tools)
			}
			res, err := u.CallTool(context.Background(), "add", map[string]int{"a": 2, "b": 40})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"sum":42`) {
				t.Fatalf("add = %+v, %v", res, err)
			}
		}},
		{"cancel-reaches-server", func(t *testing.T, m *memServer, u *Upstream) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { _, err := u.CallTool(ctx, "wait", map[string]any{}); done <- err }()
			time.Sleep(50 * time.Millisecond) // let the request leave
			cancel()
			select {
			case <-m.cancelled:
			case <-time.After(2 * time.Second):
				t.Fatal("the server's handler never saw the cancel")
			}
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"reconnects-after-session-ends", func(t *testing.T, m *memServer, u *Upstream) {
			before := m.connects.Load()
			m.dropAll()
			waitFor(t, "a new connect", func() bool { return m.connects.Load() > before })
			waitReady(t, u)
			if _, err := u.CallTool(context.Background(), "add", map[string]int{"a": 1}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemServer()
			u := Start(Spec{BundleID: "mem", Type: TypeMemory, Connect: m.Connect}, Options{MinBackoff: 20 * time.Millisecond})
			defer u.Close()
			waitReady(t, u)
			tc.run(t, m, u)
		})
	}
}

func TestMemoryConnectRetried(t *testing.T) {
	m := newMemServer()
	m.fail.Store(true)
	u := Start(Spec{BundleID: "mem", Type: TypeMemory, Connect: m.Connect}, Options{MinBackoff: 10 * time.Millisecond})
	defer u.Close()
	waitFor(t, "two failed connects", func() bool { return m.connects.Load() >= 2 })
	if st, err := u.State(); st == Ready || err == nil {
		t.Fatalf("state = %s, %v; want not ready with an error", st, err)
	}
	m.fail.Store(false)
	waitReady(t, u)
}

func TestMemoryWithoutConnect(t *testing.T) {
	u := Start(Spec{BundleID: "mem", Type: TypeMemory}, Options{MinBackoff: 10 * time.Millisecond})
	defer u.Close()
	waitFor(t, "a connection error", func() bool { _, err := u.State(); return err != nil })
	if _, err := u.State(); !strings.Contains(err.Error(), "without a Connect") {
		t.Fatalf("err = %v", err)
	}
}

// TestMemoryCloseEndsServerSession: Close ends the session context the
// server end was given, so an in-process server stops serving.
func TestMemoryCloseEndsServerSession(t *testing.T) {
	m := newMemServer()
	var sctx context.Context
	var mu sync.Mutex
	connect := func(ctx context.Context) (mcp.Transport, error) {
		mu.Lock()
		sctx = ctx
		mu.Unlock()
		return m.Connect(ctx)
	}
	u := Start(Spec{BundleID: "mem", Type: TypeMemory, Connect: connect}, Options{})
	waitReady(t, u)
	u.Close()
	mu.Lock()
	defer mu.Unlock()
	if sctx.Err() == nil {
		t.Fatal("the session context is still live after Close")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestPrepare: Options.Prepare is called before every connection attempt
// and its Spec is the one used; a failing Prepare puts the Upstream in
// backoff with that error and is retried; a live session is not touched.
func TestPrepare(t *testing.T) {
	errNoValue := errors.New(`input "k": no value`)
	tests := []struct {
		name string
		// fail says whether the n-th call of Prepare (from 1) fails.
		fail func(n int32) bool
		run  func(t *testing.T, m *memServer, u *Upstream, calls *atomic.Int32)
	}{
		{"every-attempt", func(int32) bool { return false }, func(t *testing.T, m *memServer, u *Upstream, calls *atomic.Int32) {
			if n := calls.Load(); n != 1 {
				t.Fatalf("Prepare called %d times before the first session, want 1", n)
			}
			if got := u.Spec(); got.URL != "attempt-1" || got.BundleID != "mem" || got.Type != TypeMemory {
				t.Errorf("Spec() = %+v", got)
			}
			// A running session is not re-prepared.
			time.Sleep(50 * time.Millisecond)
			if n := calls.Load(); n != 1 {
				t.Fatalf("Prepare called %d times while the session ran", n)
			}
			m.dropAll()
			waitFor(t, "a second Prepare", func() bool { return calls.Load() >= 2 })
			waitReady(t, u)
			if got := u.Spec(); got.URL != "attempt-2" {
				t.Errorf("Spec() after the restart = %+v", got)
			}
		}},
		{"failure-backs-off", func(n int32) bool { return n == 1 }, func(t *testing.T, m *memServer, u *Upstream, calls *atomic.Int32) {
			if calls.Load() < 2 {
				t.Fatalf("Prepare called %d times", calls.Load())
			}
			if m.connects.Load() != 1 {
				t.Errorf("connects = %d: a failed Prepare must not connect", m.connects.Load())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemServer()
			var calls atomic.Int32
			var sawErr atomic.Bool
			var up atomic.Pointer[Upstream]
			started := make(chan struct{}) // up is set
			prepare := func(context.Context) (Spec, error) {
				n := calls.Add(1)
				if tc.fail(n) {
					return Spec{}, errNoValue
				}
				// The URL field only labels the attempt here; BundleID and
				// Type given by Prepare are ignored.
				return Spec{BundleID: "other", Type: "stdio", URL: fmt.Sprintf("attempt-%d", n), Connect: m.Connect}, nil
			}
			// The backoff lasts long enough for the notifier to see it
			// under -race on a loaded machine, and OnChange waits for
			// Start to have returned, so that no change is missed.
			u := Start(Spec{BundleID: "mem", Type: TypeMemory}, Options{MinBackoff: 500 * time.Millisecond, Prepare: prepare,
				OnChange: func() {
					<-started
					if u := up.Load(); u != nil {
						if st, err := u.State(); st == Backoff && errors.Is(err, errNoValue) {
							sawErr.Store(true)
						}
					}
				}})
			up.Store(u)
			close(started)
			defer u.Close()
			waitReady(t, u)
			if tc.fail(1) && !sawErr.Load() {
				t.Error("the Prepare error was never the state's error")
			}
			tc.run(t, m, u, &calls)
		})
	}
}
