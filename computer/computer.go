package computer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/blob"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Approval is the policy for tools whose merged ToolMeta does not set
// auto_apply: run them ("all"), refuse them ("none"), ask Confirm
// ("ask"), or leave the confirmation to the Agent ("agent": a call runs
// only when it carries confirmed, which the MCP gateway sets once its
// client's user accepted the call; without it the call is refused with
// 4005, which tells the Agent to ask).
type Approval string

// Approval policies.
const (
	ApproveAll   Approval = "all"
	ApproveNone  Approval = "none"
	ApproveAsk   Approval = "ask"
	ApproveAgent Approval = "agent"
)

// Options configure a [Computer].
type Options struct {
	// Server is the signalling server's URL; Path its Engine.IO path.
	Server, Path string
	Office, Name string
	// Auth is the connect auth object; Header is sent with every request.
	Auth   map[string]any
	Header http.Header
	// Config is the configuration to serve.
	Config *config.File
	// Resolver substitutes ${input:...} and ${env:...} placeholders; nil
	// means one with no prompt. A configured server's raw configuration is
	// rendered by it before every real start of the server (the first, and
	// each restart after its process ended), never reused from an earlier
	// start: command inputs run again and the environment is read again
	// (0.3.2). A running server keeps the values it was started with.
	Resolver *config.Resolver
	// Approval decides about tools without auto_apply. Default all.
	Approval Approval
	// Confirm asks a person, for ApproveAsk. A false answer, an error or
	// ConfirmTimeout passing refuses the call (4005).
	Confirm        func(ctx context.Context, tool string, params json.RawMessage) (bool, error)
	ConfirmTimeout time.Duration
	// History is how many finished tool calls History keeps. Default 100.
	History int
	// InlineBudget is the largest binary content item (decoded bytes) a
	// tool result carries inline; larger ones become blob handles read
	// with client:get_blob. Default 256 KiB.
	InlineBudget int
	// Blobs configures the blob store.
	Blobs blob.Options
	// Supervisor is passed to every upstream as [mcphost.Options.Supervisor]:
	// the binary that keeps a stdio server's process tree from outliving
	// this Computer.
	Supervisor string
	// Local are MCP servers of this process, hosted beside the servers of
	// Config (see [LocalServer]).
	Local []LocalServer
	// OnJoined, if set, is called each time the Computer has joined its
	// office (after a reconnect too), once its tools are listed there.
	OnJoined func()
	Logger   *slog.Logger
	// TracerProvider, if set, traces each tool call the Computer handles
	// (a2c.computer.tool_call, with the approval wait and the MCP call
	// below it; see package tracing), and passes W3C trace context on to
	// the MCP server in the request's params._meta. Nil, the default,
	// traces nothing.
	TracerProvider trace.TracerProvider

	// ProtocolVersion is the A2C-SMCP version the Computer speaks, one of
	// [smcp.SupportedVersions]. Default [smcp.ProtocolVersion].
	ProtocolVersion string
	// LandingRoot is the folder client:put_blob uploads land in (created
	// if missing). Empty refuses every upload with 4019 "forbidden", as the
	// specification fails closed.
	LandingRoot string
	// Uploads bounds client:put_blob sessions; zero values take the
	// defaults of [blob.UploadOptions].
	Uploads blob.UploadOptions
	// SkillsDir is the user's folder of skill packages (source "user").
	// Empty serves no user skills; MCP servers' skill:// resources are
	// served either way.
	SkillsDir string
	// SkillsStaging is where skills published by MCP servers are
	// materialised. Default a private folder under the user's cache folder.
	SkillsStaging string
}

// LocalServer is an MCP server that runs in the Computer's own process
// (aiod's sandbox tools, for one) and is reached through Connect instead
// of a configuration entry. It is hosted exactly like a configured server:
// supervised by an [mcphost.Upstream] of type [mcphost.TypeMemory]
// (Connect is called again for every new session), exposed as
// <BundleID>__<tool>, listed by client:get_config under its bundle_id with
// type "memory", and its calls pass the same approval, timeout,
// cancellation, history and blob handling. A local server stays across
// [Computer.Reload]; a configuration server with the same bundle_id is
// not started (the local one keeps the name) and a warning is logged.
type LocalServer struct {
	// BundleID names the server's tools; it must be a valid bundle_id.
	BundleID string
	// Name is the display name in client:get_config. Default BundleID.
	Name string
	// Connect returns the client end of a fresh transport to the server;
	// see [mcphost.Spec.Connect].
	Connect func(ctx context.Context) (mcp.Transport, error)
}

// LocalReadyWait is how long [Computer.Run] waits, before it first joins
// the office, for the local servers to list their tools, so that an Agent
// does not meet the Computer without them. In-process servers answer in
// milliseconds; one that does not is joined without (its tools follow with
// notify:update_tool_list).
const LocalReadyWait = 2 * time.Second

// Computer hosts MCP servers and serves their tools to the Agent of one
// office.
type Computer struct {
	opts    Options
	log     *slog.Logger
	profile smcp.Profile

	mu       sync.RWMutex
	cfg      *config.File
	local    []config.Server                                         // the Local servers, as configuration entries
	connect  map[string]func(context.Context) (mcp.Transport, error) // Local Connect by bundle_id
	order    []config.Server                                         // local then cfg servers, as hosted
	servers  map[string]*hosted                                      // by bundle_id
	routes   map[string]route                                        // by exposed name
	tools    []smcp.SMCPTool
	sock     *sio.Socket
	inflight map[string]context.CancelFunc // by req_id
	history  []Record
	blobs    *blob.Store

	changed chan struct{}

	// skillState is the SKILL channel (computer/skills.go): set by
	// startSkills, cleared by stopSkills.
	skillState atomic.Pointer[skillSet]
	// uploads is the client:put_blob landing (computer/upload.go): set by
	// startUploads when the protocol has uploads, closed by stopUploads.
	uploads atomic.Pointer[blob.Landing]

	// mgmt guards management and orders its sends (computer/management.go).
	mgmt sync.Mutex
	// management is the last state [Computer.SetManagement] was given;
	// nil when the Computer has no management plane.
	management *smcp.ManagementState
}

// hosted is one configured server and its upstream connection.
type hosted struct {
	cfg config.Server
	up  *mcphost.Upstream // nil when disabled
	// malformed lists the tools whose last listing carried a malformed
	// a2c_tool_meta declaration, as last warned about (one warning per
	// server and change, not per rebuild).
	malformed string
}

// route is one line of the ExposedToolMapping.
type route struct {
	server *hosted
	tool   string // original name
}

// Record is one finished tool call, for the CLI's history.
type Record struct {
	ReqID    string        `json:"req_id"`
	Agent    string        `json:"agent"`
	Tool     string        `json:"tool"`
	BundleID string        `json:"bundle_id,omitempty"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	IsError  bool          `json:"is_error"`
	Outcome  string        `json:"outcome"` // ok, error, timeout, cancelled, refused
}

// New starts the configured MCP servers; Run connects to the office.
func New(o Options) (*Computer, error) {
	if o.Name == "" || o.Office == "" || o.Server == "" {
		return nil, errors.New("computer: server, office and name are required")
	}
	if o.Config == nil {
		o.Config = &config.File{}
	}
	if o.Resolver == nil {
		o.Resolver = &config.Resolver{Inputs: o.Config.Inputs}
	}
	if o.Approval == "" {
		o.Approval = ApproveAll
	}
	if o.ConfirmTimeout <= 0 {
		o.ConfirmTimeout = 60 * time.Second
	}
	if o.History <= 0 {
		o.History = 100
	}
	if o.InlineBudget <= 0 {
		o.InlineBudget = 256 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = smcp.ProtocolVersion
	}
	profile, err := smcp.NewProfile(o.ProtocolVersion)
	if err != nil {
		return nil, fmt.Errorf("computer: %w", err)
	}
	c := &Computer{opts: o, log: o.Logger, profile: profile, servers: make(map[string]*hosted), inflight: make(map[string]context.CancelFunc),
		changed: make(chan struct{}, 1), blobs: blob.NewStore(o.Blobs), connect: make(map[string]func(context.Context) (mcp.Transport, error))}
	for _, l := range o.Local {
		if !smcp.ValidBundleID(l.BundleID) {
			return nil, fmt.Errorf("computer: local server: invalid bundle_id %q", l.BundleID)
		}
		if l.Connect == nil {
			return nil, fmt.Errorf("computer: local server %q has no Connect", l.BundleID)
		}
		if c.connect[l.BundleID] != nil {
			return nil, fmt.Errorf("computer: two local servers named %q", l.BundleID)
		}
		c.connect[l.BundleID] = l.Connect
		c.local = append(c.local, localEntry(l))
	}
	if err := c.startSkills(); err != nil {
		return nil, err
	}
	c.startUploads()
	if err := c.apply(context.Background(), o.Config, true); err != nil {
		c.stopSkills()
		c.stopUploads()
		return nil, err
	}
	return c, nil
}

// localEntry is a local server as the configuration entry it is hosted
// and reported (client:get_config) as.
func localEntry(l LocalServer) config.Server {
	name := l.Name
	if name == "" {
		name = l.BundleID
	}
	id := l.BundleID
	return config.Server{Name: name, BundleID: l.BundleID, Explicit: true, Type: mcphost.TypeMemory,
		Raw: smcp.MCPServerConfig{Name: name, BundleID: &id, Type: mcphost.TypeMemory, ServerParameters: json.RawMessage("{}")}}
}

// hostedOrder is what the Computer hosts, in order: the local servers,
// then the servers of cfg whose bundle_id no local server has taken.
func (c *Computer) hostedOrder(cfg *config.File) []config.Server {
	order := append([]config.Server(nil), c.local...)
	for _, s := range cfg.Servers {
		if c.connect[s.BundleID] != nil {
			c.log.Warn("config: server not started: its bundle_id is the one of a built-in server", "bundle_id", s.BundleID, "name", s.Name)
			continue
		}
		order = append(order, s)
	}
	return order
}

// apply makes the hosted servers match cfg (and the local servers): new
// ones start, removed ones stop, changed ones are replaced in place.
//
// A configured server's inputs are resolved here, for its first start,
// and again by its upstream's Prepare before every later start (see
// [Options.Resolver]). When that first resolution fails: if strict (the
// Computer is being created), nothing starts and the error is returned;
// else (a reload) the error is logged and returned after the rest is
// applied, and a changed server keeps its running version (runtime
// contract §5.13: keep the old process where possible), while a new one is
// hosted anyway, in backoff with the error until a start succeeds.
func (c *Computer) apply(ctx context.Context, cfg *config.File, strict bool) error {
	order := c.hostedOrder(cfg)
	next := make(map[string]*hosted, len(order))
	var stop, started []*mcphost.Upstream
	var errs []error
	c.mu.Lock()
	for i, s := range order {
		old := c.servers[s.BundleID]
		if old != nil && sameServer(old.cfg, s) {
			old.cfg = s
			next[s.BundleID] = old
			continue
		}
		h := &hosted{cfg: s}
		bundleID := s.BundleID
		upOpts := mcphost.Options{OnChange: func() { c.markChanged(); c.upstreamChanged(bundleID) },
			OnResources: c.resourcesChanged, Supervisor: c.opts.Supervisor, Logger: c.log}
		if connect := c.connect[s.BundleID]; connect != nil {
			h.up = mcphost.Start(mcphost.Spec{BundleID: s.BundleID, Type: mcphost.TypeMemory, Connect: connect}, upOpts)
		} else if !s.Disabled {
			rendered, err := c.opts.Resolver.Render(ctx, s)
			var first *mcphost.Spec
			switch {
			case err == nil:
				sp := UpstreamSpec(rendered)
				first = &sp
			case strict:
				c.mu.Unlock()
				for _, u := range started {
					u.Close()
				}
				return fmt.Errorf("server %q: %w", s.BundleID, err)
			default:
				c.logInputError(s.BundleID, err)
				errs = append(errs, fmt.Errorf("server %q: %w", s.BundleID, err))
				if old != nil && old.up != nil {
					next[s.BundleID], order[i] = old, old.cfg // keep the running version
					continue
				}
			}
			upOpts.Prepare = c.prepare(s, first)
			h.up = mcphost.Start(UpstreamSpec(s), upOpts)
		}
		if h.up != nil {
			started = append(started, h.up)
		}
		if old != nil && old.up != nil {
			stop = append(stop, old.up)
		}
		next[s.BundleID] = h
	}
	for id, old := range c.servers {
		if next[id] == nil && old.up != nil {
			stop = append(stop, old.up)
		}
	}
	c.servers, c.cfg, c.order = next, cfg, order
	c.rebuildLocked()
	c.mu.Unlock()
	for _, u := range stop {
		go u.Close()
	}
	c.markChanged()
	return errors.Join(errs...)
}

// prepare is the [mcphost.Options.Prepare] of configured server s: it
// renders s's raw configuration for each connection attempt, so that no
// start reuses an earlier start's values. first, when not nil, is the
// rendering apply made for the first start; it is used once, by the first
// attempt.
func (c *Computer) prepare(s config.Server, first *mcphost.Spec) func(context.Context) (mcphost.Spec, error) {
	var pending atomic.Pointer[mcphost.Spec]
	pending.Store(first)
	return func(ctx context.Context) (mcphost.Spec, error) {
		if sp := pending.Swap(nil); sp != nil {
			return *sp, nil
		}
		rendered, err := c.opts.Resolver.Render(ctx, s)
		if err != nil {
			c.logInputError(s.BundleID, err)
			return mcphost.Spec{}, err
		}
		return UpstreamSpec(rendered), nil
	}
}

// logInputError logs a failed resolution of a server's inputs with its
// category (missing_input, invalid_selection or validation) and the input
// concerned. The error names fields and inputs, never values.
func (c *Computer) logInputError(bundleID string, err error) {
	category, input := config.CategoryValidation, ""
	var ce *config.Error
	if errors.As(err, &ce) {
		category, input = ce.Category(), ce.Input
	}
	c.log.Error("mcp server inputs could not be resolved; server not started", "bundle_id", bundleID,
		"category", category, "input", input, "err", err)
}

// Reload applies a new configuration without leaving the office, then
// tells the Agent that tools and configuration changed. A server whose
// inputs cannot be resolved is reported in the returned error; the rest
// of the configuration is applied all the same (see apply).
func (c *Computer) Reload(ctx context.Context, cfg *config.File) error {
	c.opts.Resolver.SetInputs(cfg.Inputs)
	err := c.apply(ctx, cfg, false)
	c.emit(smcp.EventUpdateConfig)
	return err
}

func sameServer(a, b config.Server) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// UpstreamSpec is how mcphost reaches a configured server; s must already
// be rendered (placeholders substituted) for the Spec to be usable.
func UpstreamSpec(s config.Server) mcphost.Spec {
	sp := mcphost.Spec{BundleID: s.BundleID, Type: s.Type, Secrets: s.Secrets}
	if s.Stdio != nil {
		sp.Command, sp.Args, sp.Env, sp.Cwd = s.Stdio.Command, s.Stdio.Args, s.Stdio.Env, s.Stdio.Cwd
	}
	if s.HTTP != nil {
		sp.URL, sp.Headers = s.HTTP.URL, s.HTTP.Headers
	}
	return sp
}

func (c *Computer) markChanged() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// rebuildLocked recomputes the ExposedToolMapping and the tool list from
// the upstreams' current tools, in config order.
func (c *Computer) rebuildLocked() {
	routes := make(map[string]route)
	var tools []smcp.SMCPTool
	for _, s := range c.order {
		h := c.servers[s.BundleID]
		if h == nil || h.up == nil {
			continue
		}
		var malformed []string
		for _, t := range h.up.Tools() {
			exposed := h.cfg.ExposedName(t.Name)
			if h.cfg.Forbidden(t.Name) || routes[exposed].server != nil {
				continue // forbidden, or an alias collision: the first wins
			}
			routes[exposed] = route{server: h, tool: t.Name}
			tool, bad := c.smcpTool(h.cfg, exposed, t)
			if bad {
				malformed = append(malformed, t.Name)
			}
			tools = append(tools, tool)
		}
		c.warnMalformed(h, malformed)
	}
	c.routes, c.tools = routes, tools
}

// warnMalformed logs, once per server and change, the tools whose
// a2c_tool_meta declaration was dropped as malformed. It names tools only,
// never what they declared.
func (c *Computer) warnMalformed(h *hosted, tools []string) {
	sig := strings.Join(tools, "\x00")
	if sig == h.malformed {
		return
	}
	h.malformed = sig
	if len(tools) == 0 {
		return
	}
	shown := tools
	if len(shown) > 10 {
		shown = shown[:10]
	}
	c.log.Warn("mcp server: malformed a2c_tool_meta declarations dropped (want an object whose tags are a list of strings)",
		"bundle_id", h.cfg.BundleID, "tools", len(tools), "first", strings.Join(shown, ", "))
}

// smcpTool is t as client:get_tools lists it. Its meta keeps the server's
// native _meta keys, except a2c_tool_meta, which is always the Computer's:
// the ToolMeta merge of the configuration over the server's declaration
// (tags only, and only when the profile has ServerToolTags), encoded in
// full, or no key at all when neither says anything. malformed reports a
// declaration that was dropped.
func (c *Computer) smcpTool(s config.Server, exposed string, t *mcp.Tool) (tool smcp.SMCPTool, malformed bool) {
	meta := map[string]any{}
	for k, v := range t.Meta {
		if k != smcp.MetaKeyToolMeta {
			meta[k] = v
		}
	}
	var declared *smcp.ServerToolMeta
	if raw, ok := t.Meta[smcp.MetaKeyToolMeta]; ok && raw != nil && c.profile.ServerToolTags {
		if d, err := smcp.ParseServerToolMeta(raw); err == nil {
			declared = &d
		} else {
			malformed = true
		}
	}
	if tm, ok := s.PublishedToolMeta(t.Name, declared); ok {
		meta[smcp.MetaKeyToolMeta], _ = tm.Encode()
	}
	if t.Annotations != nil {
		b, _ := json.Marshal(t.Annotations)
		meta[smcp.MetaKeyToolAnnotation] = string(b)
	}
	params, _ := json.Marshal(t.InputSchema)
	var ret json.RawMessage
	if t.OutputSchema != nil {
		ret, _ = json.Marshal(t.OutputSchema)
	}
	return smcp.SMCPTool{Name: exposed, BundleID: s.BundleID, Description: t.Description, ParamsSchema: params, ReturnSchema: ret, Meta: meta}, malformed
}

// Tools returns the exposed tools, as client:get_tools lists them.
func (c *Computer) Tools() []smcp.SMCPTool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tools
}

// History returns the most recent finished tool calls, oldest first.
func (c *Computer) History() []Record {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]Record(nil), c.history...)
}

// Close stops every upstream and leaves the office.
func (c *Computer) Close() {
	c.mu.Lock()
	servers := c.servers
	c.servers = map[string]*hosted{}
	sock := c.sock
	for _, cancel := range c.inflight {
		cancel()
	}
	c.mu.Unlock()
	if sock != nil {
		sock.Disconnect()
	}
	c.stopSkills()
	c.stopUploads()
	var wg sync.WaitGroup
	for _, h := range servers {
		if h.up != nil {
			wg.Add(1)
			go func() { defer wg.Done(); h.up.Close() }()
		}
	}
	wg.Wait()
}

// Run connects to the server, joins the office and serves until ctx ends,
// reconnecting with backoff when the connection drops. A protocol version
// refusal ends it at once.
func (c *Computer) Run(ctx context.Context) error {
	c.waitLocal(ctx, LocalReadyWait)
	go c.publisher(ctx)
	backoff := 500 * time.Millisecond
	for {
		start := time.Now()
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var pve *sio.HTTPError
		if errors.As(err, &pve) && pve.StatusCode == http.StatusBadRequest {
			return fmt.Errorf("computer: server refused the handshake: %s", pve.Body)
		}
		if time.Since(start) > time.Minute {
			backoff = 500 * time.Millisecond
		}
		c.log.Warn("office connection lost; reconnecting", "in", backoff.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// session is one connection: dial, join, serve until it drops.
func (c *Computer) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	down := make(chan string, 1)
	s, err := sio.Dial(dctx, c.opts.Server, sio.ClientOptions{
		Path:      c.opts.Path,
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {c.profile.Version}},
		Header:    c.opts.Header,
		Auth:      authOrNil(c.opts.Auth),
		Handler:   &handler{c: c, down: down},
	})
	if err != nil {
		return err
	}
	defer s.Disconnect()
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleComputer, Name: c.opts.Name, OfficeID: c.opts.Office})
	joined := make(chan error, 1)
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{b}}, 30*time.Second, func(m sio.Message, err error) {
		if err == nil && (len(m.Args) == 0 || string(m.Args[0]) != "true") {
			err = fmt.Errorf("join refused: %s", joinMessage(m))
		}
		joined <- err
	})
	if err := <-joined; err != nil {
		return err
	}
	c.mu.Lock()
	c.sock = s
	c.mu.Unlock()
	c.log.Info("joined office", "office", c.opts.Office, "name", c.opts.Name)
	c.emit(smcp.EventUpdateToolList) // an Agent already there refreshes
	c.sendManagement()               // this session's hub has no state yet
	if c.opts.OnJoined != nil {
		c.opts.OnJoined()
	}
	defer func() {
		c.mu.Lock()
		if c.sock == s {
			c.sock = nil
		}
		c.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return nil
	case reason := <-down:
		return errors.New(reason)
	}
}

// waitLocal waits, at most d or until ctx ends, for every local server to
// be connected, then rebuilds the tool list so that the first join lists
// their tools.
func (c *Computer) waitLocal(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		ready := true
		c.mu.RLock()
		for _, l := range c.local {
			if h := c.servers[l.BundleID]; h != nil && h.up != nil {
				if st, _ := h.up.State(); st != mcphost.Ready {
					ready = false
				}
			}
		}
		c.mu.RUnlock()
		if ready || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	c.mu.Lock()
	c.rebuildLocked()
	c.mu.Unlock()
}

func authOrNil(a map[string]any) any {
	if a == nil {
		return nil
	}
	return a
}

func joinMessage(m sio.Message) string {
	if len(m.Args) > 1 {
		var s string
		if json.Unmarshal(m.Args[1], &s) == nil {
			return s
		}
	}
	return "no reason given"
}

// publisher rebuilds the tool list when an upstream changes and tells the
// office, coalescing bursts.
//
// It compares the rebuilt list with the one it last announced, not with
// the list before its own rebuild: a reload (apply) rebuilds the list
// itself, so a server it removes would otherwise change nothing here and
// its tools would leave without a word.
func (c *Computer) publisher(ctx context.Context) {
	c.mu.RLock()
	announced := toolNames(c.tools)
	c.mu.RUnlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		}
		c.mu.Lock()
		c.rebuildLocked()
		now := toolNames(c.tools)
		c.mu.Unlock()
		if now != announced {
			announced = now
			c.emit(smcp.EventUpdateToolList)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// toolNames is what Agents see of ts, to tell whether it changed: names,
// descriptions and meta (tags, aliases).
func toolNames(ts []smcp.SMCPTool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		meta, _ := json.Marshal(t.Meta)
		names[i] = t.Name + "\x00" + t.Description + "\x00" + string(meta)
	}
	sort.Strings(names)
	b, _ := json.Marshal(names)
	return string(b)
}

// emit sends a server:update_* event about this Computer, if joined.
func (c *Computer) emit(event string) {
	c.mu.RLock()
	s := c.sock
	c.mu.RUnlock()
	if s == nil {
		return
	}
	b, _ := json.Marshal(smcp.ComputerRef{Computer: c.opts.Name})
	_ = s.Emit(event, sio.Message{Args: []json.RawMessage{b}})
}
