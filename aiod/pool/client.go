package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultRequestTimeout bounds a [Client] request whose context has no deadline
// of its own: long enough for a create that starts a sandbox cold, short
// enough that a pool that stopped answering does not hang a caller.
const DefaultRequestTimeout = 60 * time.Second

// Bounds on what the client reads of an answer, so that a broken or
// hostile server cannot make it hold an unbounded body.
const (
	// maxObject bounds one sandbox object or a metrics answer.
	maxObject = 1 << 20
	// maxList bounds GET /v2/sandboxes: 64 sandboxes (the default --max)
	// of well under 64 KiB each fit many times over.
	maxList = 16 << 20
	// maxErrorBody is what is read of an error answer.
	maxErrorBody = 64 << 10
	// maxErrorText is the longest body, not in the pool's error shape,
	// that an [Error]'s message quotes; longer ones are left out.
	maxErrorText = 200
)

// defaultHTTP is the client of a [Client] whose HTTP field is nil. Every
// wait of a request is bounded: the dial and TLS handshake here, the rest
// by the request's context (see [Client.Timeout]), so no total timeout is
// set that would cut a legitimately slow create short of its context.
var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment, // never applied to loopback
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
	IdleConnTimeout:       90 * time.Second,
	MaxIdleConnsPerHost:   8,
	ForceAttemptHTTP2:     true,
}}

// Client is the Go client of a pool's API (aiod pool, or the in-process
// pool of a2c up): the lifecycle routes under /v2/sandboxes, and the URLs
// of each sandbox's own aiod API and of the ports served inside it.
//
// Every method takes a context; a request whose context has no deadline
// gets [Client.Timeout]. A pool's refusal (any status but 2xx) is an
// [*Error] with the status and the pool's message; a failure to reach the
// pool or to read its answer is another error, wrapped with %w. A Client
// is safe for concurrent use once its fields are set.
type Client struct {
	// HTTP sends the requests (nil: a shared default with bounded dial
	// and TLS handshake).
	HTTP *http.Client
	// Timeout bounds a request whose context has no deadline (0:
	// [DefaultRequestTimeout]).
	Timeout time.Duration

	base  *url.URL // the pool's base URL, without a trailing slash
	raw   string   // base as a string, without a trailing slash
	token string
	err   error // a bad base URL, returned by every request
}

// NewClient returns a client of the pool at baseURL (such as
// http://127.0.0.1:18100; a path prefix is kept) that presents token in
// the x-api-key header ("": no credential). A baseURL that is not an
// http or https URL makes every request fail with an error saying so.
func NewClient(baseURL, token string) *Client {
	c := &Client{raw: strings.TrimRight(baseURL, "/"), token: token}
	u, err := url.Parse(c.raw)
	switch {
	case err != nil:
		c.err = fmt.Errorf("pool: bad base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		c.err = fmt.Errorf("pool: bad base URL %q: want http://HOST:PORT", baseURL)
	case u.RawQuery != "" || u.Fragment != "":
		c.err = fmt.Errorf("pool: bad base URL %q: a query or fragment has no place in it", baseURL)
	default:
		c.base = u
	}
	return c
}

// ListFilter narrows [Client.List]; an empty field matches every
// sandbox, and every Metadata pair must match.
type ListFilter struct {
	// State is "running" or "paused" (see [State]).
	State string
	// Office is the A2C office the sandboxes joined.
	Office string
	// Metadata pairs are sent as metadata.KEY=VALUE.
	Metadata map[string]string
}

// Create starts a sandbox (POST /v2/sandboxes) and returns it as the pool
// answered (201). A pool at its --max answers 429, bad input 400 naming
// the field: both an [*Error].
func (c *Client) Create(ctx context.Context, req CreateRequest) (Sandbox, error) {
	var s Sandbox
	err := c.do(ctx, http.MethodPost, "/v2/sandboxes", nil, req, &s, maxObject)
	return s, err
}

// List returns the sandboxes that match f (GET /v2/sandboxes), never nil.
func (c *Client) List(ctx context.Context, f ListFilter) ([]Sandbox, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Office != "" {
		q.Set("office", f.Office)
	}
	for k, v := range f.Metadata {
		q.Set("metadata."+k, v)
	}
	var l List
	if err := c.do(ctx, http.MethodGet, "/v2/sandboxes", q, nil, &l, maxList); err != nil {
		return nil, err
	}
	if l.Sandboxes == nil {
		l.Sandboxes = []Sandbox{}
	}
	return l.Sandboxes, nil
}

// Get returns sandbox id (GET /v2/sandboxes/{id}); an unknown id is an
// [*Error] with Status 404. It never resumes a paused sandbox.
func (c *Client) Get(ctx context.Context, id string) (Sandbox, error) {
	var s Sandbox
	err := c.doID(ctx, http.MethodGet, id, "", nil, nil, &s)
	return s, err
}

// Delete kills sandbox id (DELETE /v2/sandboxes/{id}): every process
// ends, it leaves its office, and its workspace is removed unless
// keepWorkspace.
func (c *Client) Delete(ctx context.Context, id string, keepWorkspace bool) error {
	var q url.Values
	if keepWorkspace {
		q = url.Values{"keep_workspace": {"true"}}
	}
	return c.doID(ctx, http.MethodDelete, id, "", q, nil, nil)
}

// Pause freezes every process of sandbox id (POST .../pause) and returns
// it, paused.
func (c *Client) Pause(ctx context.Context, id string) (Sandbox, error) {
	var s Sandbox
	err := c.doID(ctx, http.MethodPost, id, "/pause", nil, nil, &s)
	return s, err
}

// Resume thaws sandbox id (POST .../resume) and returns it, running.
// timeoutS, when not nil, sets its deadline to now + *timeoutS seconds (0:
// none); nil keeps the deadline it had.
func (c *Client) Resume(ctx context.Context, id string, timeoutS *int) (Sandbox, error) {
	var s Sandbox
	err := c.doID(ctx, http.MethodPost, id, "/resume", nil, TimeoutRequest{TimeoutS: timeoutS}, &s)
	return s, err
}

// SetTimeout sets the deadline of sandbox id to now + timeoutS seconds
// (POST .../timeout; 0: none) and returns it.
func (c *Client) SetTimeout(ctx context.Context, id string, timeoutS int) (Sandbox, error) {
	var s Sandbox
	err := c.doID(ctx, http.MethodPost, id, "/timeout", nil, TimeoutRequest{TimeoutS: &timeoutS}, &s)
	return s, err
}

// Metrics reads the usage of sandbox id from its cgroups and workspace
// (GET .../metrics). It never resumes a paused sandbox.
func (c *Client) Metrics(ctx context.Context, id string) (Metrics, error) {
	var m Metrics
	err := c.doID(ctx, http.MethodGet, id, "/metrics", nil, nil, &m)
	return m, err
}

// APIURL is the base URL of sandbox id's own aiod API: baseURL +
// "/sandboxes/" + id (the id path-escaped). An AIO client given it works
// unchanged: APIURL(id) + "/v2/commands" runs a command in the sandbox,
// APIURL(id) + "/mcp" is its MCP endpoint. The credential is the pool's.
func (c *Client) APIURL(id string) string {
	return c.raw + "/sandboxes/" + url.PathEscape(id)
}

// PortURL is the URL of a server listening on port inside sandbox id, in
// the host form http://{port}-{id}.localhost:{pool port}/: the pool picks
// the sandbox by the Host header, so a web app that uses absolute paths
// works, and browsers resolve every *.localhost name to loopback. It
// therefore serves a browser on the pool's own machine; from elsewhere
// use the path form, [Client.PortPathURL]
// (baseURL/sandboxes/{id}/ports/{port}/). A pool with a token wants it
// once on a browser's first request, as ?token=T (the pool then sets a
// cookie for that host); PortURL leaves it out so that a printed URL
// does not carry the secret.
//
// PortURL is "" when there is no such URL: a bad base URL, a port
// outside 1-65535, or an id that cannot be part of a host name label
// ({port}-{id} must be letters, digits and inner hyphens, at most 63).
func (c *Client) PortURL(id string, port int) string {
	label := strconv.Itoa(port) + "-" + id
	if c.base == nil || !validPort(port) || !hostLabel(label) {
		return ""
	}
	host := label + ".localhost"
	if p := c.base.Port(); p != "" {
		host = net.JoinHostPort(host, p)
	}
	return c.base.Scheme + "://" + host + "/"
}

// PortPathURL is the URL of a server listening on port inside sandbox
// id, in the path form baseURL/sandboxes/{id}/ports/{port}/: it works
// wherever the pool is reachable, but a page that links by absolute path
// (/app.js) leaves the prefix; see [Client.PortURL] for the host form.
// It is "" for a port outside 1-65535.
func (c *Client) PortPathURL(id string, port int) string {
	if !validPort(port) {
		return ""
	}
	return c.APIURL(id) + "/ports/" + strconv.Itoa(port) + "/"
}

func validPort(port int) bool { return port >= 1 && port <= 65535 }

// hostLabel reports whether s is a host name label (RFC 1123): 1 to 63
// letters, digits and hyphens, neither first nor last a hyphen.
func hostLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '-':
		default:
			return false
		}
	}
	return true
}

// doID sends a request to /v2/sandboxes/{id}{suffix}. An empty id is
// refused here: /v2/sandboxes/ + "" would be another route.
func (c *Client) doID(ctx context.Context, method, id, suffix string, q url.Values, in, out any) error {
	if id == "" {
		return errors.New("pool: empty sandbox id")
	}
	return c.do(ctx, method, "/v2/sandboxes/"+url.PathEscape(id)+suffix, q, in, out, maxObject)
}

// do sends one request to the pool and decodes a 2xx answer into out (nil:
// the body is drained and dropped). in, when not nil, is sent as JSON. A
// non-2xx answer is an [*Error]; an answer larger than limit an error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any, limit int64) error {
	if c.err != nil {
		return c.err
	}
	if _, ok := ctx.Deadline(); !ok {
		t := c.Timeout
		if t <= 0 {
			t = DefaultRequestTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	target := c.raw + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("pool: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("x-api-key", c.token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("pool: %w", err) // a *url.Error: it names the method and URL
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorOf(resp)
	}
	if out == nil {
		// Drained (up to a bound) so that the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("pool: %s %s: read the answer: %w", method, path, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("pool: %s %s: the answer is larger than %d bytes", method, path, limit)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("pool: %s %s: undecodable answer (%d): %w", method, path, resp.StatusCode, err)
	}
	return nil
}

// errorOf turns a non-2xx answer into an [*Error]. The pool's own shape,
// {"error":{"code","message"}}, gives its message; any other body (a
// proxy's page, a plain aiod's envelope) gives the status line, followed
// by the body only when it is short, one-line-able UTF-8 text, so that a
// huge or binary body never ends up in an error message.
func errorOf(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	var eb ErrorBody
	if len(b) <= maxErrorBody && json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
		return &Error{Status: resp.StatusCode, Message: eb.Error.Message}
	}
	msg := strconv.Itoa(resp.StatusCode)
	if t := http.StatusText(resp.StatusCode); t != "" {
		msg += " " + t
	}
	if text := strings.Join(strings.Fields(string(b)), " "); text != "" && len(text) <= maxErrorText && printable(text) {
		msg += ": " + text
	}
	return &Error{Status: resp.StatusCode, Message: msg}
}

// printable reports whether s is valid UTF-8 of printable characters and
// spaces: the rule for names the pool takes (office, metadata keys) and
// for an error text the client shows.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}
