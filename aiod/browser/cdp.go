package browser

// This file is the plane's one DevTools connection: a WebSocket to the
// browser target (webSocketDebuggerUrl) with flattened sessions for the
// pages (Target.attachToTarget flatten:true). Invariants:
//
//   - One reader goroutine per connection owns every read; it ends when
//     the connection fails or Close closes it, and fails every pending
//     call then. Writers share a mutex.
//   - A response is matched to its call by id. Chrome writes "id" first
//     ({"id":N,"result":…}), so the reader takes the id with a prefix scan
//     and hands the raw message to the caller, who decodes only what it
//     needs (a screenshot is base64-decoded straight into the HTTP
//     answer, never unmarshalled).
//   - Events go to the subscribers registered for their session (a
//     navigation's wait) and to the network ring.
//   - A dead connection (the browser restarted) is replaced on the next
//     call; the sessions of the old one are forgotten with it.
//   - Attaching never closes a tab: sessions are detached, not the
//     targets, when the plane closes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// cdpError is a failed CDP command: the method and Chrome's message.
type cdpError struct {
	Method  string
	Code    int64
	Message string
}

func (e *cdpError) Error() string { return e.Method + ": " + e.Message }

// errConnLost is a call that ended because the connection went away.
var errConnLost = errors.New("cdp: connection lost")

// errCrashed is a call on a tab whose renderer crashed
// (Inspector.targetCrashed): it fails at once rather than wait out its
// deadline (Chrome holds every other command until the page loads
// again). Only a navigation is sent to a crashed tab: Chrome loads the
// page in a new renderer, the session and its enabled domains carry on,
// and once Chrome accepts the navigation the crash is over.
var errCrashed = errors.New("cdp: the tab crashed")

// crashOK are the methods a crashed tab is still sent.
var crashOK = map[string]bool{"Page.navigate": true, "Page.reload": true}

// Message limits. A page decides how large an answer is (an evaluate
// of "x".repeat(2e8)), so a call's answer is bounded by the call:
// maxResult for most, maxMessage for a screenshot (a full page of a
// long page is the largest). An answer past its call's limit fails that
// call alone with errTooLarge; the rest of the message is read and
// thrown away, so the connection and every other call carry on. Events
// past maxResult are dropped.
const (
	maxResult  = 32 << 20
	maxMessage = 256 << 20
)

// tooLarge is a call whose answer passed its limit.
type tooLarge struct{ limit int64 }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("cdp: the result is larger than %d MiB", e.limit>>20)
}

// event is a CDP event.
type event struct {
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
}

// pending is a call waiting for its answer: the message, or an error
// that ended it early (errCrashed).
type pending struct {
	ch      chan reply
	session string
	limit   int64
}

type reply struct {
	msg []byte
	err error
}

// subscriber receives the Page events of one session until it
// unsubscribes.
type subscriber struct {
	session string
	ch      chan event
}

// conn is one WebSocket connection to the browser target.
type conn struct {
	ws      *websocket.Conn
	wmu     sync.Mutex
	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[int64]*pending
	subs    map[*subscriber]struct{}
	// crashed holds the sessions whose renderer crashed.
	crashed map[string]bool
	// sessions maps a target id to its flattened session id.
	sessions map[string]string
	// enabled remembers which domains a session has enabled.
	enabled map[string]bool
	done    chan struct{}
	err     error
	onEvent func(c *conn, ev *event)
	log     *slog.Logger
}

func newConn(ws *websocket.Conn, onEvent func(c *conn, ev *event), log *slog.Logger) *conn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &conn{ws: ws, pending: map[int64]*pending{}, crashed: map[string]bool{}, subs: map[*subscriber]struct{}{},
		sessions: map[string]string{}, enabled: map[string]bool{}, done: make(chan struct{}), onEvent: onEvent, log: log}
	ws.SetReadLimit(0) // each message is bounded by its call (see next)
	go c.read()
	return c
}

// alive reports whether the connection still reads.
func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// close ends the connection; the reader fails every pending call.
func (c *conn) close() { _ = c.ws.Close() }

func (c *conn) read() {
	defer close(c.done)
	for {
		msg, err := c.next()
		if err != nil {
			c.mu.Lock()
			c.err = err
			for id, pc := range c.pending {
				close(pc.ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		if msg == nil { // past its limit, already answered
			continue
		}
		if id, ok := messageID(msg); ok {
			c.mu.Lock()
			pc := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if pc != nil {
				pc.ch <- reply{msg: msg}
			}
			continue
		}
		var ev event
		if json.Unmarshal(msg, &ev) != nil || ev.Method == "" {
			continue
		}
		c.dispatch(&ev)
	}
}

// next reads one message within its limit: the limit of the call whose
// answer it is (Chrome writes the id first), or maxResult for an event.
// A message past its limit is read to its end and thrown away, its call
// failed with tooLarge; next answers nil for it.
func (c *conn) next() ([]byte, error) {
	_, r, err := c.ws.NextReader()
	if err != nil {
		return nil, err
	}
	var head [32]byte
	n, err := io.ReadFull(r, head[:])
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return append([]byte(nil), head[:n]...), nil
	}
	if err != nil {
		return nil, err
	}
	limit := int64(maxResult)
	id, isAnswer := messageID(head[:n])
	if isAnswer {
		c.mu.Lock()
		if pc := c.pending[id]; pc != nil && pc.limit > 0 {
			limit = pc.limit
		}
		c.mu.Unlock()
	}
	buf := bytes.NewBuffer(make([]byte, 0, 4<<10))
	buf.Write(head[:n])
	if _, err := buf.ReadFrom(io.LimitReader(r, limit-int64(n)+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) <= limit {
		return buf.Bytes(), nil
	}
	buf = nil
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, err
	}
	if isAnswer {
		c.mu.Lock()
		pc := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if pc != nil {
			pc.ch <- reply{err: &tooLarge{limit: limit}}
		}
	}
	c.log.Debug("browser: a CDP message past its limit was dropped", "limit", limit, "answer", isAnswer)
	return nil, nil
}

// messageID is the id of a response, read from its start ({"id":N,).
func messageID(msg []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(msg, []byte(`{"id":`))
	if !ok {
		var r struct {
			ID *int64 `json:"id"`
		}
		if json.Unmarshal(msg, &r) != nil || r.ID == nil {
			return 0, false
		}
		return *r.ID, true
	}
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return id, err == nil
}

func (c *conn) dispatch(ev *event) {
	if ev.Method == "Target.detachedFromTarget" {
		var p struct {
			SessionID string `json:"sessionId"`
			TargetID  string `json:"targetId"`
		}
		if json.Unmarshal(ev.Params, &p) == nil {
			c.forget(p.SessionID)
		}
	}
	switch ev.Method {
	case "Page.javascriptDialogOpening":
		c.dialog(ev)
	case "Inspector.targetCrashed":
		c.crash(ev.SessionID)
	case "Inspector.targetReloadedAfterCrash":
		c.mu.Lock()
		delete(c.crashed, ev.SessionID)
		c.mu.Unlock()
	}
	if c.onEvent != nil {
		c.onEvent(c, ev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	watched := false
	for s := range c.subs {
		if s.session == ev.SessionID {
			watched = true
			break
		}
	}
	if !watched || !awaited(ev) {
		return
	}
	for s := range c.subs {
		if s.session == ev.SessionID {
			select {
			case s.ch <- *ev:
			default: // a slow waiter loses events rather than stall the reader
			}
		}
	}
}

// awaited reports whether a navigation waiting on its tab's events needs
// ev (see awaitLifecycle): commits, same-document navigations, a crash,
// and the lifecycle events it can wait for. Everything else a busy page
// sends (child frames attaching and loading, paint milestones) is not
// queued, so it cannot crowd out the main frame's load in the
// subscriber's buffer. The reader asks only for an event of a session
// that a navigation waits on.
func awaited(ev *event) bool {
	switch ev.Method {
	case "Page.frameNavigated", "Page.navigatedWithinDocument", "Inspector.targetCrashed":
		return true
	case "Page.lifecycleEvent":
		var p struct {
			Name string `json:"name"`
		}
		return json.Unmarshal(ev.Params, &p) == nil && awaitedLifecycle[p.Name]
	}
	return false
}

// awaitedLifecycle is the set of lifecycle event names a navigation can
// wait for: the values of lifecycleNames but commit's "".
var awaitedLifecycle = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range lifecycleNames {
		if n != "" {
			m[n] = true
		}
	}
	return m
}()

// dialogTimeout bounds the answer to a JavaScript dialog.
const dialogTimeout = 5 * time.Second

// dialog answers a JavaScript dialog that opened in a page the plane
// drives, as browser automation usually does: alert, confirm and prompt
// are dismissed (confirm answers false, prompt null) and beforeunload
// is accepted, so the navigation that raised it proceeds. A dialog left
// open would hold the page's script (an evaluate waits, every later
// call times out). The answer is sent from a goroutine of its own (the
// reader must go on reading to receive it), which ends with its
// deadline or with the connection.
func (c *conn) dialog(ev *event) {
	var p struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		URL     string `json:"url"`
	}
	_ = json.Unmarshal(ev.Params, &p)
	accept := p.Type == "beforeunload"
	session := ev.SessionID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), dialogTimeout)
		defer cancel()
		err := c.call(ctx, session, "Page.handleJavaScriptDialog", map[string]any{"accept": accept}, nil)
		c.log.Debug("browser: answered a JavaScript dialog", "type", p.Type, "accept", accept,
			"message", cut(p.Message, 200), "url", cut(p.URL, 200), "err", err)
	}()
}

// crash marks session crashed and fails its pending calls at once.
func (c *conn) crash(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed[session] = true
	for id, pc := range c.pending {
		if pc.session == session {
			pc.ch <- reply{err: errCrashed}
			delete(c.pending, id)
		}
	}
	c.log.Debug("browser: a tab crashed", "session", session)
}

// cut is s cut to n bytes, for a log line.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// forget drops a session (its target closed or detached).
func (c *conn) forget(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, s := range c.sessions {
		if s == session {
			delete(c.sessions, t)
		}
	}
	delete(c.crashed, session)
	for k := range c.enabled {
		if strings.HasPrefix(k, session+" ") {
			delete(c.enabled, k)
		}
	}
}

// subscriberBuffer is how many awaited events a subscriber holds: a page
// of a thousand frames, each loading, fits.
const subscriberBuffer = 4096

func (c *conn) subscribe(session string) *subscriber {
	s := &subscriber{session: session, ch: make(chan event, subscriberBuffer)}
	c.mu.Lock()
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s
}

func (c *conn) unsubscribe(s *subscriber) {
	c.mu.Lock()
	delete(c.subs, s)
	c.mu.Unlock()
}

// request is a CDP command on the wire.
type request struct {
	ID        int64  `json:"id"`
	Method    string `json:"method"`
	Params    any    `json:"params,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// response is a CDP command's answer.
type response struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// raw sends method to session ("" = the browser) and returns the whole
// response message, checked for a CDP error. The wait ends with ctx,
// or after callTimeout when ctx has no deadline (see rawN).
func (c *conn) raw(ctx context.Context, session, method string, params any) ([]byte, error) {
	return c.rawN(ctx, maxResult, session, method, params)
}

// rawN is raw with the answer bounded at limit bytes. A ctx without a
// deadline gets callTimeout, for the write and the wait for the answer
// both: a hung browser never holds a call longer.
func (c *conn) rawN(ctx context.Context, limit int64, session, method string, params any) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	id := c.nextID.Add(1)
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, errConnLost
	}
	if session != "" && c.crashed[session] && !crashOK[method] {
		c.mu.Unlock()
		return nil, errCrashed
	}
	c.pending[id] = &pending{ch: ch, session: session, limit: limit}
	c.mu.Unlock()
	b, err := json.Marshal(request{ID: id, Method: method, Params: params, SessionID: session})
	if err != nil {
		c.drop(id)
		return nil, fmt.Errorf("cdp: encode %s: %w", method, err)
	}
	c.wmu.Lock()
	dl, _ := ctx.Deadline()
	_ = c.ws.SetWriteDeadline(dl)
	err = c.ws.WriteMessage(websocket.TextMessage, b)
	c.wmu.Unlock()
	if err != nil {
		c.drop(id)
		c.close()
		return nil, errConnLost
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, errConnLost
		}
		if r.err != nil {
			return nil, r.err
		}
		if err := checkError(method, r.msg); err != nil {
			return nil, err
		}
		if method == "Page.navigate" || method == "Page.reload" || method == "Page.navigateToHistoryEntry" {
			c.mu.Lock()
			delete(c.crashed, session) // a new renderer loads the page
			c.mu.Unlock()
		}
		return r.msg, nil
	case <-ctx.Done():
		c.drop(id)
		return nil, ctx.Err()
	}
}

// checkError is the CDP error in msg, if any. A success never carries an
// "error" key at its top level, and it is cheap to look for one only
// when the message is short or names it early.
func checkError(method string, msg []byte) error {
	i := bytes.Index(msg, []byte(`"error":{`))
	if i < 0 || bytes.Contains(msg[:i], []byte(`"result":`)) {
		return nil
	}
	var r response
	if err := json.Unmarshal(msg, &r); err != nil {
		return fmt.Errorf("cdp: decode %s: %w", method, err)
	}
	if r.Error != nil {
		return &cdpError{Method: method, Code: r.Error.Code, Message: r.Error.Message}
	}
	return nil
}

func (c *conn) drop(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// call sends method and decodes its result into out (nil: ignored).
func (c *conn) call(ctx context.Context, session, method string, params, out any) error {
	msg, err := c.raw(ctx, session, method, params)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	// One pass: the result decodes straight into out (no copy of it
	// as raw JSON first).
	wrap := struct {
		Result any `json:"result"`
	}{Result: out}
	if err := json.Unmarshal(msg, &wrap); err != nil {
		return fmt.Errorf("cdp: decode %s: %w", method, err)
	}
	return nil
}

// session is the flattened session attached to target, attaching once,
// with the domains the plane watches on every page enabled (see watch).
func (c *conn) session(ctx context.Context, target string) (string, error) {
	s, err := c.attach(ctx, target)
	if err != nil {
		return "", err
	}
	if err := c.watch(ctx, s); err != nil {
		return "", err
	}
	return s, nil
}

// watch enables, once per session, Page with its lifecycle events (its
// JavaScript dialogs are answered, see dialog; a navigation waits on
// them, and after a crash they must already be on) and Inspector (a
// crash fails the tab's calls at once, see crash).
func (c *conn) watch(ctx context.Context, s string) error {
	if err := c.enable(ctx, s, "Page.enable", nil); err != nil {
		return err
	}
	if err := c.enable(ctx, s, "Page.setLifecycleEventsEnabled", map[string]any{"enabled": true}); err != nil {
		return err
	}
	return c.enable(ctx, s, "Inspector.enable", nil)
}

// attach is the flattened session attached to target, attaching once.
func (c *conn) attach(ctx context.Context, target string) (string, error) {
	c.mu.Lock()
	s, ok := c.sessions[target]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target, "flatten": true}, &r); err != nil {
		return "", err
	}
	c.mu.Lock()
	if old, ok := c.sessions[target]; ok { // a concurrent attach won
		c.mu.Unlock()
		_ = c.call(ctx, "", "Target.detachFromTarget", map[string]any{"sessionId": r.SessionID}, nil)
		return old, nil
	}
	c.sessions[target] = r.SessionID
	c.mu.Unlock()
	return r.SessionID, nil
}

// enable sends domain.enable (with params) on session once.
func (c *conn) enable(ctx context.Context, session, method string, params any) error {
	key := session + " " + method
	c.mu.Lock()
	done := c.enabled[key]
	c.mu.Unlock()
	if done {
		return nil
	}
	if err := c.call(ctx, session, method, params, nil); err != nil {
		if errors.Is(err, errCrashed) {
			return nil // the call that follows says so
		}
		return err
	}
	c.mu.Lock()
	c.enabled[key] = true
	c.mu.Unlock()
	return nil
}

// detachAll detaches every session (the tabs stay open).
func (c *conn) detachAll(ctx context.Context) {
	c.mu.Lock()
	ss := make([]string, 0, len(c.sessions))
	for _, s := range c.sessions {
		ss = append(ss, s)
	}
	c.mu.Unlock()
	for _, s := range ss {
		_ = c.call(ctx, "", "Target.detachFromTarget", map[string]any{"sessionId": s}, nil)
	}
}

// callTimeout bounds a CDP call whose caller set no deadline (see
// rawN). A variable so that a test can shorten it.
var callTimeout = 30 * time.Second

// dialWS opens the WebSocket at wsURL through dial.
func dialWS(ctx context.Context, dial dialFunc, wsURL string) (*websocket.Conn, error) {
	d := websocket.Dialer{NetDialContext: dial, HandshakeTimeout: 5 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 16 << 10}
	ws, resp, err := d.DialContext(ctx, wsURL, http.Header{})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("cdp: connect: %w", err)
	}
	return ws, nil
}
