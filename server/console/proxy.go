package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// The sandbox proxy: /api/console/sandboxes/{name}/api/{path...} reaches
// the sandbox's own HTTP API (aiod) with its token, for the console's
// file browser, command runner and python cells. Only those planes are
// reachable (see allowed); the client's cookie and credentials never
// reach the sandbox, and nothing the sandbox answers can set a cookie or
// run a script in the console's origin.

// allowedPrefixes are the aiod routes the console may reach: the file
// plane, commands (bash, shell, v2 commands) and code (code, jupyter), in
// both API versions (see aiod/openapi). Everything else is 404.
var allowedPrefixes = []string{
	"v1/file/", "v1/bash/", "v1/shell/", "v1/code/", "v1/jupyter/",
	"v2/fs/", "v2/commands", "v2/code/", "v2/watch",
}

// allowedExact are single routes the console may read: the sandbox's
// description (its workspace) in both versions, GET only.
var allowedExact = map[string]bool{"v1/sandbox": true, "v2/sandbox": true}

// refusedPaths are routes under an allowed prefix that the console does
// not offer: WebSocket terminals.
var refusedPaths = map[string]bool{"v1/shell/ws": true, "v1/shell/terminal-url": true}

// Proxy limits.
const (
	// maxProxyBody bounds a request body sent to a sandbox (uploads).
	maxProxyBody = 64 << 20
	// proxyHeaderWait bounds the wait for a sandbox's answer to start (a
	// python cell or a command that answers when done may run this long);
	// a streamed answer then lasts as long as bytes keep coming (see
	// ProxyIdle) and the client reads them (see ProxyWrite).
	proxyHeaderWait = 15 * time.Minute
	// ProxyWrite bounds each write of a proxied answer to the client: a
	// client that reads nothing for this long is cut off, and the
	// sandbox's request ends.
	ProxyWrite = 30 * time.Second
	// ProxyIdle bounds the silence of a proxied answer's body: a sandbox
	// that sends no byte for this long has its answer cut. aiod's
	// streams send something well within it while a command prints
	// nothing: a "ping" frame every 30 s on a command's NDJSON stream, a
	// keep-alive comment every 15 s on a watch's event stream.
	ProxyIdle = 5 * time.Minute
)

// proxyWrite and proxyIdle are vars for tests.
var (
	proxyWrite = ProxyWrite
	proxyIdle  = ProxyIdle
)

// sandboxProxy reaches one sandbox.
type sandboxProxy struct {
	box  Sandbox
	base *url.URL
	rp   *httputil.ReverseProxy
}

// requestHeaders are the client's headers passed to the sandbox; every
// other one (Cookie, Authorization, x-api-key, Origin, Referer ...) is
// dropped.
var requestHeaders = []string{"Accept", "Accept-Encoding", "Content-Type", "Range", "If-None-Match", "If-Modified-Since", "Last-Event-ID"}

func newSandboxProxy(b Sandbox, log *slog.Logger) (*sandboxProxy, error) {
	if b.Name == "" || strings.ContainsAny(b.Name, "/?#%") {
		return nil, fmt.Errorf("console: invalid sandbox name %q", b.Name)
	}
	u, err := url.Parse(strings.TrimRight(b.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("console: sandbox %s: invalid URL %q", b.Name, b.URL)
	}
	p := &sandboxProxy{box: b, base: u}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: proxyHeaderWait,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     tr,
		FlushInterval: -1, // commands stream their output
		// A cut answer is logged by the proxy: for debugging only.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ModifyResponse: func(resp *http.Response) error {
			// The sandbox's silence is bounded from here on.
			pc := resp.Request.Context().Value(proxyKey{}).(*proxyCall)
			resp.Body = newIdleBody(resp.Body, proxyIdle, func() { pc.cancel(errIdle) })
			h := resp.Header
			for _, k := range []string{"Set-Cookie", "Set-Cookie2", "Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Cache-Control"} {
				h.Del(k) // the console's own are set (see guard)
			}
			// The sandbox's content never runs in the console's origin:
			// this policy adds to the console's.
			h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if isMaxBytes(err) {
				writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
				return
			}
			switch context.Cause(r.Context()) {
			case errSessionEnded:
				writeError(w, http.StatusUnauthorized, "login required")
			case errClosed:
				writeError(w, http.StatusServiceUnavailable, "the console is closing")
			default:
				writeError(w, http.StatusBadGateway, "the sandbox did not answer")
			}
		},
	}
	return p, nil
}

func isMaxBytes(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

// rewrite builds the request to the sandbox: its URL plus the checked
// path (set by sandboxAPI in the request's context as the target),
// only the allowed headers, and the sandbox's token.
func (p *sandboxProxy) rewrite(pr *httputil.ProxyRequest) {
	pc := pr.In.Context().Value(proxyKey{}).(*proxyCall)
	pr.Out.URL = pc.target
	pr.Out.Host = ""
	in := pr.In.Header
	out := make(http.Header)
	for _, k := range requestHeaders {
		if v := in.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	if p.box.Token != "" {
		out.Set("X-Api-Key", p.box.Token)
	}
	pr.Out.Header = out
}

// proxyCall is one proxied request's state, in its context.
type proxyCall struct {
	target *url.URL                // the sandbox's URL
	cancel context.CancelCauseFunc // ends the request to the sandbox
}

type proxyKey struct{}

// Why a proxied request was ended early (its context's cause).
var (
	errSessionEnded = errors.New("console: the session ended")
	errClosed       = errors.New("console: closed")
	errIdle         = errors.New("console: the sandbox's answer was silent too long")
)

// idleBody is a sandbox's answer body that calls stop when no byte
// arrived for idle.
type idleBody struct {
	io.ReadCloser
	idle time.Duration
	t    *time.Timer
}

func newIdleBody(body io.ReadCloser, idle time.Duration, stop func()) *idleBody {
	return &idleBody{ReadCloser: body, idle: idle, t: time.AfterFunc(idle, stop)}
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.t.Stop()
	return b.ReadCloser.Close()
}

// deadlineWriter sets a write deadline of proxyWrite on the client's
// connection before each write and flush of a proxied answer.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (d deadlineWriter) Write(b []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(proxyWrite))
	return d.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls.
func (d deadlineWriter) FlushError() error {
	_ = d.rc.SetWriteDeadline(time.Now().Add(proxyWrite))
	return d.rc.Flush()
}

// Unwrap gives http.ResponseController the client's writer.
func (d deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// checkPath returns the sandbox path's segments when the console may
// reach it with method, or false.
func checkPath(method, path string) (string, bool) {
	if path == "" || len(path) > 1024 || strings.ContainsAny(path, "\\\x00") {
		return "", false
	}
	segs := strings.Split(path, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", false
		}
	}
	clean := strings.Join(segs, "/")
	if refusedPaths[clean] {
		return "", false
	}
	if allowedExact[clean] {
		return clean, method == http.MethodGet || method == http.MethodHead
	}
	for _, pre := range allowedPrefixes {
		if strings.HasPrefix(clean, pre) && (strings.HasSuffix(pre, "/") || len(clean) == len(pre) || clean[len(pre)] == '/') {
			return clean, true
		}
	}
	return "", false
}

func (c *Console) sandboxes(w http.ResponseWriter, _ *http.Request) {
	type box struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	out := make([]box, 0, len(c.cfg.Sandboxes))
	for _, b := range c.cfg.Sandboxes {
		out = append(out, box{b.Name, b.URL})
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

// sandboxAPI proxies one request to a sandbox's API.
func (c *Console) sandboxAPI(w http.ResponseWriter, r *http.Request) {
	p := c.boxes[r.PathValue("name")]
	if p == nil {
		writeError(w, http.StatusNotFound, "no such sandbox")
		return
	}
	path, ok := checkPath(r.Method, r.PathValue("path"))
	if !ok || r.Header.Get("Upgrade") != "" {
		writeError(w, http.StatusNotFound, "not a route the console offers")
		return
	}
	target := *p.base
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	target.Path = strings.TrimRight(p.base.Path, "/") + "/" + path
	target.RawPath = strings.TrimRight(p.base.EscapedPath(), "/") + "/" + strings.Join(segs, "/")
	target.RawQuery = r.URL.RawQuery
	if r.ContentLength > maxProxyBody {
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxProxyBody)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	ctx = context.WithValue(ctx, proxyKey{}, &proxyCall{target: &target, cancel: cancel})
	// The request, and a streamed answer, end with the session or the
	// console.
	se := sessionOf(r)
	var ended <-chan struct{}
	var expiry <-chan time.Time
	if se != nil {
		ended = se.done
		t := time.NewTimer(c.sessions.until(se))
		defer t.Stop()
		expiry = t.C
	}
	go func() {
		select {
		case <-ended:
			cancel(errSessionEnded)
		case <-expiry:
			c.sessions.alive(se) // ends it
			cancel(errSessionEnded)
		case <-c.done:
			cancel(errClosed)
		case <-ctx.Done():
		}
	}()
	p.rp.ServeHTTP(deadlineWriter{w, http.NewResponseController(w)}, r.WithContext(ctx))
}
