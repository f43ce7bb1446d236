package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// --- screenshot

type screenshotQuery struct {
	Format   *string `json:"format" serde:"enum=png|jpeg|jpg"`
	Quality  *uint64 `json:"quality"`
	FullPage *bool   `json:"full_page"`
}

// shot is a screenshot still in its CDP message: the base64 text
// msg[start:end], decoded while it is written.
type shot struct {
	msg        []byte
	start, end int
	jpeg       bool
}

func (p *Plane) screenshot(r *http.Request, in screenshotQuery) (*shot, error) {
	jpeg := in.Format != nil && *in.Format != "png"
	params := map[string]any{"format": "png"}
	if jpeg {
		q := uint64(85)
		if in.Quality != nil {
			if *in.Quality > 100 {
				return nil, serde.ValueError("quality must be between 0 and 100", "query", "quality")
			}
			q = *in.Quality
		}
		params["format"], params["quality"] = "jpeg", q
	}
	ctx := r.Context()
	c, s, err := p.session(ctx, "")
	if err != nil {
		return nil, err
	}
	if in.FullPage != nil && *in.FullPage {
		var m struct {
			Content struct {
				Width  float64 `json:"width"`
				Height float64 `json:"height"`
			} `json:"cssContentSize"`
		}
		if err := c.call(ctx, s, "Page.getLayoutMetrics", nil, &m); err != nil {
			return nil, cdpFailed(err)
		}
		if m.Content.Width > 0 && m.Content.Height > 0 {
			params["captureBeyondViewport"] = true
			params["clip"] = map[string]any{"x": 0, "y": 0, "width": m.Content.Width, "height": m.Content.Height, "scale": 1}
		}
	}
	msg, err := c.rawN(ctx, maxMessage, s, "Page.captureScreenshot", params)
	if err != nil {
		return nil, cdpFailed(err)
	}
	st, end, ok := base64Field(msg, "data")
	if !ok {
		return nil, api.NewError(api.ErrUnavailable, "browser: Page.captureScreenshot: no image in the answer").WithHint(Hint)
	}
	return &shot{msg: msg, start: st, end: end, jpeg: jpeg}, nil
}

// base64Field finds the string value of key in a CDP message without
// decoding it: base64 text has no escapes, so the value ends at the next
// quote. A value with a backslash is refused (not base64).
func base64Field(msg []byte, key string) (start, end int, ok bool) {
	i := bytes.Index(msg, []byte(`"`+key+`":"`))
	if i < 0 {
		return 0, 0, false
	}
	start = i + len(key) + 4
	n := bytes.IndexByte(msg[start:], '"')
	if n < 0 || bytes.IndexByte(msg[start:start+n], '\\') >= 0 {
		return 0, 0, false
	}
	return start, start + n, true
}

// pngSize reads the width and height from a PNG's IHDR.
func pngSize(head []byte) (w, h uint32, ok bool) {
	if len(head) < 24 || !bytes.Equal(head[:8], []byte("\x89PNG\r\n\x1a\n")) || string(head[12:16]) != "IHDR" {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(head[16:20]), binary.BigEndian.Uint32(head[20:24]), true
}

// writeShot streams the image: base64 decoded straight into the answer.
func writeShot(w http.ResponseWriter, _ *http.Request, s *shot) {
	b64 := s.msg[s.start:s.end]
	h := w.Header()
	if s.jpeg {
		h.Set("Content-Type", "image/jpeg")
	} else {
		h.Set("Content-Type", "image/png")
		if len(b64) >= 32 {
			head := make([]byte, 24)
			if _, err := base64.StdEncoding.Decode(head, b64[:32]); err == nil {
				if wd, ht, ok := pngSize(head); ok {
					h.Set("X-Image-Width", strconv.FormatUint(uint64(wd), 10))
					h.Set("X-Image-Height", strconv.FormatUint(uint64(ht), 10))
				}
			}
		}
	}
	h.Set("Content-Length", strconv.Itoa(base64.StdEncoding.DecodedLen(len(b64))-padding(b64)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, base64.NewDecoder(base64.StdEncoding, bytes.NewReader(b64)))
}

func padding(b64 []byte) int {
	n := 0
	for i := len(b64) - 1; i >= 0 && n < 2 && b64[i] == '='; i-- {
		n++
	}
	return n
}

// --- config

type configBody struct {
	Resolution json.RawMessage `json:"resolution"`
}

type configured struct {
	Resolution *Size `json:"resolution"`
}

// Resolutions are the window sizes config accepts.
var Resolutions = []Size{
	{1920, 1080}, {640, 480}, {1360, 768}, {1280, 720}, {800, 600}, {1024, 768}, {1280, 800},
	{1920, 1200}, {1280, 960}, {1400, 1050}, {1680, 1050}, {1280, 1024}, {1600, 1200},
}

// parseResolution reads config's resolution: null or absent is nil, a
// size of Resolutions is that size, anything else an error.
func parseResolution(raw json.RawMessage) (*Size, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v struct {
		Width  *int64 `json:"width"`
		Height *int64 `json:"height"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Width == nil || v.Height == nil {
		return nil, serde.ValueError("resolution must be an object {width, height} of integers", "body", "resolution")
	}
	for _, s := range Resolutions {
		if s.Width == *v.Width && s.Height == *v.Height {
			return &s, nil
		}
	}
	names := make([]string, len(Resolutions))
	for i, s := range Resolutions {
		names[i] = fmt.Sprintf("%dx%d", s.Width, s.Height)
	}
	return nil, serde.ValueError(fmt.Sprintf("unsupported resolution %dx%d; supported: %s", *v.Width, *v.Height, strings.Join(names, ", ")), "body", "resolution")
}

func (p *Plane) config(r *http.Request, in configBody) (configured, error) {
	size, err := parseResolution(in.Resolution)
	if err != nil || size == nil {
		return configured{}, err
	}
	ctx := r.Context()
	t, err := p.target(ctx, "")
	if err != nil {
		return configured{}, err
	}
	c, err := p.conn(ctx)
	if err != nil {
		return configured{}, err
	}
	var win struct {
		WindowID int64 `json:"windowId"`
	}
	if err := c.call(ctx, "", "Browser.getWindowForTarget", map[string]any{"targetId": t}, &win); err != nil {
		return configured{}, cdpFailed(err)
	}
	if err := c.call(ctx, "", "Browser.setWindowBounds", map[string]any{"windowId": win.WindowID, "bounds": map[string]any{"windowState": "normal"}}, nil); err != nil {
		return configured{}, cdpFailed(err)
	}
	if err := c.call(ctx, "", "Browser.setWindowBounds", map[string]any{"windowId": win.WindowID, "bounds": map[string]any{"width": size.Width, "height": size.Height}}, nil); err != nil {
		return configured{}, cdpFailed(err)
	}
	return configured{Resolution: size}, nil
}

// --- cdp

type cdpBody struct {
	Method  string          `json:"method" serde:"required"`
	Params  json.RawMessage `json:"params"`
	TabID   *string         `json:"tab_id"`
	Browser *bool           `json:"browser"`
}

func (p *Plane) rawCDP(r *http.Request, in cdpBody) (json.RawMessage, error) {
	if in.Method == "" {
		return nil, serde.ValueError("method must not be empty", "body", "method")
	}
	var params any = json.RawMessage("{}")
	if len(in.Params) > 0 && string(in.Params) != "null" {
		if in.Params[0] != '{' {
			return nil, serde.ValueError("params must be an object", "body", "params")
		}
		params = in.Params
	}
	ctx, cancel := context.WithTimeout(r.Context(), evaluateTimeout)
	defer cancel()
	var c *conn
	s := ""
	var err error
	if in.Browser != nil && *in.Browser {
		if in.TabID != nil {
			_, c, err = p.tabInfo(ctx, *in.TabID)
		} else {
			c, err = p.conn(ctx)
		}
	} else {
		c, s, err = p.session(ctx, str(in.TabID))
	}
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := c.call(ctx, s, in.Method, params, &out); err != nil {
		return nil, cdpFailed(err)
	}
	if len(out) == 0 {
		out = json.RawMessage("{}")
	}
	return out, nil
}

// --- tabs

type newTabBody struct {
	URL *string `json:"url"`
}

func (p *Plane) newTab(r *http.Request, in newTabBody) (Tab, error) {
	u := "about:blank"
	if in.URL != nil && *in.URL != "" {
		u = *in.URL
	}
	var t Tab
	if err := p.devtools(r.Context(), http.MethodPut, "/json/new?"+url.QueryEscape(u), &t); err != nil {
		return Tab{}, unreachable("open tab", err)
	}
	return t, nil
}

// activateTab brings a tab to the front. The tab is named by its id, or
// by its index in GET tabs' list (0 first), as the Python AIO SDK's
// browser_tabs.activate(index) sends it: target ids are never short
// decimal numbers, so the two cannot be confused.
func (p *Plane) activateTab(r *http.Request, _ struct{}) (Tab, error) {
	id := r.PathValue("id")
	if n, ok := tabIndex(id); ok {
		tabs, err := p.tabs(r.Context())
		if err != nil {
			return Tab{}, err
		}
		if n >= len(tabs) {
			return Tab{}, api.NewError(api.ErrNotFound, "no tab at index "+id)
		}
		id = tabs[n].ID
	}
	t, _, err := p.tabInfo(r.Context(), id)
	if err != nil {
		return Tab{}, err
	}
	if err := p.devtools(r.Context(), http.MethodGet, "/json/activate/"+url.PathEscape(id), nil); err != nil {
		if errors.Is(err, api.ErrNotFound) {
			return Tab{}, noTab(id)
		}
		return Tab{}, unreachable("activate tab", err)
	}
	return t, nil
}

// tabIndex reads a tab index: a decimal number of at most 6 digits.
func tabIndex(s string) (int, bool) {
	if s == "" || len(s) > 6 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// closeTab closes the tab with Target.closeTarget: asked of Chrome for
// that id alone, so no other tab's content can make it fail.
func (p *Plane) closeTab(r *http.Request, _ struct{}) (Tab, error) {
	id := r.PathValue("id")
	ctx := r.Context()
	t, c, err := p.tabInfo(ctx, id)
	if err != nil {
		return Tab{}, err
	}
	if err := c.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": id}, nil); err != nil {
		var ce *cdpError
		if errors.As(err, &ce) {
			return Tab{}, noTab(id)
		}
		return Tab{}, cdpFailed(err)
	}
	// Chrome closes the tab after answering; wait (briefly) until it is
	// gone, so a GET tabs that follows agrees.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	for {
		if _, _, err := p.tabInfo(wctx, id); err != nil {
			return t, nil
		}
		select {
		case <-wctx.Done():
			return t, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// --- cookies

type setCookiesBody struct {
	Cookies json.RawMessage `json:"cookies" serde:"required"`
}

// cookieCount is the answer of POST and DELETE cookies.
type cookieCount struct {
	Count int `json:"count"`
}

// parseCookies checks POST cookies' list: objects with a string name
// and value, and a url or a domain (path "/" when a domain has none).
func parseCookies(raw json.RawMessage) ([]map[string]any, error) {
	var list []map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, serde.ValueError("cookies must be a list of objects", "body", "cookies")
	}
	for i, c := range list {
		at := "cookies[" + strconv.Itoa(i) + "]"
		for _, k := range []string{"name", "value"} {
			if _, ok := c[k].(string); !ok {
				return nil, serde.ValueError(at+"."+k+" must be a string", "body", "cookies")
			}
		}
		if err := checkCookieFields(c, at); err != nil {
			return nil, err
		}
		u, _ := c["url"].(string)
		d, _ := c["domain"].(string)
		if u == "" && d == "" {
			return nil, serde.ValueError(at+" needs a url or a domain", "body", "cookies")
		}
		if _, ok := c["path"]; !ok && u == "" {
			c["path"] = "/"
		}
	}
	return list, nil
}

// checkCookieFields checks the fields of one cookie that CDP's
// Network.CookieParam types, so that a client's mistake is a 422 naming
// it rather than Chrome's refusal: url an absolute http(s) URL, expires
// a number (seconds since the epoch), the flags booleans, sameSite one
// of its values, the rest strings.
func checkCookieFields(c map[string]any, at string) error {
	for k, v := range c {
		if v == nil {
			continue
		}
		ok := true
		switch k {
		case "url":
			s, isStr := v.(string)
			u, err := url.Parse(s)
			ok = isStr && (s == "" || err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "")
			if !ok {
				return serde.ValueError(at+".url must be an absolute http or https URL", "body", "cookies")
			}
		case "expires":
			_, ok = v.(float64)
			if !ok {
				return serde.ValueError(at+".expires must be a number (seconds since the epoch)", "body", "cookies")
			}
		case "secure", "httpOnly":
			_, ok = v.(bool)
		case "sameSite":
			s, _ := v.(string)
			ok = s == "Strict" || s == "Lax" || s == "None"
			if !ok {
				return serde.ValueError(at+".sameSite must be Strict, Lax or None", "body", "cookies")
			}
		case "domain", "path", "priority", "sourceScheme":
			_, ok = v.(string)
		}
		if !ok {
			return serde.ValueError(at+"."+k+" has the wrong type", "body", "cookies")
		}
	}
	return nil
}

func (p *Plane) setCookies(r *http.Request, in setCookiesBody) (cookieCount, error) {
	list, err := parseCookies(in.Cookies)
	if err != nil {
		return cookieCount{}, err
	}
	ctx := r.Context()
	c, err := p.browserConn(ctx)
	if err != nil {
		return cookieCount{}, err
	}
	if err := c.call(ctx, "", "Storage.setCookies", map[string]any{"cookies": list}, nil); err != nil {
		return cookieCount{}, cdpFailed(err)
	}
	return cookieCount{Count: len(list)}, nil
}

// browserConn is the connection for browser-level calls.
func (p *Plane) browserConn(ctx context.Context) (*conn, error) {
	return p.conn(ctx)
}

type cookiesQuery struct {
	URL    *string `json:"url"`
	Domain *string `json:"domain"`
}

// allCookies is every cookie of the browser, each as CDP's Network.Cookie.
func allCookies(ctx context.Context, c *conn) ([]json.RawMessage, error) {
	var res struct {
		Cookies []json.RawMessage `json:"cookies"`
	}
	if err := c.call(ctx, "", "Storage.getCookies", map[string]any{}, &res); err != nil {
		return nil, cdpFailed(err)
	}
	return res.Cookies, nil
}

func cookieDomain(raw json.RawMessage) (name, domain string) {
	var c struct {
		Name   string `json:"name"`
		Domain string `json:"domain"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Name, c.Domain
}

func (p *Plane) cookies(r *http.Request, in cookiesQuery) ([]json.RawMessage, error) {
	ctx := r.Context()
	var list []json.RawMessage
	if in.URL != nil && *in.URL != "" {
		c, s, err := p.session(ctx, "")
		if err != nil {
			return nil, err
		}
		var res struct {
			Cookies []json.RawMessage `json:"cookies"`
		}
		if err := c.call(ctx, s, "Network.getCookies", map[string]any{"urls": []string{*in.URL}}, &res); err != nil {
			return nil, cdpFailed(err)
		}
		list = res.Cookies
	} else {
		c, err := p.browserConn(ctx)
		if err != nil {
			return nil, err
		}
		if list, err = allCookies(ctx, c); err != nil {
			return nil, err
		}
	}
	out := []json.RawMessage{}
	for _, ck := range list {
		if in.Domain != nil {
			if _, d := cookieDomain(ck); !strings.Contains(d, *in.Domain) {
				continue
			}
		}
		out = append(out, ck)
	}
	return out, nil
}

type deleteCookiesQuery struct {
	Name   *string `json:"name"`
	URL    *string `json:"url"`
	Domain *string `json:"domain"`
	All    *bool   `json:"all"`
}

// deleteCookies deletes the cookies named (name with url or domain), or
// every cookie with all=true. On v1 a request with no parameter at all
// clears every cookie too: the Python AIO SDK's clear_cookies() sends
// DELETE /v1/browser/cookies bare.
func (p *Plane) deleteCookies(r *http.Request, in deleteCookiesQuery, v1 bool) (cookieCount, error) {
	all := in.All != nil && *in.All || v1 && in == (deleteCookiesQuery{})
	if !all && (in.Name == nil || (in.URL == nil && in.Domain == nil)) {
		return cookieCount{}, api.NewError(api.ErrInvalid, "browser: give name and url or domain, or all=true")
	}
	ctx := r.Context()
	if all {
		c, err := p.browserConn(ctx)
		if err != nil {
			return cookieCount{}, err
		}
		before, err := allCookies(ctx, c)
		if err != nil {
			return cookieCount{}, err
		}
		if err := c.call(ctx, "", "Storage.clearCookies", map[string]any{}, nil); err != nil {
			return cookieCount{}, cdpFailed(err)
		}
		return cookieCount{Count: len(before)}, nil
	}
	c, s, err := p.session(ctx, "")
	if err != nil {
		return cookieCount{}, err
	}
	before, err := allCookies(ctx, c)
	if err != nil {
		return cookieCount{}, err
	}
	params := map[string]any{"name": *in.Name}
	if in.URL != nil {
		params["url"] = *in.URL
	}
	if in.Domain != nil {
		params["domain"] = *in.Domain
	}
	if err := c.call(ctx, s, "Network.deleteCookies", params, nil); err != nil {
		return cookieCount{}, cdpFailed(err)
	}
	after, err := allCookies(ctx, c)
	if err != nil {
		return cookieCount{}, err
	}
	return cookieCount{Count: len(before) - len(after)}, nil
}

// --- network/requests

type networkQuery struct {
	Limit *uint64 `json:"limit"`
	Clear *bool   `json:"clear"`
}

// requests answers the ring, newest first; the first call turns capture
// on for every open tab (and every tab driven later). It answers with
// the browser down too (what was captured, or nothing).
func (p *Plane) requests(r *http.Request, in networkQuery) ([]Request, error) {
	if p.net.start() {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if tabs, err := p.tabs(ctx); err == nil {
			if c, err := p.conn(ctx); err == nil {
				for _, t := range tabs {
					if s, err := c.session(ctx, t.ID); err == nil {
						_ = p.net.attach(ctx, c, s)
					}
				}
			}
		}
	}
	limit := -1
	if in.Limit != nil {
		limit = int(min(*in.Limit, netCap))
	}
	return p.net.list(limit, in.Clear != nil && *in.Clear), nil
}
