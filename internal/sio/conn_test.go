package sio

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// waitFor polls cond until it holds; the deadline is only the failure
// bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// recorder is a namespace handler that records what it is told.
type recorder struct {
	gate chan struct{} // when set, Connect waits on it

	mu      sync.Mutex
	events  []*Event
	reasons []string
	socks   []*Socket
}

func (h *recorder) Connect(s *Socket) error {
	if h.gate != nil {
		<-h.gate
	}
	h.mu.Lock()
	h.socks = append(h.socks, s)
	h.mu.Unlock()
	return nil
}

func (h *recorder) Event(_ *Socket, e *Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *recorder) Disconnect(_ *Socket, reason string) {
	h.mu.Lock()
	h.reasons = append(h.reasons, reason)
	h.mu.Unlock()
}

func (h *recorder) counts() (events, disconnects int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events), len(h.reasons)
}

func startServer(t *testing.T, o Options, h Handler) (*Server, string) {
	t.Helper()
	srv := NewServer(o)
	srv.Handle("/smcp", h)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return srv, ts.URL
}

// engineWS is a hand-driven Engine.IO WebSocket client.
type engineWS struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialEngineWS(t *testing.T, base, sid string) *engineWS {
	t.Helper()
	r, err := openEngineWS(t, base, sid)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// openEngineWS is dialEngineWS for a goroutine other than the test's,
// where t.Fatal must not be called: it returns the error instead. (The
// engineWS's expect still calls t.Fatal: use next there.)
func openEngineWS(t *testing.T, base, sid string) (*engineWS, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/socket.io/?EIO=4&transport=websocket"
	if sid != "" {
		u += "&sid=" + sid
	}
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { ws.Close() })
	r := &engineWS{t: t, ws: ws}
	if sid == "" {
		if m, err := r.next(); err != nil || !strings.HasPrefix(m, "0") {
			return nil, fmt.Errorf("open packet: got %q, %v", m, err)
		}
	}
	return r, nil
}

func (r *engineWS) text(s string) error { return r.ws.WriteMessage(websocket.TextMessage, []byte(s)) }
func (r *engineWS) bin(b []byte) error  { return r.ws.WriteMessage(websocket.BinaryMessage, b) }

// next reads one message (answering pings), or fails after 10 s.
func (r *engineWS) next() (string, error) {
	for {
		_ = r.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := r.ws.ReadMessage()
		if err != nil {
			return "", err
		}
		if string(b) == "2" {
			_ = r.text("3")
			continue
		}
		return string(b), nil
	}
}

func (r *engineWS) expect(prefix string) string {
	r.t.Helper()
	m, err := r.next()
	if err != nil || !strings.HasPrefix(m, prefix) {
		r.t.Fatalf("got %q, %v; want %q...", m, err, prefix)
	}
	return m
}

// closed reports whether the server ends the connection (within 10 s).
func (r *engineWS) closed() bool {
	for {
		m, err := r.next()
		if err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
		if m == "1" { // the Engine.IO close packet
			return true
		}
	}
}

// TestAttachmentsBounded checks that attachments are never kept for a
// namespace the peer has not joined, and that what a joined peer may make
// the server hold (attachments, held frames) is bounded.
func TestAttachmentsBounded(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			o := mode.opts
			o.MaxPayload = 64 << 10
			h := &recorder{}
			srv, url := startServer(t, o, h)
			chunk := make([]byte, 60<<10)

			// Not joined: 63 announced attachments are counted off, none kept.
			r := dialEngineWS(t, url, "")
			if err := r.text(`4563-/smcp,["x",{"_placeholder":true,"num":0}]`); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 62; i++ {
				if err := r.bin(chunk); err != nil {
					t.Fatal(err)
				}
			}
			c := onlyConn(t, srv)
			waitFor(t, "the attachments to arrive", func() bool {
				c.dispatch.Lock()
				defer c.dispatch.Unlock()
				return c.partial != nil && c.partial.n == 62
			})
			c.dispatch.Lock()
			kept := len(c.partial.att)
			c.dispatch.Unlock()
			if kept != 0 {
				t.Errorf("%d attachments kept for a namespace the peer has not joined", kept)
			}
			_ = r.ws.Close()
			waitFor(t, "the connection to end", func() bool { return srv.Conns() == 0 })

			// Joined: attachments past twice MaxPayload close the connection.
			r = dialEngineWS(t, url, "")
			_ = r.text("40/smcp,")
			r.expect("40/smcp,")
			ph := make([]string, 10)
			for i := range ph {
				ph[i] = fmt.Sprintf(`{"_placeholder":true,"num":%d}`, i)
			}
			_ = r.text(`4510-/smcp,["x",` + strings.Join(ph, ",") + `]`)
			for i := 0; i < 10; i++ {
				if r.bin(chunk) != nil {
					break
				}
			}
			if !r.closed() {
				t.Error("the connection holding attachments over the limit stayed open")
			}
			if n, _ := h.counts(); n != 0 {
				t.Errorf("%d events delivered", n)
			}
		})
	}
}

// TestHeldFramesBounded checks the bytes held while a connect is decided.
func TestHeldFramesBounded(t *testing.T) {
	h := &recorder{gate: make(chan struct{})}
	_, url := startServer(t, Options{MaxPayload: 64 << 10}, h)
	defer close(h.gate)
	r := dialEngineWS(t, url, "")
	_ = r.text("40/smcp,")
	big := `42/smcp,["x","` + strings.Repeat("y", 60<<10) + `"]`
	for i := 0; i < 10; i++ {
		if r.text(big) != nil {
			break
		}
	}
	if !r.closed() {
		t.Error("the connection holding frames over the limit stayed open")
	}
}

func onlyConn(t *testing.T, srv *Server) *econn {
	t.Helper()
	var c *econn
	waitFor(t, "one connection", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, x := range srv.conns {
			c = x
		}
		return len(srv.conns) == 1
	})
	return c
}

func TestCheckPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		args string
		n    int
		ok   bool
	}{
		{`[{"_placeholder":true,"num":0}]`, 1, true},
		{`[{"a":[{"_placeholder":true,"num":1}]},{"_placeholder":true,"num":0}]`, 2, true},
		{`[{"_placeholder":true,"num":0},{"_placeholder":true,"num":0}]`, 1, true},
		{`["_placeholder"]`, 0, true},
		{`[{"_placeholder":false,"num":9}]`, 0, true},
		{`[{"_placeholder":true,"num":1}]`, 1, false},   // out of range
		{`[{"_placeholder":true,"num":-1}]`, 1, false},  // negative
		{`[{"_placeholder":true,"num":0.5}]`, 1, false}, // not an integer
		{`[{"_placeholder":true,"num":"0"}]`, 1, false}, // not a number
		{`[{"_placeholder":true}]`, 1, false},           // no num
		{`[{"_placeholder":true,"num":0}]`, 0, false},   // no attachment at all
		{`[{"x":1}]`, 1, true},                          // an attachment with no placeholder: accepted, as the reference does
		{`[{"_placeholder":true,"num":0}]`, 2, true},    // one of two referred to
		{`[{"\u005fplaceholder":true,"num":3}]`, 1, false},
	} {
		_, args, err := splitArgs([]byte(tc.args), false)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlaceholders(args, tc.n); (err == nil) != tc.ok {
			t.Errorf("%s with %d attachments: %v", tc.args, tc.n, err)
		}
	}
}

// TestBadPlaceholderRefused checks that a binary answer whose placeholder
// is out of range never reaches the requester: the connection that sent it
// is closed and the request fails.
func TestBadPlaceholderRefused(t *testing.T) {
	h := &recorder{}
	_, url := startServer(t, Options{}, h)
	r := dialEngineWS(t, url, "")
	_ = r.text("40/smcp,")
	r.expect("40/smcp,")
	waitFor(t, "the socket", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.socks) == 1 })
	h.mu.Lock()
	s := h.socks[0]
	h.mu.Unlock()
	got := make(chan error, 1)
	s.Request("q", Message{}, 30*time.Second, func(m Message, err error) { got <- err })
	r.expect("42/smcp,0")
	_ = r.text(`461-/smcp,0[{"_placeholder":true,"num":5}]`)
	_ = r.bin([]byte{1})
	select {
	case err := <-got:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("request ended with %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request was never answered")
	}
	if !r.closed() {
		t.Error("the connection stayed open")
	}
}

// pollClient is a hand-driven Engine.IO long-polling client.
type pollClient struct {
	t   *testing.T
	url string // the Engine.IO URL with sid
	sid string
}

func openPolling(t *testing.T, base string) *pollClient {
	t.Helper()
	resp, err := http.Get(base + "/socket.io/?EIO=4&transport=polling")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var op openPacket
	if len(b) == 0 || json.Unmarshal(b[1:], &op) != nil {
		t.Fatalf("handshake: %q", b)
	}
	return &pollClient{t: t, url: base + "/socket.io/?EIO=4&transport=polling&sid=" + op.SID, sid: op.SID}
}

func (p *pollClient) get() ([]frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET: %d %s", resp.StatusCode, b)
	}
	return decodePayload(b)
}

func (p *pollClient) post(body string) int {
	p.t.Helper()
	resp, err := http.Post(p.url, "text/plain", strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestUpgradeKeepsOrder sends numbered events from the server as fast as
// it can while the client upgrades from polling to WebSocket: what the
// client receives over polling and then over the WebSocket must be every
// number, in order.
func TestUpgradeKeepsOrder(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			for round := 0; round < 3; round++ {
				upgradeOrder(t, mode.opts)
			}
		})
	}
}

func upgradeOrder(t *testing.T, o Options) {
	h := &recorder{}
	_, url := startServer(t, o, h)
	p := openPolling(t, url)
	if code := p.post("40/smcp,"); code != 200 {
		t.Fatalf("connect POST: %d", code)
	}
	waitFor(t, "the socket", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.socks) == 1 })
	h.mu.Lock()
	s := h.socks[0]
	h.mu.Unlock()
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		i := 0
		defer func() { sent <- i }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if i == 5000 || s.Emit("n", Message{Args: []json.RawMessage{json.RawMessage(strconv.Itoa(i))}}) != nil {
				return
			}
			i++
		}
	}()
	var got []int
	take := func(data string) {
		if strings.HasPrefix(data, `42/smcp,["n",`) {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(data, `42/smcp,["n",`), "]"))
			got = append(got, n)
		}
	}
	// Poll while the probe runs; the probe releases the parked GET.
	polled := make(chan []string, 1)
	probed := make(chan struct{})
	go func() {
		var out []string
		defer func() { polled <- out }()
		for {
			fs, err := p.get()
			if err != nil {
				return
			}
			upgrading := false
			for _, f := range fs {
				out = append(out, string(f.data))
				if string(f.data) == "6" {
					upgrading = true
				}
			}
			select {
			case <-probed:
				if upgrading {
					return
				}
			default:
			}
		}
	}()
	ws := dialEngineWS(t, url, p.sid)
	_ = ws.text("2probe")
	ws.expect("3probe")
	close(probed)
	for _, d := range <-polled {
		take(d)
	}
	_ = ws.text("5")
	for len(got) < 1000 {
		m, err := ws.next()
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		take(m)
	}
	close(stop)
	<-sent
	for i, n := range got {
		if n != i {
			t.Fatalf("event %d is number %d: order broken across the upgrade", i, n)
		}
	}
}

// TestUpgradeQueueFirst checks the invariant behind the order: once a
// sender can see the connection switched to WebSocket, what polling had
// queued is already on the WebSocket, so a send right after the switch
// (made from upgradeHook) comes after it.
func TestUpgradeQueueFirst(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			h := &recorder{}
			srv, url := startServer(t, mode.opts, h)
			p := openPolling(t, url)
			p.post("40/smcp,")
			waitFor(t, "the socket", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.socks) == 1 })
			h.mu.Lock()
			s := h.socks[0]
			h.mu.Unlock()
			fs, err := p.get() // the CONNECT answer
			if err != nil || len(fs) != 1 {
				t.Fatalf("GET: %v %v", fs, err)
			}
			ws := dialEngineWS(t, url, p.sid)
			_ = ws.text("2probe")
			ws.expect("3probe")
			emit := func(i int) {
				if err := s.Emit("n", Message{Args: []json.RawMessage{json.RawMessage(strconv.Itoa(i))}}); err != nil {
					t.Error(err)
				}
			}
			for i := 0; i < 100; i++ {
				emit(i) // queued: the connection is upgrading
			}
			hook := func() {
				for i := 100; i < 110; i++ {
					emit(i)
				}
			}
			srv.upgradeHook.Store(&hook)
			_ = ws.text("5")
			for i := 0; i < 110; i++ {
				if m := ws.expect(`42/smcp,["n",`); m != `42/smcp,["n",`+strconv.Itoa(i)+`]` {
					t.Fatalf("message %d is %s", i, m)
				}
			}
		})
	}
}

// TestCloseDuringDirectHandshake closes the server while direct WebSocket
// handshakes are on the way: no handler panics (net/http would recover
// it and log it, and the test pass), every WebSocket that opened is
// closed by the server, and no connection stays registered.
func TestCloseDuringDirectHandshake(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			for round := 0; round < 10; round++ {
				srv := NewServer(mode.opts)
				srv.Handle("/smcp", &recorder{})
				ts := httptest.NewUnstartedServer(srv)
				var httpLog lockedBuffer
				ts.Config.ErrorLog = log.New(&httpLog, "", 0)
				ts.Start()
				u := "ws" + strings.TrimPrefix(ts.URL, "http") + "/socket.io/?EIO=4&transport=websocket"
				var wg sync.WaitGroup
				var opened, left atomic.Int32
				for i := 0; i < 20; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
						ws, _, err := d.Dial(u, nil)
						if err != nil {
							return // refused: the server was already closing
						}
						defer ws.Close()
						opened.Add(1)
						// The server ends it; the deadline is only the failure bound.
						_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
						for {
							if _, _, err := ws.ReadMessage(); err != nil {
								var ne net.Error
								if errors.As(err, &ne) && ne.Timeout() {
									left.Add(1)
								}
								return
							}
						}
					}()
				}
				time.Sleep(time.Duration(round) * 200 * time.Microsecond) // spread Close over the handshakes
				srv.Close()
				wg.Wait()
				if n := left.Load(); n > 0 {
					t.Errorf("round %d: %d of %d WebSockets still open 5 s after Close", round, n, opened.Load())
				}
				waitFor(t, "no connection registered", func() bool { return srv.Conns() == 0 })
				ts.Close()
				if strings.Contains(httpLog.String(), "panic") {
					t.Fatalf("round %d: a handler panicked:\n%s", round, httpLog.String())
				}
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers (a server's
// ErrorLog).
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPollingQueueBounded checks that a polling peer that never polls
// cannot make the server queue without bound.
func TestPollingQueueBounded(t *testing.T) {
	h := &recorder{}
	srv, url := startServer(t, Options{MaxBuffered: 256 << 10}, h)
	p := openPolling(t, url)
	p.post("40/smcp,")
	waitFor(t, "the socket", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.socks) == 1 })
	h.mu.Lock()
	s := h.socks[0]
	h.mu.Unlock()
	arg := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = s.Emit("x", Message{Args: []json.RawMessage{arg}})
	}
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("1 MB queued for a peer that never polls: Emit = %v", err)
	}
	waitFor(t, "the connection to end", func() bool { return srv.Conns() == 0 })
	waitFor(t, "the disconnect", func() bool { _, n := h.counts(); return n == 1 })
}

// TestPostRules checks that a second POST while one is being read is
// refused with 400 (and ends the connection), and that a POST after the
// upgrade is refused with 400.
func TestPostRules(t *testing.T) {
	h := &recorder{}
	srv, url := startServer(t, Options{BodyIdleTimeout: 5 * time.Second}, h)
	p := openPolling(t, url)
	conn := stalledPost(t, url, p.sid)
	defer conn.Close()
	c := onlyConn(t, srv)
	waitFor(t, "the first POST to be read", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.posting })
	if code := p.post("40/smcp,"); code != 400 {
		t.Errorf("overlapping POST: %d, want 400", code)
	}
	waitFor(t, "the connection to end", func() bool { return srv.Conns() == 0 })

	p = openPolling(t, url)
	p.post("40/smcp,")
	go func() { _, _ = p.get() }()
	ws := dialEngineWS(t, url, p.sid)
	_ = ws.text("2probe")
	ws.expect("3probe")
	_ = ws.text("5")
	c = onlyConn(t, srv)
	waitFor(t, "the upgrade", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.state == stWebSocket })
	if code := p.post(`42/smcp,["x"]`); code != 400 {
		t.Errorf("POST after the upgrade: %d, want 400", code)
	}
	if n, _ := h.counts(); n != 0 {
		t.Errorf("the refused POST delivered %d events", n)
	}
}

// stalledPost sends a POST's headers and half its body, then nothing.
func stalledPost(t *testing.T, base, sid string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(conn, "POST /socket.io/?EIO=4&transport=polling&sid=%s HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 40\r\n\r\n42/smcp,[\"x\"", sid)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestStalledPostCut checks that a POST body that stops making progress
// is cut after BodyIdleTimeout (not held forever), while a slow body that
// keeps arriving is read whole.
func TestStalledPostCut(t *testing.T) {
	h := &recorder{}
	srv, url := startServer(t, Options{BodyIdleTimeout: 200 * time.Millisecond}, h)
	p := openPolling(t, url)
	start := time.Now()
	conn := stalledPost(t, url, p.sid)
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the stalled POST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || time.Since(start) < 200*time.Millisecond {
		t.Errorf("stalled POST: %d after %v", resp.StatusCode, time.Since(start))
	}
	waitFor(t, "the connection to end", func() bool { return srv.Conns() == 0 })

	// A refused POST (no such session, or no session at all) is not held
	// by its stalled body either.
	for _, sid := range []string{"nosuchsession", ""} {
		conn := stalledPost(t, url, sid)
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("stalled POST with sid %q: %v %v", sid, resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	// Progress, not total time: a body of 28 one-byte pieces 50 ms apart
	// (1.4 s in all) against a BodyIdle of 1 s. The pace keeps a margin
	// of 20 to 1 under the bound, which a loaded machine's late timers
	// do not use up (8 pieces 100 ms apart against 200 ms did: failed
	// once in a run of five packages under load).
	h2 := &recorder{}
	_, url = startServer(t, Options{BodyIdleTimeout: time.Second}, h2)
	p = openPolling(t, url)
	body := `40/smcp,{"pad":"0123456789"}`
	conn2, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprintf(conn2, "POST /socket.io/?EIO=4&transport=polling&sid=%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", p.sid, len(body))
	for i := 0; i < len(body); i++ {
		time.Sleep(50 * time.Millisecond) // the pace of the slow peer, not synchronisation
		if _, err := conn2.Write([]byte{body[i]}); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn2.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(conn2), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("slow POST: %v %v", resp, err)
	}
	waitFor(t, "the connect", func() bool { h2.mu.Lock(); defer h2.mu.Unlock(); return len(h2.socks) == 1 })
}

// TestClientRespectsMaxPayload checks that the polling client never POSTs
// more than the server's maxPayload: messages are split over POSTs, and
// one message too large for any POST is refused with ErrTooLarge while
// the connection stays up.
func TestClientRespectsMaxPayload(t *testing.T) {
	h := &recorder{socks: nil}
	_, url := startServer(t, Options{MaxPayload: 4000}, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Dial(ctx, url, ClientOptions{Namespace: "/smcp", Transport: PollingOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disconnect()
	arg := json.RawMessage(`"` + strings.Repeat("x", 1500) + `"`)
	for i := 0; i < 20; i++ {
		if err := s.Emit("x", Message{Args: []json.RawMessage{arg}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "20 events", func() bool { n, _ := h.counts(); return n == 20 })
	big := json.RawMessage(`"` + strings.Repeat("x", 5000) + `"`)
	if err := s.Emit("x", Message{Args: []json.RawMessage{big}}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("message over maxPayload: %v, want ErrTooLarge", err)
	}
	if err := s.Emit("x", Message{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection to go on", func() bool { n, _ := h.counts(); return n == 21 })
	if _, n := h.counts(); n != 0 {
		t.Error("the connection closed")
	}
}

// TestPollingCloseReason checks that a polling connection closed by the
// server reports why, not always "server namespace disconnect".
func TestPollingCloseReason(t *testing.T) {
	h := &recorder{}
	srv, url := startServer(t, Options{}, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, url, ClientOptions{Namespace: "/smcp", Transport: PollingOnly}); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	waitFor(t, "the disconnect", func() bool { _, n := h.counts(); return n == 1 })
	if h.reasons[0] != "server shutting down" {
		t.Errorf("reason = %q, want %q", h.reasons[0], "server shutting down")
	}
}

// TestNoEventAfterDisconnect: a socket whose transport ends right after
// an event never has that event delivered after (or during) Disconnect.
func TestNoEventAfterDisconnect(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			var bad atomic.Int32
			h := &orderChecker{gone: map[*Socket]bool{}, bad: &bad}
			srv, url := startServer(t, mode.opts, h)
			var wg sync.WaitGroup
			for i := 0; i < 200; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := openEngineWS(t, url, "")
					if err != nil {
						t.Error(err)
						return
					}
					_ = r.text("40/smcp,")
					_ = r.text(`42/smcp,["x"]`)
					_ = r.ws.UnderlyingConn().Close()
				}()
			}
			wg.Wait()
			waitFor(t, "every connection to end", func() bool { return srv.Conns() == 0 })
			if n := bad.Load(); n > 0 {
				t.Errorf("%d events delivered during or after their socket's Disconnect", n)
			}
		})
	}
}

// orderChecker counts events that arrive during or after Disconnect.
type orderChecker struct {
	mu   sync.Mutex
	gone map[*Socket]bool
	busy map[*Socket]bool
	bad  *atomic.Int32
}

func (h *orderChecker) Connect(*Socket) error { return nil }

func (h *orderChecker) Event(s *Socket, _ *Event) {
	h.mu.Lock()
	if h.gone[s] {
		h.bad.Add(1)
	}
	if h.busy == nil {
		h.busy = map[*Socket]bool{}
	}
	h.busy[s] = true
	h.mu.Unlock()
	time.Sleep(time.Millisecond) // widen the window a concurrent Disconnect would hit
	h.mu.Lock()
	delete(h.busy, s)
	h.mu.Unlock()
}

func (h *orderChecker) Disconnect(s *Socket, _ string) {
	h.mu.Lock()
	if h.busy[s] {
		h.bad.Add(1)
	}
	h.gone[s] = true
	h.mu.Unlock()
}

// TestPollWriteBounded checks that a long-poll GET whose peer never reads
// the answer does not hold the handler (and the queued packets) forever:
// the write fails after WriteTimeout and the connection ends.
func TestPollWriteBounded(t *testing.T) {
	h := &recorder{}
	srv, url := startServer(t, Options{WriteTimeout: 200 * time.Millisecond, MaxBuffered: 64 << 20}, h)
	p := openPolling(t, url)
	p.post("40/smcp,")
	waitFor(t, "the socket", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.socks) == 1 })
	h.mu.Lock()
	s := h.socks[0]
	h.mu.Unlock()
	arg := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	for i := 0; i < 32; i++ { // more than loopback socket buffers take
		if err := s.Emit("x", Message{Args: []json.RawMessage{arg}}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET /socket.io/?EIO=4&transport=polling&sid=%s HTTP/1.1\r\nHost: x\r\n\r\n", p.sid)
	// Never read.
	waitFor(t, "the connection to end", func() bool { return srv.Conns() == 0 })
}

// blockingClient holds its first event until release is closed.
type blockingClient struct {
	entered, release chan struct{}
	inEvent          atomic.Bool
	overlap          atomic.Bool
	gone             atomic.Bool
}

func (h *blockingClient) Event(*Socket, *Event) {
	h.inEvent.Store(true)
	close(h.entered)
	<-h.release
	h.inEvent.Store(false)
}

func (h *blockingClient) Disconnect(*Socket, string) {
	if h.inEvent.Load() {
		h.overlap.Store(true)
	}
	h.gone.Store(true)
}

// TestClientDisconnectWaitsForEvent checks the client side of the order:
// a Disconnect while an event's handler runs is reported after it ends.
func TestClientDisconnectWaitsForEvent(t *testing.T) {
	h := &recorder{}
	_, url := startServer(t, Options{}, h)
	ch := &blockingClient{entered: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, ClientOptions{Namespace: "/smcp", Transport: WebSocketOnly, Handler: ch})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the socket", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.socks) == 1 })
	h.mu.Lock()
	_ = h.socks[0].Emit("hold", Message{})
	h.mu.Unlock()
	<-ch.entered
	c.Disconnect()
	close(ch.release)
	waitFor(t, "the client's Disconnect", ch.gone.Load)
	if ch.overlap.Load() {
		t.Error("Disconnect ran while an Event was being handled")
	}
}
