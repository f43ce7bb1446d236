package computer

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// connTracker is a listener that can cut every connection it accepted,
// WebSockets included (httptest forgets hijacked ones).
type connTracker struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *connTracker) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// TestManagementState: a state given before the join is sent at the
// join, a new one at once, and again after a reconnect, under the
// Computer's own name; a Computer never given one sends nothing.
func TestManagementState(t *testing.T) {
	// Goroutines per connection: the Linux event loop serves a WebSocket
	// on a duplicate of its fd, which closing the accepted conn leaves open.
	srv, err := server.New(server.Config{GoroutinePerConn: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	lis := &connTracker{Listener: ts.Listener}
	ts.Listener = lis
	ts.Start()
	t.Cleanup(ts.Close)

	var jmu sync.Mutex
	joins := map[string]int{}
	start := func(name string) *Computer {
		cfg, err := config.Parse([]byte(`{"servers":{}}`), "test.json")
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Server: ts.URL, Office: "o", Name: name, Config: cfg, OnJoined: func() {
			jmu.Lock()
			joins[name]++
			jmu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	run := func(c *Computer) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = c.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done; c.Close() })
	}
	joined := func(name string, n int) {
		t.Helper()
		waitFor(t, name+" joined", func() bool { jmu.Lock(); defer jmu.Unlock(); return joins[name] >= n })
	}
	stored := func(name string) string {
		st, ok := srv.Management("o", name)
		if !ok {
			return "none"
		}
		b, _ := json.Marshal(st)
		return string(b)
	}

	pc := start("pc")
	pc.SetManagement(smcp.ManagementState{Computer: "someone else", Servers: []smcp.ManagedServer{{BundleID: "fs", Name: "fs", Origin: "user", Verdict: "enabled", Served: true}}})
	run(pc)
	const first = `{"computer":"pc","servers":[{"bundle_id":"fs","name":"fs","origin":"user","verdict":"enabled","served":true}],"plugins":[]}`
	waitFor(t, "the state given before the join", func() bool { return stored("pc") == first })

	pc.SetManagement(smcp.ManagementState{Plugins: []smcp.ManagedPlugin{{ID: "audit@acme", State: "installed_disabled", MCPServers: []string{"acme_audit_srv"}}}})
	const second = `{"computer":"pc","servers":[],"plugins":[{"id":"audit@acme","state":"installed_disabled","enabled":false,"active":false,"mcpServers":["acme_audit_srv"]}]}`
	waitFor(t, "the new state", func() bool { return stored("pc") == second })

	// A new session's hub is told again.
	joined("pc", 1)
	lis.cut()
	joined("pc", 2)
	waitFor(t, "the state after the reconnect", func() bool { return stored("pc") == second })

	// A Computer without a state sends none: its update_config, sent
	// after its join, reaches the hub after anything the join sent.
	bare := start("bare")
	updated := make(chan struct{}, 8)
	stop := srv.WatchOffice("o", func(ev string) {
		if ev == smcp.NotifyUpdateConfig {
			updated <- struct{}{}
		}
	})
	defer stop()
	run(bare)
	joined("bare", 1)
	cfg, _ := config.Parse([]byte(`{"servers":{}}`), "test.json")
	if err := bare.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	case <-time.After(10 * time.Second):
		t.Fatal("bare's update_config never reached the hub")
	}
	if got := stored("bare"); got != "none" {
		t.Fatalf("bare sent a state: %s", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
