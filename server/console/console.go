package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/a2c-smcp/a2c-go/server"
)

// Config configures a [Console].
type Config struct {
	// Server is the hub the console shows and mounts itself on; its
	// Config.Calls must be set.
	Server *server.Server
	// Token is the hub's token, asked for at login; empty: the console is
	// open, as the hub is.
	Token string
	// Sandboxes are the aiod daemons whose files, commands and python
	// cells the console offers.
	Sandboxes []Sandbox
	// Pool is the sandbox pool the Sandboxes page lists, with each
	// sandbox's usage and its pause, resume and delete; nil: none (the
	// page shows no pool, and its routes answer 404).
	Pool Pool
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// Sandbox is an aiod daemon the console reaches: Name is how the console
// names it (a2c up: the sandbox Computer's name), URL its HTTP API's
// base URL, Token its API key (empty: none).
type Sandbox struct {
	Name, URL, Token string
}

// Console is the hub's web console, mounted at / on its server.
type Console struct {
	cfg      Config
	srv      *server.Server
	log      *slog.Logger
	sessions *sessions
	static   fs.FS
	boxes    map[string]*sandboxProxy

	streamsMu sync.Mutex
	streams   map[string]int // live streams by session (or address: an open console)

	done      chan struct{} // closed by Close: the live streams end
	closeOnce sync.Once
}

//go:embed static
var staticFiles embed.FS

// Console limits.
const (
	// maxBody bounds the body of the console's own POST requests.
	maxBody = 1 << 20
)

// New mounts the console on cfg.Server (see the package documentation
// for its routes) and returns it; Close ends its live streams, proxied
// sandbox requests and sessions.
func New(cfg Config) (*Console, error) {
	if cfg.Server == nil {
		return nil, errors.New("console: no server")
	}
	if !cfg.Server.Config().Calls {
		return nil, errors.New("console: the server keeps no call log (server.Config.Calls)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg:      cfg,
		srv:      cfg.Server,
		log:      cfg.Logger,
		sessions: newSessions(cfg.Token),
		static:   sub,
		boxes:    make(map[string]*sandboxProxy),
		streams:  make(map[string]int),
		done:     make(chan struct{}),
	}
	for _, b := range cfg.Sandboxes {
		p, err := newSandboxProxy(b, cfg.Logger)
		if err != nil {
			return nil, err
		}
		if _, dup := c.boxes[b.Name]; dup {
			return nil, errors.New("console: two sandboxes named " + strconv.Quote(b.Name))
		}
		c.boxes[b.Name] = p
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.root)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.logout)
	mux.HandleFunc("GET /console/static/{file}", c.staticFile)
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, c.apiAuth(h)) }
	api("GET /api/console/session", c.session)
	api("GET /api/console/offices", c.offices)
	api("GET /api/console/offices/{office}", c.office)
	api("GET /api/console/offices/{office}/computers/{computer}", c.computer)
	api("POST /api/console/offices/{office}/computers/{computer}/call", c.call)
	api("GET /api/console/calls", c.calls)
	api("GET /api/console/calls/stream", c.stream)
	api("GET /api/console/calls/{agent}/{req_id}", c.callDetail)
	api("GET /api/console/sandboxes", c.sandboxes)
	api("/api/console/sandboxes/{name}/api/{path...}", c.sandboxAPI)
	api("GET /api/console/pool/sandboxes", c.poolAPI(c.poolList))
	api("POST /api/console/pool/sandboxes/{id}/pause", c.poolAPI(c.poolAction("paused", Pool.Pause)))
	api("POST /api/console/pool/sandboxes/{id}/resume", c.poolAPI(c.poolAction("resumed", Pool.Resume)))
	api("DELETE /api/console/pool/sandboxes/{id}", c.poolAPI(c.poolDelete))
	api("/api/console/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such route")
	})
	h := c.guard(mux)
	for _, p := range []string{"/{$}", "/login", "/logout", "/console/static/", "/api/console/"} {
		cfg.Server.Handle(p, h)
	}
	return c, nil
}

// Close ends the console's live streams, proxied sandbox requests and
// sessions. A server registers it with http.Server.RegisterOnShutdown, so
// that open pages do not hold its shutdown.
func (c *Console) Close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.sessions.clear()
	})
}

// securityHeaders are on every answer of the console.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "same-origin",
	"X-Frame-Options":         "DENY",
}

// guard sets the security headers and refuses a state-changing request
// from another origin (see [Console.sameOrigin]).
func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !c.sameOrigin(r) {
				writeError(w, http.StatusForbidden, "cross-origin request refused")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// apiAuth asks for a session (when the hub has a token) and marks the
// answer as not to be cached.
func (c *Console) apiAuth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		se, ok := c.sessions.lookup(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "login required")
			return
		}
		if se != nil {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, se))
		}
		next(w, r)
	})
}

type sessionKey struct{}

// sessionOf is the session apiAuth found for r (nil: the console is
// open).
func sessionOf(r *http.Request) *session {
	se, _ := r.Context().Value(sessionKey{}).(*session)
	return se
}

// sessionDone is closed when r's session ends (nil, never closed, when
// the console is open).
func sessionDone(r *http.Request) <-chan struct{} {
	if se := sessionOf(r); se != nil {
		return se.done
	}
	return nil
}

// root serves the app, or the login form to a request without a session.
func (c *Console) root(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	page := "index.html"
	if !c.sessions.valid(r) {
		page = "login.html"
	}
	c.serveFile(w, r, page)
}

// staticFile serves app.js, app.css and whatever else static/ holds
// (public: no data).
func (c *Console) staticFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "" || name == "index.html" || name == "login.html" || !fs.ValidPath(name) {
		writeError(w, http.StatusNotFound, "no such file")
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	c.serveFile(w, r, name)
}

func (c *Console) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(c.static, name)
	if err != nil {
		writeError(w, http.StatusNotFound, "no such file")
		return
	}
	http.ServeContent(w, r, name, startTime, bytesReader(b))
}

// writeError answers with the console's error shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	writeJSON(w, status, struct {
		Error body `json:"error"`
	}{body{status, msg}})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
