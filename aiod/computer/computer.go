package computer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// DefaultURL is where the worker is reached when AIO_COMPUTER_USE_URL is
// not set.
const DefaultURL = "http://127.0.0.1:18100"

// The answer to every computer-use route while the worker cannot be
// reached, word for word the published daemon's.
const (
	UnavailableMessage = "computer-use worker is not available"
	UnavailableHint    = "start computer-use or set AIO_COMPUTER_USE_URL"
)

// Config configures the plane.
type Config struct {
	// URL is the worker's base URL. Default DefaultURL.
	URL string
	// Dial opens connections to the worker: inside the sandbox's network
	// when the daemon runs the worker there. Nil: a plain dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// APIKey is presented (Authorization: Bearer) on the plane's own
	// requests to the worker: the capability probe and the MCP GUI tools.
	// A worker started with AIO_API_KEY, sharing the daemon's key, asks
	// for it; forwarded client requests carry the client's own.
	APIKey string
	// WorkerKey is the key of a worker the daemon runs itself
	// (aiod --desktop), which knows only that key and never the
	// daemon's: it is presented on the plane's own requests, and on
	// forwarded ones it replaces the client's credentials (the daemon has
	// checked them already; the api_key query parameter is removed), so
	// the user's key never reaches the worker and nothing that skips the
	// daemon can drive the desktop.
	WorkerKey string
	Logger    *slog.Logger
}

// Plane forwards the computer-use routes to the worker.
type Plane struct {
	base string
	key  string
	// ownWorker: key is a WorkerKey, replacing forwarded credentials.
	ownWorker bool
	log       *slog.Logger
	client    *http.Client
}

// New returns the plane.
func New(cfg Config) *Plane {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return dial(ctx, network, addr)
		},
		ResponseHeaderTimeout: responseWait,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
	}
	p := &Plane{base: strings.TrimRight(cfg.URL, "/"), key: cfg.APIKey, log: cfg.Logger, client: &http.Client{Transport: tr}}
	if cfg.WorkerKey != "" {
		p.key, p.ownWorker = cfg.WorkerKey, true
	}
	return p
}

// responseWait bounds the wait for the worker's answer: the longest
// documented action is a batch with 20 s of waits and a screenshot.
const responseWait = time.Minute

// Mount serves /v2/computer/* and the v1 aliases.
func (p *Plane) Mount(mux *http.ServeMux) {
	mux.HandleFunc("/v2/computer/", func(w http.ResponseWriter, r *http.Request) { p.forward(w, r, r.URL.EscapedPath()) })
	mux.HandleFunc("/v1/browser/actions", func(w http.ResponseWriter, r *http.Request) { p.forward(w, r, "/v2/computer/actions") })
	mux.HandleFunc("/v1/display/record", func(w http.ResponseWriter, r *http.Request) { p.forward(w, r, "/v2/computer/record") })
}

// Close releases the plane's idle connections to the worker.
func (p *Plane) Close(context.Context) error {
	p.client.CloseIdleConnections()
	return nil
}

// hopHeaders are not forwarded in either direction (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	for _, c := range src.Values("Connection") {
		for f := range strings.SplitSeq(c, ",") {
			dst.Del(strings.TrimSpace(f))
		}
	}
}

// forward sends the request to the worker at path (the v1 aliases map
// to their v2 paths) with the same method, query, headers and body, and
// relays the answer unchanged. A worker that cannot be reached (nothing
// listens, the dial times out, or it closes before answering) gets the
// documented 503.
func (p *Plane) forward(w http.ResponseWriter, r *http.Request, path string) {
	target := p.base + path
	query := r.URL.RawQuery
	if p.ownWorker {
		query, _ = api.SplitKey(query)
	}
	if query != "" {
		target += "?" + query
	}
	var body io.Reader
	if r.Body != nil && r.Body != http.NoBody {
		body = r.Body
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, body)
	if err != nil {
		unavailable(w)
		return
	}
	copyHeaders(req.Header, r.Header)
	if p.ownWorker {
		api.DropCredentials(req.Header)
		p.authorize(req)
	}
	req.ContentLength = r.ContentLength
	resp, err := p.client.Do(req)
	if err != nil {
		if r.Context().Err() == nil {
			p.log.Debug("computer-use worker unreachable", "url", p.base, "err", err)
		}
		unavailable(w)
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func unavailable(w http.ResponseWriter) {
	api.Fail(w, http.StatusServiceUnavailable, UnavailableMessage, nil, UnavailableHint)
}

// Capability is capabilities.computer (the GuiCapability schema): what
// the worker (package desktop) serves at /capabilities and the probe
// reads back.
type Capability struct {
	Status               string     `json:"status"`
	Provider             *string    `json:"provider"`
	Display              *string    `json:"display"`
	Screenshot           bool       `json:"screenshot"`
	Actions              bool       `json:"actions"`
	Clipboard            bool       `json:"clipboard"`
	Recording            bool       `json:"recording"`
	Accessibility        bool       `json:"accessibility"`
	AccessibilityBackend *string    `json:"accessibility_backend"`
	Resolution           Resolution `json:"resolution"`
	Missing              []string   `json:"missing"`
	Warnings             []string   `json:"warnings"`
}

// Resolution is the display's size, null parts when unknown.
type Resolution struct {
	Width  *int `json:"width"`
	Height *int `json:"height"`
}

// Probe asks the worker for its capabilities (GET /capabilities, within
// ctx). A worker that does not answer is "absent", with the missing part
// and the failure named, as the published daemon reports them; the
// display is the daemon's own DISPLAY then.
func (p *Plane) Probe(ctx context.Context, display string) Capability {
	c := Capability{Status: "absent", Missing: []string{}, Warnings: []string{}}
	if display != "" {
		c.Display = &display
	}
	fail := func(err error) Capability {
		c.Missing = append(c.Missing, "computer-use")
		c.Warnings = append(c.Warnings, "computer-use worker probe failed: error sending request for url ("+p.base+"/capabilities)")
		if err != nil {
			p.log.Debug("computer-use worker probe failed", "err", err)
		}
		return c
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/capabilities", nil)
	if err != nil {
		return fail(err)
	}
	p.authorize(req)
	resp, err := p.client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(errors.New(resp.Status))
	}
	var got Capability
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&got); err != nil {
		return fail(err)
	}
	switch got.Status {
	case "ready", "degraded", "absent":
	default:
		got.Status = "ready"
	}
	if got.Missing == nil {
		got.Missing = []string{}
	}
	if got.Warnings == nil {
		got.Warnings = []string{}
	}
	if got.Provider == nil {
		ext := "external"
		got.Provider = &ext
	}
	if got.Display == nil {
		got.Display = c.Display
	}
	return got
}
