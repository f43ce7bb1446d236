package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Dialer opens a connection the way the daemon reaches its programs
// (inside the sandbox's network when it has its own).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// CDPProxy forwards /cdp/* to a browser's DevTools endpoint: HTTP (the
// /json routes) and the WebSocket of /cdp/devtools/... , with the prefix
// removed (/cdp/devtools/browser/<id> → /devtools/browser/<id>). It
// checks no credential itself: the caller wraps it in its own auth, and
// the query parameter api_key is dropped before forwarding.
//
// Chromium accepts DevTools requests only with a Host that is an IP
// address or localhost, and WebSocket upgrades only without an Origin it
// was not told to allow: the proxy presents the endpoint's own host and
// drops Origin, the caller's auth being what admits a client.
type CDPProxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	client *http.Client
}

// NewCDPProxy returns the proxy to endpoint (http://HOST:PORT) through
// dial.
func NewCDPProxy(endpoint string, dial Dialer) (*CDPProxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("cdp proxy: bad DevTools endpoint %q", endpoint)
	}
	tr := &http.Transport{DialContext: dial, ResponseHeaderTimeout: 30 * time.Second, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: 90 * time.Second}
	p := &CDPProxy{target: u, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
	p.rp = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", u.Host
			r.Out.Host = u.Host
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, browser.CDPPrefix)
			if r.Out.URL.Path == "" {
				r.Out.URL.Path = "/"
			}
			r.Out.URL.RawPath = ""
			// The query byte for byte but the key: /json/new?<url> takes
			// it whole as the URL to open.
			r.Out.URL.RawQuery, _ = api.SplitKey(r.In.URL.RawQuery)
			api.DropCredentials(r.Out.Header)
			r.Out.Header.Del("Origin")
			// The answer's WebSocket URLs are rewritten for the client
			// (see publicURLs), which needs the request it sent.
			r.Out = r.Out.WithContext(context.WithValue(r.Out.Context(), inboundKey{}, r.In))
		},
		ModifyResponse: publicURLs,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "the browser's DevTools endpoint is not reachable", http.StatusBadGateway)
		},
	}
	return p, nil
}

// inboundKey holds, in an outbound request's context, the client's
// request it was made from.
type inboundKey struct{}

// maxJSONAnswer bounds a /json answer read for rewriting (a list of a
// few hundred targets is far smaller).
const maxJSONAnswer = 4 << 20

// publicURLs rewrites the webSocketDebuggerUrl of the DevTools /json
// answers (version, list, new) into the URL the client reaches them by,
// through this proxy: what browser.CDPURL builds from the client's
// request (its host, forwarded headers and query). Clients such as
// Puppeteer's connect({browserURL}) and Playwright's connectOverCDP with
// an http:// URL read /json/version and dial what it names; Chromium's
// own URL (its loopback address) would not reach it from elsewhere.
func publicURLs(resp *http.Response) error {
	in, _ := resp.Request.Context().Value(inboundKey{}).(*http.Request)
	if in == nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.Path, "/json") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
	if err != nil {
		resp.Body.Close()
		return fmt.Errorf("cdp proxy: read %s: %w", resp.Request.URL.Path, err)
	}
	if len(body) > maxJSONAnswer {
		// Too large to rewrite (pages with huge URLs): passed on whole
		// and unchanged, what was read first, then the rest.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	// The public URLs keep the client's api_key (a WebSocket client may
	// have no other way to send it) and nothing else of its query.
	pub := in.Clone(in.Context())
	_, pub.URL.RawQuery = api.SplitKey(in.URL.RawQuery)
	var v any
	if json.Unmarshal(body, &v) == nil && rewriteWS(v, pub) {
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false) // a query's & stays as it is
		if enc.Encode(v) == nil {
			body = bytes.TrimSuffix(out.Bytes(), []byte("\n"))
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// rewriteWS replaces every webSocketDebuggerUrl in v (an object, or a
// list of them) by its public form; it reports whether it changed any.
func rewriteWS(v any, in *http.Request) bool {
	changed := false
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			changed = rewriteWS(e, in) || changed
		}
	case map[string]any:
		if s, ok := t["webSocketDebuggerUrl"].(string); ok {
			if u, err := url.Parse(s); err == nil && strings.HasPrefix(u.Path, "/devtools/") {
				t["webSocketDebuggerUrl"] = browser.CDPURL(in, browser.CDPPrefix, u.Path)
				changed = true
			}
		}
	}
	return changed
}

// ServeHTTP forwards one request or WebSocket.
func (p *CDPProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !browser.UnderCDP(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// BrowserPath is the path of the browser's own WebSocket, from
// /json/version's webSocketDebuggerUrl: /devtools/browser/<uuid>.
func (p *CDPProxy) BrowserPath(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.target.String()+"/json/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/json/version answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
		return "", fmt.Errorf("/json/version: %w", err)
	}
	ws, err := url.Parse(v.WS)
	if err != nil || !strings.HasPrefix(ws.Path, "/devtools/browser/") {
		return "", errors.New("/json/version has no browser WebSocket URL")
	}
	return ws.Path, nil
}
