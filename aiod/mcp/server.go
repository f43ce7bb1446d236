package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/aiod/code"
	"github.com/a2c-smcp/a2c-go/aiod/commands"
	"github.com/a2c-smcp/a2c-go/aiod/files"
	"github.com/a2c-smcp/a2c-go/internal/origin"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// MaxBody is the largest POST body /mcp reads (the daemon's other JSON
// routes stop at 2 MiB). A larger one is answered 413 before any of it
// is decoded.
const MaxBody = 8 << 20

// MaxBatch is the most elements a JSON-RPC batch may hold; a larger one
// is answered with one -32600 error (id null), none of it run.
const MaxBatch = 100

// MaxBatchAnswer bounds a batch's answer: once the answers of its
// elements reach this many bytes, the requests left are answered -32000
// without being run. One element's answer may still take it past.
const MaxBatchAnswer = 16 << 20

// MaxSessions bounds the streamable-HTTP sessions open at once (idle ones
// close after [SessionIdle]); an initialize that would open one more is
// answered 503 with a JSON-RPC error (-32000). The plain path and
// in-process connections do not count.
const MaxSessions = 256

// SessionIdle closes a streamable-HTTP session that has seen no request
// for this long.
const SessionIdle = 30 * time.Minute

// statelessProtocol is the first MCP revision without the initialize
// handshake (SEP-2575). /mcp serves it on its own path (stateless.go),
// chosen per request; the plain path and the sessions keep the
// handshake-era revisions.
const statelessProtocol = "2026-07-28"

// protocolVersions are the revisions /mcp negotiates, newest first: those
// the Go SDK supports, up to (not including) [statelessProtocol].
var protocolVersions = slices.DeleteFunc(sdk.SupportedProtocolVersions(), func(v string) bool { return v >= statelessProtocol })

// Browser is what the three browser tools drive. A daemon without a
// browser plane leaves it nil and the tools answer isError. An error's
// text is the tool's isError text, so it must read well on its own.
type Browser interface {
	// Info describes the browser (user agent, CDP url, viewport):
	// browser_get_info's JSON. origin is the /mcp request the call came
	// with (its Host, X-Forwarded-* headers and query build the URLs), or
	// nil for a call through [Server.Connect]; see [Origin].
	Info(ctx context.Context, origin *http.Request) (any, error)
	// Screenshot returns an image of the whole display and its MIME
	// type.
	Screenshot(ctx context.Context) ([]byte, string, error)
	// Action performs one GUI action: the tool's "action" object, a
	// POST /v2/computer/actions body whose action_type the tool has
	// already checked against [ActionTypes].
	Action(ctx context.Context, action json.RawMessage) error
}

// Config configures a [Server]. The engines are the ones the HTTP planes
// serve, so a tool and its route share sessions, processes and files.
type Config struct {
	// Commands runs sandbox_execute_bash.
	Commands *commands.Engine
	// Files runs sandbox_file_operations and sandbox_str_replace_editor.
	Files *files.Engine
	// Code runs sandbox_execute_code.
	Code *code.Engine
	// Context is what sandbox_get_context reports (GET /v2/sandbox's
	// facts); nil answers isError.
	Context func(ctx context.Context) (any, error)
	// Packages lists the installed packages of a language (python or
	// nodejs) as GET /v2/sandbox/packages words them; nil answers isError.
	Packages func(ctx context.Context, lang string) (string, error)
	// Browser drives the browser tools; nil: they answer isError.
	Browser Browser
	// SkillsPath is where sandbox_load_skill finds skills
	// (AIO_SKILLS_PATH): a directory holding SKILL.md, or a tree of them.
	SkillsPath string
	// Upstreams is EXTRA_MCP_SERVERS: a JSON object of loopback MCP
	// servers whose tools are listed beside the built-in ones.
	Upstreams string
	// Origins is the daemon's Host and Origin rule (package origin),
	// which /mcp answers in JSON-RPC's shape. Nil: origin.Loopback(), the
	// loopback names only.
	Origins *origin.Policy
	// Version is the serverInfo version (aiod.Version).
	Version string
	// Logger receives the endpoint's logs (default: discarded).
	Logger *slog.Logger
	// Registerer, when set, gets mcp_tool_calls_total{tool,outcome} and
	// mcp_tool_call_duration_seconds{tool} (tool: a built-in's name,
	// "upstream:<name>", or "(unknown)").
	Registerer prometheus.Registerer
	// TracerProvider, if set, traces each tools/call (aiod.tool, a child
	// of the W3C trace context the request carries in params._meta; the
	// commands and code engines' aiod.command and aiod.cell below it).
	// Nil traces nothing.
	TracerProvider trace.TracerProvider
	// BeforeCall, if set, runs before every tools/call on every path;
	// an error answers the call isError with the error's text (a pool
	// resumes a paused sandbox here: see aiod.Config.BeforeTool).
	BeforeCall func(ctx context.Context) error
}

// Server is aiod's MCP endpoint: the built-in tools and the upstreams of
// [Config.Upstreams] behind one dispatcher, reached over POST /mcp (plain
// stateless JSON-RPC, or the streamable-HTTP transport with sessions) and
// over [Server.Connect] in the same process. Make one with [New]; it is
// safe for concurrent use.
type Server struct {
	cfg       Config
	log       *slog.Logger
	origins   *origin.Policy // cfg.Origins, never nil
	tools     []*tool        // built-ins, in the published order
	byName    map[string]*tool
	upstreams []*upstream
	warnings  []string
	client    *http.Client // to the upstreams
	metrics   *metrics
	bash      bashState
	tracer    trace.Tracer // nil: tracing off

	sdk    *sdk.Server
	stream *sdk.StreamableHTTPHandler

	// ctx ends at Close: calls in flight on the plain path and every
	// in-memory session end with it.
	ctx  context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	inflight map[string]map[*context.CancelFunc]struct{} // plain-path calls by id
	opening  int                                         // initializes admitted, not yet answered
	maxSess  int                                         // MaxSessions (tests lower it)
	maxBatch int                                         // MaxBatchAnswer (tests lower it)
}

// New returns a server for cfg. Entries of cfg.Upstreams that cannot be
// used (remote URLs, stdio commands, malformed entries) are skipped with
// a warning, logged here and kept for [Server.Warnings]; New never fails.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	ctx, stop := context.WithCancel(context.Background())
	if cfg.Origins == nil {
		cfg.Origins = origin.Loopback()
	}
	s := &Server{cfg: cfg, origins: cfg.Origins, log: cfg.Logger, ctx: ctx, stop: stop, inflight: map[string]map[*context.CancelFunc]struct{}{},
		metrics: newMetrics(cfg.Registerer), client: upstreamClient(),
		maxSess: MaxSessions, maxBatch: MaxBatchAnswer}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	s.tools = s.builtins()
	s.byName = make(map[string]*tool, len(s.tools))
	for _, t := range s.tools {
		s.byName[t.name] = t
	}
	s.upstreams, s.warnings = parseUpstreams(cfg.Upstreams)
	for _, w := range s.warnings {
		s.log.Warn("EXTRA_MCP_SERVERS entry skipped", "reason", w)
	}
	for _, u := range s.upstreams {
		s.log.Info("MCP upstream registered", "name", u.name, "url", u.display, "prefix", u.prefix)
	}

	sdkLog := slog.New(demote{cfg.Logger.Handler()})
	opts := &sdk.ServerOptions{
		Logger:                    sdkLog,
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: false}},
		SupportedProtocolVersions: protocolVersions,
	}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "aiod", Version: cfg.Version}, opts)
	s.sdk.AddReceivingMiddleware(s.toolsMiddleware)
	hopts := sdk.StreamableHTTPOptions{
		Logger:              sdkLog,
		SessionTimeout:      SessionIdle,
		MaxRequestBodyBytes: MaxBody,
		// Host and Origin are checked in ServeHTTP for every path.
		DisableLocalhostProtection: true,
	}
	s.stream = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk }, &hopts)
	return s
}

// Warnings lists the EXTRA_MCP_SERVERS entries New skipped and why.
func (s *Server) Warnings() []string { return slices.Clone(s.warnings) }

// Close ends the endpoint's state: every streamable-HTTP and in-memory
// session and every call in flight (whose commands end with their whole
// process trees). A call that begins after Close is cancelled at once;
// the protocol answers (initialize, ping, tools/list) still come. It
// does not block.
func (s *Server) Close(context.Context) error {
	s.stop()
	for ss := range s.sdk.Sessions() {
		_ = ss.Close()
	}
	return nil
}

// Connect returns the client end of an in-memory transport whose server
// end is served by s (the same tools, the same dispatcher) until ctx ends,
// the client closes, or s is closed. A Computer in the same process uses
// it instead of HTTP; cancelling a call's context on the client sends
// notifications/cancelled, which ends the call as on /mcp.
func (s *Server) Connect(ctx context.Context) (sdk.Transport, error) {
	ct, st := newPipe()
	ss, err := s.sdk.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	// The session ends with ctx or with s; the watcher below ends with
	// the session, so nothing outlives it.
	stopCtx := context.AfterFunc(ctx, func() { _ = ss.Close() })
	stopS := context.AfterFunc(s.ctx, func() { _ = ss.Close() })
	go func() {
		_ = ss.Wait()
		stopCtx()
		stopS()
	}()
	return ct, nil
}

// ServeHTTP answers /mcp. Host and Origin are checked first (see
// [Server.refuseRebinding]: 421 or 403). A request with Mcp-Session-Id, a GET or a
// DELETE belongs to a streamable-HTTP session and goes to the SDK's
// handler. A POST body is read (at most [MaxBody], else 413) and parsed
// (-32700 on HTTP 200 when it is not JSON) before it is routed, so those
// answers are the same on both paths; a POST without a session goes to
// the SDK only when it opens one: a single initialize request whose
// Accept lists text/event-stream (see [wantsSession]). Every other POST
// is plain stateless JSON-RPC, whatever its Accept. Both reach the same
// tools through the same dispatcher.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.refuseRebinding(w, r) {
		return
	}
	clearOrigin(r.Header)
	sid := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		s.serveSDK(w, r)
		return
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, response{JSONRPC: "2.0", ID: nullID,
			Error: &rpcError{Code: codeInvalidRequest, Message: "Method Not Allowed: /mcp takes POST (and GET and DELETE for streamable-HTTP sessions)"}})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, response{JSONRPC: "2.0", ID: nullID,
				Error: &rpcError{Code: codeInvalidRequest, Message: "Request body too large: /mcp accepts at most 8 MiB"}})
		}
		// Otherwise the client went away or stalled: nobody to answer.
		return
	}
	msgs, batch, perr := parseBody(body)
	if perr != nil {
		// On HTTP 200 as JSON-RPC over HTTP has it, but a 2026-07-28
		// client (its header says so) is told on 400, as the revision's
		// other refusals of a request that cannot be read.
		status := http.StatusOK
		if sid == "" && isNewRevision(r.Header.Get("Mcp-Protocol-Version")) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, response{JSONRPC: "2.0", ID: nullID, Error: perr})
		return
	}
	switch {
	case sid != "":
	case newEra(r, msgs, batch):
		s.serveNext(w, r, msgs, batch)
		return
	case !batch && msgs[0].Invalid == nil && msgs[0].isCall() && msgs[0].Method == "initialize" && wantsSession(r):
		if !s.admitSession() {
			writeJSON(w, http.StatusServiceUnavailable, response{JSONRPC: "2.0", ID: msgs[0].ID, Error: &rpcError{Code: codeServerError,
				Message: fmt.Sprintf("Too many sessions: %d streamable-HTTP sessions are open; end one (DELETE /mcp) or use /mcp without a session", s.maxSess)}})
			return
		}
		defer s.admitted()
	default:
		s.servePlain(w, r, msgs, batch)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	markOrigin(r)
	s.serveSDK(w, r)
}

// wantsSession reports whether a POST asks for a streamable-HTTP session
// in a way the SDK's handler takes: Accept names text/event-stream (and
// JSON: application/json, application/* or */*) and Content-Type is
// application/json. An initialize that does not is answered on the plain
// path: the client gets no session id, and its later requests, which
// then carry none, are plain ones too.
func wantsSession(r *http.Request) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "text/event-stream":
				streamOK = true
			case "application/json", "application/*", "*/*":
				jsonOK = true
			}
		}
	}
	return jsonOK && streamOK
}

// admitSession reserves room for one more streamable-HTTP session: the
// sessions open (the SDK server's sessions with an id; in-process ones
// have none) plus the initializes in flight stay within [MaxSessions].
// A caller that got true calls [Server.admitted] once its initialize has
// been answered (the session is then open, or the SDK closed it).
func (s *Server) admitSession() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := s.opening
	for ss := range s.sdk.Sessions() {
		if ss.ID() != "" {
			open++
		}
	}
	if open >= s.maxSess {
		return false
	}
	s.opening++
	return true
}

func (s *Server) admitted() {
	s.mu.Lock()
	s.opening--
	s.mu.Unlock()
}

// serveSDK hands a request to the SDK's streamable-HTTP handler, with
// its plain-text refusals (http.Error) turned into JSON-RPC errors on the
// same status: an unknown or expired session is 404 with -32001 "session
// not found" (a client opens a new session on a 404), a GET or DELETE
// without a session 400, and so on. The daemon's envelope would
// otherwise rewrite a text/plain 404 or 405 into its REST envelope.
func (s *Server) serveSDK(w http.ResponseWriter, r *http.Request) {
	jw := &jsonErrors{ResponseWriter: w}
	s.stream.ServeHTTP(jw, r)
	jw.finish()
}

// jsonErrors holds back a text/plain error answer (status 400 and up)
// and writes it as a JSON-RPC error in finish. Everything else, event
// streams included, passes through (Unwrap gives a ResponseController
// the connection for flushes and deadlines).
type jsonErrors struct {
	http.ResponseWriter
	status int // a held-back error's status; 0 when passing through
	msg    strings.Builder
}

func (j *jsonErrors) WriteHeader(code int) {
	if code >= 400 && j.status == 0 && strings.HasPrefix(j.Header().Get("Content-Type"), "text/plain") {
		j.status = code
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if j.status != 0 {
		if j.msg.Len() < 1024 {
			j.msg.Write(b)
		}
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}

func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// finish writes the held-back error, if any.
func (j *jsonErrors) finish() {
	if j.status == 0 {
		return
	}
	j.Header().Del("X-Content-Type-Options")
	e := &rpcError{Code: codeInvalidRequest, Message: strings.TrimSpace(j.msg.String())}
	switch {
	case j.status == http.StatusNotFound:
		e = &rpcError{Code: codeSessionNotFound, Message: "session not found"}
	case j.status >= 500:
		e.Code = codeInternalError
	}
	writeJSON(j.ResponseWriter, j.status, response{JSONRPC: "2.0", ID: nullID, Error: e})
}

// servePlain is the stateless path: one POST, one JSON answer (or 202 for
// a body of notifications only). No session, no handshake required. A
// batch's elements run one after the other and its tools/list elements
// share one listing (one request to each upstream per body); once the
// answers reach [MaxBatchAnswer] bytes, the requests left are answered
// -32000 without being run.
func (s *Server) servePlain(w http.ResponseWriter, r *http.Request, msgs []message, batch bool) {
	ctx := withOrigin(r.Context(), r)
	if r.Header.Get(HopHeader) != "" {
		ctx = withHop(ctx)
	}
	var list json.RawMessage
	listOnce := func() json.RawMessage {
		if list == nil {
			list = s.listJSON(ctx)
		}
		return list
	}
	var out []response
	size := 0
	for i := range msgs {
		if m := &msgs[i]; size >= s.maxBatch && m.Invalid == nil && !m.Response && m.isCall() {
			out = append(out, response{JSONRPC: "2.0", ID: m.ID, Error: &rpcError{Code: codeServerError,
				Message: fmt.Sprintf("Batch answer too large: the answers before this request reached %d MiB; it was not run (send it again)", s.maxBatch>>20)}})
			continue
		}
		if resp, ok := s.handle(ctx, &msgs[i], listOnce, true); ok {
			size += len(resp.Result)
			if resp.Error != nil {
				size += len(resp.Error.Message) + len(resp.Error.Data)
			}
			out = append(out, resp)
		}
	}
	switch {
	case len(out) == 0:
		w.WriteHeader(http.StatusAccepted)
	case batch:
		writeJSON(w, http.StatusOK, out)
	default:
		writeJSON(w, http.StatusOK, out[0])
	}
}

// handle answers one message of the plain path (and, for tools/list and
// tools/call, of the 2026-07-28 path); ok is false when there is nothing
// to answer (a notification, a client's response). A tools/call is
// tracked under its id (see track) when tracked is set; on the 2026-07-28
// path it is not, as its POST is the call: a call ends when its POST
// does, and no id of another client names it.
func (s *Server) handle(ctx context.Context, m *message, list func() json.RawMessage, tracked bool) (resp response, ok bool) {
	resp = response{JSONRPC: "2.0", ID: m.ID}
	switch {
	case m.Invalid != nil:
		resp.Error = m.Invalid
		return resp, true
	case m.Response:
		return resp, false
	case !m.isCall():
		if m.Method == "notifications/cancelled" {
			s.cancelPlain(m.Params)
		}
		return resp, false
	}
	switch m.Method {
	case "initialize":
		resp.Result = marshal(s.initializeResult(m.Params))
	case "ping":
		resp.Result = json.RawMessage(`{}`)
	case "tools/list":
		resp.Result = list()
	case "tools/call":
		p := m.paramFields() // an array or a bad name reads as no name
		name := ""
		if raw := p["name"]; len(raw) > 0 && json.Unmarshal(raw, &name) != nil {
			name = string(compact(raw))
		}
		var done func()
		if tracked {
			ctx, done = s.track(ctx, m.ID)
		} else {
			ctx, done = s.untracked(ctx)
		}
		defer done()
		if s.tracer != nil && len(p["_meta"]) > 0 {
			var meta map[string]any
			if json.Unmarshal(p["_meta"], &meta) == nil {
				ctx = tracing.Extract(ctx, meta)
			}
		}
		resp.Result, resp.Error = s.call(ctx, name, p["arguments"])
	default:
		resp.Error = methodNotFound(m.Method)
	}
	return resp, true
}

// initializeResult answers initialize: the client's protocolVersion when
// /mcp speaks it, else the newest one it does.
func (s *Server) initializeResult(params json.RawMessage) any {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	v := protocolVersions[0]
	if slices.Contains(protocolVersions, p.ProtocolVersion) {
		v = p.ProtocolVersion
	}
	return map[string]any{
		"protocolVersion": v,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": "aiod", "version": s.cfg.Version},
	}
}

// track registers a plain-path call under its id so that a
// notifications/cancelled naming that id ends it; the context also ends
// with the HTTP request (the client went away) and with Close.
func (s *Server) track(parent context.Context, id json.RawMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.ctx, cancel)
	key := idKey(id)
	s.mu.Lock()
	if s.inflight[key] == nil {
		s.inflight[key] = map[*context.CancelFunc]struct{}{}
	}
	s.inflight[key][&cancel] = struct{}{}
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.inflight[key], &cancel)
		if len(s.inflight[key]) == 0 {
			delete(s.inflight, key)
		}
		s.mu.Unlock()
		stop()
		cancel()
	}
}

// untracked is the context of a call no id names: it ends with parent
// (the HTTP request) and with Close.
func (s *Server) untracked(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// cancelPlain ends the plain-path calls in flight under the requestId of
// a notifications/cancelled. Ids are not scoped to a client (the plain
// path has no session): every call in flight under that id ends.
func (s *Server) cancelPlain(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	key := idKey(p.RequestID)
	s.mu.Lock()
	var cancels []context.CancelFunc
	for c := range s.inflight[key] {
		cancels = append(cancels, *c)
	}
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	if len(cancels) > 0 {
		s.log.Info("MCP call cancelled", "id", key)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(marshal(v))
}

// demote hands the Go SDK's records to the daemon's handler with Info
// lowered to Debug: the SDK logs every session's start and end at Info,
// which for an in-process Computer (a2c up) is noise on every
// reconnect. Warnings and errors keep their level.
type demote struct{ slog.Handler }

func (d demote) Enabled(ctx context.Context, l slog.Level) bool {
	return d.Handler.Enabled(ctx, d.level(l))
}

func (d demote) Handle(ctx context.Context, r slog.Record) error {
	r.Level = d.level(r.Level)
	return d.Handler.Handle(ctx, r)
}

func (d demote) WithAttrs(as []slog.Attr) slog.Handler { return demote{d.Handler.WithAttrs(as)} }
func (d demote) WithGroup(n string) slog.Handler       { return demote{d.Handler.WithGroup(n)} }

func (demote) level(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}
