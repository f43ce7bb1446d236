package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/internal/origin"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// Config configures a [Server]. The zero value is a working server for
// protocol [smcp.ProtocolVersion] on the default path with no
// authentication.
type Config struct {
	// Version is the one protocol version the server speaks, one of
	// [smcp.SupportedVersions]; clients are admitted by the rule of
	// [smcp.Compatible], and what the server routes follows the version's
	// [smcp.Profile]. Default smcp.ProtocolVersion.
	Version string
	// Path is the Engine.IO mount path, starting with "/"; a "/" is added
	// at its end if missing. Default "/socket.io/".
	Path string
	// Auth, if set, must accept a client before it can connect.
	Auth Authenticator
	// Origins is the Host and Origin rule every request meets first, on
	// every route: Engine.IO handshakes and polling, the console, what
	// [Server.Handle] mounts (see package origin). Nil: origin.Loopback(),
	// the loopback names only.
	Origins *origin.Policy
	// RelayTimeout bounds the wait for a Computer's answer to a client:*
	// request other than client:tool_call. Default 30s.
	RelayTimeout time.Duration
	// ToolCallSlack is added to a tool call's own timeout to give the
	// relay deadline. Default 5s.
	ToolCallSlack time.Duration
	// MaxPayload caps one Socket.IO message in bytes; a larger one closes
	// the connection. Default 1 MiB.
	MaxPayload int64
	// MaxRequest caps the payload (and attachments) of one request in
	// bytes; a larger one is refused with a 400 ErrorPayload (or a false
	// join/leave answer) and the connection stays open. Default 512 KiB.
	// client:put_blob chunks are bounded by MaxPayload instead, as the
	// specification sizes them to the server's message limit.
	// Answers relayed from Computers are bounded by MaxPayload only.
	MaxRequest int
	// PingInterval and PingTimeout are the Engine.IO heartbeat. Defaults
	// 25s and 20s.
	PingInterval, PingTimeout time.Duration
	// BodyIdleTimeout cuts a request body (on any route) that makes no
	// progress for this long. Default 30s (see [sio.Options]).
	BodyIdleTimeout time.Duration
	// GoroutinePerConn serves each WebSocket with a reader goroutine
	// instead of the Linux epoll event loop (see [sio.Options]). The event
	// loop is the default; other systems always use goroutines.
	GoroutinePerConn bool
	// Cluster, when Cluster.URL names a Redis, makes this server one node
	// of a cluster of servers that act as one hub (see package cluster and
	// clustered.go). With no URL the server works alone and runs no Redis
	// code at all. Cluster.Logger defaults to Logger.
	Cluster cluster.Config
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger

	// TracerProvider, if set, makes the server trace every tool call it
	// relays (a2c.hub.relay, with a2c.hub.queue and a2c.hub.wire; see
	// package tracing). Nil, the default, traces nothing and costs
	// nothing on the relay.
	TracerProvider trace.TracerProvider
	// Recorder, if set, is where this process keeps its recent spans:
	// the server serves them at GET /api/traces/{trace_id} and takes
	// other processes' spans at POST /v1/traces (OTLP/HTTP). It should be
	// a span processor of TracerProvider.
	Recorder *tracing.Recorder
	// Calls keeps a log of the recent and running tool calls and a live
	// stream of them, for the console (see [Server.Calls]).
	Calls bool

	// Provisioner, if set, gives each office a sandbox Computer of its
	// own (see provision.go): an Agent's server:join_office is answered
	// once Ensure has returned and the Computer it names is in the
	// office, or after ProvisionWait at most (the office then works
	// without it). Nil, the default, provisions nothing.
	Provisioner Provisioner
	// OfficeIdle is how long an office has had no Agent before its
	// sandbox is released (Provisioner.Release). Default 10 min.
	OfficeIdle time.Duration
	// ProvisionWait bounds how long an Agent's join waits for its
	// office's sandbox, Ensure included. Default 5s.
	ProvisionWait time.Duration
}

// Server is an A2C-SMCP signalling server: it admits clients (version
// gate, then authentication), keeps offices of one Agent and any number
// of Computers, relays client:* requests from an Agent to one Computer of
// its office, and broadcasts notify:* events within an office. It never
// executes a tool and never lets traffic cross offices.
type Server struct {
	cfg     Config
	profile smcp.Profile
	log     *slog.Logger
	io      *sio.Server
	metrics *metrics
	handler http.Handler
	mux     *http.ServeMux

	mu       sync.RWMutex
	offices  map[string]*office
	names    map[string]int // Computer name -> offices that hold one
	draining bool

	inFlight atomic.Int64

	// tracer is nil when the server does not trace (see observe.go).
	tracer trace.Tracer
	// calls is nil unless Config.Calls is set.
	calls *callLog

	// hub is the cluster side, nil when the server runs alone.
	hub *hub
	// conns holds the connected members by sid, in a cluster only (guarded
	// by mu): a request from another node may name a member whose join is
	// still being decided (see serveRemote).
	conns map[string]*member

	// prov provisions the offices' sandboxes; nil without
	// Config.Provisioner.
	prov *provisioner

	// watchers are the [Server.WatchOffice] callbacks by office id.
	wmu      sync.Mutex
	watchers map[string]map[*officeWatch]struct{}
}

// member is one connected client. Its office fields are guarded by
// Server.mu.
type member struct {
	sock    *sio.Socket
	version string
	name    string
	role    smcp.Role
	office  *office
	gone    bool // its socket has disconnected: it may join nothing
	// console marks the console's own member (see local.go): its calls
	// are marked as the console's in the call log and its spans.
	console bool
	// joined is when the member took its seat (the console's
	// connected_since).
	joined time.Time
	// management is a Computer's last a2c:management_state (see
	// management.go), nil when it sent none. It belongs to the
	// connection: it is replaced whole, never changed in place.
	management *smcp.ManagementState

	// ops runs the member's office operations in a cluster (see serial);
	// unused by a server that runs alone.
	ops serial
}

type office struct {
	id        string
	agent     *member
	computers map[string]*member
}

// sid is the member's socket id, for logs; the console's member (see
// local.go) has no socket and logs as "console".
func (m *member) sid() string {
	if m.sock == nil {
		return localSID
	}
	return m.sock.ID()
}

// each calls f for every member of the office.
func (o *office) each(f func(*member)) {
	if o.agent != nil {
		f(o.agent)
	}
	for _, c := range o.computers {
		f(c)
	}
}

// New returns a server ready to serve with [Server.Handler].
func New(cfg Config) (*Server, error) {
	if cfg.Version == "" {
		cfg.Version = smcp.ProtocolVersion
	}
	profile, err := smcp.NewProfile(cfg.Version)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	cfg.Version = profile.Version
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Path == "" {
		cfg.Path = "/socket.io/"
	}
	if !strings.HasSuffix(cfg.Path, "/") {
		cfg.Path += "/"
	}
	if cfg.RelayTimeout <= 0 {
		cfg.RelayTimeout = 30 * time.Second
	}
	if cfg.ToolCallSlack <= 0 {
		cfg.ToolCallSlack = 5 * time.Second
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 1 << 20
	}
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = 512 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Origins == nil {
		cfg.Origins = origin.Loopback()
	}
	if cfg.OfficeIdle <= 0 {
		cfg.OfficeIdle = defaultOfficeIdle
	}
	if cfg.ProvisionWait <= 0 {
		cfg.ProvisionWait = defaultProvisionWait
	}
	s := &Server{profile: profile,
		cfg:     cfg,
		log:     cfg.Logger,
		metrics: newMetrics(),
		offices: make(map[string]*office),
		names:   make(map[string]int),
		conns:   make(map[string]*member),

		watchers: make(map[string]map[*officeWatch]struct{}),
	}
	s.io = sio.NewServer(sio.Options{
		PingInterval:     cfg.PingInterval,
		PingTimeout:      cfg.PingTimeout,
		MaxPayload:       cfg.MaxPayload,
		BodyIdleTimeout:  cfg.BodyIdleTimeout,
		GoroutinePerConn: cfg.GoroutinePerConn,
		Logger:           cfg.Logger,
	})
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer("github.com/a2c-smcp/a2c-go/server")
	}
	if cfg.Calls {
		s.calls = newCallLog()
	}
	if cfg.Provisioner != nil {
		s.prov = newProvisioner(s, cfg)
	}
	s.io.Handle(smcp.Namespace, (*nsHandler)(s))
	mux := http.NewServeMux()
	mux.Handle(cfg.Path, s.gate(s.io))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /api/offices/{office}", s.officeInfo)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	s.traceRoutes(mux)
	s.mux = mux
	// A stalled body holds nothing, on any route (a refused request's
	// included: net/http reads what the handler left unread); a request
	// the Host and Origin rule refuses reaches no route.
	s.handler = s.io.BoundBodies(s.cfg.Origins.Handler(mux, hubCORS, s.refuseRequest))
	if cfg.Cluster.URL != "" {
		if err := s.startHub(cfg.Cluster); err != nil {
			s.io.Close()
			return nil, fmt.Errorf("server: joining the cluster: %w", err)
		}
		s.cfg.Cluster.NodeID = s.hub.node.ID()
	}
	return s, nil
}

// Handler serves the Engine.IO path, /healthz and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// Handle adds a route to [Server.Handler], with the pattern syntax of
// [http.ServeMux]: the console mounts itself at "/" this way, under the
// server's bound on stalled request bodies. Patterns must not clash with
// the server's own routes.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// hubCORS is what an origin given with --allowed-origin may do.
var hubCORS = origin.Allow{Methods: "GET, POST, PUT, DELETE"}

// refuseRequest answers a request the Host and Origin rule refused (421 or
// 403) with the flat ErrorPayload, its code the HTTP status; on the MCP
// gateway's routes (see [Server.HandleMCP]) with a JSON-RPC error
// (-32000, id null) on the same status, as an MCP client reads it.
func (s *Server) refuseRequest(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.log.Warn("request refused", "remote", r.RemoteAddr, "status", status, "reason", msg)
	if s.mcpRoute(r) {
		WriteMCPError(w, status, msg)
		return
	}
	writeJSONError(w, status, smcp.NewError(status, msg))
}

// MCP gateway routes: "/mcp" serves the gateway's default office, and
// "/offices/{office}/mcp" any office.
const (
	mcpDefaultRoute = "/mcp"
	mcpOfficeRoute  = "/offices/{office}/mcp"
)

// HandleMCP mounts the MCP gateway h at /mcp and /offices/{office}/mcp,
// every method, under the hub's Host and Origin rule and its bound on
// stalled bodies (a refusal there is a JSON-RPC error). h finds the
// office with [MCPOffice].
func (s *Server) HandleMCP(h http.Handler) {
	s.mux.Handle(mcpDefaultRoute, h)
	s.mux.Handle(mcpOfficeRoute, h)
}

// WriteMCPError answers an MCP request the hub refuses before any MCP
// server reads it (Host, Origin, token, office, limits): a JSON-RPC error
// (-32000, id null) on status, the shape an MCP client reads.
func WriteMCPError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32000, "message": msg}})
	writeJSON(w, status, body)
}

// MCPOffice is the office a request on a [Server.HandleMCP] route names;
// named is false on /mcp, which names none (the gateway's default office).
func MCPOffice(r *http.Request) (office string, named bool) {
	if r.Pattern == mcpOfficeRoute {
		return r.PathValue("office"), true
	}
	return "", false
}

// mcpRoute reports whether r is for a gateway route (before routing:
// the Host and Origin rule runs first).
func (s *Server) mcpRoute(r *http.Request) bool {
	p := r.URL.EscapedPath()
	if p == mcpDefaultRoute {
		return true
	}
	rest, ok := strings.CutPrefix(p, "/offices/")
	return ok && strings.HasSuffix(rest, "/mcp") && strings.Count(rest, "/") == 1
}

// Origins is the Host and Origin rule the server applies, for what is
// mounted on it to judge a Referer by the same rule (the console).
func (s *Server) Origins() *origin.Policy { return s.cfg.Origins }

// Config returns the configuration in force, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.mu.RLock()
	draining := s.draining
	s.mu.RUnlock()
	w.Header().Set("Content-Type", "application/json")
	if draining {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"draining"}`))
		return
	}
	if s.hub == nil {
		_, _ = w.Write([]byte(`{"status":"ok","version":"` + s.cfg.Version + `"}`))
		return
	}
	// A node cut off from Redis still serves the members it holds, so it
	// stays healthy for the load balancer; "redis" says what it lacks.
	redis := "ok"
	if !s.hub.node.Healthy() {
		redis = "unavailable"
	}
	b, _ := json.Marshal(map[string]string{"status": "ok", "version": s.cfg.Version, "node": s.hub.node.ID(), "redis": redis})
	_, _ = w.Write(b)
}

// Shutdown stops admitting joins and requests, waits until the requests
// in flight have been answered or ctx ends, then tells every office that
// its members leave and closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	var err error
	if s.prov != nil {
		// Joins waiting for their sandbox are answered now; the idle
		// timers stop (the sandboxes outlive the server).
		err = s.prov.close(ctx)
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.inFlight.Load() > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-t.C:
		}
	}
	type seat struct{ office, sid string }
	var left []seat
	s.mu.Lock()
	for _, o := range s.offices {
		var all []*member
		o.each(func(m *member) { all = append(all, m) })
		for _, m := range all {
			left = append(left, seat{o.id, m.sock.ID()})
			s.leaveLocalLocked(m)
		}
	}
	s.mu.Unlock()
	if s.hub != nil {
		// The other nodes learn of each departure from Redis now, not at
		// this node's sweep, as long as Redis answers and ctx lasts; the
		// members not left by then are swept when the lease runs out.
		for _, l := range left {
			if ctx.Err() != nil || !s.hub.node.Healthy() {
				break
			}
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			_ = s.hub.node.Leave(c, l.office, l.sid)
			cancel()
		}
		s.hub.close()
	}
	s.io.Close()
	return err
}

// nsHandler is the /smcp namespace; a separate type keeps the sio hooks
// out of Server's method set.
type nsHandler Server

func (h *nsHandler) Connect(sock *sio.Socket) error {
	s := (*Server)(h)
	hs := sock.Handshake()
	if s.cfg.Auth != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.cfg.Auth.Authenticate(ctx, &AuthRequest{Header: hs.Header, Query: hs.Query, RemoteAddr: hs.RemoteAddr, Auth: hs.Auth})
		cancel()
		if err != nil {
			s.metrics.rejected("auth")
			s.log.Warn("authentication failed", "remote", hs.RemoteAddr, "err", err)
			return &sio.ConnectError{Message: "unauthorized", Data: map[string]any{"code": smcp.CodeUnauthorized, "message": "Authentication failed"}}
		}
	}
	s.mu.RLock()
	draining := s.draining
	s.mu.RUnlock()
	if draining {
		// 503 in the data tells clients the refusal is temporary: they
		// retry (the Agent SDK does) instead of taking it for an auth one.
		return &sio.ConnectError{Message: "Server is shutting down", Data: map[string]any{"code": http.StatusServiceUnavailable, "message": "Server is shutting down"}}
	}
	m := &member{sock: sock, version: hs.Query.Get(smcp.QueryVersion)}
	sock.Value = m
	if s.hub != nil {
		s.mu.Lock()
		s.conns[sock.ID()] = m
		s.mu.Unlock()
	}
	s.metrics.connections.Inc()
	return nil
}

func (h *nsHandler) Disconnect(sock *sio.Socket, reason string) {
	s := (*Server)(h)
	m, ok := sock.Value.(*member)
	if !ok {
		return
	}
	s.metrics.connections.Dec()
	s.mu.Lock()
	m.gone = true
	if m.office != nil {
		s.leaveLocked(m)
	}
	if s.hub != nil {
		delete(s.conns, sock.ID())
	}
	s.mu.Unlock()
	s.log.Debug("disconnected", "sid", sock.ID(), "reason", reason)
}

func (h *nsHandler) Event(sock *sio.Socket, e *sio.Event) {
	s := (*Server)(h)
	m := sock.Value.(*member)
	if n, limit := requestSize(e), s.requestLimit(e.Name); n > limit {
		s.tooLarge(e, n, limit)
		return
	}
	if s.hub != nil && (e.Name == smcp.EventJoinOffice || e.Name == smcp.EventLeaveOffice || e.Name == smcp.EventListRoom || m.ops.busy()) {
		// In a cluster, joins, leaves and list_room talk to Redis: they
		// run on the member's queue, and whatever the client sends
		// meanwhile waits behind them, so its events take effect in the
		// order it sent them.
		if !m.ops.tryDo(func() { s.dispatch(m, e) }) {
			s.log.Warn("client queued too many events while its office operation waited: disconnected", "sid", sock.ID())
			sock.Disconnect()
		}
		return
	}
	s.dispatch(m, e)
}

// dispatch handles one event of member m.
func (s *Server) dispatch(m *member, e *sio.Event) {
	switch e.Name {
	case smcp.EventJoinOffice:
		s.join(m, e)
	case smcp.EventLeaveOffice:
		s.leave(m, e)
	case smcp.EventListRoom:
		s.listRoom(m, e)
	case smcp.EventCancelToolCall:
		s.cancel(m, e)
	case smcp.EventUpdateConfig:
		s.update(m, e, smcp.NotifyUpdateConfig)
	case smcp.EventUpdateToolList:
		s.update(m, e, smcp.NotifyUpdateToolList)
	case smcp.EventUpdateDesktop:
		s.update(m, e, smcp.NotifyUpdateDesktop)
	case smcp.EventUpdateSkills:
		s.update(m, e, smcp.NotifyUpdateSkills)
	case smcp.EventManagementState:
		s.managementState(m, e)
	default:
		if s.profile.IsClientEvent(e.Name) {
			s.relay(m, e)
			return
		}
		ackJSON(e, smcp.NewError(smcp.CodeBadRequest, "unknown event"))
	}
}

func requestSize(e *sio.Event) int {
	n := 0
	for _, a := range e.Args {
		n += len(a)
	}
	for _, a := range e.Attachments {
		n += len(a)
	}
	return n
}

// requestLimit is the largest payload a request of event may carry:
// MaxRequest, except for client:put_blob, whose chunks the specification
// sizes to the server's message limit (each must fit maxHttpBufferSize,
// and the server forwards every one): for it the limit is MaxPayload, so
// any chunk the connection can carry is relayed.
func (s *Server) requestLimit(event string) int {
	if event == smcp.EventPutBlob && s.cfg.MaxPayload > int64(s.cfg.MaxRequest) {
		return int(min(s.cfg.MaxPayload, math.MaxInt32))
	}
	return s.cfg.MaxRequest
}

// tooLarge refuses a request over its limit in the shape its event
// answers with.
func (s *Server) tooLarge(e *sio.Event, n, limit int) {
	msg := fmt.Sprintf("payload too large: %d bytes, the limit is %d", n, limit)
	switch {
	case e.Name == smcp.EventJoinOffice || e.Name == smcp.EventLeaveOffice:
		ackTuple(e, false, msg)
	case s.profile.IsClientEvent(e.Name):
		s.refuse(e, smcp.NewError(smcp.CodeBadRequest, msg))
	case e.Name == smcp.EventListRoom:
		ackJSON(e, smcp.NewError(smcp.CodeBadRequest, msg))
	default:
		ackEmpty(e)
	}
}

// payload is the first argument of an event, or nil.
func payload(e *sio.Event) []byte {
	if len(e.Args) == 0 {
		return nil
	}
	return e.Args[0]
}

func ackJSON(e *sio.Event, v any) {
	if !e.WantsAck() {
		return
	}
	_ = e.Ack(sio.Message{Args: []json.RawMessage{smcp.Encode(v)}})
}

var (
	jsonTrue  = json.RawMessage("true")
	jsonFalse = json.RawMessage("false")
	jsonNull  = json.RawMessage("null")
)

// ackTuple answers join and leave with two arguments: (true, null) or
// (false, message).
func ackTuple(e *sio.Event, ok bool, msg string) {
	if ok {
		_ = e.Ack(sio.Message{Args: []json.RawMessage{jsonTrue, jsonNull}})
		return
	}
	b, _ := json.Marshal(msg)
	_ = e.Ack(sio.Message{Args: []json.RawMessage{jsonFalse, b}})
}

// broadcastLocked sends an event to every member of o except skip. Sends
// only queue, so holding s.mu keeps each member's notifications in the
// order the office changed.
func (s *Server) broadcastLocked(o *office, skip *member, name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.officeEvent(o.id, name)
	msg := sio.Message{Args: []json.RawMessage{b}}
	o.each(func(m *member) {
		if m != skip {
			_ = m.sock.Emit(name, msg)
		}
	})
}

func notification(o *office, m *member) smcp.OfficeNotification {
	n := smcp.OfficeNotification{OfficeID: o.id}
	if m.role == smcp.RoleAgent {
		n.Agent = m.name
	} else {
		n.Computer = m.name
	}
	return n
}

func errMessage(err error) string {
	var e *smcp.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "invalid payload"
}

func (s *Server) join(m *member, e *sio.Event) {
	var req smcp.EnterOfficeReq
	if err := smcp.DecodeRequest(payload(e), &req); err != nil {
		ackTuple(e, false, errMessage(err))
		return
	}
	if msg := checkNames(payload(e), req.Name, req.OfficeID); msg != "" {
		ackTuple(e, false, msg)
		return
	}
	if s.hub != nil {
		s.joinCluster(m, e, req)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.joinClosedLocked(m); msg != "" {
		ackTuple(e, false, msg)
		return
	}
	o := s.offices[req.OfficeID]
	d := decideJoin(m, req, o)
	switch {
	case d.refuse != "":
		s.log.Info("join refused", "sid", m.sock.ID(), "reason", d.refuse)
		ackTuple(e, false, d.refuse)
		return
	case d.already:
		ackTuple(e, true, "")
		return
	case d.switchOffice:
		s.leaveLocked(m)
	}
	s.seatLocked(m, req)
	s.ackJoin(m, e, req.OfficeID)
	s.broadcastLocked(m.office, m, smcp.NotifyEnterOffice, notification(m.office, m))
	s.enteredLocked(m)
}

// joinClosedLocked is why a join can no longer be taken ("" if it can):
// the server is draining, or the socket left while its join was on the
// way (a member added then would never be removed: a ghost that holds its
// name, or its office's Agent seat, until restart).
func (s *Server) joinClosedLocked(m *member) string {
	switch {
	case s.draining:
		return "Server is shutting down"
	case m.gone || m.sock.Closed():
		return "Connection closed"
	}
	return ""
}

// seatLocked puts m in the office and seat req names, creating the
// office on this server if needed. The rules were checked before.
func (s *Server) seatLocked(m *member, req smcp.EnterOfficeReq) {
	o := s.offices[req.OfficeID]
	if o == nil {
		o = &office{id: req.OfficeID, computers: make(map[string]*member)}
		s.offices[req.OfficeID] = o
		s.metrics.offices.Inc()
	}
	m.name, m.role, m.office, m.joined = req.Name, req.Role, o, time.Now()
	if req.Role == smcp.RoleAgent {
		o.agent = m
	} else {
		o.computers[m.name] = m
		s.names[m.name]++
	}
	s.metrics.members.WithLabelValues(string(m.role)).Inc()
	if s.prov != nil && m.role == smcp.RoleAgent {
		s.prov.agentSeated(o.id)
	}
	// Watchers hear of the seat before the join is answered (the
	// broadcast that follows reports it again): a request that follows
	// the answer finds the office marked changed.
	s.officeEvent(o.id, smcp.NotifyEnterOffice)
}

// enteredLocked follows the announcement of m's arrival in its office
// (after s.broadcastLocked): a Computer wakes the joins waiting for it
// (provision.go), whose answers so reach the Agent after the Computer's
// notify:enter_office.
func (s *Server) enteredLocked(m *member) {
	if s.prov != nil && m.role == smcp.RoleComputer {
		s.prov.computerSeated(m.office.id, m.name)
	}
}

func (s *Server) leave(m *member, e *sio.Event) {
	var req smcp.LeaveOfficeReq
	if err := smcp.DecodeRequest(payload(e), &req); err != nil {
		ackTuple(e, false, errMessage(err))
		return
	}
	if s.hub != nil {
		s.leaveCluster(m, e, req)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.office == nil || m.office.id != req.OfficeID {
		ackTuple(e, false, "Not in this office")
		return
	}
	s.leaveLocked(m)
	ackTuple(e, true, "")
}

// leaveLocked tells the office that m leaves, then removes it; in a
// cluster the member's record in Redis goes next, on its queue.
func (s *Server) leaveLocked(m *member) {
	o := m.office
	if o == nil {
		return
	}
	s.leaveLocalLocked(m)
	if s.hub != nil {
		s.leaveRemote(m, o.id)
	}
}

// leaveLocalLocked tells this server's members of m's office that m
// leaves, then removes it from the office here.
func (s *Server) leaveLocalLocked(m *member) {
	o := m.office
	if o == nil {
		return
	}
	s.broadcastLocked(o, m, smcp.NotifyLeaveOffice, notification(o, m))
	if o.agent == m {
		o.agent = nil
		if s.prov != nil {
			s.prov.agentLeft(o.id, m)
		}
	} else if o.computers[m.name] == m {
		delete(o.computers, m.name)
		if s.names[m.name]--; s.names[m.name] <= 0 {
			delete(s.names, m.name)
		}
	}
	m.office = nil
	m.management = nil // a state is its office seat's: a later join sends its own
	s.metrics.members.WithLabelValues(string(m.role)).Dec()
	if o.agent == nil && len(o.computers) == 0 {
		delete(s.offices, o.id)
		s.metrics.offices.Dec()
	}
}

func (s *Server) listRoom(m *member, e *sio.Event) {
	var req smcp.ListRoomReq
	if err := smcp.DecodeRequest(payload(e), &req); err != nil {
		ackJSON(e, err)
		return
	}
	s.mu.RLock()
	o := m.office
	if o == nil {
		s.mu.RUnlock()
		ackJSON(e, smcp.NewError(smcp.CodeNotInRoom, "Not in an office; join one first"))
		return
	}
	if o.id != req.OfficeID {
		s.mu.RUnlock()
		s.log.Warn("cross-office list_room refused", "sid", m.sock.ID())
		ackJSON(e, smcp.NewError(smcp.CodeCrossRoom, "Cannot list another office"))
		return
	}
	if s.hub != nil {
		s.mu.RUnlock()
		s.listRoomCluster(e, req) // on the member's queue
		return
	}
	ret := smcp.ListRoomRet{ReqID: req.ReqID, Sessions: make([]smcp.SessionInfo, 0, 1+len(o.computers))}
	o.each(func(x *member) {
		ret.Sessions = append(ret.Sessions, smcp.SessionInfo{SID: x.sock.ID(), Name: x.name, Role: x.role, OfficeID: o.id, A2CVersion: x.version})
	})
	s.mu.RUnlock()
	sortSessions(ret.Sessions)
	ackJSON(e, ret)
}

// sortSessions puts the Agent first, then the Computers by name: the
// order of server:list_room.
func sortSessions(ss []smcp.SessionInfo) {
	sort.SliceStable(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if (a.Role == smcp.RoleAgent) != (b.Role == smcp.RoleAgent) {
			return a.Role == smcp.RoleAgent
		}
		return a.Name < b.Name
	})
}

// cancel broadcasts an Agent's cancel to its office. It never answers with
// an error: a cancel that cannot apply is dropped.
func (s *Server) cancel(m *member, e *sio.Event) {
	defer ackEmpty(e)
	var req smcp.AgentCallData
	if err := smcp.DecodeRequest(payload(e), &req); err != nil {
		s.log.Debug("cancel dropped", "sid", m.sock.ID(), "err", err)
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m.office == nil || m.role != smcp.RoleAgent {
		return
	}
	s.broadcastLocked(m.office, m, smcp.NotifyCancelToolCall, req)
	s.broadcastRemote(m.office.id, m, smcp.NotifyCancelToolCall, req)
}

// update turns a Computer's server:update_* into the matching notify:* to
// its office, naming the sender. It never answers with an error.
func (s *Server) update(m *member, e *sio.Event, notify string) {
	defer ackEmpty(e)
	var req smcp.ComputerRef
	if err := smcp.Decode(payload(e), &req); err != nil {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m.office == nil || m.role != smcp.RoleComputer {
		return
	}
	s.broadcastLocked(m.office, m, notify, smcp.ComputerRef{Computer: m.name})
	s.broadcastRemote(m.office.id, m, notify, smcp.ComputerRef{Computer: m.name})
}

// ackEmpty answers an event that has no result, so no client waits.
func ackEmpty(e *sio.Event) {
	if e.WantsAck() {
		_ = e.Ack(sio.Message{})
	}
}
