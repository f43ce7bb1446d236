package browser

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// CDPPrefix is where aiod serves the browser's DevTools protocol on its
// own address, behind its key (Config.CDP), and so the path prefix of a
// cdp_url that goes through it.
const CDPPrefix = "/cdp"

// UnderCDP reports whether path is CDPPrefix or below it: the requests
// /cdp serves.
func UnderCDP(path string) bool {
	return path == CDPPrefix || strings.HasPrefix(path, CDPPrefix+"/")
}

// Size is a width and a height in CSS pixels.
type Size struct {
	Width  int64 `json:"width"`
	Height int64 `json:"height"`
}

// Info is GET info's data: how to reach the browser from where the
// request came from, and its sizes.
type Info struct {
	UserAgent string `json:"user_agent"`
	// CDPURL is the browser's WebSocket URL as the client reaches it
	// (see [CDPURL]): through the daemon's /cdp, or directly.
	CDPURL string `json:"cdp_url"`
	// Viewport is the browser window's size.
	Viewport Size `json:"viewport"`
	// PageViewport is the largest innerWidth x innerHeight of the tabs,
	// null when no tab answered.
	PageViewport *Size `json:"page_viewport"`
	// CDPUIURL is null: no DevTools front end is installed.
	CDPUIURL *string `json:"cdp_ui_url"`
	// VNCURL is "" on v1 (no VNC) and absent on v2.
	VNCURL *string `json:"vnc_url,omitempty"`
}

// Info answers GET info for r (its headers, Host and query build the
// URLs; v1 adds vnc_url); prefix is cdp_url's path prefix (see
// [CDPURL]): CDPPrefix through the daemon's /cdp, "" for the browser's own
// endpoint. The error is the plane's 503 when the DevTools
// endpoint does not answer. The MCP tool browser_get_info calls it with
// the /mcp request.
func (p *Plane) Info(ctx context.Context, r *http.Request, prefix string, v1 bool) (*Info, error) {
	vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := p.version(vctx)
	if err != nil {
		return nil, unreachable("read version", err)
	}
	u, err := url.Parse(v.WebSocketDebuggerURL)
	if err != nil {
		return nil, unreachable("read version", err)
	}
	info := &Info{UserAgent: v.UserAgent, CDPURL: CDPURL(r, prefix, u.Path), Viewport: Size{Width: 1280, Height: 720}}
	if v1 {
		info.VNCURL = new(string)
	}
	tabs, err := p.tabs(ctx)
	if err != nil {
		return nil, err
	}
	c, err := p.conn(ctx)
	if err != nil {
		return nil, err
	}
	if len(tabs) > 0 {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var win struct {
			Bounds struct {
				Width  int64 `json:"width"`
				Height int64 `json:"height"`
			} `json:"bounds"`
		}
		if c.call(wctx, "", "Browser.getWindowForTarget", map[string]any{"targetId": tabs[0].ID}, &win) == nil && win.Bounds.Width > 0 {
			info.Viewport = Size{Width: win.Bounds.Width, Height: win.Bounds.Height}
		}
		cancel()
	}
	for i, t := range tabs {
		if i == 8 { // enough to find the largest of the tabs anyone looks at
			break
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := c.session(tctx, t.ID)
		if err == nil {
			var res evalResult
			err = c.call(tctx, s, "Runtime.evaluate", map[string]any{"expression": "[innerWidth, innerHeight]", "returnByValue": true}, &res)
			var wh []int64
			if err == nil && res.ExceptionDetails == nil && jsonInto(res.Result.Value, &wh) && len(wh) == 2 {
				if info.PageViewport == nil || wh[0]*wh[1] > info.PageViewport.Width*info.PageViewport.Height {
					info.PageViewport = &Size{Width: wh[0], Height: wh[1]}
				}
			}
		}
		cancel()
	}
	return info, nil
}

// CDPURL is the browser's WebSocket URL as a client of r reaches it:
// ws[s]://<host><forwarded prefix><prefix><wsPath><?query>, prefix
// being CDPPrefix through the daemon's /cdp and "" for the browser's own
// endpoint. The host is
// X-Forwarded-Host, else Host, else the listener's address; the scheme
// follows X-Forwarded-Proto when it is http or https, else the
// request's; the forwarded prefix is X-Forwarded-Prefix with one leading
// slash and no trailing one, not added when the path already starts
// with it; the
// raw query is kept, so an ?api_key= survives.
func CDPURL(r *http.Request, prefix, wsPath string) string {
	host := firstValue(r.Header.Get("X-Forwarded-Host"))
	if host == "" {
		host = r.Host
	}
	if host == "" {
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			host = a.String()
		}
	}
	scheme := "ws"
	switch proto := strings.ToLower(firstValue(r.Header.Get("X-Forwarded-Proto"))); {
	case proto == "https":
		scheme = "wss"
	case proto == "http":
	case r.TLS != nil:
		scheme = "wss"
	}
	path := prefix + wsPath
	if fwd := normPrefix(r.Header.Get("X-Forwarded-Prefix")); fwd != "" && path != fwd && !strings.HasPrefix(path, fwd+"/") {
		path = fwd + path
	}
	out := scheme + "://" + host + path
	if r.URL != nil && r.URL.RawQuery != "" {
		out += "?" + r.URL.RawQuery
	}
	return out
}

// firstValue is the first of a comma-separated header's values.
func firstValue(h string) string {
	v, _, _ := strings.Cut(h, ",")
	return strings.TrimSpace(v)
}

// normPrefix is a path prefix with one leading slash and no trailing
// one; "" for none.
func normPrefix(p string) string {
	p = strings.Trim(strings.TrimSpace(firstValue(p)), "/")
	if p == "" {
		return ""
	}
	return "/" + p
}
