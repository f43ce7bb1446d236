package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/target"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// DefaultEndpoint is where the browser's DevTools HTTP endpoint is
// reached when BROWSER_REMOTE_DEBUGGING_HOST/PORT are not set.
const DefaultEndpoint = "http://127.0.0.1:9222"

// Hint is the hint of every 503 the plane answers.
const Hint = "Ensure the browser capability is ready (GET /v1/capabilities)."

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// Config configures the plane.
type Config struct {
	// CDPEndpoint is the browser's DevTools HTTP endpoint, such as
	// http://127.0.0.1:9222.
	CDPEndpoint string
	// Dial opens connections to the DevTools endpoint (HTTP and
	// WebSocket). Under isolation the browser listens inside the
	// sandbox's network, which only the daemon's dialer reaches. Nil: a
	// plain dialer.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
}

// Plane serves the browser routes. It keeps one WebSocket connection to
// the browser, opened on first use and replaced when the browser
// restarts, and one flattened session per tab it has driven.
type Plane struct {
	cfg    Config
	base   string
	log    *slog.Logger
	client *http.Client
	dial   dialFunc

	mu     sync.Mutex // guards c and closed; held while connecting
	c      *conn
	closed bool

	net *netLog
}

// New returns the plane. It connects to the browser on first use.
func New(cfg Config) *Plane {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CDPEndpoint == "" {
		cfg.CDPEndpoint = DefaultEndpoint
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	bounded := func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return dial(ctx, network, addr)
	}
	tr := &http.Transport{DialContext: bounded, ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}
	return &Plane{cfg: cfg, base: strings.TrimRight(cfg.CDPEndpoint, "/"), log: cfg.Logger,
		client: &http.Client{Transport: tr, Timeout: 15 * time.Second}, dial: bounded, net: newNetLog(netCap)}
}

// Close drops the plane's CDP connection after detaching its sessions;
// the browser and its tabs stay.
func (p *Plane) Close(ctx context.Context) error {
	p.mu.Lock()
	c := p.c
	p.c, p.closed = nil, true
	p.mu.Unlock()
	if c != nil {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c.detachAll(dctx)
		cancel()
		c.close()
		<-c.done
	}
	p.client.CloseIdleConnections()
	return nil
}

// TabID names a tab: a CDP target id.
type TabID = target.ID

// version is /json/version's answer.
type version struct {
	Browser              string `json:"Browser"`
	UserAgent            string `json:"User-Agent"`
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}

// Tab is a page target: GET tabs lists them, POST tabs answers one.
type Tab struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	URL   string `json:"url"`
	Type  string `json:"type"`
}

// unreachable is the 503 for a browser whose DevTools endpoint does not
// answer; what names the step that failed ("list targets").
func unreachable(what string, err error) *api.Error {
	reason := "unreachable"
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		reason = "timed out"
	case errors.Is(err, errConnLost):
		reason = "connection lost"
	case errors.Is(err, os.ErrNotExist):
		reason = "not found"
	}
	return api.NewError(api.ErrUnavailable, "browser: "+what+": "+reason).WithHint(Hint)
}

// devtools sends an HTTP request to the DevTools endpoint and decodes
// its JSON answer into out (nil: ignored). A 404 is api.ErrNotFound.
func (p *Plane) devtools(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, nil)
	if err != nil {
		return fmt.Errorf("devtools: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("devtools %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("devtools %s: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return api.ErrNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("devtools %s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("devtools %s: %w", path, err)
	}
	return nil
}

func (p *Plane) version(ctx context.Context) (*version, error) {
	var v version
	if err := p.devtools(ctx, http.MethodGet, "/json/version", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Probe reports whether the DevTools endpoint answers GET /json/version
// within ctx, through the plane's dialer: capabilities.browser.cdp.
func (p *Plane) Probe(ctx context.Context) bool {
	_, err := p.version(ctx)
	return err == nil
}

// tabs lists the page targets, most recently activated first (Chrome's
// own order: new and activated tabs go to the head).
func (p *Plane) tabs(ctx context.Context) ([]Tab, error) {
	var all []Tab
	if err := p.devtools(ctx, http.MethodGet, "/json/list", &all); err != nil {
		return nil, unreachable("list targets", err)
	}
	out := make([]Tab, 0, len(all))
	for _, t := range all {
		if t.Type == "page" {
			out = append(out, t)
		}
	}
	return out, nil
}

// noTab is the 404 for an unknown tab id.
func noTab(id string) *api.Error {
	return api.NewError(api.ErrNotFound, "no tab with id "+id)
}

// target is the tab a route drives: id when given (it must be a page),
// else the first page.
func (p *Plane) target(ctx context.Context, id string) (string, error) {
	tabs, err := p.tabs(ctx)
	if err != nil {
		return "", err
	}
	if id == "" {
		if len(tabs) == 0 {
			return "", api.NewError(api.ErrUnavailable, "browser: no open tab").WithHint("Open a tab with POST /v2/browser/tabs.")
		}
		return tabs[0].ID, nil
	}
	for _, t := range tabs {
		if t.ID == id {
			return id, nil
		}
	}
	return "", noTab(id)
}

// conn is the live connection to the browser, connecting (again) when
// there is none or the last one died.
func (p *Plane) conn(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, api.NewError(api.ErrUnavailable, "browser: the plane is shutting down").WithHint(Hint)
	}
	if p.c != nil && p.c.alive() {
		return p.c, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := p.version(cctx)
	if err != nil {
		return nil, unreachable("connect", err)
	}
	ws, err := p.wsURL(v.WebSocketDebuggerURL)
	if err != nil {
		return nil, unreachable("connect", err)
	}
	wc, err := dialWS(cctx, p.dial, ws)
	if err != nil {
		return nil, unreachable("connect", err)
	}
	p.c = newConn(wc, p.net.onEvent)
	p.log.Debug("browser connected", "browser", v.Browser)
	return p.c, nil
}

// wsURL is the browser's WebSocket URL, addressed at the endpoint the
// plane dials (Chrome names its own listen address, which may differ
// from the one reached through the daemon's dialer).
func (p *Plane) wsURL(debugger string) (string, error) {
	u, err := url.Parse(debugger)
	if err != nil || u.Path == "" {
		return "", fmt.Errorf("bad webSocketDebuggerUrl %q", debugger)
	}
	b, err := url.Parse(p.base)
	if err != nil {
		return "", fmt.Errorf("bad endpoint: %w", err)
	}
	u.Scheme = "ws"
	if b.Scheme == "https" {
		u.Scheme = "wss"
	}
	u.Host = b.Host
	return u.String(), nil
}

// session returns the connection and the session attached to the tab.
func (p *Plane) session(ctx context.Context, tabID string) (*conn, string, error) {
	t, err := p.target(ctx, tabID)
	if err != nil {
		return nil, "", err
	}
	c, err := p.conn(ctx)
	if err != nil {
		return nil, "", err
	}
	s, err := c.session(ctx, t)
	if err != nil {
		return nil, "", cdpFailed(err)
	}
	if err := p.net.attach(ctx, c, s); err != nil {
		return nil, "", cdpFailed(err)
	}
	return c, s, nil
}

// cdpFailed words a failed CDP call as the plane's 503, or passes an
// answer that already is one.
func cdpFailed(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	var ce *cdpError
	if errors.As(err, &ce) {
		return api.NewError(api.ErrUnavailable, "browser: "+ce.Error()).WithHint(Hint)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return api.NewError(api.ErrUnavailable, "browser: the browser did not answer in time").WithHint(Hint)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return unreachable("cdp", err)
}
