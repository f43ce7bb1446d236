package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const portTestToken = "s3cret-pool-token"

// portFakeBox is a sandbox whose ports are servers on the host: port →
// address. A port it does not list dials a closed port (refused).
type portFakeBox struct {
	ports   map[int]string
	closed  string
	touches atomic.Int32
	gone    atomic.Bool
}

func (f *portFakeBox) dialPort(ctx context.Context, port int) (net.Conn, error) {
	addr, ok := f.ports[port]
	if !ok {
		addr = f.closed
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (f *portFakeBox) touch(context.Context) error {
	if f.gone.Load() {
		return errors.New("sandbox ended")
	}
	f.touches.Add(1)
	return nil
}

// portSeen is what the app behind a port saw of a request.
type portSeen struct {
	Method, Path, RawPath, Query, Host string
	Header                             http.Header
}

// portApp is the app a sandbox's port serves: it echoes what it saw
// (as JSON), echoes WebSocket messages on /ws, redirects on /redirect and
// never answers on /hang until the test ends.
func portApp(t *testing.T) *httptest.Server {
	t.Helper()
	hang := make(chan struct{})
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ws":
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				mt, b, err := c.ReadMessage()
				if err != nil {
					return
				}
				if c.WriteMessage(mt, b) != nil {
					return
				}
			}
		case "/redirect":
			http.Redirect(w, r, "/login", http.StatusFound)
		case "/hang":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		default:
			_ = json.NewEncoder(w).Encode(portSeen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, r.Header})
		}
	}))
	t.Cleanup(func() { close(hang); s.Close() })
	return s
}

// portClosedAddr is an address of 127.0.0.1 where nothing listens.
func portClosedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// portRig is a pool front (the pool's router in miniature: ServeHost
// first, then the path route) with sandboxes "abc" and "def", both
// serving the app on port 3000 and abc also on 4000.
type portRig struct {
	p     *portProxy
	front *httptest.Server
	boxes map[string]*portFakeBox
	http  *http.Client
	port  string // the front's port
}

func newPortRig(t *testing.T, cfg portProxyConfig) *portRig {
	t.Helper()
	app := portApp(t).Listener.Addr().String()
	closed := portClosedAddr(t)
	g := &portRig{boxes: map[string]*portFakeBox{
		"abc": {ports: map[int]string{3000: app, 4000: app}, closed: closed},
		"def": {ports: map[int]string{3000: app}, closed: closed},
	}}
	cfg.Lookup = func(id string) (portTarget, bool) {
		b, ok := g.boxes[id]
		return b, ok
	}
	g.p = newPortProxy(cfg)
	t.Cleanup(g.p.close)
	mux := http.NewServeMux()
	mux.HandleFunc("/sandboxes/{id}/ports/{port}/{rest...}", g.p.ServeRoute)
	g.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.p.ServeHost(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(g.front.Close)
	_, g.port, _ = net.SplitHostPort(g.front.Listener.Addr().String())
	g.http = &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
	t.Cleanup(g.http.CloseIdleConnections)
	return g
}

// portReq is one request to the front: host "" is the path form (the
// front's own host), else the Host header to send.
type portReq struct {
	method, host, target string
	header               http.Header
	body                 string
}

func (g *portRig) do(t *testing.T, q portReq) *http.Response {
	t.Helper()
	if q.method == "" {
		q.method = http.MethodGet
	}
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r, err := http.NewRequest(q.method, g.front.URL+q.target, body)
	if err != nil {
		t.Fatal(err)
	}
	if q.host != "" {
		r.Host = q.host
	}
	for k, v := range q.header {
		r.Header[k] = v
	}
	resp, err := g.http.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// portSeenBy decodes what the app saw, failing unless the answer is 200.
func portSeenBy(t *testing.T, resp *http.Response) portSeen {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, b)
	}
	var s portSeen
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("not the app's answer: %v: %s", err, b)
	}
	return s
}

// portPoolError decodes the pool's own error body, checking its status.
func portPoolError(t *testing.T, resp *http.Response, status int) string {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json: %s", ct, b)
	}
	var e ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != status || e.Error.Message == "" {
		t.Fatalf("not the pool's error body (%v): %s", err, b)
	}
	return e.Error.Message
}

func portHdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestPortProxyForms(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	hostForm := "3000-abc.localhost:" + g.port
	for _, tc := range []struct {
		name                       string
		q                          portReq
		path, rawPath, query, host string
		prefix, fwdHost            string
	}{
		{name: "path", q: portReq{target: "/sandboxes/abc/ports/3000/a/b?x=1&y=%20z"},
			path: "/a/b", query: "x=1&y=%20z", host: g.front.Listener.Addr().String(),
			prefix: "/sandboxes/abc/ports/3000", fwdHost: g.front.Listener.Addr().String()},
		{name: "path root", q: portReq{target: "/sandboxes/abc/ports/3000/"},
			path: "/", host: g.front.Listener.Addr().String(),
			prefix: "/sandboxes/abc/ports/3000", fwdHost: g.front.Listener.Addr().String()},
		{name: "path escaped", q: portReq{target: "/sandboxes/abc/ports/3000/a%2Fb/c"},
			path: "/a/b/c", rawPath: "/a%2Fb/c", host: g.front.Listener.Addr().String(),
			prefix: "/sandboxes/abc/ports/3000", fwdHost: g.front.Listener.Addr().String()},
		{name: "host", q: portReq{host: hostForm, target: "/a/b?x=1"},
			path: "/a/b", query: "x=1", host: hostForm, fwdHost: hostForm},
		{name: "host upper case", q: portReq{host: "3000-ABC.LocalHost:" + g.port, target: "/"},
			path: "/", host: "3000-ABC.LocalHost:" + g.port, fwdHost: "3000-ABC.LocalHost:" + g.port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.header = portHdr("X-Api-Key", portTestToken, "X-Forwarded-Host", "evil.example", "X-Forwarded-Prefix", "/evil")
			s := portSeenBy(t, g.do(t, tc.q))
			if s.Path != tc.path || s.RawPath != tc.rawPath || s.Query != tc.query || s.Host != tc.host {
				t.Errorf("app saw path %q raw %q query %q host %q; want %q %q %q %q", s.Path, s.RawPath, s.Query, s.Host, tc.path, tc.rawPath, tc.query, tc.host)
			}
			if got := s.Header.Get("X-Forwarded-Prefix"); got != tc.prefix {
				t.Errorf("X-Forwarded-Prefix %q, want %q", got, tc.prefix)
			}
			if got := s.Header.Get("X-Forwarded-Host"); got != tc.fwdHost {
				t.Errorf("X-Forwarded-Host %q, want %q", got, tc.fwdHost)
			}
			if got := s.Header.Get("X-Forwarded-Proto"); got != "http" {
				t.Errorf("X-Forwarded-Proto %q, want http", got)
			}
			if got := s.Header.Get("X-Forwarded-For"); got != "127.0.0.1" {
				t.Errorf("X-Forwarded-For %q, want 127.0.0.1", got)
			}
			if s.Header.Get("X-Api-Key") != "" {
				t.Errorf("the pool's x-api-key reached the app")
			}
		})
	}
}

func TestPortProxyCredentialsStripped(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	cookie := g.p.cookieValue("abc", 3000)
	for _, tc := range []struct {
		name   string
		q      portReq
		query  string
		header http.Header // what the app must see (others must be absent)
		absent []string
	}{
		{name: "bearer", q: portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("Authorization", "Bearer "+portTestToken)},
			absent: []string{"Authorization"}},
		{name: "bearer any case", q: portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("Authorization", "bEaReR "+portTestToken)},
			absent: []string{"Authorization"}},
		{name: "app's own authorization kept", q: portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("X-Api-Key", portTestToken, "Authorization", "Bearer app-token")},
			header: portHdr("Authorization", "Bearer app-token"), absent: []string{"X-Api-Key"}},
		{name: "app's own x-api-key kept", q: portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("Authorization", "Bearer "+portTestToken, "X-Api-Key", "app-key")},
			header: portHdr("X-Api-Key", "app-key"), absent: []string{"Authorization"}},
		{name: "cookie", q: portReq{host: "3000-abc.localhost:" + g.port, target: "/", header: portHdr("Cookie", "app=1; "+portCookie+"="+cookie+"; other=2")},
			header: portHdr("Cookie", "app=1; other=2")},
		{name: "cookie alone", q: portReq{host: "3000-abc.localhost:" + g.port, target: "/", header: portHdr("Cookie", portCookie+"="+cookie)},
			absent: []string{"Cookie"}},
		{name: "query token on a POST", q: portReq{method: "POST", host: "3000-abc.localhost:" + g.port, target: "/?a=1&token=" + portTestToken + "&b=%2F"},
			query: "a=1&b=%2F"},
		{name: "query token escaped", q: portReq{method: "POST", host: "3000-abc.localhost:" + g.port, target: "/?%74oken=" + url.QueryEscape(portTestToken)}},
		{name: "app's own token param kept", q: portReq{target: "/sandboxes/abc/ports/3000/?token=app-reset-123", header: portHdr("X-Api-Key", portTestToken)},
			query: "token=app-reset-123", absent: []string{"X-Api-Key"}},
		{name: "host form", q: portReq{host: "3000-abc.localhost:" + g.port, target: "/?q=1", header: portHdr("Cookie", portCookie+"="+cookie+"; app=1")},
			query: "q=1", header: portHdr("Cookie", "app=1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := portSeenBy(t, g.do(t, tc.q))
			if s.Query != tc.query {
				t.Errorf("app saw query %q, want %q", s.Query, tc.query)
			}
			for k := range tc.header {
				if got, want := s.Header.Values(k), tc.header.Values(k); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("app saw %s %q, want %q", k, got, want)
				}
			}
			for _, k := range tc.absent {
				if v := s.Header.Values(k); len(v) > 0 {
					t.Errorf("app saw %s %q", k, v)
				}
			}
			for k, vs := range s.Header {
				for _, v := range vs {
					if strings.Contains(v, portTestToken) || strings.Contains(v, cookie) {
						t.Errorf("the pool's credential reached the app in %s: %q", k, v)
					}
				}
			}
			if strings.Contains(s.Query, portTestToken) || strings.Contains(s.Query, url.QueryEscape(portTestToken)) {
				t.Errorf("the pool's token reached the app in the query %q", s.Query)
			}
		})
	}
}

func TestPortProxyTokenCookie(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	for _, tc := range []struct {
		name, host, target, location, path string
		// others are (host, target) pairs the cookie must not open: the
		// other ports, and the other sandboxes. (The two forms of one
		// port share the cookie's value; a browser keeps each on its
		// own host.)
		others [][2]string
		ok     [2]string // (host, target) the cookie opens
	}{
		{name: "host form", host: "3000-abc.localhost:" + g.port, target: "/app/?x=1&token=" + portTestToken + "&y=2",
			location: "/app/?x=1&y=2", path: "/",
			ok: [2]string{"3000-abc.localhost:" + g.port, "/static/main.js"},
			others: [][2]string{
				{"4000-abc.localhost:" + g.port, "/"},
				{"3000-def.localhost:" + g.port, "/"},
			}},
		{name: "host form, a path that reads as another host", host: "3000-abc.localhost:" + g.port, target: "//evil.example/?token=" + portTestToken,
			location: "/evil.example/", path: "/",
			ok: [2]string{"3000-abc.localhost:" + g.port, "/"},
			others: [][2]string{
				{"4000-abc.localhost:" + g.port, "/"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do(t, portReq{host: tc.host, target: tc.target})
			if resp.StatusCode != http.StatusFound {
				t.Fatalf("status %d, want 302", resp.StatusCode)
			}
			if loc := resp.Header.Get("Location"); loc != tc.location {
				t.Errorf("Location %q, want %q", loc, tc.location)
			}
			cs := resp.Cookies()
			if len(cs) != 1 {
				t.Fatalf("cookies %v, want one", cs)
			}
			c := cs[0]
			if c.Name != portCookie || c.Value == "" || strings.Contains(c.Value, portTestToken) {
				t.Errorf("cookie %s=%s: want %s, not holding the token", c.Name, c.Value, portCookie)
			}
			if c.Domain != "" || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != tc.path || c.Secure {
				t.Errorf("cookie %q: want host-only, HttpOnly, SameSite=Lax, Path=%s", resp.Header.Get("Set-Cookie"), tc.path)
			}
			jar := portHdr("Cookie", c.Name+"="+c.Value)
			portSeenBy(t, g.do(t, portReq{host: tc.ok[0], target: tc.ok[1], header: jar}))
			for _, o := range tc.others {
				portPoolError(t, g.do(t, portReq{host: o[0], target: o[1], header: jar}), http.StatusUnauthorized)
			}
		})
	}
}

func TestPortProxyRefusals(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	key := portHdr("X-Api-Key", portTestToken)
	cookie := portCookie + "=" + g.p.cookieValue("abc", 3000)
	host := "3000-abc.localhost:" + g.port
	for _, tc := range []struct {
		name   string
		q      portReq
		status int
		msg    string // a part of the message
	}{
		{"no credentials", portReq{target: "/sandboxes/abc/ports/3000/"}, 401, "token is required"},
		{"no credentials host", portReq{host: host, target: "/"}, 401, "token is required"},
		{"wrong token", portReq{target: "/sandboxes/abc/ports/3000/?token=nope"}, 401, "wrong token"},
		// The path form shares the pool's origin with every sandbox's
		// pages: no token in its URL, no cookie.
		{"path form, ?token=", portReq{target: "/sandboxes/abc/ports/3000/?token=" + portTestToken}, 401, "takes the pool's token in a header"},
		{"path form, cookie", portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("Cookie", cookie)}, 401, "token is required"},
		{"wrong key", portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("X-Api-Key", "nope")}, 401, ""},
		{"token as cookie", portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("Cookie", portCookie+"="+portTestToken)}, 401, ""},
		{"token prefix", portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("X-Api-Key", portTestToken[:5])}, 401, ""},
		{"unknown id", portReq{target: "/sandboxes/zzz/ports/3000/", header: key}, 404, `no sandbox "zzz"`},
		{"unknown id host", portReq{host: "3000-zzz.localhost", target: "/", header: key}, 404, `no sandbox "zzz"`},
		{"refused port", portReq{target: "/sandboxes/abc/ports/5000/", header: key}, 502, `nothing is listening on port 5000 of sandbox "abc"`},
		{"refused port host", portReq{host: "5000-abc.localhost:" + g.port, target: "/", header: key}, 502, "nothing is listening"},
		{"port zero", portReq{target: "/sandboxes/abc/ports/0/", header: key}, 400, "1 to 65535"},
		{"port leading zero", portReq{target: "/sandboxes/abc/ports/03000/", header: key}, 400, ""},
		{"port plus", portReq{target: "/sandboxes/abc/ports/+3000/", header: key}, 400, ""},
		{"port too large", portReq{target: "/sandboxes/abc/ports/65536/", header: key}, 400, ""},
		{"port not a number", portReq{target: "/sandboxes/abc/ports/http/", header: key}, 400, ""},
		{"CONNECT", portReq{method: "CONNECT", host: host, target: "/", header: key}, 405, "CONNECT"},
		{"port with letters", portReq{target: "/sandboxes/abc/ports/3000x/", header: key}, 400, ""},
		{"cross-origin POST with cookie", portReq{method: "POST", host: host, target: "/api", body: "x",
			header: portHdr("Cookie", cookie, "Origin", "http://3000-def.localhost:"+g.port)}, 403, "cross-origin"},
		{"other site POST with cookie", portReq{method: "POST", host: host, target: "/api",
			header: portHdr("Cookie", cookie, "Origin", "https://evil.example")}, 403, ""},
		{"other port POST", portReq{method: "POST", host: host, target: "/api",
			header: portHdr("Cookie", cookie, "Origin", "http://4000-abc.localhost:"+g.port)}, 403, ""},
		{"pool origin POST", portReq{method: "DELETE", host: host, target: "/api",
			header: portHdr("Cookie", cookie, "Origin", "http://127.0.0.1:"+g.port)}, 403, ""},
		{"null origin POST", portReq{method: "PUT", host: host, target: "/api",
			header: portHdr("Cookie", cookie, "Origin", "null")}, 403, ""},
		{"cross-origin path form POST", portReq{method: "POST", target: "/sandboxes/abc/ports/3000/api",
			header: portHdr("X-Api-Key", portTestToken, "Origin", "http://3000-abc.localhost:"+g.port)}, 403, ""},
		// A service worker of a sandbox's page would see every later
		// URL of its scope, ?token= included (the path form's scope can
		// be the pool's whole origin): a browser fetching a worker's
		// script says so, and the proxy does not serve it. (Once, a
		// sandbox's page at /sandboxes/A/ports/8000/ registered one with
		// scope "/" and read the pool's token from a later ?token= URL.)
		{"service worker path form", portReq{target: "/sandboxes/abc/ports/3000/sw.js",
			header: portHdr("Cookie", portCookie+"="+g.p.cookieValue("abc", 3000), "Service-Worker", "script")}, 403, "service worker"},
		{"service worker host form", portReq{host: host, target: "/sw.js",
			header: portHdr("Cookie", cookie, "Service-Worker", "script")}, 403, "service worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := portPoolError(t, g.do(t, tc.q), tc.status)
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q, want it to hold %q", msg, tc.msg)
			}
		})
	}
}

func TestPortProxyAdmits(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	cookie := portCookie + "=" + g.p.cookieValue("abc", 3000)
	host := "3000-abc.localhost:" + g.port
	for _, tc := range []struct {
		name string
		q    portReq
	}{
		{"same-origin POST", portReq{method: "POST", host: host, target: "/api", header: portHdr("Cookie", cookie, "Origin", "http://"+host)}},
		{"same-origin POST https page", portReq{method: "POST", host: host, target: "/api", header: portHdr("Cookie", cookie, "Origin", "https://"+host)}},
		{"POST without Origin", portReq{method: "POST", host: host, target: "/api", header: portHdr("Cookie", cookie)}},
		{"cross-origin GET", portReq{host: host, target: "/img", header: portHdr("Cookie", cookie, "Origin", "https://evil.example")}},
		{"path form same-origin POST", portReq{method: "POST", target: "/sandboxes/abc/ports/3000/api",
			header: portHdr("X-Api-Key", portTestToken, "Origin", g.front.URL)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := portSeenBy(t, g.do(t, tc.q))
			if s.Method != tc.q.method && tc.q.method != "" {
				t.Errorf("app saw %s, want %s", s.Method, tc.q.method)
			}
		})
	}

	t.Run("no token", func(t *testing.T) {
		g := newPortRig(t, portProxyConfig{})
		s := portSeenBy(t, g.do(t, portReq{target: "/sandboxes/abc/ports/3000/?token=app"}))
		if s.Query != "token=app" {
			t.Errorf("app saw query %q, want token=app", s.Query)
		}
		portPoolError(t, g.do(t, portReq{method: "POST", host: host, target: "/",
			header: portHdr("Origin", "http://evil.example")}), http.StatusForbidden)
	})
}

func TestPortProxyRedirects(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	key := portHdr("X-Api-Key", portTestToken)
	for _, tc := range []struct {
		name     string
		q        portReq
		status   int
		location string
	}{
		{"not followed, path form", portReq{target: "/sandboxes/abc/ports/3000/redirect", header: key}, 302, "/sandboxes/abc/ports/3000/login"},
		{"not followed, host form", portReq{host: "3000-abc.localhost:" + g.port, target: "/redirect", header: key}, 302, "/login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do(t, tc.q)
			if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, resp.Header.Get("Location"), tc.status, tc.location)
			}
		})
	}
}

// ServePath called by a router other than ServeRoute: the bare port
// root is redirected to its slash, and a port the router parsed more
// leniently than parsePortNumber is refused.
func TestPortProxyServePath(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	for _, tc := range []struct {
		target   string
		port     int
		status   int
		location string
	}{
		{"/sandboxes/abc/ports/3000?x=1", 3000, http.StatusPermanentRedirect, "/sandboxes/abc/ports/3000/?x=1"},
		{"/sandboxes/abc/ports/03000/", 3000, http.StatusBadRequest, ""},
		{"/sandboxes/abc/ports/+3000/", 3000, http.StatusBadRequest, ""},
		{"/sandboxes/abc/ports/3000x/", 3000, http.StatusBadRequest, ""},
		{"/sandboxes/abc/ports/70000/", 70000, http.StatusBadRequest, ""},
		{"/sandboxes/abc/ports/0/", 0, http.StatusBadRequest, ""},
		{"/sandboxes/abc/ports/3000/", 3000, http.StatusUnauthorized, ""},
	} {
		w := httptest.NewRecorder()
		g.p.ServePath(w, httptest.NewRequest("GET", tc.target, nil), "abc", tc.port, "")
		if w.Code != tc.status || w.Header().Get("Location") != tc.location {
			t.Errorf("%s: %d %q, want %d %q", tc.target, w.Code, w.Header().Get("Location"), tc.status, tc.location)
		}
	}
}

func TestPortProxyWebSocket(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	hostForm := "3000-abc.localhost:" + g.port
	ws := "ws://" + g.front.Listener.Addr().String()
	for _, tc := range []struct {
		name, url string
		header    http.Header
		status    int // of a refused handshake
	}{
		{name: "path form, key", url: ws + "/sandboxes/abc/ports/3000/ws", header: portHdr("X-Api-Key", portTestToken)},
		{name: "path form, ?token=", url: ws + "/sandboxes/abc/ports/3000/ws?token=" + portTestToken,
			header: portHdr("Origin", g.front.URL), status: 401},
		{name: "host form, cookie", url: ws + "/ws",
			header: portHdr("Host", hostForm, "Origin", "http://"+hostForm, "Cookie", portCookie+"="+g.p.cookieValue("abc", 3000))},
		{name: "host form, ?token=", url: ws + "/ws?token=" + portTestToken, header: portHdr("Host", hostForm)},
		{name: "host form, other origin", url: ws + "/ws",
			header: portHdr("Host", hostForm, "Origin", "http://evil.example", "Cookie", portCookie+"="+g.p.cookieValue("abc", 3000)), status: 403},
		{name: "host form, no credentials", url: ws + "/ws", header: portHdr("Host", hostForm), status: 401},
		{name: "refused port", url: ws + "/sandboxes/abc/ports/5000/ws", header: portHdr("X-Api-Key", portTestToken), status: 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, resp, err := websocket.DefaultDialer.DialContext(ctx, tc.url, tc.header)
			if tc.status != 0 {
				if err == nil {
					c.Close()
					t.Fatal("handshake succeeded, want it refused")
				}
				if resp == nil || resp.StatusCode != tc.status {
					t.Fatalf("handshake %v (%v), want %d", resp, err, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, resp)
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for _, m := range []string{"hello", strings.Repeat("x", 100_000)} {
				if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
					t.Fatal(err)
				}
				_, b, err := c.ReadMessage()
				if err != nil || string(b) != m {
					t.Fatalf("echo %d bytes, %v; want %d", len(b), err, len(m))
				}
			}
		})
	}
}

func TestPortProxyTouch(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	key := portHdr("X-Api-Key", portTestToken)
	box := g.boxes["abc"]
	for i := range 3 {
		portSeenBy(t, g.do(t, portReq{target: "/sandboxes/abc/ports/3000/", header: key}))
		if got := box.touches.Load(); got != int32(i+1) {
			t.Fatalf("after %d requests touch was called %d times", i+1, got)
		}
	}
	portSeenBy(t, g.do(t, portReq{host: "4000-abc.localhost", target: "/", header: key}))
	if got := box.touches.Load(); got != 4 {
		t.Fatalf("touch called %d times after 4 requests", got)
	}
	// Refused credentials do not count as activity.
	portPoolError(t, g.do(t, portReq{target: "/sandboxes/abc/ports/3000/"}), http.StatusUnauthorized)
	if got := box.touches.Load(); got != 4 {
		t.Fatalf("an unauthorized request touched the sandbox (%d)", got)
	}
	box.gone.Store(true)
	portPoolError(t, g.do(t, portReq{target: "/sandboxes/abc/ports/3000/", header: key}), http.StatusNotFound)
}

func TestPortProxyHeaderWait(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken, HeaderWait: 50 * time.Millisecond})
	msg := portPoolError(t, g.do(t, portReq{target: "/sandboxes/abc/ports/3000/hang", header: portHdr("X-Api-Key", portTestToken)}), http.StatusGatewayTimeout)
	if !strings.Contains(msg, "did not answer in time") {
		t.Errorf("message %q", msg)
	}
}

func TestPortProxyForget(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	portSeenBy(t, g.do(t, portReq{target: "/sandboxes/abc/ports/3000/", header: portHdr("X-Api-Key", portTestToken)}))
	portSeenBy(t, g.do(t, portReq{target: "/sandboxes/def/ports/3000/", header: portHdr("X-Api-Key", portTestToken)}))
	g.p.mu.Lock()
	n := len(g.p.boxes)
	g.p.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d transports, want one per sandbox (2)", n)
	}
	g.p.forget("abc")
	g.p.mu.Lock()
	_, kept := g.p.boxes["abc"]
	n = len(g.p.boxes)
	g.p.mu.Unlock()
	if kept || n != 1 {
		t.Fatalf("forget left abc's transport (%d left)", n)
	}
}

func TestPortOfAddr(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:80", "localhost:80", "127.0.0.1:0", "127.0.0.1:+80", "[::1]:80", "127.0.0.1"} {
		if _, err := portOfAddr(addr); err == nil {
			t.Errorf("portOfAddr(%q) dials", addr)
		}
	}
	if p, err := portOfAddr("127.0.0.1:3000"); err != nil || p != 3000 {
		t.Errorf("portOfAddr(127.0.0.1:3000) = %d, %v", p, err)
	}
}

func TestParsePortNumber(t *testing.T) {
	for s, want := range map[string]int{"1": 1, "80": 80, "3000": 3000, "65535": 65535} {
		if got, ok := parsePortNumber(s); !ok || got != want {
			t.Errorf("parsePortNumber(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "0", "00", "080", "+80", "-1", "65536", "99999", "100000", " 80", "80 ", "8_0", "0x50", "٣"} {
		if got, ok := parsePortNumber(s); ok {
			t.Errorf("parsePortNumber(%q) = %d, want refused", s, got)
		}
	}
}

func TestParsePortHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		id   string
		port int
		ok   bool
	}{
		{"3000-abc.localhost:18100", "abc", 3000, true},
		{"3000-abc.localhost", "abc", 3000, true},
		{"3000-AbC9.LOCALHOST:1", "abc9", 3000, true},
		{"65535-a.localhost", "a", 65535, true},
		{"1-0.localhost", "0", 1, true},
		{"0-abc.localhost", "", 0, false},
		{"03000-abc.localhost", "", 0, false},
		{"+3000-abc.localhost", "", 0, false},
		{"65536-abc.localhost", "", 0, false},
		{"3000-.localhost", "", 0, false},
		{"-abc.localhost", "", 0, false},
		{"3000abc.localhost", "", 0, false},
		{"3000-ab-c.localhost", "", 0, false},
		{"3000-ab_c.localhost", "", 0, false},
		{"3000-abc.localhost.", "", 0, false},
		{"3000-abc.localhost:", "", 0, false},
		{"3000-abc.localhost:x", "", 0, false},
		{"3000-abc.localhost:123456", "", 0, false},
		{"3000-abc.evil.localhost", "", 0, false},
		{"3000-abc.localhost.evil.example", "", 0, false},
		{"x.3000-abc.localhost", "", 0, false},
		{"localhost", "", 0, false},
		{".localhost", "", 0, false},
		{"127.0.0.1:18100", "", 0, false},
		{"[::1]:18100", "", 0, false},
		{"", "", 0, false},
		{"3000-" + strings.Repeat("a", 58) + ".localhost", strings.Repeat("a", 58), 3000, true},
		{"3000-" + strings.Repeat("a", 59) + ".localhost", "", 0, false},
	} {
		id, port, ok := parsePortHost(tc.host)
		if id != tc.id || port != tc.port || ok != tc.ok {
			t.Errorf("parsePortHost(%q) = %q, %d, %v; want %q, %d, %v", tc.host, id, port, ok, tc.id, tc.port, tc.ok)
		}
	}
}

// FuzzParsePortHost: any input is refused or gives an id of [a-z0-9]+
// and a port in range that the canonical host form parses back to.
func FuzzParsePortHost(f *testing.F) {
	for _, s := range []string{"3000-abc.localhost:18100", "3000-ABC.LocalHost", "0-a.localhost", "65536-a.localhost", "1-a.localhost:", "[::1]:80", "a-1.localhost", "3000-abc.localhost.:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		id, port, ok := parsePortHost(host)
		if !ok {
			if id != "" || port != 0 {
				t.Fatalf("refused %q but gave %q, %d", host, id, port)
			}
			return
		}
		if port < 1 || port > 65535 || id == "" {
			t.Fatalf("%q gave %q, %d", host, id, port)
		}
		for _, c := range []byte(id) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
				t.Fatalf("%q gave id %q", host, id)
			}
		}
		canon := strconv.Itoa(port) + "-" + id + ".localhost"
		if !strings.EqualFold(strings.SplitN(host, ":", 2)[0], canon) {
			t.Fatalf("%q is not the host form of %q", host, canon)
		}
		if id2, port2, ok2 := parsePortHost(canon + ":80"); !ok2 || id2 != id || port2 != port {
			t.Fatalf("%q does not parse back", canon)
		}
	})
}

// Requests to several sandboxes at once, while one of them is forgotten
// again and again (its transport dropped and made anew): every request
// is answered by the app (run under -race).
func TestPortProxyConcurrent(t *testing.T) {
	g := newPortRig(t, portProxyConfig{Token: portTestToken})
	targets := []portReq{
		{target: "/sandboxes/abc/ports/3000/a"},
		{target: "/sandboxes/def/ports/3000/b"},
		{host: "4000-abc.localhost:" + g.port, target: "/c"},
	}
	stop := make(chan struct{})
	forgot := make(chan struct{})
	go func() {
		defer close(forgot)
		for {
			select {
			case <-stop:
				return
			default:
				g.p.forget("abc")
				runtime.Gosched()
			}
		}
	}()
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 20 {
				q := targets[(w+i)%len(targets)]
				r, _ := http.NewRequest(http.MethodGet, g.front.URL+q.target, nil)
				if q.host != "" {
					r.Host = q.host
				}
				r.Header.Set("X-Api-Key", portTestToken)
				resp, err := g.http.Do(r)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("%s %s: status %d", q.host, q.target, resp.StatusCode)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	<-forgot
}
