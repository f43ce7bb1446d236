package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// office is one office's MCP server: the Go SDK server whose tools and
// resources mirror the office's Computers, its streamable-HTTP handler,
// and the goroutine that reads the office again when it changes.
//
// The SDK's registries are the gateway's tables: a tool is registered
// under its listed name with a handler that knows its Computer, so the
// SDK lists, pages, caches and announces changes (list_changed) itself.
// refresh is the only writer of those registries, one at a time
// (refreshMu), and changes only what changed, so a client is told of a
// change only when there is one.
type office struct {
	g       *Gateway
	id      string
	srv     *sdk.Server
	impl    *sdk.Implementation        // serverInfo
	handler *sdk.StreamableHTTPHandler // handshake-era, with sessions
	next    *sdk.StreamableHTTPHandler // 2026-07-28 (the SDK serves it stateless only)

	stale      atomic.Bool   // an event came since the last refresh began
	refreshing atomic.Bool   // a refresh is running (set under refreshMu)
	kick       chan struct{} // wakes loop (capacity 1)
	stopWatch  func()
	ctx        context.Context // ends at close
	cancel     context.CancelFunc
	loopDone   chan struct{}

	refreshMu sync.Mutex
	tools     map[string]toolEntry                 // by listed name
	routes    atomic.Pointer[map[string]toolEntry] // a copy of tools for readers (the fast path)
	resources map[string]resourceEntry             // by URI

	mu       sync.Mutex
	inUse    int
	lastUsed time.Time

	// fastMu guards the fast path's calls in sessions (by session id and
	// request id, for notifications/cancelled) and when each session was
	// last used (the gateway closes idle sessions itself: the SDK's own
	// timer would not see the fast path's requests).
	fastMu   sync.Mutex
	inflight map[string]context.CancelFunc
	seen     map[string]time.Time

	// slow are the Computers that did not list in time, until when the
	// readings skip them (they keep what they listed before): one
	// Computer that never answers must not make every reading wait.
	slowMu sync.Mutex
	slow   map[string]time.Time
}

// toolEntry is a listed tool: the Computer that serves it and the
// fingerprint of what was registered (the tool as the Computer describes
// it), so an unchanged tool is not registered again.
type toolEntry struct {
	computer string
	exposed  string
	print    string
	tool     smcp.SMCPTool // as the Computer listed it
}

// resourceEntry is a listed resource and its fingerprint.
type resourceEntry struct {
	computer string
	print    string
}

func newOffice(g *Gateway, id string) *office {
	ctx, cancel := context.WithCancel(g.ctx)
	o := &office{g: g, id: id, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, loopDone: make(chan struct{}),
		tools: map[string]toolEntry{}, resources: map[string]resourceEntry{}, lastUsed: time.Now(),
		inflight: map[string]context.CancelFunc{}, seen: map[string]time.Time{}, slow: map[string]time.Time{}}
	o.stale.Store(true)
	o.impl = &sdk.Implementation{Name: "a2c-gateway", Title: "A2C-SMCP office " + id, Version: g.cfg.Version}
	o.srv = sdk.NewServer(o.impl, g.sdkOptions())
	o.srv.AddReceivingMiddleware(o.fresh)
	opts := sdk.StreamableHTTPOptions{
		Logger: g.log.With("component", "mcp-gateway"),
		// No SessionTimeout: idle sessions are closed by closeIdle, which
		// sees the fast path's requests too.
		MaxRequestBodyBytes:        MaxBody,
		DisableLocalhostProtection: true, // the hub's Host and Origin rule ran before
	}
	get := func(*http.Request) *sdk.Server { return o.srv }
	o.handler = sdk.NewStreamableHTTPHandler(get, &opts)
	opts.Stateless = true
	opts.PropagateRequestCancellation = true // a 2026-07-28 call ends with its POST
	opts.JSONResponse = true                 // one answer per POST (subscriptions/listen streams all the same)
	o.next = sdk.NewStreamableHTTPHandler(get, &opts)
	o.stopWatch = g.hub.WatchOffice(id, o.event)
	go o.loop()
	return o
}

// event is the hub's report of a notify:* event of the office (see
// server.Server.WatchOffice): a change of its members or of what a
// Computer serves marks the mirror stale and wakes loop. It runs under
// the hub's locks: it only sets a flag and signals.
func (o *office) event(name string) {
	if name == smcp.NotifyCancelToolCall {
		return
	}
	o.stale.Store(true)
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// loop refreshes the mirror when the office changes, so the clients hear
// of it without asking; in a cluster also every ClusterPoll while a
// session is open (see the package documentation).
func (o *office) loop() {
	defer close(o.loopDone)
	var tick <-chan time.Time
	if o.g.hub.NodeID() != "" {
		t := time.NewTicker(ClusterPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-o.kick:
		case <-tick:
			if o.sessions() == 0 {
				continue
			}
			o.stale.Store(true)
		}
		o.refresh(o.ctx)
	}
}

// fresh is the receiving middleware that brings the mirror up to date
// before a request reads it (a list, a call, a read): a request made
// after a Computer entered finds its tools.
func (o *office) fresh(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "prompts/list", "prompts/get", "completion/complete":
			// The SDK would answer them (empty) while the capabilities
			// the gateway declares (tools, resources) say it has none.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", method)}
		case "tools/call":
			// A call goes by the listing it knows: a reading under way
			// (one slow Computer may hold it for ListTimeout) is waited
			// for only when the name is not listed yet.
			if p, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok {
				if _, listed := o.route(p.Name); listed {
					break
				}
			}
			o.freshen()
		case "tools/list", "resources/list", "resources/read":
			o.freshen()
		}
		return next(ctx, method, req)
	}
}

// freshen brings the mirror up to date when it is stale, or waits for a
// reading under way (it may hold the change a request must see). It reads
// under the office's context, not a request's: a client that goes away
// must not cut a reading short (its Computers would look gone).
func (o *office) freshen() {
	if o.stale.Load() || o.refreshing.Load() {
		o.refresh(o.ctx)
	}
}

// refresh reads the office's Computers, their tools and their resources,
// and makes the SDK's registries match (adding, replacing and removing
// only what changed). A Computer that does not answer in time is left out
// of this reading. Refreshes run one at a time; one that finds the mirror
// already fresh (another ran meanwhile) does nothing.
func (o *office) refresh(ctx context.Context) {
	o.refreshMu.Lock()
	defer o.refreshMu.Unlock()
	o.refreshing.Store(true)
	defer o.refreshing.Store(false)
	if !o.stale.Swap(false) {
		return
	}
	info, err := o.g.hub.Office(ctx, o.id)
	if err != nil {
		o.stale.Store(true) // try again on the next request
		o.g.log.Warn("MCP gateway: the office could not be read", "office", o.id, "err", err)
		return
	}
	var computers []string
	for _, m := range info.Members {
		if m.Role == smcp.RoleComputer {
			computers = append(computers, m.Name)
		}
	}
	slices.Sort(computers)
	o.slowMu.Lock()
	for c := range o.slow {
		if !slices.Contains(computers, c) {
			delete(o.slow, c) // it left: one of that name that comes is asked
		}
	}
	o.slowMu.Unlock()
	views := make([]computerView, len(computers))
	var wg sync.WaitGroup
	for i, c := range computers {
		wg.Go(func() { views[i] = o.read(ctx, c) })
	}
	wg.Wait()
	o.syncTools(views)
	o.syncResources(views)
}

// slowFor is how long a Computer that did not list in time is skipped.
const slowFor = 30 * time.Second

// computerView is what one Computer serves, as read by refresh.
type computerView struct {
	name      string
	tools     []smcp.SMCPTool
	windows   []string
	skills    []smcp.A2CSkillRef
	toolsOK   bool
	windowsOK bool
	skillsOK  bool
}

// read asks one Computer for its tools, desktop and skills, each within
// ListTimeout.
func (o *office) read(ctx context.Context, computer string) computerView {
	v := computerView{name: computer}
	o.slowMu.Lock()
	skip := time.Now().Before(o.slow[computer])
	o.slowMu.Unlock()
	if skip {
		return v
	}
	ask := func(event string, payload, out any) bool {
		rctx, cancel := context.WithTimeout(ctx, o.g.cfg.ListTimeout)
		defer cancel()
		raw, err := o.g.hub.Request(rctx, o.id, o.g.caller, event, payload)
		if err != nil {
			o.g.log.Debug("MCP gateway: a Computer did not list", "office", o.id, "computer", computer, "event", event, "err", err)
			if rctx.Err() != nil && ctx.Err() == nil {
				o.slowMu.Lock()
				o.slow[computer] = time.Now().Add(slowFor)
				o.slowMu.Unlock()
			}
			return false
		}
		return json.Unmarshal(raw, out) == nil
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		var ret smcp.GetToolsRet
		v.toolsOK = ask(smcp.EventGetTools, smcp.GetToolsReq{Computer: computer}, &ret)
		v.tools = ret.Tools
	})
	wg.Go(func() {
		var ret smcp.GetDesktopRet
		v.windowsOK = ask(smcp.EventGetDesktop, smcp.GetDesktopReq{Computer: computer}, &ret)
		v.windows = ret.Desktops
	})
	wg.Go(func() {
		var ret smcp.GetSkillsRet
		v.skillsOK = ask(smcp.EventGetSkills, smcp.GetSkillsReq{Computer: computer}, &ret)
		v.skills = ret.Skills
	})
	wg.Wait()
	return v
}

// syncTools lists the Computers' tools under the naming rule of the
// package documentation and updates the SDK's registry to match.
func (o *office) syncTools(views []computerView) {
	type offer struct {
		computer string
		tool     smcp.SMCPTool
	}
	byName := map[string][]offer{}
	for _, v := range views {
		if !v.toolsOK {
			// It did not answer this time: it keeps what it had.
			for _, e := range o.tools {
				if e.computer == v.name {
					byName[e.exposed] = append(byName[e.exposed], offer{v.name, e.tool})
				}
			}
			continue
		}
		for _, t := range v.tools {
			// An exposed name is bundle_id + "__" + tool: one that is not
			// could pose as another Computer's qualified name.
			if !smcp.ValidBundleID(t.BundleID) || !strings.HasPrefix(t.Name, t.BundleID+"__") || len(t.Name) == len(t.BundleID)+2 {
				o.g.log.Warn("MCP gateway: a tool whose name is not its bundle_id + \"__\" + tool is left out",
					"office", o.id, "computer", v.name, "tool", t.Name)
				continue
			}
			byName[t.Name] = append(byName[t.Name], offer{v.name, t})
		}
	}
	claims := map[string][]offer{}
	for name, offers := range byName {
		if len(offers) == 1 {
			claims[name] = append(claims[name], offers[0])
			continue
		}
		for _, of := range offers {
			q := of.computer + "." + name
			if !validToolName(q) {
				o.g.log.Warn("MCP gateway: a tool two Computers expose is left out (its qualified name is no valid MCP tool name)",
					"office", o.id, "computer", of.computer, "tool", name)
				continue
			}
			claims[q] = append(claims[q], of)
		}
	}
	// A name claimed twice (a qualified name that is also another's
	// name) goes to neither: a call must never reach another Computer than
	// the one its name meant, whatever the order of the readings.
	want := map[string]offer{}
	for name, cs := range claims {
		if len(cs) == 1 {
			want[name] = cs[0]
			continue
		}
		o.g.log.Warn("MCP gateway: a tool name two Computers claim is left out", "office", o.id, "tool", name)
	}
	dropGone(o.tools, want, o.srv.RemoveTools)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		of := want[name]
		print := of.computer + "\x00" + string(smcp.Encode(of.tool))
		if cur, ok := o.tools[name]; ok && cur.print == print {
			continue
		}
		e := toolEntry{computer: of.computer, exposed: of.tool.Name, print: print, tool: of.tool}
		if err := o.addTool(name, of.computer, of.tool, e); err != nil {
			o.g.log.Warn("MCP gateway: a tool is left out", "office", o.id, "computer", of.computer, "tool", name, "err", err)
			if _, ok := o.tools[name]; ok {
				o.srv.RemoveTools(name)
				delete(o.tools, name)
			}
			continue
		}
		o.tools[name] = e
	}
	routes := maps.Clone(o.tools)
	o.routes.Store(&routes)
}

// route is the listed tool name's entry, as the last refresh left it.
func (o *office) route(name string) (toolEntry, bool) {
	if m := o.routes.Load(); m != nil {
		e, ok := (*m)[name]
		return e, ok
	}
	return toolEntry{}, false
}

// dropGone takes the keys want no longer holds out of have and, with
// remove, out of the SDK's registry (whose change the SDK announces).
func dropGone[E, W any](have map[string]E, want map[string]W, remove func(...string)) {
	var gone []string
	for k := range have {
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
		for _, k := range gone {
			delete(have, k)
		}
	}
}

// addTool registers one tool with the SDK. The SDK panics on a schema it
// cannot take; a Computer's tool must never take the hub down, so such a
// tool is an error here.
func (o *office) addTool(name, computer string, t smcp.SMCPTool, e toolEntry) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the MCP SDK refused it: %v", r)
		}
	}()
	meta := sdk.Meta{"a2c_computer": computer, "a2c_bundle_id": t.BundleID}
	if len(t.Meta) > 0 {
		meta["a2c_meta"] = t.Meta
	}
	if rs := bytes.TrimSpace(t.ReturnSchema); len(rs) > 0 && string(rs) != "null" && json.Valid(rs) {
		meta["a2c_return_schema"] = json.RawMessage(rs)
	}
	tool := &sdk.Tool{Name: name, Description: t.Description, InputSchema: inputSchema(t.ParamsSchema), Meta: meta}
	if !validToolName(name) {
		return errors.New("no valid MCP tool name")
	}
	o.srv.AddTool(tool, o.callHandler(e))
	return nil
}

// inputSchema is a tool's params_schema when it is a JSON object of type
// "object", else the schema of any object.
func inputSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil && string(m["type"]) == `"object"` {
		return raw
	}
	return json.RawMessage(`{"type":"object"}`)
}

// validToolName is MCP's rule for tool names (2025-11-25): 1 to 128 of
// A-Z a-z 0-9 _ - and ".".
func validToolName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// syncResources lists the Computers' windows and skills as resources
// and updates the SDK's registry to match. A URI two Computers list
// goes to the one whose name sorts first (views are sorted by name).
func (o *office) syncResources(views []computerView) {
	type res struct {
		computer string
		r        *sdk.Resource
		read     func(ctx context.Context, uri string) (*sdk.ReadResourceResult, error)
	}
	want := map[string]res{}
	for _, v := range views {
		for _, d := range v.windows {
			uri, _, _ := strings.Cut(d, "\n\n")
			if _, taken := want[uri]; taken || !validURI(uri) {
				continue
			}
			want[uri] = res{v.name, &sdk.Resource{URI: uri, Name: uri, MIMEType: "text/plain", Meta: sdk.Meta{"a2c_computer": v.name}}, o.readWindow(v.name)}
		}
		for _, sk := range v.skills {
			uri := sk.URI
			if uri == "" {
				uri = "skill://" + url.PathEscape(sk.Name) + "/" + smcp.DefaultSkillRelPath
			}
			if _, taken := want[uri]; taken || !validURI(uri) {
				continue
			}
			want[uri] = res{v.name, &sdk.Resource{URI: uri, Name: sk.Name, Description: sk.Description, MIMEType: "text/markdown",
				Meta: sdk.Meta{"a2c_computer": v.name, "a2c_skill": sk.Name}}, o.readSkill(v.name, sk.Name)}
		}
	}
	dropGone(o.resources, want, o.srv.RemoveResources)
	for _, uri := range slices.Sorted(maps.Keys(want)) {
		x := want[uri]
		b, _ := json.Marshal(x.r)
		e := resourceEntry{computer: x.computer, print: x.computer + "\x00" + string(b)}
		if cur, ok := o.resources[uri]; ok && cur.print == e.print {
			continue
		}
		read := x.read
		if err := addResource(o.srv, x.r, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return read(ctx, req.Params.URI)
		}); err != nil {
			o.g.log.Warn("MCP gateway: a resource is left out", "office", o.id, "computer", x.computer, "uri", uri, "err", err)
			continue
		}
		o.resources[uri] = e
	}
}

// addResource registers a resource with the SDK, which panics on a URI
// it cannot parse.
func addResource(srv *sdk.Server, r *sdk.Resource, h sdk.ResourceHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the MCP SDK refused it: %v", p)
		}
	}()
	srv.AddResource(r, h)
	return nil
}

// validURI reports whether a Computer's URI can name an MCP resource:
// an absolute URI of at most 2048 bytes.
func validURI(s string) bool {
	if len(s) > 2048 {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && u.IsAbs()
}

// use counts a request in; done counts it out.
func (o *office) use() {
	o.mu.Lock()
	o.inUse++
	o.lastUsed = time.Now()
	o.mu.Unlock()
}

func (o *office) done() {
	o.mu.Lock()
	o.inUse--
	o.lastUsed = time.Now()
	o.mu.Unlock()
}

// free reports when the office was last used, and whether it has no
// request in flight and no session open (so it may be let go).
func (o *office) free() (time.Time, bool) {
	o.mu.Lock()
	at, busy := o.lastUsed, o.inUse > 0
	o.mu.Unlock()
	return at, !busy && o.sessions() == 0
}

// idle reports whether the office has had no request for d and has no
// session open.
func (o *office) idle(d time.Duration) bool {
	o.mu.Lock()
	busy := o.inUse > 0 || time.Since(o.lastUsed) < d
	o.mu.Unlock()
	return !busy && o.sessions() == 0
}

// sessions counts the office's open sessions (a 2026-07-28 request's
// session has no id and lasts one request: not counted).
func (o *office) sessions() int {
	n := 0
	for ss := range o.srv.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// touch marks a session used now. Only a session closeIdle has met is
// marked: an id a client makes up takes no room.
func (o *office) touch(sid string) {
	o.fastMu.Lock()
	if _, ok := o.seen[sid]; ok {
		o.seen[sid] = time.Now()
	}
	o.fastMu.Unlock()
}

// closeIdle closes the sessions not used for d (a session first met
// here counts as used now) and forgets the ones that are gone.
func (o *office) closeIdle(d time.Duration) {
	now := time.Now()
	open := map[string]*sdk.ServerSession{}
	for ss := range o.srv.Sessions() {
		if id := ss.ID(); id != "" {
			open[id] = ss
		}
	}
	var idle []*sdk.ServerSession
	o.fastMu.Lock()
	for id := range o.seen {
		if open[id] == nil {
			delete(o.seen, id)
		}
	}
	for id, ss := range open {
		t, ok := o.seen[id]
		switch {
		case !ok:
			o.seen[id] = now
		case now.Sub(t) >= d:
			idle = append(idle, ss)
			delete(o.seen, id)
		}
	}
	o.fastMu.Unlock()
	for _, ss := range idle {
		o.endSession(ss.ID())
		_ = ss.Close()
	}
}

// close ends the office's sessions, its calls and its goroutine. The
// calls end with o.ctx; the SDK's session Close waits for its handlers,
// so the sessions are closed side by side, and a session still not
// closed after closeWait is left to end on its own (logged).
func (o *office) close() {
	o.stopWatch()
	o.cancel()
	var wg sync.WaitGroup
	for ss := range o.srv.Sessions() {
		wg.Go(func() { _ = ss.Close() })
	}
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(closeWait):
		o.g.log.Warn("MCP gateway: sessions still closing", "office", o.id)
	}
	<-o.loopDone
}

// closeWait bounds how long close waits for the office's sessions.
const closeWait = 5 * time.Second
