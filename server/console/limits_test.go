package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// wrappedHub is newHub with wrap around the hub's handler.
func wrappedHub(t *testing.T, token string, wrap func(http.Handler) http.Handler) *hub {
	t.Helper()
	rec := tracing.NewRecorder(0, 0)
	cfg := server.Config{Calls: true, Recorder: rec}
	if token != "" {
		cfg.Auth = server.TokenAuth(token, "x-api-key")
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	con, err := New(Config{Server: srv, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(wrap(srv.Handler()))
	t.Cleanup(func() {
		con.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return &hub{srv: srv, con: con, url: ts.URL, rec: rec}
}

// firstRead calls done at the first Read of a request body.
type firstRead struct {
	io.ReadCloser
	once *sync.Once
	done func()
}

func (f firstRead) Read(p []byte) (int, error) {
	f.once.Do(f.done)
	return f.ReadCloser.Read(p)
}

// Logins whose bodies arrive slowly all start reading before any of
// them has tried its token: the limit still lets only MaxFailedLogins
// wrong tokens through (the attempt is counted when the token is
// checked, in the same locked step as the check of the limit).
func TestLoginLimitSlowBodies(t *testing.T) {
	const n = 40
	var reading sync.WaitGroup
	reading.Add(n)
	h := wrappedHub(t, testToken, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/login" {
				r.Body = firstRead{r.Body, new(sync.Once), reading.Done}
			}
			next.ServeHTTP(w, r)
		})
	})
	u, _ := url.Parse(h.url)
	conns := make([]net.Conn, n)
	bodies := make([]string, n)
	for i := range n {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bodies[i] = url.Values{"token": {fmt.Sprintf("guess-%d", i)}}.Encode()
		// The headers and all of the body but its last byte.
		fmt.Fprintf(c, "POST /login HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nAccept: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
			u.Host, h.url, len(bodies[i]), bodies[i][:len(bodies[i])-1])
		conns[i] = c
	}
	waitGroup(t, &reading, 10*time.Second) // every handler reads its body
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.WriteString(c, bodies[i][len(bodies[i])-1:])
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[http.StatusUnauthorized] != MaxFailedLogins || codes[http.StatusTooManyRequests] != n-MaxFailedLogins {
		t.Fatalf("answers %v: want %d × 401 and %d × 429", codes, MaxFailedLogins, n-MaxFailedLogins)
	}
}

// waitGroup waits for wg, at most d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("timed out")
	}
}

func TestLoginKey(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::ffff", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
		{"not-an-address", "not-an-address"},
	} {
		if got := loginKey(tc.host); got != tc.want {
			t.Errorf("loginKey(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

// One IPv6 host holds a /64: its addresses share one count.
func TestLoginLimitIPv6Prefix(t *testing.T) {
	s := newSessions(testToken)
	for i := range MaxFailedLogins {
		s.failed(loginKey(fmt.Sprintf("2001:db8:0:7::%x", i+1)))
	}
	if !s.limited(loginKey("2001:db8:0:7::ffff")) {
		t.Fatal("another address of the same /64 is not limited")
	}
	if _, ok := s.attempt(loginKey("2001:db8:0:7:1::1")); ok {
		t.Fatal("an attempt from the same /64 was counted")
	}
	if s.limited(loginKey("2001:db8:0:8::1")) {
		t.Fatal("another /64 is limited")
	}
}

// Past maxTracked live addresses the others share one count, and that
// count limits them.
func TestLoginLimitOverflow(t *testing.T) {
	s := newSessions(testToken)
	s.maxAll = 1 << 30
	for i := range maxTracked {
		s.failed(fmt.Sprintf("198.51.%d.%d", i/256, i%256))
	}
	if len(s.failures) != maxTracked {
		t.Fatalf("%d addresses tracked", len(s.failures))
	}
	for i := range MaxFailedLogins {
		if _, ok := s.attempt(fmt.Sprintf("203.0.113.%d", i)); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if !s.limited("203.0.113.200") {
		t.Fatal("an untracked address is not limited once the shared count is used up")
	}
	if _, ok := s.attempt("203.0.113.201"); ok {
		t.Fatal("an untracked address's attempt was counted past the shared count")
	}
	if len(s.failures) != maxTracked+1 {
		t.Fatalf("%d addresses tracked, want %d", len(s.failures), maxTracked+1)
	}
}

// Past MaxFailedLoginsTotal failures in a window from all addresses,
// every login is refused until the window ends; a right token gives its
// attempt back.
func TestLoginLimitTotal(t *testing.T) {
	h := newHub(t, testToken)
	now := time.Now()
	var mu sync.Mutex
	s := h.con.sessions
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// A login with the right token counts nothing.
	if resp := h.client(t).login(testToken); resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s", resp.Header.Get("Location"))
	}
	for i := range MaxFailedLoginsTotal - 1 {
		if _, ok := s.attempt(fmt.Sprintf("198.51.100.%d", i)); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	// The last one, from the hub's client, fills the window.
	c := h.client(t)
	if resp := c.login("wrong"); resp.Header.Get("Location") != "/?error=token" {
		t.Fatalf("failure %d: %s", MaxFailedLoginsTotal, resp.Header.Get("Location"))
	}
	if !s.limited("192.0.2.77") {
		t.Fatal("a fresh address is not limited past the total")
	}
	if resp := c.login(testToken); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?error=limited" || c.cookie != "" {
		t.Fatalf("past the total: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	mu.Lock()
	now = now.Add(LoginWindow)
	mu.Unlock()
	if resp := c.login(testToken); resp.Header.Get("Location") != "/" || c.cookie == "" {
		t.Fatalf("after the window: %s", resp.Header.Get("Location"))
	}
}

// readsToEnd reports whether r reaches its end (EOF or an error) within d.
func readsToEnd(r io.Reader, d time.Duration) bool {
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, r); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// sessionEnds are the ways a session ends: before runs before the
// stream opens, end once it runs; each is given the hub and the client
// whose session it ends.
var sessionEnds = []struct {
	name        string
	before, end func(t *testing.T, h *hub, c *client)
}{
	{"logout", nil, func(t *testing.T, h *hub, c *client) {
		if resp, _ := c.do("POST", "/logout", "self", "", ""); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout: %d", resp.StatusCode)
		}
	}},
	{"expiry", func(t *testing.T, h *hub, c *client) {
		s := h.con.sessions
		s.mu.Lock()
		// The session expires in 300 ms; the streams see it at their
		// next look (a ping, the proxy's expiry timer).
		s.byID[c.cookie].exp = time.Now().Add(300 * time.Millisecond)
		s.mu.Unlock()
	}, nil},
	{"eviction", func(t *testing.T, h *hub, c *client) {
		s := h.con.sessions
		s.mu.Lock()
		s.byID[c.cookie].exp = time.Now().Add(time.Hour) // the first to expire
		s.mu.Unlock()
	}, func(t *testing.T, h *hub, c *client) {
		s := h.con.sessions
		for s.count() < MaxSessions {
			s.create()
		}
		s.create() // evicts c's
		if s.valid(c.req()) {
			t.Fatal("not evicted")
		}
	}},
	{"close", nil, func(t *testing.T, h *hub, c *client) { h.con.Close() }},
}

// A session that ends takes its live streams with it.
func TestStreamEndsWithSession(t *testing.T) {
	old := heartbeat
	heartbeat = 20 * time.Millisecond
	t.Cleanup(func() { heartbeat = old })
	for _, tc := range sessionEnds {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, testToken)
			c := h.client(t)
			c.login(testToken)
			other := h.client(t)
			other.login(testToken)
			if tc.before != nil {
				tc.before(t, h, c)
			}
			st := c.stream("/api/console/calls/stream")
			st.next(t)
			keep := other.stream("/api/console/calls/stream")
			keep.next(t)
			if tc.end != nil {
				tc.end(t, h, c)
			}
			if !readsToEnd(st.r, 5*time.Second) {
				t.Fatal("the stream outlives its session")
			}
			if tc.name == "close" {
				return
			}
			// Another session's stream goes on.
			for range 3 {
				if got := keep.next(t); got != ": ping\n" {
					t.Fatalf("other stream: %q", got)
				}
			}
		})
	}
}

// A session that ends takes its proxied answers with it: the client's
// answer is cut and the request to the sandbox ends.
func TestProxyEndsWithSession(t *testing.T) {
	for _, tc := range sessionEnds {
		t.Run(tc.name, func(t *testing.T) {
			gone := make(chan struct{})
			box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				_, _ = io.WriteString(w, "{\"type\":\"started\"}\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				close(gone)
			}))
			defer box.Close()
			h := newHub(t, testToken, Sandbox{Name: "sb", URL: box.URL})
			c := h.client(t)
			c.login(testToken)
			if tc.before != nil {
				tc.before(t, h, c)
			}
			req, _ := http.NewRequest("POST", h.url+"/api/console/sandboxes/sb/api/v2/commands", strings.NewReader(`{"command":"sleep 600"}`))
			req.Header.Set("Cookie", CookieName+"="+c.cookie)
			req.Header.Set("Origin", h.url)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || line != "{\"type\":\"started\"}\n" {
				t.Fatalf("first line %q %v", line, err)
			}
			if tc.end != nil {
				tc.end(t, h, c)
			}
			if !readsToEnd(br, 5*time.Second) {
				t.Fatal("the proxied answer outlives its session")
			}
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the request to the sandbox outlives the session")
			}
		})
	}
}

// req is a request carrying c's session.
func (c *client) req() *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
	return r
}

// setVar sets *p to v for the test.
func setVar[T any](t *testing.T, p *T, v T) {
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// A client that stops reading a proxied answer is cut off after
// proxyWrite, and the sandbox's request ends.
func TestProxyStalledClient(t *testing.T) {
	setVar(t, &proxyWrite, 300*time.Millisecond)
	ended := make(chan error, 1)
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
	}))
	defer box.Close()
	h := newHub(t, testToken, Sandbox{Name: "sb", URL: box.URL})
	c := h.client(t)
	c.login(testToken)
	u, _ := url.Parse(h.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Asks, and never reads.
	fmt.Fprintf(conn, "GET /api/console/sandboxes/sb/api/v2/fs/download?path=/big HTTP/1.1\r\nHost: %s\r\nCookie: %s=%s\r\n\r\n", u.Host, CookieName, c.cookie)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy still holds the sandbox's answer 10 s after its client stopped reading")
	}
}

// A sandbox whose answer falls silent for proxyIdle has it cut; one that
// keeps sending (as aiod's pings do) goes on past it, and the client's
// connection is reused afterwards without the proxy's write deadline.
func TestProxyIdle(t *testing.T) {
	setVar(t, &proxyIdle, 300*time.Millisecond)
	setVar(t, &proxyWrite, 300*time.Millisecond)
	gone := make(chan struct{}, 1)
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		switch r.URL.Query().Get("mode") {
		case "silent":
			_, _ = io.WriteString(w, "{\"type\":\"started\"}\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			gone <- struct{}{}
		case "pings":
			for range 10 { // 1 s in all, pings every 100 ms
				_, _ = io.WriteString(w, "{\"type\":\"ping\"}\n")
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond)
			}
			_, _ = io.WriteString(w, "{\"type\":\"exit\"}\n")
		}
	}))
	defer box.Close()
	h := newHub(t, testToken, Sandbox{Name: "sb", URL: box.URL})
	c := h.client(t)
	c.login(testToken)
	cl := &http.Client{Transport: &http.Transport{}}
	defer cl.CloseIdleConnections()
	get := func(mode string) (*http.Response, *bufio.Reader) {
		req, _ := http.NewRequest("GET", h.url+"/api/console/sandboxes/sb/api/v2/watch?mode="+mode, nil)
		req.Header.Set("Cookie", CookieName+"="+c.cookie)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, bufio.NewReader(resp.Body)
	}

	resp, br := get("pings")
	all, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil || string(all) != strings.Repeat("{\"type\":\"ping\"}\n", 10)+"{\"type\":\"exit\"}\n" {
		t.Fatalf("a pinging answer: %q %v", all, err)
	}
	// The connection waits longer than proxyWrite, then serves again.
	time.Sleep(2 * proxyWrite)
	if resp, body := c.get("/api/console/session"); resp.StatusCode != 200 {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", h.url+"/api/console/session", nil)
	req.Header.Set("Cookie", CookieName+"="+c.cookie)
	var reused bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
	if resp, err := cl.Do(req); err != nil || resp.StatusCode != 200 || !reused {
		t.Fatalf("the next request on the connection: %v %v (reused %v)", resp, err, reused)
	} else {
		resp.Body.Close()
	}

	resp, br = get("silent")
	defer resp.Body.Close()
	if line, err := br.ReadString('\n'); err != nil || line != "{\"type\":\"started\"}\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	if !readsToEnd(br, 5*time.Second) {
		t.Fatal("a silent answer is not cut")
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the request to the silent sandbox goes on")
	}
}

// A session (an address, when the console is open) holds at most
// MaxStreamsPerSession live streams; the hub's bound on all holds too.
func TestStreamCapPerSession(t *testing.T) {
	for _, tc := range []struct{ token, refused string }{
		{testToken, `{"error":{"code":503,"message":"too many live streams open in this session"}}`},
		{"", `{"error":{"code":503,"message":"too many live streams open from this address"}}`},
	} {
		t.Run("token="+tc.token, func(t *testing.T) {
			h := newHub(t, tc.token)
			c := h.client(t)
			c.login(tc.token)
			var open []*sseReader
			for range MaxStreamsPerSession {
				open = append(open, c.stream("/api/console/calls/stream"))
			}
			if resp, body := c.get("/api/console/calls/stream"); resp.StatusCode != 503 || body != tc.refused {
				t.Fatalf("stream %d: %d %s", MaxStreamsPerSession+1, resp.StatusCode, body)
			}
			// One closed frees its place.
			open[0].resp.Body.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				resp, err := http.DefaultClient.Do(c.getReq("/api/console/calls/stream"))
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode == 200 {
					t.Cleanup(func() { resp.Body.Close() })
					break
				}
				resp.Body.Close()
				if time.Now().After(deadline) {
					t.Fatal("a closed stream's place is not freed")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if tc.token == "" {
				return
			}
			// Other sessions fill the hub's bound; past it, its refusal.
			n := MaxStreamsPerSession
			for n < server.MaxCallSubscribers {
				o := h.client(t)
				o.login(tc.token)
				for range min(MaxStreamsPerSession, server.MaxCallSubscribers-n) {
					o.stream("/api/console/calls/stream")
					n++
				}
			}
			o := h.client(t)
			o.login(tc.token)
			if resp, body := o.get("/api/console/calls/stream"); resp.StatusCode != 503 || body != `{"error":{"code":503,"message":"too many live streams open"}}` {
				t.Fatalf("past the hub's bound: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// getReq is a GET of path carrying c's session.
func (c *client) getReq(path string) *http.Request {
	req, _ := http.NewRequest("GET", c.h.url+path, nil)
	if c.cookie != "" {
		req.Header.Set("Cookie", CookieName+"="+c.cookie)
	}
	return req
}
