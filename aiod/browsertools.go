package aiod

// This file backs the MCP browser tools (browser_get_info,
// browser_gui_screenshot, browser_gui_execute_action) with the browser
// and computer-use planes.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/mcp"
)

// How long each browser tool waits for its plane. An action may be a
// WAIT of up to 10 s; the others are one round trip.
const (
	infoWait   = 10 * time.Second
	shotWait   = 30 * time.Second
	actionWait = 30 * time.Second
)

// browserTools drives the MCP browser tools: browser_get_info through the
// browser plane (CDP), the two GUI tools through the computer-use worker,
// as the published daemon documents them.
type browserTools struct {
	br   *browser.Plane
	comp *computer.Plane
	// cdpHost is the DevTools endpoint's host:port (CDPEndpoint): the
	// host of browser_get_info's cdp_url for a call with no /mcp request.
	cdpHost string
	// public is Config.PublicURL parsed (nil: none): where the daemon serves
	// /cdp, for a call with no /mcp request.
	public *url.URL
}

// newBrowserTools returns what the MCP browser tools drive.
func newBrowserTools(d *Daemon, br *browser.Plane, comp *computer.Plane) mcp.Browser {
	t := &browserTools{br: br, comp: comp}
	if u, err := url.Parse(d.cfg.CDPEndpoint); err == nil {
		t.cdpHost = u.Host
	}
	if u, err := url.Parse(d.cfg.PublicURL); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		t.public = u
	}
	return t
}

// Info is browser_get_info: GET /v2/browser/info's data (no vnc_url).
// On /mcp its URLs are built from the /mcp request as the route builds
// them from its own (Host, X-Forwarded-Host/Proto/Prefix, the query).
// A call with no HTTP request (the sandbox Computer of an office) gets
// the URL of the daemon's /cdp when it has a PublicURL, else
// the browser's own DevTools WebSocket URL,
// ws://<BROWSER_REMOTE_DEBUGGING_HOST:PORT>/devtools/browser/<id>, where
// the sandbox's own programs reach a browser the user runs (under aiod
// --browser Chromium has no port: such a call then names no reachable
// URL; a2c up gives the daemon its PublicURL).
func (t *browserTools) Info(ctx context.Context, origin *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, infoWait)
	defer cancel()
	direct := origin == nil && t.public == nil
	switch {
	case direct:
		origin = (&http.Request{Method: http.MethodGet, Host: t.cdpHost, Header: http.Header{}, URL: &url.URL{Path: "/mcp"}}).WithContext(ctx)
	case origin == nil:
		h := http.Header{}
		h.Set("X-Forwarded-Proto", t.public.Scheme)
		h.Set("X-Forwarded-Prefix", t.public.Path)
		origin = (&http.Request{Method: http.MethodGet, Host: t.public.Host, Header: h, URL: &url.URL{Path: "/mcp"}}).WithContext(ctx)
	}
	prefix := browser.CDPPrefix
	if direct {
		prefix = ""
	}
	info, err := t.br.Info(ctx, origin, prefix, false)
	if err != nil {
		msg, hint := api.MessageOf(err)
		if hint != "" {
			msg += ". " + hint
		}
		return nil, errors.New(msg)
	}
	return info, nil
}

// Screenshot is browser_gui_screenshot: the whole display from the
// worker's GET /v2/computer/screenshot, as the worker encodes it (PNG).
func (t *browserTools) Screenshot(ctx context.Context) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, shotWait)
	defer cancel()
	img, mt, err := t.comp.Screenshot(ctx)
	if err != nil {
		return nil, "", toolError(ctx, err)
	}
	return img, mt, nil
}

// Action is browser_gui_execute_action: the action posted to the
// worker's /v2/computer/actions.
func (t *browserTools) Action(ctx context.Context, action json.RawMessage) error {
	ctx, cancel := context.WithTimeout(ctx, actionWait)
	defer cancel()
	if err := t.comp.Act(ctx, action); err != nil {
		return toolError(ctx, err)
	}
	return nil
}

// toolError words a worker failure for the tool's isError text: the
// documented message when the worker is down, the worker's own message
// when it refused, never Go's error text.
func toolError(ctx context.Context, err error) error {
	var we *computer.WorkerError
	switch {
	case errors.As(err, &we):
		return errors.New(we.Message)
	case errors.Is(err, computer.ErrUnavailable):
		return computer.ErrUnavailable
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errors.New("the computer-use worker did not answer in time")
	default:
		return errors.New("the call was cancelled")
	}
}
