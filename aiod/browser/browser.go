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
	"unicode/utf8"

	"github.com/chromedp/cdproto/target"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// DefaultEndpoint is where the browser's DevTools HTTP endpoint is
// reached when BROWSER_REMOTE_DEBUGGING_HOST/PORT are not set.
const DefaultEndpoint = "http://127.0.0.1:9222"

// Hint is the hint of the plane's 503s (but a crashed tab's).
const Hint = "Ensure the browser capability is ready (GET /v1/capabilities)."

// CrashHint is the hint of the 503 for a call on a crashed tab.
const CrashHint = "Close the tab (DELETE /v2/browser/tabs/{id}) or navigate it again (POST /v2/browser/navigate)."

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
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CDP, when set, serves the DevTools protocol to the daemon's
	// clients at CDPPrefix (/cdp and below), behind the daemon's key:
	// what cdp_url names.
	CDP    http.Handler
	Logger *slog.Logger
}

// Plane serves the browser routes. It keeps one WebSocket connection to
// the browser, opened on first use and replaced when the browser
// restarts, and one flattened session per tab it has driven.
type Plane struct {
	base   string
	cdp    http.Handler
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
	return &Plane{base: strings.TrimRight(cfg.CDPEndpoint, "/"), cdp: cfg.CDP, log: cfg.Logger,
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

// Target listing limits: no page can make the list fail. /json/list
// names every target with its URL, and a page controls its URL (a
// multi-megabyte history.replaceState, a data: URL), so the listing is
// decoded as a stream that keeps only id, title, type and url, each
// title and url cut at maxTargetText bytes, and at most maxTargetList
// bytes of the answer are read.
const (
	maxTargetText = 64 << 10
	maxTargetList = 64 << 20
)

// tabs lists the page targets, most recently activated first (Chrome's
// own order: new and activated tabs go to the head). /json/list gives
// that order; when it cannot be read, Target.getTargets on the
// browser's WebSocket answers instead (its order is Chrome's creation
// order, so the default tab may differ until /json/list answers again).
func (p *Plane) tabs(ctx context.Context) ([]Tab, error) {
	all, err := p.listTargets(ctx)
	if err != nil {
		var ok bool
		if all, ok = p.getTargets(ctx); !ok {
			return nil, unreachable("list targets", err)
		}
		p.log.Debug("browser: /json/list failed; targets from Target.getTargets", "err", err)
	}
	out := make([]Tab, 0, len(all))
	for _, t := range all {
		if t.Type == "page" {
			out = append(out, t)
		}
	}
	return out, nil
}

// listTargets reads /json/list as a stream (see maxTargetText).
func (p *Plane) listTargets(ctx context.Context) ([]Tab, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/json/list", nil)
	if err != nil {
		return nil, fmt.Errorf("devtools: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("devtools /json/list: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("devtools /json/list: %s", resp.Status)
	}
	tabs, err := decodeTargets(io.LimitReader(resp.Body, maxTargetList))
	if err != nil {
		return nil, fmt.Errorf("devtools /json/list: %w", err)
	}
	return tabs, nil
}

// decodeTargets decodes a JSON list of targets one element at a time,
// keeping id, title, type and url (title and url cut to maxTargetText).
func decodeTargets(r io.Reader) ([]Tab, error) {
	d := json.NewDecoder(r)
	if tok, err := d.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("not a list of targets (%v)", err)
	}
	var out []Tab
	for d.More() {
		var t Tab
		if err := d.Decode(&t); err != nil {
			return nil, err
		}
		t.Title, t.URL = cutText(t.Title), cutText(t.URL)
		out = append(out, t)
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// cutText cuts s to maxTargetText bytes, on a UTF-8 boundary; the
// copy lets the decoder's larger string go.
func cutText(s string) string {
	if len(s) <= maxTargetText {
		return s
	}
	n := maxTargetText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// getTargets lists the targets with Target.getTargets on the browser's
// WebSocket: the fallback when /json/list cannot be read.
func (p *Plane) getTargets(ctx context.Context) ([]Tab, bool) {
	c, err := p.conn(ctx)
	if err != nil {
		return nil, false
	}
	var res struct {
		TargetInfos []targetInfo `json:"targetInfos"`
	}
	if err := c.call(ctx, "", "Target.getTargets", map[string]any{}, &res); err != nil {
		return nil, false
	}
	out := make([]Tab, 0, len(res.TargetInfos))
	for _, ti := range res.TargetInfos {
		out = append(out, ti.tab())
	}
	return out, true
}

// targetInfo is the part of CDP's Target.TargetInfo the plane reads.
type targetInfo struct {
	TargetID string `json:"targetId"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	URL      string `json:"url"`
}

func (ti targetInfo) tab() Tab {
	return Tab{ID: ti.TargetID, Title: cutText(ti.Title), URL: cutText(ti.URL), Type: ti.Type}
}

// tabInfo is the page tab id, asked of Chrome alone (Target.getTargetInfo,
// which fails for an unknown id), so no other tab's content can make it
// fail: an unknown id or a target that is not a page is the 404.
func (p *Plane) tabInfo(ctx context.Context, id string) (Tab, *conn, error) {
	c, err := p.conn(ctx)
	if err != nil {
		return Tab{}, nil, err
	}
	var res struct {
		TargetInfo targetInfo `json:"targetInfo"`
	}
	if err := c.call(ctx, "", "Target.getTargetInfo", map[string]any{"targetId": id}, &res); err != nil {
		var ce *cdpError
		if errors.As(err, &ce) {
			return Tab{}, nil, noTab(id)
		}
		return Tab{}, nil, cdpFailed(err)
	}
	if res.TargetInfo.Type != "page" {
		return Tab{}, nil, noTab(id)
	}
	return res.TargetInfo.tab(), c, nil
}

// noTab is the 404 for an unknown tab id.
func noTab(id string) *api.Error {
	return api.NewError(api.ErrNotFound, "no tab with id "+id)
}

// target is the tab a route drives: id when given (it must be a page),
// else the first page.
func (p *Plane) target(ctx context.Context, id string) (string, error) {
	if id != "" {
		if _, _, err := p.tabInfo(ctx, id); err != nil {
			return "", err
		}
		return id, nil
	}
	tabs, err := p.tabs(ctx)
	if err != nil {
		return "", err
	}
	if len(tabs) == 0 {
		return "", api.NewError(api.ErrUnavailable, "browser: no open tab").WithHint("Open a tab with POST /v2/browser/tabs.")
	}
	return tabs[0].ID, nil
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
	p.c = newConn(wc, p.net.onEvent, p.log)
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
	var tl *tooLarge
	if errors.As(err, &tl) {
		return api.NewError(api.ErrTooLarge, fmt.Sprintf("browser: the result is larger than %d MiB", tl.limit>>20)).
			WithHint("Return less: a part of the value, or a summary of it.")
	}
	if errors.Is(err, errCrashed) {
		return api.NewError(api.ErrUnavailable, "browser: the tab crashed").WithHint(CrashHint)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return api.NewError(api.ErrUnavailable, "browser: the browser did not answer in time").WithHint(Hint)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return unreachable("cdp", err)
}
