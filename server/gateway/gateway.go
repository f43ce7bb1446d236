package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/server"
)

// DefaultAgent is the Agent name of the gateway's requests: the call
// log, the spans and the Computers see it.
const DefaultAgent = "a2c-mcp-gateway"

// MaxOffices bounds the offices served at once; a request for one more
// is answered 503. An office with no open session is let go after
// [OfficeIdle] without requests.
const MaxOffices = 1024

// MaxSessions bounds the handshake-era sessions open at once, across
// offices; a request that would open one more is answered 503. Idle
// sessions close after [SessionIdle].
const MaxSessions = 256

// SessionIdle closes a session that has seen no request for this long.
const SessionIdle = 30 * time.Minute

// OfficeIdle lets go of an office's MCP server when it has had no request
// and no open session for this long.
const OfficeIdle = 10 * time.Minute

// ClusterPoll is how often, in a cluster, an office with open sessions is
// read again (see the package documentation).
const ClusterPoll = 2 * time.Second

// MaxBody is the largest request body the gateway reads (413 past it).
const MaxBody = 4 << 20

// Config configures a [Gateway].
type Config struct {
	// Hub is the server whose offices are served. Required.
	Hub *server.Server
	// Agent is the Agent name of the gateway's requests; default
	// [DefaultAgent].
	Agent string
	// CallTimeout is a tools/call's budget, sent to the Computer as the
	// call's timeout (whole seconds, 1 to 3600). Default 60 s.
	CallTimeout time.Duration
	// ListTimeout bounds each Computer's answer while the gateway reads an
	// office's tools and resources; a Computer that does not answer in
	// time is left out of that list. Default 5 s.
	ListTimeout time.Duration
	// DefaultOffice is the office /mcp serves; default "default".
	DefaultOffice string
	// Version is the serverInfo version.
	Version string
	// Logger receives the gateway's logs (default: discarded).
	Logger *slog.Logger
}

// Gateway serves the offices of a hub as MCP servers (see the package
// documentation). Make one with [New], mount it with
// [server.Server.HandleMCP], and Close it before the hub shuts down.
type Gateway struct {
	cfg    Config
	hub    *server.Server
	log    *slog.Logger
	caller server.Caller

	ctx  context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup // the offices' goroutines and the janitor

	mu      sync.Mutex
	offices map[string]*office
	closed  bool

	// slowOnly sends every request to the SDK (tests compare the fast
	// path's answers with the SDK's); fastServed counts the fast path's
	// answers.
	slowOnly   atomic.Bool
	fastServed atomic.Int64
}

// New returns a gateway for cfg.Hub and starts its janitor, which lets
// idle offices go; Close stops it.
func New(cfg Config) (*Gateway, error) {
	if cfg.Hub == nil {
		return nil, fmt.Errorf("gateway: Config.Hub is required")
	}
	if cfg.Agent == "" {
		cfg.Agent = DefaultAgent
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 60 * time.Second
	}
	cfg.CallTimeout = min(max(cfg.CallTimeout, time.Second), time.Hour)
	if cfg.ListTimeout <= 0 {
		cfg.ListTimeout = 5 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.DefaultOffice == "" {
		cfg.DefaultOffice = "default"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	g := &Gateway{cfg: cfg, hub: cfg.Hub, log: cfg.Logger, caller: server.Caller{Agent: cfg.Agent},
		ctx: ctx, stop: stop, offices: make(map[string]*office)}
	g.wg.Add(1)
	go g.janitor()
	return g, nil
}

// Close ends every session and every call in flight (their Computers are
// told to cancel them), and stops the gateway's goroutines; it returns
// once they have. Later requests are answered 503.
func (g *Gateway) Close() {
	g.mu.Lock()
	g.closed = true
	offices := g.offices
	g.offices = map[string]*office{}
	g.mu.Unlock()
	g.stop()
	for _, o := range offices {
		o.close()
	}
	g.wg.Wait()
}

// ServeHTTP answers an MCP request on a route of [server.Server.HandleMCP]:
// the hub's token first, then the office, then the office's MCP server.
// (The hub's Host and Origin rule ran before.)
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.hub.Authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2c"`)
		writeError(w, http.StatusUnauthorized, "Unauthorized: the hub's token is required (Authorization: Bearer TOKEN, or the auth field's header)")
		return
	}
	id, named := server.MCPOffice(r)
	if !named {
		id = g.cfg.DefaultOffice
	}
	if id == "" || len(id) > server.MaxOfficeID || !utf8.ValidString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Bad Request: an office id is 1 to %d bytes of UTF-8", server.MaxOfficeID))
		return
	}
	o, status, msg := g.office(id)
	if o == nil {
		writeError(w, status, msg)
		return
	}
	defer o.done()
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	sid := r.Header.Get("Mcp-Session-Id")
	switch {
	case sid != "":
		o.touch(sid)
		switch {
		case r.Method == http.MethodDelete:
			o.endSession(sid)
		case r.Method == http.MethodPost && o.fastSession(w, r, sid):
			return
		}
	case r.Method == http.MethodPost:
		next, err := newEra(r)
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body too large: the gateway reads at most %d MiB", MaxBody>>20))
			return
		case err != nil:
			// The client went away, or its body stalled past the hub's
			// bound: whoever still listens is told so.
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, "Request Timeout: the request's body did not arrive")
			return
		}
		if next {
			if !o.fast(w, r) {
				o.next.ServeHTTP(w, r)
			}
			return
		}
		if !g.admitSession() {
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("Too many sessions: %d MCP sessions are open on this hub; end one (DELETE) or try later", MaxSessions))
			return
		}
	}
	o.handler.ServeHTTP(w, r)
}

// nextRevision is the first MCP revision without sessions.
const nextRevision = "2026-07-28"

// newEra reports whether a POST without a session speaks MCP 2026-07-28,
// which the SDK serves on its stateless handler only: its
// MCP-Protocol-Version header names that revision or a later one, or,
// without the header, its body is server/discover or carries the
// revision in _meta. The body is read (at most MaxBody) and put back.
func newEra(r *http.Request) (bool, error) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= nextRevision, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return false, nil // a batch, or no JSON: the session handler answers it
	}
	var v string
	_ = json.Unmarshal(m.Params.Meta["io.modelcontextprotocol/protocolVersion"], &v)
	return m.Method == "server/discover" || v >= nextRevision, nil
}

// office returns the office's MCP server, made on first use, counted as
// in use until done is called; nil with the status and message to answer
// when it cannot be served.
func (g *Gateway) office(id string) (o *office, status int, msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, http.StatusServiceUnavailable, "Service Unavailable: the hub is shutting down"
	}
	o = g.offices[id]
	if o == nil {
		if len(g.offices) >= MaxOffices {
			g.evictLocked()
		}
		if len(g.offices) >= MaxOffices {
			g.evictOneLocked()
		}
		if len(g.offices) >= MaxOffices {
			return nil, http.StatusServiceUnavailable, fmt.Sprintf("Too many offices: the gateway serves at most %d at once; try later", MaxOffices)
		}
		o = newOffice(g, id)
		g.offices[id] = o
	}
	o.use()
	return o, 0, ""
}

// admitSession reports whether one more session may open: a POST without
// a session may be an initialize (2026-07-28 requests open none, but are
// refused alike while the hub is full of sessions).
func (g *Gateway) admitSession() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, o := range g.offices {
		n += o.sessions()
	}
	return n < MaxSessions
}

// janitor lets go of the offices that have been idle for OfficeIdle and
// closes the sessions idle for SessionIdle.
func (g *Gateway) janitor() {
	defer g.wg.Done()
	t := time.NewTicker(OfficeIdle / 10)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
			g.mu.Lock()
			g.evictLocked()
			offices := make([]*office, 0, len(g.offices))
			for _, o := range g.offices {
				offices = append(offices, o)
			}
			g.mu.Unlock()
			for _, o := range offices {
				o.closeIdle(SessionIdle)
			}
		}
	}
}

// evictLocked lets go of the idle offices.
func (g *Gateway) evictLocked() {
	for id, o := range g.offices {
		if o.idle(OfficeIdle) {
			delete(g.offices, id)
			g.wg.Add(1)
			go func() { // o.close waits for its goroutine: never under g.mu
				defer g.wg.Done()
				o.close()
			}()
		}
	}
}

// evictOneLocked lets go of the office used longest ago that has no
// session and no request in flight, idle or not: offices that requests
// made and left (even refused ones) must not lock the others out.
func (g *Gateway) evictOneLocked() {
	var lru *office
	var lruID string
	var lruAt time.Time
	for id, o := range g.offices {
		at, free := o.free()
		if free && (lru == nil || at.Before(lruAt)) {
			lru, lruID, lruAt = o, id, at
		}
	}
	if lru == nil {
		return
	}
	delete(g.offices, lruID)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		lru.close()
	}()
}

// writeError is the gateway's own refusal: the hub's MCP error shape.
var writeError = server.WriteMCPError

// sdkOptions are the options of every office's MCP server.
func (g *Gateway) sdkOptions() *sdk.ServerOptions {
	return &sdk.ServerOptions{
		Logger: g.log.With("component", "mcp-gateway"),
		// Every revision the SDK speaks, 2026-07-28 included (which the
		// SDK's server leaves out unless asked).
		SupportedProtocolVersions: sdk.SupportedProtocolVersions(),
		Capabilities: &sdk.ServerCapabilities{
			Tools:     &sdk.ToolCapabilities{ListChanged: true},
			Resources: &sdk.ResourceCapabilities{ListChanged: true},
		},
	}
}
