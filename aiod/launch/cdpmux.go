package launch

// CDPMux puts many DevTools clients on the one pipe of a Chromium started
// with --remote-debugging-pipe, so that the browser has no TCP port at
// all: /cdp behind the daemon's key is the only way in.
//
// The pipe (checked against Chromium 156): Chromium reads commands from
// its fd 3 and writes answers and events on its fd 4, each message a
// JSON object ended by a NUL byte. Whoever holds the pipe is the root
// connection, the one a WebSocket to /devtools/browser/<id> would be.
//
// How clients share it:
//
//   - Every client (the browser plane's own connection, each WebSocket of
//     /cdp) gets a session of its own at attach time: a browser-level
//     session (Target.attachToBrowserTarget, sent by the mux on the root)
//     for /devtools/browser/<id>, a page session (Target.attachToTarget
//     with flatten) for /devtools/page/<targetId>. It is the client's
//     default session: a message the client sends without a sessionId is
//     sent on it, and what Chromium sends on it reaches the client with
//     the sessionId taken away, so that the client sees a connection of
//     its own.
//   - Child sessions a client attaches (flatten mode) belong to it: the
//     mux reads Target.attachedToTarget on a session the client owns and
//     records the new session as the client's (Chromium sends that event
//     on the attaching session before the answer to attachToTarget, and
//     for every auto-attach); Target.detachedFromTarget forgets it. A
//     client may send only on sessions it owns; events go only to the
//     owner of their session.
//   - Ids: Chromium answers an unknown session's command on the root,
//     without the sessionId, so answers are routed by id, never by
//     session: each command forwarded gets a fresh id of the mux's, and
//     the answer is given back to its client with the client's own id.
//
// Ownership and lifetimes:
//
//   - One reader goroutine per Chromium instance (a generation, started
//     by Attach) owns every read of the pipe and every routing decision;
//     it never blocks on a client: each client has a bounded queue, and a
//     client that falls that far behind is disconnected.
//   - Writes to the pipe share a mutex and a deadline; a failed or
//     timed-out write may leave half a message in the pipe, so it ends
//     the generation (Chromium is then restarted by its supervisor).
//   - Chromium ending (end of file on the pipe) ends the generation:
//     every client's connection is closed and every pending call fails.
//     The next Attach (the restarted Chromium) starts a new one.
//   - A client ending detaches its default session (which detaches the
//     children attached through it) and forgets what it owned; answers
//     still in flight for it are dropped when they come.
//   - Size bounds: a message from Chromium past maxChromeMessage is
//     read to its end and thrown away, and the call it answered fails
//     with a CDP error; a client's message past maxClientMessage ends
//     that client's connection.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Bounds of the multiplexer.
const (
	// maxClientMessage bounds one message a client sends.
	maxClientMessage = 64 << 20
	// clientQueue and clientQueueBytes bound what waits for a slow
	// client; past either, the client is disconnected.
	clientQueue      = 4096
	clientQueueBytes = 512 << 20
	// maxInFlight bounds a client's commands Chromium has not answered.
	maxInFlight = 4096
	// pipeWriteTimeout bounds one write to the pipe.
	pipeWriteTimeout = 30 * time.Second
	// clientWriteTimeout bounds one write to a client.
	clientWriteTimeout = 30 * time.Second
)

// maxChromeMessage bounds one message from Chromium: the browser plane's
// largest answer (a full-page screenshot, 256 MiB) and some. A variable
// so that a test can lower it.
var maxChromeMessage = 264 << 20

// errPipeGone is a call on a multiplexer whose Chromium is not (or no
// longer) attached.
var errPipeGone = errors.New("cdp: the browser's DevTools pipe is closed")

// CDPMux serves the DevTools protocol of one supervised Chromium over its
// pipe (see the file comment): the WebSockets and the /json routes, on
// /cdp/... for clients of the daemon (ServeHTTP) and, for the browser
// plane, on an in-process connection (Dial).
type CDPMux struct {
	log *slog.Logger
	// browserID names /devtools/browser/<browserID>; it outlives
	// Chromium's restarts, so a client's URL stays good.
	browserID string
	upgrader  websocket.Upgrader

	mu  sync.Mutex
	gen *generation // nil before the first Attach and once closed
	// closed is set by Close; no Attach is taken after it.
	closed bool

	// The in-process listener the browser plane dials (Dial).
	ln  *pipeListener
	srv *http.Server
}

// NewCDPMux returns a multiplexer with no Chromium yet (see Attach).
func NewCDPMux(log *slog.Logger) *CDPMux {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	m := &CDPMux{log: log, browserID: id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:],
		upgrader: websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10, HandshakeTimeout: 10 * time.Second,
			// The daemon's middleware checks Host, Origin and the key
			// before any upgrade: that is the rule, not a second one here.
			CheckOrigin: func(*http.Request) bool { return true }}}
	m.ln = newPipeListener()
	m.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, false) }),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(m.ln) }() // ends with Close (srv.Close)
	return m
}

// BrowserPath is the path of the browser's WebSocket,
// /devtools/browser/<id>, under the multiplexer's root.
func (m *CDPMux) BrowserPath() string { return "/devtools/browser/" + m.browserID }

// Attach starts serving a new Chromium's pipe: toChrome is the write end
// of its fd 3, fromChrome the read end of its fd 4. A previous instance's
// generation is ended (its clients disconnected). The multiplexer owns
// both files from then on.
func (m *CDPMux) Attach(toChrome, fromChrome *os.File) {
	g := &generation{mux: m, w: toChrome, r: fromChrome, limit: maxChromeMessage, pending: map[int64]*pendingCall{},
		sessions: map[string]*muxClient{}, clients: map[*muxClient]struct{}{}, done: make(chan struct{})}
	m.mu.Lock()
	old, closed := m.gen, m.closed
	if !closed {
		m.gen = g
	}
	m.mu.Unlock()
	if old != nil {
		old.end(errors.New("the browser was restarted"))
	}
	if closed {
		_ = toChrome.Close()
		_ = fromChrome.Close()
		return
	}
	go g.read()
	// The mux's own view of the targets, for /json/list's order.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := g.call(ctx, "Target.setDiscoverTargets", map[string]any{"discover": true}); err != nil {
			m.log.Debug("cdp mux: target discovery", "err", err)
		}
	}()
}

// Ready reports whether the attached Chromium answers Browser.getVersion
// (the supervisor's readiness check).
func (m *CDPMux) Ready(ctx context.Context) error {
	g := m.current()
	if g == nil {
		return errPipeGone
	}
	_, err := g.call(ctx, "Browser.getVersion", nil)
	return err
}

// Close ends the current generation and the in-process server; the
// multiplexer serves nothing after it.
func (m *CDPMux) Close() {
	m.mu.Lock()
	g := m.gen
	m.gen, m.closed = nil, true
	m.mu.Unlock()
	if g != nil {
		g.end(errors.New("the daemon is stopping"))
	}
	_ = m.srv.Close()
}

// Dial opens an in-process connection to the multiplexer's HTTP side
// (what the browser plane's client dials instead of a TCP port). The
// network and address are ignored.
func (m *CDPMux) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	return m.ln.dial(ctx)
}

func (m *CDPMux) current() *generation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// ServeHTTP serves /cdp/... to clients of the daemon (whose auth the
// caller checked): /cdp/json/version, /cdp/json/list (and /cdp/json),
// /cdp/json/new, /cdp/json/activate/<id>, /cdp/json/close/<id> and the
// WebSockets /cdp/devtools/browser/<id> and /cdp/devtools/page/<id>.
func (m *CDPMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.serve(w, r, true)
}

// serve answers one request; public says it came through /cdp (the
// prefix is removed, and the URLs it answers go through /cdp too).
func (m *CDPMux) serve(w http.ResponseWriter, r *http.Request, public bool) {
	p := r.URL.Path
	if public {
		if !browser.UnderCDP(p) {
			http.NotFound(w, r)
			return
		}
		p = strings.TrimPrefix(p, browser.CDPPrefix)
	}
	if strings.HasPrefix(p, "/json") {
		p = strings.TrimRight(p, "/") // Playwright asks for /json/version/
	}
	g := m.current()
	if g == nil {
		http.Error(w, "the browser is not running", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	switch {
	case p == "/json/version" && (r.Method == http.MethodGet || r.Method == http.MethodPut):
		m.version(ctx, w, r, g, public)
	case (p == "/json" || p == "/json/list") && (r.Method == http.MethodGet || r.Method == http.MethodPut):
		m.list(ctx, w, r, g, public)
	case p == "/json/new" && r.Method == http.MethodPut:
		m.newTarget(ctx, w, r, g, public)
	case strings.HasPrefix(p, "/json/activate/") && (r.Method == http.MethodGet || r.Method == http.MethodPut):
		id := strings.TrimPrefix(p, "/json/activate/")
		if _, err := g.call(ctx, "Target.activateTarget", map[string]any{"targetId": id}); err != nil {
			http.Error(w, "No such target id: "+id, http.StatusNotFound)
			return
		}
		g.front(id)
		writeText(w, "Target activated")
	case strings.HasPrefix(p, "/json/close/") && (r.Method == http.MethodGet || r.Method == http.MethodPut):
		id := strings.TrimPrefix(p, "/json/close/")
		if _, err := g.call(ctx, "Target.closeTarget", map[string]any{"targetId": id}); err != nil {
			http.Error(w, "No such target id: "+id, http.StatusNotFound)
			return
		}
		writeText(w, "Target is closing")
	case p == m.BrowserPath():
		m.socket(w, r, g, "")
	case strings.HasPrefix(p, "/devtools/page/") && plainID([]byte(strings.TrimPrefix(p, "/devtools/page/"))):
		m.socket(w, r, g, strings.TrimPrefix(p, "/devtools/page/"))
	default:
		http.NotFound(w, r)
	}
}

// wsURL is the WebSocket URL of path (/devtools/...) as the client of r
// reaches it: through /cdp with the client's api_key kept (a WebSocket
// client may have no other way to send it) for a public request, on the
// in-process endpoint otherwise.
func wsURL(r *http.Request, public bool, path string) string {
	if !public {
		return "ws://" + r.Host + path
	}
	pub := r.Clone(r.Context())
	_, pub.URL.RawQuery = api.SplitKey(r.URL.RawQuery)
	return browser.CDPURL(pub, browser.CDPPrefix, path)
}

func (m *CDPMux) version(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, public bool) {
	msg, err := g.call(ctx, "Browser.getVersion", nil)
	if err != nil {
		http.Error(w, "the browser does not answer", http.StatusBadGateway)
		return
	}
	var v struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			Product         string `json:"product"`
			Revision        string `json:"revision"`
			UserAgent       string `json:"userAgent"`
			JSVersion       string `json:"jsVersion"`
		} `json:"result"`
	}
	_ = json.Unmarshal(msg, &v)
	writeJSON(w, map[string]string{
		"Browser": v.Result.Product, "Protocol-Version": v.Result.ProtocolVersion, "User-Agent": v.Result.UserAgent,
		"V8-Version": v.Result.JSVersion, "WebKit-Version": "537.36 (" + v.Result.Revision + ")",
		"webSocketDebuggerUrl": wsURL(r, public, m.BrowserPath()),
	})
}

// targetInfo is what Target.getTargets says of a target.
type targetInfo struct {
	TargetID string `json:"targetId"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	URL      string `json:"url"`
}

// targetJSON is a target as /json/list shows it.
func targetJSON(r *http.Request, public bool, t targetInfo) map[string]string {
	return map[string]string{"description": "", "id": t.TargetID, "title": t.Title, "type": t.Type, "url": t.URL,
		"webSocketDebuggerUrl": wsURL(r, public, "/devtools/page/"+t.TargetID)}
}

// list is /json/list: the targets but the browser's own, most recently
// created or activated first as Chromium's own endpoint orders them (as
// far as the mux sees activations: Target.activateTarget and
// /json/activate, not a user's click on a headful window).
func (m *CDPMux) list(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, public bool) {
	msg, err := g.call(ctx, "Target.getTargets", nil)
	if err != nil {
		http.Error(w, "the browser does not answer", http.StatusBadGateway)
		return
	}
	var v struct {
		Result struct {
			TargetInfos []targetInfo `json:"targetInfos"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &v); err != nil {
		http.Error(w, "the browser's target list does not decode", http.StatusBadGateway)
		return
	}
	ts := g.ordered(v.Result.TargetInfos)
	out := make([]map[string]string, 0, len(ts))
	for _, t := range ts {
		if t.Type != "browser" && t.Type != "tab" {
			out = append(out, targetJSON(r, public, t))
		}
	}
	writeJSON(w, out)
}

// newTarget is PUT /json/new?<url>: a tab opened at the query (the whole
// raw query but an api_key), about:blank without one.
func (m *CDPMux) newTarget(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, public bool) {
	u, _ := api.SplitKey(r.URL.RawQuery)
	if d, err := urlUnescape(u); err == nil {
		u = d
	}
	if u == "" {
		u = "about:blank"
	}
	msg, err := g.call(ctx, "Target.createTarget", map[string]any{"url": u})
	if err != nil {
		http.Error(w, "Could not create new page", http.StatusInternalServerError)
		return
	}
	var v struct {
		Result struct {
			TargetID string `json:"targetId"`
		} `json:"result"`
	}
	_ = json.Unmarshal(msg, &v)
	g.front(v.Result.TargetID)
	t := targetInfo{TargetID: v.Result.TargetID, Type: "page", URL: u}
	if msg, err := g.call(ctx, "Target.getTargetInfo", map[string]any{"targetId": v.Result.TargetID}); err == nil {
		var i struct {
			Result struct {
				TargetInfo targetInfo `json:"targetInfo"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &i) == nil && i.Result.TargetInfo.TargetID != "" {
			t = i.Result.TargetInfo
		}
	}
	writeJSON(w, targetJSON(r, public, t))
}

func writeJSON(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "   ")
	_ = enc.Encode(v)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	_, _ = w.Write(b.Bytes())
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	_, _ = io.WriteString(w, s)
}

// socket serves one WebSocket client: the browser (target "") or the
// page target. The goroutine of the request owns the client: it reads
// the client's messages and forwards them; on its way out it detaches
// the client's sessions and ends the client's writer.
func (m *CDPMux) socket(w http.ResponseWriter, r *http.Request, g *generation, target string) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	method, params := "Target.attachToBrowserTarget", map[string]any(nil)
	if target != "" {
		method, params = "Target.attachToTarget", map[string]any{"targetId": target, "flatten": true}
	}
	// The session is made before the upgrade: a target that does not
	// exist is a 404, as Chromium answers it.
	msg, err := g.call(ctx, method, params)
	cancel()
	if err != nil {
		if target != "" {
			http.Error(w, "No such target id: "+target, http.StatusNotFound)
		} else {
			http.Error(w, "the browser does not answer", http.StatusBadGateway)
		}
		return
	}
	var v struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(msg, &v) != nil || !plainID([]byte(v.Result.SessionID)) {
		http.Error(w, "the browser gave no session", http.StatusBadGateway)
		return
	}
	// The client owns its session before the upgrade answers: whatever
	// Chromium sends on it from then on is queued for it.
	c := newMuxClient(g, v.Result.SessionID)
	if !g.add(c) {
		g.detach(v.Result.SessionID)
		http.Error(w, "the browser is not running", http.StatusServiceUnavailable)
		return
	}
	ws, err := m.upgrader.Upgrade(hijacker{w}, r, nil)
	if err != nil {
		g.remove(c)
		return // the upgrader answered
	}
	if !c.connected(ws) { // killed meanwhile (the browser went away)
		g.remove(c)
		_ = ws.Close()
		return
	}
	go c.writeLoop()
	c.readLoop()
	g.remove(c)
	c.stop()
	<-c.writerDone
	_ = ws.Close()
}

// hijacker reaches the connection through the daemon's middleware
// (whose writers unwrap to the server's).
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

// urlUnescape decodes a /json/new query as Chromium does (percent
// escapes only).
func urlUnescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) {
				return "", errors.New("bad escape")
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b.WriteByte(byte(n))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// generation is the multiplexer's state for one Chromium instance.
type generation struct {
	mux *CDPMux
	w   *os.File // to Chromium (its fd 3)
	r   *os.File // from Chromium (its fd 4)
	wmu sync.Mutex
	// limit is maxChromeMessage when the generation began.
	limit int

	nextID atomic.Int64

	mu       sync.Mutex
	pending  map[int64]*pendingCall // by the mux's id
	sessions map[string]*muxClient  // every session a client owns
	clients  map[*muxClient]struct{}
	order    []string // target ids, most recently created or activated first
	err      error    // set once the generation ended
	done     chan struct{}
}

// pendingCall is a command sent to Chromium and not yet answered: the
// mux's own (ch set) or a client's (c set, with the client's raw id).
type pendingCall struct {
	ch       chan []byte
	c        *muxClient
	clientID []byte
	// activates is the target a Target.activateTarget names, moved to the
	// front of /json/list when it succeeds.
	activates string
}

// call sends method on the root connection and waits for its answer (the
// whole message), within ctx. A CDP error answer is an error.
func (g *generation) call(ctx context.Context, method string, params any) ([]byte, error) {
	id := g.nextID.Add(1)
	ch := make(chan []byte, 1)
	g.mu.Lock()
	if g.err != nil {
		g.mu.Unlock()
		return nil, errPipeGone
	}
	g.pending[id] = &pendingCall{ch: ch}
	g.mu.Unlock()
	b, err := json.Marshal(struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params,omitempty"`
	}{id, method, params})
	if err == nil {
		err = g.write(b)
	}
	if err != nil {
		g.forget(id)
		return nil, err
	}
	select {
	case msg, ok := <-ch:
		if !ok {
			return nil, errPipeGone
		}
		var e struct {
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if i := bytes.Index(msg, []byte(`"error":{`)); i >= 0 && !bytes.Contains(msg[:i], []byte(`"result":`)) &&
			json.Unmarshal(msg, &e) == nil && e.Error != nil {
			return nil, fmt.Errorf("cdp: %s: %s", method, e.Error.Message)
		}
		return msg, nil
	case <-ctx.Done():
		g.forget(id)
		return nil, ctx.Err()
	}
}

func (g *generation) forget(id int64) {
	g.mu.Lock()
	delete(g.pending, id)
	g.mu.Unlock()
}

// detach sends Target.detachFromTarget for session without waiting for
// the answer (it is dropped when it comes).
func (g *generation) detach(session string) {
	b, _ := json.Marshal(map[string]any{"id": g.nextID.Add(1), "method": "Target.detachFromTarget",
		"params": map[string]string{"sessionId": session}})
	_ = g.write(b)
}

// write sends one message and its NUL. A failure ends the generation (a
// partial message may be in the pipe).
func (g *generation) write(msg []byte) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	select {
	case <-g.done:
		return errPipeGone
	default:
	}
	_ = g.w.SetWriteDeadline(time.Now().Add(pipeWriteTimeout))
	_, err := g.w.Write(append(msg, 0))
	if err != nil {
		go g.end(fmt.Errorf("writing to the browser: %w", err))
		return errPipeGone
	}
	return nil
}

// end ends the generation once: the pipe is closed, mux calls fail,
// clients are disconnected.
func (g *generation) end(why error) {
	g.mu.Lock()
	if g.err != nil {
		g.mu.Unlock()
		return
	}
	g.err = why
	close(g.done)
	for id, pc := range g.pending {
		if pc.ch != nil {
			close(pc.ch)
		}
		delete(g.pending, id)
	}
	clients := make([]*muxClient, 0, len(g.clients))
	for c := range g.clients {
		clients = append(clients, c)
	}
	g.mu.Unlock()
	_ = g.w.Close()
	_ = g.r.Close()
	for _, c := range clients {
		c.kill()
	}
	g.mux.log.Debug("cdp mux: browser connection ended", "why", why, "clients", len(clients))
}

// add registers a client with its default session; false once the
// generation has ended.
func (g *generation) add(c *muxClient) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return false
	}
	g.clients[c] = struct{}{}
	g.sessions[c.def] = c
	return true
}

// remove forgets a client that ended and everything it owned, then
// detaches its default session (Chromium detaches the sessions attached
// through it with it).
func (g *generation) remove(c *muxClient) {
	g.mu.Lock()
	delete(g.clients, c)
	for s, o := range g.sessions {
		if o == c {
			delete(g.sessions, s)
		}
	}
	for id, pc := range g.pending {
		if pc.c == c {
			delete(g.pending, id)
		}
	}
	ended := g.err != nil
	g.mu.Unlock()
	if !ended {
		g.detach(c.def)
	}
}

// front moves target to the head of /json/list's order.
func (g *generation) front(target string) {
	if target == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.order = append([]string{target}, removeString(g.order, target)...)
}

func removeString(list []string, s string) []string {
	out := list[:0:0]
	for _, e := range list {
		if e != s {
			out = append(out, e)
		}
	}
	return out
}

// ordered sorts targets by the mux's order; targets it has not seen
// keep Chromium's order, after those it has.
func (g *generation) ordered(ts []targetInfo) []targetInfo {
	g.mu.Lock()
	rank := make(map[string]int, len(g.order))
	for i, id := range g.order {
		rank[id] = i
	}
	g.mu.Unlock()
	at := func(t targetInfo) int {
		if i, ok := rank[t.TargetID]; ok {
			return i
		}
		return len(rank)
	}
	out := slices.Clone(ts)
	slices.SortStableFunc(out, func(a, b targetInfo) int { return at(a) - at(b) })
	return out
}

// read is the generation's one reader: it owns the pipe's read end and
// every routing decision, until the pipe ends.
func (g *generation) read() {
	br := bufio.NewReaderSize(g.r, 256<<10)
	for {
		msg, over, err := readPipeMessage(br, g.limit)
		if err != nil {
			g.end(fmt.Errorf("reading from the browser: %w", err))
			return
		}
		if over != nil {
			g.tooLarge(over)
			continue
		}
		g.route(msg)
	}
}

// oversize is what is kept of a message past its bound: its start and
// its end, enough to route an error to whoever waits for it.
type oversize struct{ head, tail []byte }

// readPipeMessage reads one NUL-ended message of at most limit bytes.
// A longer one is read to its NUL and thrown away; only its first and
// last bytes are kept (over).
func readPipeMessage(br *bufio.Reader, limit int) (msg []byte, over *oversize, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice(0)
		if over == nil && len(buf)+len(chunk) > limit+1 {
			over = &oversize{head: append([]byte(nil), buf[:min(len(buf), 64)]...)}
			if len(over.head) < 64 {
				over.head = append(over.head, chunk[:min(len(chunk), 64-len(over.head))]...)
			}
			buf = nil
		}
		if over != nil {
			over.tail = append(over.tail, chunk...)
			if len(over.tail) > 256 {
				over.tail = append(over.tail[:0:0], over.tail[len(over.tail)-256:]...)
			}
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case err == nil:
			if over != nil {
				over.tail = bytes.TrimSuffix(over.tail, []byte{0})
				return nil, over, nil
			}
			return buf[:len(buf)-1], nil, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, nil, err
		}
	}
}

// tooLarge fails the call an oversized answer was for.
func (g *generation) tooLarge(o *oversize) {
	id, _, ok := headID(o.head)
	g.mux.log.Debug("cdp mux: a message from the browser past its bound was dropped", "limit", g.limit, "answer", ok)
	if !ok {
		return
	}
	g.mu.Lock()
	pc := g.pending[id]
	delete(g.pending, id)
	g.mu.Unlock()
	if pc == nil {
		return
	}
	e := fmt.Sprintf(`{"id":%d,"error":{"code":-32000,"message":"the answer is larger than %d MiB"}}`, id, g.limit>>20)
	if pc.ch != nil {
		pc.ch <- []byte(e)
		return
	}
	sess, _ := sessionTail(o.tail)
	pc.c.answer(pc.clientID, []byte(e[bytes.IndexByte([]byte(e), ','):]), sess)
}

// route hands one message from Chromium to whoever it is for. Called
// only by the reader.
func (g *generation) route(msg []byte) {
	if id, end, ok := headID(msg); ok {
		g.mu.Lock()
		pc := g.pending[id]
		delete(g.pending, id)
		g.mu.Unlock()
		switch {
		case pc == nil: // a detach's answer, or its client has gone
		case pc.ch != nil:
			pc.ch <- msg
		default:
			sess, ok := sessionTail(msg)
			if !ok {
				sess = topSession(msg)
			}
			if pc.activates != "" && !bytes.Contains(msg[:min(len(msg), end+16)], []byte(`"error"`)) {
				g.front(pc.activates)
			}
			pc.c.answer(pc.clientID, msg[end:], sess)
		}
		return
	}
	sess, ok := sessionTail(msg)
	if !ok {
		sess = topSession(msg)
	}
	if sess == "" {
		g.rootEvent(msg)
		return
	}
	g.mu.Lock()
	c := g.sessions[sess]
	switch {
	case c == nil:
	case bytes.HasPrefix(msg, []byte(`{"method":"Target.attachedToTarget"`)):
		if child := paramsSession(msg); child != "" {
			g.sessions[child] = c
		}
	case bytes.HasPrefix(msg, []byte(`{"method":"Target.detachedFromTarget"`)):
		if child := paramsSession(msg); child != "" && g.sessions[child] == c && child != c.def {
			delete(g.sessions, child)
		}
	}
	g.mu.Unlock()
	if c != nil {
		c.event(msg, sess)
	}
}

// rootEvent handles an event of the root connection: target discovery
// (for /json/list's order) and the end of a client's default session
// (its target closed: the client is disconnected, as Chromium closes a
// page's WebSocket).
func (g *generation) rootEvent(msg []byte) {
	switch {
	case bytes.HasPrefix(msg, []byte(`{"method":"Target.targetCreated"`)):
		var v struct {
			Params struct {
				TargetInfo targetInfo `json:"targetInfo"`
			} `json:"params"`
		}
		if json.Unmarshal(msg, &v) == nil {
			g.front(v.Params.TargetInfo.TargetID)
		}
	case bytes.HasPrefix(msg, []byte(`{"method":"Target.targetDestroyed"`)):
		var v struct {
			Params struct {
				TargetID string `json:"targetId"`
			} `json:"params"`
		}
		if json.Unmarshal(msg, &v) == nil {
			g.mu.Lock()
			g.order = removeString(g.order, v.Params.TargetID)
			g.mu.Unlock()
		}
	case bytes.HasPrefix(msg, []byte(`{"method":"Target.detachedFromTarget"`)):
		s := paramsSession(msg)
		g.mu.Lock()
		c := g.sessions[s]
		g.mu.Unlock()
		if c != nil && c.def == s {
			c.kill()
		}
	}
}

// paramsSession is params.sessionId of an event (small: attach and
// detach events carry a target's info, whose title and URL a page sets,
// but are parsed only on sessions a client owns).
func paramsSession(msg []byte) string {
	var v struct {
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &v) != nil || !plainID([]byte(v.Params.SessionID)) {
		return ""
	}
	return v.Params.SessionID
}

// pipeListener is an in-process net.Listener: Dial hands it one end of a
// net.Pipe. It serves the browser plane, which so reaches the
// multiplexer without any socket.
type pipeListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.ch <- b:
		return a, nil
	case <-l.done:
	case <-ctx.Done():
	}
	_ = a.Close()
	_ = b.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, net.ErrClosed
}

// Accept returns the next in-process connection.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr names the listener.
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "devtools-pipe" }
