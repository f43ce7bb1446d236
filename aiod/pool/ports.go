package pool

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// The port proxy: ANY /sandboxes/{id}/ports/{port}/... (the path form)
// and every request whose Host is {port}-{id}.localhost[:any] (the host
// form) reach 127.0.0.1:{port} inside that sandbox's network namespace,
// HTTP and WebSocket alike, through the sandbox's own dialer
// (portTarget.dialPort): nothing outside the sandbox is ever dialled.
//
// # Credentials
//
// With a pool token, a request must carry one of: the token in x-api-key
// or Authorization: Bearer; the token in ?token=; or the port cookie
// (portCookie). A right ?token= on a GET or HEAD that is not a WebSocket
// upgrade is answered 302 to the same URL without it, with Set-Cookie: a
// browser opens http://3000-<id>.localhost:18100/?token=T once and then
// loads the app, absolute paths included, on the cookie. Elsewhere (a
// POST, a WebSocket handshake, which cannot follow a redirect) a right
// ?token= admits that request alone.
//
// The cookie's value is not the token: it is HMAC-SHA256 keyed by the
// token over the scope "id:port", so a cookie that leaks (the app's own
// logs, a shared HAR file) opens that one port of that one sandbox, and
// a cookie of one port is worth nothing at another. It is host-only (no
// Domain), HttpOnly (the app's scripts never read it), SameSite=Lax, and
// Path=/ on the port's host, Path=/sandboxes/{id}/ports/{port}/ on the
// pool's host. Every comparison is in constant time, of digests for the
// token so its length does not show either.
//
// Nothing of the pool's credentials reaches the sandbox: the token's
// ?token= parameters, an x-api-key or Authorization header holding the
// token, and the port cookie are removed before the request is
// forwarded. A ?token=, x-api-key or Authorization that is not the pool's
// is the app's own and goes through untouched.
//
// # Origin
//
// Each port host is an origin, and a site, of its own
// (3000-a.localhost:18100 is not 3001-a.localhost:18100, nor
// 3000-b.localhost:18100, nor 127.0.0.1:18100), so SameSite=Lax already
// keeps the cookie off every cross-site request but a top-level GET
// navigation. Above that, a request that may change state (any method
// but GET, HEAD and OPTIONS, and every WebSocket handshake, which
// browsers send cross-origin without asking) must, when it carries an
// Origin, come from the origin of the Host it was sent to (the rule of
// internal/origin: host and port equal, scheme ignored); any other origin,
// "null" included, is refused 403 before credentials are looked at. So
// the app's own page posts and opens its WebSockets freely; a page of
// another sandbox's port, of the pool, or of any site cannot, even when
// the pool has no token. The price: an app's cross-origin CORS for
// unsafe methods does not pass through the proxy (its frontend on one
// port calling its API on another port should go through the dev
// server's own proxy, as Vite and Next offer).
//
// The path form has no such walls in a browser: every sandbox's path-form
// pages share the pool's origin. It is for API clients and tools; a
// browser should use the host form, which is what the cookie's Path and
// the Origin rule above protect.
//
// # Bounds
//
// One http.Transport per sandbox keeps connections alive (bounded idle
// connections, closed after portIdleConn), so a proxied request costs
// about one loopback hop more than a direct one. The answer's headers must
// start within HeaderWait and fit in portMaxHeader bytes; redirects are
// passed to the client, never followed; a dial gives up after portDial.
// The inbound request's header size is bounded by the pool's http.Server
// (MaxHeaderBytes).

// portTarget is what the proxy needs of one sandbox; the pool's sandbox
// type implements it.
type portTarget interface {
	// dialPort opens a TCP connection to 127.0.0.1:port inside the
	// sandbox's network namespace. A refused connection must wrap
	// syscall.ECONNREFUSED (with %w) so the client hears that nothing
	// listens there.
	dialPort(ctx context.Context, port int) (net.Conn, error)
	// touch marks activity (idle timeout) and resumes a paused sandbox
	// first; an error means the sandbox is gone.
	touch(ctx context.Context) error
}

// portProxyConfig is what a [portProxy] is built from.
type portProxyConfig struct {
	// Token is the pool's token; "" admits every request.
	Token string
	// Lookup finds a running (or paused) sandbox by id. It must return
	// the same target for an id for the sandbox's whole life; call
	// portProxy.forget when it ends.
	Lookup func(id string) (portTarget, bool)
	// Logger receives the proxy's failures at debug level (nil: discard).
	Logger *slog.Logger
	// HeaderWait bounds the wait for the answer's headers, a WebSocket's
	// 101 included (0: portHeaderWait). A dev server compiling a page on
	// its first request may take a while.
	HeaderWait time.Duration
}

// Proxy bounds.
const (
	// portHeaderWait is the default HeaderWait.
	portHeaderWait = 2 * time.Minute
	// portDial bounds one dial into the sandbox.
	portDial = 10 * time.Second
	// portIdleConn closes a kept-alive connection unused this long.
	portIdleConn = 90 * time.Second
	// portIdlePerPort and portIdlePerBox bound the kept-alive connections
	// of one port and of one sandbox.
	portIdlePerPort = 16
	portIdlePerBox  = 64
	// portMaxHeader bounds the answer's header section.
	portMaxHeader = 1 << 20
	// portCookie is the name of the port cookie.
	portCookie = "a2c_port"
	// portHostSuffix ends every host-form Host.
	portHostSuffix = ".localhost"
)

// portProxy is the reverse proxy to sandboxes' ports. It is safe for
// concurrent use.
type portProxy struct {
	cfg      portProxyConfig
	tokenSum [sha256.Size]byte
	rp       *httputil.ReverseProxy
	log      *slog.Logger

	mu    sync.Mutex
	boxes map[string]*http.Transport // by sandbox id
}

// newPortProxy builds the proxy of cfg.
func newPortProxy(cfg portProxyConfig) *portProxy {
	if cfg.HeaderWait <= 0 {
		cfg.HeaderWait = portHeaderWait
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &portProxy{cfg: cfg, tokenSum: sha256.Sum256([]byte(cfg.Token)), log: log, boxes: map[string]*http.Transport{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      portRoundTripper{},
		BufferPool:     portBuffers{},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.proxyError,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p
}

// forget drops the transport of sandbox id and closes its idle
// connections; the pool calls it when the sandbox ends. Requests in
// flight end with the sandbox's processes.
func (p *portProxy) forget(id string) {
	p.mu.Lock()
	tr := p.boxes[id]
	delete(p.boxes, id)
	p.mu.Unlock()
	if tr != nil {
		tr.CloseIdleConnections()
	}
}

// close drops every sandbox's transport (the pool is closing).
func (p *portProxy) close() {
	p.mu.Lock()
	boxes := p.boxes
	p.boxes = map[string]*http.Transport{}
	p.mu.Unlock()
	for _, tr := range boxes {
		tr.CloseIdleConnections()
	}
}

// transport is sandbox id's transport, made on its first request. Every
// connection it opens is t.dialPort to the port the request names.
func (p *portProxy) transport(id string, t portTarget) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr := p.boxes[id]; tr != nil {
		return tr
	}
	tr := &http.Transport{
		Proxy: nil, // never HTTP_PROXY: the sandbox's loopback only
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			// addr is what rewrite set: 127.0.0.1:{port}.
			port, err := portOfAddr(addr)
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(ctx, portDial)
			defer cancel()
			return t.dialPort(ctx, port)
		},
		MaxIdleConns:           portIdlePerBox,
		MaxIdleConnsPerHost:    portIdlePerPort,
		IdleConnTimeout:        portIdleConn,
		ResponseHeaderTimeout:  p.cfg.HeaderWait,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: portMaxHeader,
		// The client's Accept-Encoding goes through as it is; the
		// transport neither adds its own nor decompresses.
		DisableCompression: true,
	}
	p.boxes[id] = tr
	return tr
}

// portOfAddr is the port of 127.0.0.1:{port}, the only address the
// transports dial.
func portOfAddr(addr string) (int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		return 0, fmt.Errorf("port proxy: refusing to dial %q", addr)
	}
	port, ok := parsePortNumber(ps)
	if !ok {
		return 0, fmt.Errorf("port proxy: refusing to dial %q", addr)
	}
	return port, nil
}

// portCall is one proxied request, in its context for rewrite, the round
// tripper and the error handler.
type portCall struct {
	id     string
	port   int
	prefix string // /sandboxes/{id}/ports/{port} (path form), or ""
	// path and rawPath are the request's path in the sandbox; query its
	// query without the pool's token.
	path, rawPath, query string
	tr                   *http.Transport
}

type portCallKey struct{}

// ServeRoute serves the pattern /sandboxes/{id}/ports/{port}/{rest...}
// from its path values: a port that is not 1..65535 in plain digits is
// 400.
func (p *portProxy) ServeRoute(w http.ResponseWriter, r *http.Request) {
	port, ok := parsePortNumber(r.PathValue("port"))
	if !ok {
		portError(w, http.StatusBadRequest, "port must be a number from 1 to 65535")
		return
	}
	p.ServePath(w, r, r.PathValue("id"), port, r.PathValue("rest"))
}

// ServePath serves /sandboxes/{id}/ports/{port}/{rest...}: r's path must
// begin with exactly that prefix (the port in plain digits; else 400).
// rest is not read: the path forwarded is r's escaped path without the
// prefix, so percent-encoding reaches the app as the client sent it. The
// port's root without its slash is redirected (308) to the slash, so
// relative links of the app's pages resolve under the prefix.
func (p *portProxy) ServePath(w http.ResponseWriter, r *http.Request, id string, port int, rest string) {
	ps := strconv.Itoa(port)
	prefix := "/sandboxes/" + id + "/ports/" + ps
	escaped := r.URL.EscapedPath()
	if port < 1 || port > 65535 {
		portError(w, http.StatusBadRequest, "port must be a number from 1 to 65535")
		return
	}
	if !strings.HasPrefix(escaped, prefix) {
		// A port not in plain digits (03000, +3000) that a lenient
		// parser let through, or a prefix the client percent-encoded.
		portError(w, http.StatusBadRequest, "the path must begin with /sandboxes/{id}/ports/{port} (port: a number from 1 to 65535)")
		return
	}
	sub := escaped[len(prefix):]
	if sub == "" {
		loc := prefix + "/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusPermanentRedirect)
		return
	}
	if sub[0] != '/' {
		portError(w, http.StatusBadRequest, "the path must begin with /sandboxes/{id}/ports/{port} (port: a number from 1 to 65535)")
		return
	}
	path, err := url.PathUnescape(sub)
	if err != nil {
		portError(w, http.StatusBadRequest, "bad path encoding")
		return
	}
	c := &portCall{id: id, port: port, prefix: prefix, path: path}
	if sub != path {
		c.rawPath = sub
	}
	p.serve(w, r, c, prefix+"/")
}

// ServeHost serves r and reports true when its Host is
// {port}-{id}.localhost[:any] (see parsePortHost); else it leaves r and
// w untouched and reports false. The pool's router calls it before its
// own routes and before its Host rule (internal/origin allows localhost,
// not its subdomains): a port host is served by the sandbox's port only,
// so no page of a sandbox is ever same-origin with the pool's API.
func (p *portProxy) ServeHost(w http.ResponseWriter, r *http.Request) bool {
	id, port, ok := parsePortHost(r.Host)
	if !ok {
		return false
	}
	p.serve(w, r, &portCall{id: id, port: port, path: r.URL.Path, rawPath: r.URL.RawPath}, "/")
	return true
}

// serve is both forms once the call is known: Origin, credentials, the
// sandbox, the ?token= redirect, activity, then the proxy. cookiePath is
// the port cookie's Path.
func (p *portProxy) serve(w http.ResponseWriter, r *http.Request, c *portCall, cookiePath string) {
	if r.Method == http.MethodConnect {
		// A tunnel is not a request to the app; the app's port is
		// reached through this proxy only.
		portError(w, http.StatusMethodNotAllowed, "CONNECT is not proxied to a sandbox's port")
		return
	}
	if r.Header.Get("Service-Worker") == "script" {
		// A browser fetching a service worker's script says so. Such a
		// worker, registered by a sandbox's page, would see every later
		// URL of its scope before the proxy does, the pool's ?token=
		// included, and the path form's scope can be the pool's whole
		// origin (its script may answer Service-Worker-Allowed: /).
		// So no sandbox's port serves one.
		portError(w, http.StatusForbidden, "a service worker is not served from a sandbox's port (it would see the pool's token in later URLs)")
		return
	}
	if !portSafe(r) && !portSameOrigin(r) {
		portError(w, http.StatusForbidden, "Origin "+strconv.Quote(r.Header.Get("Origin"))+" may not send this request to a sandbox's port (cross-origin request)")
		return
	}
	query, hadToken, tokenOK := p.splitToken(r.URL.RawQuery)
	c.query = query
	hostForm := cookiePath == "/"
	if !hostForm && tokenOK {
		// The path form shares the pool's origin with every sandbox's
		// pages: a token in its URL would be read by the page it opens,
		// and a cookie of it would be sent by any sandbox's page to any
		// other's port. It is for API clients, with the token in a
		// header; a browser opens the host form.
		portError(w, http.StatusUnauthorized, "the path form takes the pool's token in a header (x-api-key or Authorization: Bearer); in a browser open http://"+
			strconv.Itoa(c.port)+"-"+c.id+".localhost:PORT/?token=... instead")
		return
	}
	if p.cfg.Token != "" && !tokenOK && !p.headerToken(r) && !(hostForm && p.cookieOK(r, c.id, c.port)) {
		msg := "a token is required (x-api-key, Authorization: Bearer, or ?token=)"
		if hadToken {
			msg = "wrong token"
		}
		portError(w, http.StatusUnauthorized, msg)
		return
	}
	t, ok := p.cfg.Lookup(c.id)
	if !ok {
		portError(w, http.StatusNotFound, "no sandbox "+strconv.Quote(c.id))
		return
	}
	if tokenOK && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !portIsUpgrade(r) {
		p.setCookie(w, r, c, cookiePath)
		loc := r.URL.EscapedPath()
		if strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			// "//evil.example/" is a URL of another host to a browser.
			loc = "/" + strings.TrimLeft(loc, "/\\")
		}
		if query != "" {
			loc += "?" + query
		}
		h := w.Header()
		h.Set("Location", loc)
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		w.WriteHeader(http.StatusFound)
		return
	}
	if err := t.touch(r.Context()); err != nil {
		p.log.Debug("port proxy: touch", "sandbox", c.id, "err", err)
		portError(w, http.StatusNotFound, "no sandbox "+strconv.Quote(c.id))
		return
	}
	c.tr = p.transport(c.id, t)
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), portCallKey{}, c)))
}

// rewrite builds the request to the sandbox: its port on 127.0.0.1, the
// path without the prefix, the query without the pool's token, the
// client's Host kept (dev servers build their URLs from it, and accept
// *.localhost and IP addresses as theirs), X-Forwarded-For/Host/Proto
// (and Prefix for the path form) set, the pool's credentials removed.
// The client's own X-Forwarded-* were already removed by ReverseProxy.
func (p *portProxy) rewrite(pr *httputil.ProxyRequest) {
	c := pr.In.Context().Value(portCallKey{}).(*portCall)
	u := pr.Out.URL
	u.Scheme, u.Host = "http", "127.0.0.1:"+strconv.Itoa(c.port)
	u.Path, u.RawPath, u.RawQuery = c.path, c.rawPath, c.query
	pr.Out.Host = pr.In.Host
	pr.SetXForwarded()
	// ReverseProxy removes the client's X-Forwarded-For/Host/Proto, not
	// its -Prefix: an app would build its links under a prefix the
	// client chose.
	pr.Out.Header.Del("X-Forwarded-Prefix")
	if c.prefix != "" {
		pr.Out.Header.Set("X-Forwarded-Prefix", c.prefix)
	}
	p.dropCredentials(pr.Out.Header)
}

// modifyResponse points the path form's root-relative redirects
// (Location: /login) under the prefix, where the client can follow them.
func (p *portProxy) modifyResponse(resp *http.Response) error {
	c, _ := resp.Request.Context().Value(portCallKey{}).(*portCall)
	if c == nil || c.prefix == "" {
		return nil
	}
	if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") && !strings.HasPrefix(loc, "/\\") {
		resp.Header.Set("Location", c.prefix+loc)
	}
	return nil
}

// proxyError answers a request the sandbox's port did not: refused 502,
// slow 504, other failures 502; a client that went away gets nothing.
func (p *portProxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	c := r.Context().Value(portCallKey{}).(*portCall)
	p.log.Debug("port proxy", "sandbox", c.id, "port", c.port, "err", err)
	where := "port " + strconv.Itoa(c.port) + " of sandbox " + strconv.Quote(c.id)
	var ne net.Error
	switch {
	case r.Context().Err() != nil:
		// The client is gone: nobody to answer.
	case errors.Is(err, syscall.ECONNREFUSED):
		portError(w, http.StatusBadGateway, "nothing is listening on "+where)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		portError(w, http.StatusGatewayTimeout, where+" did not answer in time")
	default:
		portError(w, http.StatusBadGateway, where+" did not answer (the connection failed)")
	}
}

// portRoundTripper sends a request through its sandbox's transport
// (portCall.tr): one ReverseProxy serves every sandbox, each keeping its
// own connections.
type portRoundTripper struct{}

func (portRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	return r.Context().Value(portCallKey{}).(*portCall).tr.RoundTrip(r)
}

// portBuffers lends ReverseProxy its copy buffers, so a proxied body does
// not allocate 32 KiB each time.
type portBuffers struct{}

var portBufferPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (portBuffers) Get() []byte  { return *portBufferPool.Get().(*[]byte) }
func (portBuffers) Put(b []byte) { portBufferPool.Put(&b) }

// portSafe reports whether r cannot change state on its own: GET, HEAD
// or OPTIONS, and not a WebSocket handshake.
func portSafe(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return !portIsUpgrade(r)
	}
	return false
}

// portIsUpgrade reports whether r asks to switch protocols (a WebSocket).
func portIsUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && portHeaderHas(r.Header, "Connection", "upgrade")
}

func portHeaderHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// portOrigins is internal/origin's rule with no names of its own: an
// Origin is allowed when it is the origin of the request's Host.
var portOrigins = origin.Loopback()

// portSameOrigin reports whether r carries no Origin or the origin of the
// Host it was sent to.
func portSameOrigin(r *http.Request) bool {
	o, ok := r.Header["Origin"]
	if !ok {
		return true
	}
	return len(o) == 1 && portOrigins.SourceAllowed(r, o[0])
}

// tokenIs reports, in constant time, whether s is the pool's token.
func (p *portProxy) tokenIs(s string) bool {
	if s == "" || p.cfg.Token == "" {
		return false
	}
	h := sha256.Sum256([]byte(s))
	return subtle.ConstantTimeCompare(h[:], p.tokenSum[:]) == 1
}

// portBearer is the credentials of an Authorization: Bearer header, or "".
func portBearer(v string) string {
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return v[7:]
	}
	return ""
}

// headerToken reports whether r carries the pool's token in x-api-key or
// Authorization: Bearer.
func (p *portProxy) headerToken(r *http.Request) bool {
	return p.tokenIs(portBearer(r.Header.Get("Authorization"))) || p.tokenIs(r.Header.Get("X-Api-Key"))
}

// splitToken splits a raw query into what is forwarded, byte for byte,
// and the pool's token: every token parameter whose value is the pool's
// token is removed (another token parameter is the app's own and stays).
// hadToken says a token parameter was there at all, ok that one was the
// pool's.
func (p *portProxy) splitToken(raw string) (rest string, hadToken, ok bool) {
	if raw == "" || p.cfg.Token == "" || !strings.Contains(raw, "oken") && !strings.Contains(raw, "%") {
		return raw, false, false
	}
	var kept []string
	for part := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && n == "token" {
			hadToken = true
			if v, err := url.QueryUnescape(value); err == nil && p.tokenIs(v) {
				ok = true
				continue
			}
		}
		kept = append(kept, part)
	}
	if !ok {
		return raw, hadToken, false
	}
	return strings.Join(kept, "&"), hadToken, true
}

// cookieValue is the port cookie of sandbox id's port: HMAC-SHA256 keyed
// by the pool's token over the scope, so it opens that port alone and
// does not give the token away.
func (p *portProxy) cookieValue(id string, port int) string {
	m := hmac.New(sha256.New, []byte(p.cfg.Token))
	m.Write([]byte("a2c pool port cookie\x00" + id + ":" + strconv.Itoa(port)))
	return hex.EncodeToString(m.Sum(nil))
}

// cookieOK reports whether r carries the port cookie of id:port (any of
// the cookies of that name: another page may have set one beside it).
func (p *portProxy) cookieOK(r *http.Request, id string, port int) bool {
	cs := r.CookiesNamed(portCookie)
	if len(cs) == 0 {
		return false
	}
	want := []byte(p.cookieValue(id, port))
	for _, c := range cs {
		if subtle.ConstantTimeCompare([]byte(c.Value), want) == 1 {
			return true
		}
	}
	return false
}

// setCookie gives the client the port cookie of c, host-only.
func (p *portProxy) setCookie(w http.ResponseWriter, r *http.Request, c *portCall, path string) {
	http.SetCookie(w, &http.Cookie{
		Name:     portCookie,
		Value:    p.cookieValue(c.id, c.port),
		Path:     path,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   r.TLS != nil,
	})
}

// dropCredentials removes the pool's credentials from a forwarded
// request's headers: x-api-key and Authorization when they hold the
// token, and the port cookie. The app's own stay.
func (p *portProxy) dropCredentials(h http.Header) {
	if p.tokenIs(portBearer(h.Get("Authorization"))) {
		h.Del("Authorization")
	}
	if p.tokenIs(h.Get("X-Api-Key")) {
		h.Del("X-Api-Key")
	}
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	var kept []string
	for _, line := range cookies {
		for pair := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(pair, "=")
			if strings.TrimSpace(name) != portCookie {
				kept = append(kept, strings.TrimSpace(pair))
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// parsePortNumber parses a port strictly: 1 to 5 ASCII digits, no sign,
// no leading zero, 1..65535.
func parsePortNumber(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, false
	}
	return n, true
}

// parsePortHost parses a host-form Host header, {port}-{id}.localhost
// with an optional :port of the pool's own (digits), in any letter case.
// id is [a-z0-9]+ (returned in lower case), the label at most 63 bytes,
// port as parsePortNumber. It reads untrusted input: anything else is
// not ok.
func parsePortHost(host string) (id string, port int, ok bool) {
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		ps := host[i+1:]
		if ps == "" || len(ps) > 5 {
			return "", 0, false
		}
		for j := 0; j < len(ps); j++ {
			if ps[j] < '0' || ps[j] > '9' {
				return "", 0, false
			}
		}
		host = host[:i]
	}
	if len(host) <= len(portHostSuffix) || !strings.EqualFold(host[len(host)-len(portHostSuffix):], portHostSuffix) {
		return "", 0, false
	}
	label := host[:len(host)-len(portHostSuffix)]
	if len(label) > 63 {
		return "", 0, false
	}
	ps, rawID, found := strings.Cut(label, "-")
	if !found || rawID == "" {
		return "", 0, false
	}
	if port, ok = parsePortNumber(ps); !ok {
		return "", 0, false
	}
	for i := 0; i < len(rawID); i++ {
		c := rawID[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || 'A' <= c && c <= 'Z') {
			return "", 0, false
		}
	}
	return strings.ToLower(rawID), port, true
}

// portError answers the pool's own error body.
func portError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: status, Message: msg}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
