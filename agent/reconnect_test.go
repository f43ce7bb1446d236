package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// hub is an in-process a2c server on a fixed 127.0.0.1 address that a
// test can stop and start again, as a restarted server would be.
type hub struct {
	t    *testing.T
	addr string
	url  string
	srv  *server.Server
	ts   *httptest.Server
	// handshakes counts Engine.IO handshakes (requests without a sid):
	// one per connection attempt.
	handshakes atomic.Int32
	// closed, when set, answers every request with HTTP 503 (a transient
	// failure) except the test's own peers (header X-Test-Peer).
	closed atomic.Bool
}

func newHub(t *testing.T, cfg server.Config) *hub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hub{t: t, addr: ln.Addr().String()}
	h.url = "http://" + h.addr
	h.serve(ln, cfg)
	t.Cleanup(h.stop)
	return h
}

func (h *hub) serve(ln net.Listener, cfg server.Config) {
	srv, err := server.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.closed.Load() && r.Header.Get("X-Test-Peer") == "" {
			http.Error(w, "closed", http.StatusServiceUnavailable)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/socket.io/") && r.URL.Query().Get("sid") == "" {
			h.handshakes.Add(1)
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	h.srv, h.ts = srv, ts
}

// stop shuts the server down, closing every connection after at most
// 200ms of draining.
func (h *hub) stop() {
	if h.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
	h.ts.Close()
	h.srv, h.ts = nil, nil
}

// start serves again on the same address with cfg.
func (h *hub) start(cfg server.Config) {
	h.t.Helper()
	h.handshakes.Store(0)
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.serve(ln, cfg)
}

// peer is a scripted socket on the hub, a Computer or a second Agent: it
// joins an office and answers client:* requests with reply (never, when
// reply returns false). calls receives every client:tool_call.
type peer struct {
	sock  *sio.Socket
	calls chan *sio.Event
	reply func(e *sio.Event) (any, bool)
}

func (p *peer) Event(_ *sio.Socket, e *sio.Event) {
	if e.Name == smcp.EventToolCall {
		select {
		case p.calls <- e:
		default:
		}
	}
	if p.reply == nil {
		return
	}
	if v, ok := p.reply(e); ok {
		b, _ := json.Marshal(v)
		_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
	}
}

func (p *peer) Disconnect(*sio.Socket, string) {}

func joinPeer(t *testing.T, h *hub, role smcp.Role, office, name string, reply func(*sio.Event) (any, bool)) *peer {
	t.Helper()
	p := &peer{calls: make(chan *sio.Event, 8), reply: reply}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, h.url, sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Header:    http.Header{"X-Test-Peer": {"1"}},
		Handler:   p,
	})
	if err != nil {
		t.Fatalf("peer dial: %v", err)
	}
	p.sock = s
	t.Cleanup(s.Disconnect)
	args := p.request(t, smcp.EventJoinOffice, smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office})
	if len(args) != 2 || string(args[0]) != "true" {
		t.Fatalf("peer join = %q", args)
	}
	return p
}

func (p *peer) request(t *testing.T, event string, req any) []json.RawMessage {
	t.Helper()
	b, _ := json.Marshal(req)
	ch := make(chan sio.Message, 1)
	p.sock.Request(event, sio.Message{Args: []json.RawMessage{b}}, 5*time.Second, func(m sio.Message, err error) {
		if err != nil {
			t.Errorf("peer %s: %v", event, err)
		}
		ch <- m
	})
	return (<-ch).Args
}

// agents lists the Agents of the office as the server sees them.
func (p *peer) agents(t *testing.T, office string) []string {
	t.Helper()
	args := p.request(t, smcp.EventListRoom, smcp.ListRoomReq{Agent: "x", ReqID: NewReqID(), OfficeID: office})
	var ret smcp.ListRoomRet
	if len(args) == 0 || json.Unmarshal(args[0], &ret) != nil {
		t.Fatalf("list_room = %q", args)
	}
	var out []string
	for _, s := range ret.Sessions {
		if s.Role == smcp.RoleAgent {
			out = append(out, s.Name)
		}
	}
	return out
}

func echo(e *sio.Event) (any, bool) {
	if e.Name != smcp.EventToolCall {
		return nil, false
	}
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo"}}, "isError": false}, true
}

// lifecycle records the Client's lifecycle callbacks as events.
type lifecycle struct {
	disconnects chan string
	reconnects  chan struct{}
	errs        chan error
}

func newLifecycle(o *Options) *lifecycle {
	l := &lifecycle{disconnects: make(chan string, 16), reconnects: make(chan struct{}, 16), errs: make(chan error, 64)}
	o.OnDisconnect = func(r string) { l.disconnects <- r }
	o.OnReconnect = func() { l.reconnects <- struct{}{} }
	o.OnReconnectError = func(err error) {
		select {
		case l.errs <- err:
		default:
		}
	}
	return l
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func waitDone(t *testing.T, c *Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the Client did not end")
	}
}

// fast is a backoff for tests.
var fast = ReconnectOptions{MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond}

func dialHub(t *testing.T, h *hub, o Options) *Client {
	t.Helper()
	if o.Name == "" {
		o.Name = "agent"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, h.url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clientGoroutines returns the stacks of goroutines that belong to an
// agent Client or to a client-side sio connection.
func clientGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "a2c-go/agent.(*Client)") || strings.Contains(g, "internal/sio.(*cconn)") {
			out = append(out, g)
		}
	}
	return out
}

// checkNoLeak waits (up to 5 s) until no Client goroutine is left.
func checkNoLeak(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := clientGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Client goroutines left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReconnectRejoins restarts the server under a joined Agent: the
// Agent reconnects by itself, the new server lists it in its office,
// notifications resume and its next call succeeds. Close then leaves no
// goroutine behind.
func TestReconnectRejoins(t *testing.T) {
	for _, wsOnly := range []bool{false, true} {
		name := map[bool]string{false: "upgrade", true: "websocket"}[wsOnly]
		t.Run(name, func(t *testing.T) {
			h := newHub(t, server.Config{})
			notes := make(chan Notification, 16)
			o := Options{Reconnect: fast, WebSocketOnly: wsOnly, OnNotify: func(n Notification) { notes <- n }}
			l := newLifecycle(&o)
			a := dialHub(t, h, o)
			if err := a.Join(ctx5(t), "office"); err != nil {
				t.Fatal(err)
			}

			h.stop()
			if r := wait(t, l.disconnects, "OnDisconnect"); r == "" {
				t.Error("empty disconnect reason")
			}
			h.start(server.Config{})
			wait(t, l.reconnects, "OnReconnect")
			if a.Office() != "office" || a.Reason() != "" || a.Err() != nil {
				t.Errorf("office %q, reason %q, err %v", a.Office(), a.Reason(), a.Err())
			}
			select {
			case <-a.Done():
				t.Fatal("Done closed by a reconnect")
			default:
			}

			pc := joinPeer(t, h, smcp.RoleComputer, "office", "pc", echo)
			if got := pc.agents(t, "office"); len(got) != 1 || got[0] != "agent" {
				t.Fatalf("the server's office lists agents %q", got)
			}
			if n := wait(t, notes, "notify:enter_office"); n.Event != smcp.NotifyEnterOffice || n.Computer != "pc" {
				t.Errorf("notification %+v", n)
			}
			res, err := a.CallTool(ctx5(t), Call{Computer: "pc", Tool: "b__echo", Timeout: 5 * time.Second})
			if err != nil || res.IsError || res.Text() != "echo" {
				t.Fatalf("call after reconnect = %+v, %v", res, err)
			}
			if h.handshakes.Load() != 2 { // the Agent's and the peer's
				t.Errorf("%d handshakes on the new server", h.handshakes.Load())
			}

			pc.sock.Disconnect()
			a.Close()
			if r := wait(t, l.disconnects, "OnDisconnect on Close"); r != "io client disconnect" {
				t.Errorf("close reason %q", r)
			}
			if !errors.Is(a.Err(), ErrClosed) || a.Reason() != "io client disconnect" {
				t.Errorf("after Close: err %v, reason %q", a.Err(), a.Reason())
			}
			if _, err := a.ListRoom(ctx5(t)); !errors.Is(err, ErrClosed) {
				t.Errorf("request after Close: %v", err)
			}
			checkNoLeak(t)
		})
	}
}

// TestReconnectRotatedToken: the server accepts only the new token after
// a rotation, and the token provider, called before every connection,
// returns it.
func TestReconnectRotatedToken(t *testing.T) {
	var (
		mu       sync.Mutex
		current  = "token-1"
		accepted []string
	)
	auth := server.AuthFunc(func(_ context.Context, r *server.AuthRequest) error {
		var m struct {
			Token string `json:"token"`
		}
		_ = json.Unmarshal(r.Auth, &m)
		mu.Lock()
		defer mu.Unlock()
		if m.Token != current {
			return server.ErrBadCredentials
		}
		accepted = append(accepted, m.Token)
		return nil
	})
	var calls atomic.Int32
	provider := func(ctx context.Context) (map[string]any, error) {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return map[string]any{"token": current}, nil
	}
	h := newHub(t, server.Config{Auth: auth})
	o := Options{Reconnect: fast, Auth: map[string]any{"token": "static-unused"}, AuthFunc: provider}
	l := newLifecycle(&o)
	a := dialHub(t, h, o)
	if err := a.Join(ctx5(t), "office"); err != nil {
		t.Fatal(err)
	}

	h.stop()
	mu.Lock()
	current = "token-2"
	mu.Unlock()
	h.start(server.Config{Auth: auth})
	wait(t, l.reconnects, "OnReconnect")
	if _, err := a.ListRoom(ctx5(t)); err != nil {
		t.Fatalf("list_room after reconnect: %v", err)
	}
	mu.Lock()
	got := strings.Join(accepted, ",")
	mu.Unlock()
	if got != "token-1,token-2" {
		t.Errorf("the server accepted %q", got)
	}
	if n := calls.Load(); n < 2 {
		t.Errorf("provider called %d times", n)
	}
}

// TestInFlightFailsFast: a tool call in flight when the connection is
// lost returns at once with ErrConnectionLost, long before its deadline.
func TestInFlightFailsFast(t *testing.T) {
	h := newHub(t, server.Config{})
	a := dialHub(t, h, Options{Reconnect: ReconnectOptions{MinDelay: time.Hour}})
	if err := a.Join(ctx5(t), "office"); err != nil {
		t.Fatal(err)
	}
	pc := joinPeer(t, h, smcp.RoleComputer, "office", "pc", nil) // never answers
	type result struct {
		res *smcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.CallTool(context.Background(), Call{Computer: "pc", Tool: "b__slow", Timeout: time.Minute})
		done <- result{res, err}
	}()
	wait(t, pc.calls, "the tool call at the Computer")
	start := time.Now()
	h.stop()
	r := wait(t, done, "CallTool to return")
	if !errors.Is(r.err, ErrConnectionLost) || r.res != nil {
		t.Fatalf("in-flight call = %+v, %v", r.res, r.err)
	}
	if d := time.Since(start); d > 2*time.Second { // 200ms of draining, then the loss
		t.Errorf("returned %v after the server stopped", d)
	}
}

// TestRequestWhileReconnecting: a request made while the Client
// reconnects waits for the rejoin and then succeeds; one whose timeout
// ends first fails with ErrConnectionLost and DeadlineExceeded without
// ending the Client.
func TestRequestWhileReconnecting(t *testing.T) {
	h := newHub(t, server.Config{})
	o := Options{Reconnect: fast}
	l := newLifecycle(&o)
	a := dialHub(t, h, o)
	if err := a.Join(ctx5(t), "office"); err != nil {
		t.Fatal(err)
	}
	h.stop()
	wait(t, l.disconnects, "OnDisconnect")

	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := a.ListRoom(short); !errors.Is(err, ErrConnectionLost) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("short request while reconnecting: %v", err)
	}
	wait(t, l.errs, "a failed attempt") // the server is down: attempts fail and go on

	type result struct {
		s   []smcp.SessionInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := a.ListRoom(ctx5(t))
		done <- result{s, err}
	}()
	h.start(server.Config{})
	r := wait(t, done, "the waiting request")
	if r.err != nil || len(r.s) != 1 || r.s[0].Name != "agent" {
		t.Fatalf("waiting request = %+v, %v", r.s, r.err)
	}
}

// TestRejoinRefusedIsRetried: the office's Agent seat is taken when the
// Client comes back: the refusal is reported, retried, and the rejoin
// succeeds once the seat is free.
func TestRejoinRefusedIsRetried(t *testing.T) {
	h := newHub(t, server.Config{})
	o := Options{Reconnect: fast}
	l := newLifecycle(&o)
	a := dialHub(t, h, o)
	if err := a.Join(ctx5(t), "office"); err != nil {
		t.Fatal(err)
	}
	h.stop()
	wait(t, l.disconnects, "OnDisconnect")
	h.closed.Store(true) // the Agent's attempts fail (HTTP 503) until the seat is taken
	h.start(server.Config{})
	squatter := joinPeer(t, h, smcp.RoleAgent, "office", "squatter", nil)
	h.closed.Store(false)
	for {
		err := wait(t, l.errs, "a refused rejoin")
		var je *JoinError
		if errors.As(err, &je) {
			if je.Message != "Room already has an agent" {
				t.Errorf("refusal %q", je.Message)
			}
			break
		}
	}
	squatter.sock.Disconnect()
	wait(t, l.reconnects, "OnReconnect")
	pc := joinPeer(t, h, smcp.RoleComputer, "office", "pc", nil)
	if got := pc.agents(t, "office"); len(got) != 1 || got[0] != "agent" {
		t.Fatalf("agents %q", got)
	}
}

// TestPermanentRefusalStopsRetrying: a version mismatch or an auth
// refusal on reconnect ends the Client after one attempt.
func TestPermanentRefusalStopsRetrying(t *testing.T) {
	refuse := server.AuthFunc(func(context.Context, *server.AuthRequest) error { return server.ErrBadCredentials })
	for _, tc := range []struct {
		name   string
		cfg    server.Config
		wsOnly bool
		check  func(error) bool
	}{
		{"version", server.Config{Version: "0.3.0"}, false, func(err error) bool {
			var pve *ProtocolVersionError
			return errors.As(err, &pve) && pve.Code == smcp.CodeVersionMismatch && pve.ServerVersion == "0.3.0"
		}},
		{"version-websocket", server.Config{Version: "0.3.0"}, true, func(err error) bool {
			var pve *ProtocolVersionError
			return errors.As(err, &pve) && pve.ServerVersion == "0.3.0"
		}},
		{"auth", server.Config{Auth: refuse}, false, func(err error) bool {
			var ce *ConnectError
			return errors.As(err, &ce) && ce.Message == "unauthorized"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, server.Config{})
			o := Options{Reconnect: fast, WebSocketOnly: tc.wsOnly}
			l := newLifecycle(&o)
			a := dialHub(t, h, o)
			if err := a.Join(ctx5(t), "office"); err != nil {
				t.Fatal(err)
			}
			h.stop()
			h.closed.Store(true) // no attempt reaches the server until it is restarted
			h.start(tc.cfg)
			wait(t, l.errs, "a failed attempt")
			h.closed.Store(false)
			waitDone(t, a)
			var last error
			for len(l.errs) > 0 {
				last = <-l.errs
			}
			var re *ReconnectError
			if err := a.Err(); !errors.As(err, &re) || !tc.check(re.Err) || !errors.Is(err, ErrConnectionLost) || !tc.check(last) {
				t.Fatalf("Err() = %v; last reported %v", err, last)
			}
			if !strings.HasPrefix(a.Reason(), "reconnect failed: ") {
				t.Errorf("reason %q", a.Reason())
			}
			if _, err := a.ListRoom(ctx5(t)); !errors.As(err, &re) {
				t.Errorf("request after giving up: %v", err)
			}
			if n := h.handshakes.Load(); n != 1 {
				t.Errorf("%d connection attempts reached the server, want 1", n)
			}
			a.Close()
			checkNoLeak(t)
		})
	}
}

// TestCloseDuringBackoff: Close while the Client waits to reconnect
// returns at once and leaves no goroutine.
func TestCloseDuringBackoff(t *testing.T) {
	h := newHub(t, server.Config{})
	o := Options{Reconnect: ReconnectOptions{MinDelay: time.Hour}}
	l := newLifecycle(&o)
	a := dialHub(t, h, o)
	h.stop()
	wait(t, l.disconnects, "OnDisconnect")
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("Close did not return within 1s")
	}
	waitDone(t, a)
	if !errors.Is(a.Err(), ErrClosed) {
		t.Errorf("err %v", a.Err())
	}
	if len(l.disconnects) != 0 {
		t.Errorf("a second OnDisconnect: %q", <-l.disconnects)
	}
	checkNoLeak(t)
}

// TestCloseFromCallback: Close called from a lifecycle callback does not
// wait for itself.
func TestCloseFromCallback(t *testing.T) {
	h := newHub(t, server.Config{})
	var client atomic.Pointer[Client]
	closed := make(chan struct{})
	o := Options{Reconnect: ReconnectOptions{MinDelay: time.Hour}, OnDisconnect: func(string) {
		client.Load().Close()
		close(closed)
	}}
	a := dialHub(t, h, o)
	client.Store(a)
	h.stop()
	wait(t, closed, "Close in OnDisconnect")
	waitDone(t, a)
	checkNoLeak(t)
}

// TestReconnectDisabled: with reconnecting off, a lost connection ends
// the Client.
func TestReconnectDisabled(t *testing.T) {
	h := newHub(t, server.Config{})
	o := Options{Reconnect: ReconnectOptions{Disabled: true}}
	l := newLifecycle(&o)
	a := dialHub(t, h, o)
	h.stop()
	reason := wait(t, l.disconnects, "OnDisconnect")
	waitDone(t, a)
	if !errors.Is(a.Err(), ErrConnectionLost) || a.Reason() != reason {
		t.Errorf("err %v, reason %q (disconnect %q)", a.Err(), a.Reason(), reason)
	}
	h.start(server.Config{})
	if _, err := a.ListRoom(ctx5(t)); !errors.Is(err, ErrConnectionLost) {
		t.Errorf("request after the end: %v", err)
	}
	if n := h.handshakes.Load(); n != 0 {
		t.Errorf("%d attempts with reconnecting off", n)
	}
	checkNoLeak(t)
}

func TestBackoffDelay(t *testing.T) {
	r := ReconnectOptions{MinDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for _, tc := range []struct {
		n        int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},
		{1000, 500 * time.Millisecond, time.Second},
	} {
		for range 100 {
			if d := r.delay(tc.n); d < tc.min || d > tc.max {
				t.Fatalf("delay(%d) = %v, want in [%v, %v]", tc.n, d, tc.min, tc.max)
			}
		}
	}
}
