package pty

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Wire constants of the terminal WebSocket.
const (
	msgNotFound = "Session not found"
	msgAttached = "Session already has an active WebSocket connection"
	wsWriteWait = 10 * time.Second
	wsReadLimit = 1 << 20
	wsCoalesce  = 64 << 10 // output bytes merged into one frame at most
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 32 << 10,
	// CORS is open in aiod; the API key (checked before the upgrade) is
	// the access control.
	CheckOrigin: func(*http.Request) bool { return true },
}

// outMsg is one queued server message: a prepared frame, or output
// (pending) that the writer frames per protocol.
type outMsg struct {
	frame  []byte
	output []byte
}

// socket is one attached WebSocket. The session's reader queues output
// without ever blocking; the socket's writer goroutine sends it.
type socket struct {
	binary bool
	out    chan outMsg
	gone   chan struct{}
	once   sync.Once
	final  []byte // sent (after the queue) before closing; nil: close at once
}

func newSocket(binary bool, queue int) *socket {
	return &socket{binary: binary, out: make(chan outMsg, queue), gone: make(chan struct{})}
}

// send queues a copy of output; false when the queue is full (the
// socket is then dropped).
func (k *socket) send(b []byte) bool {
	select {
	case k.out <- outMsg{output: bytes.Clone(b)}:
		return true
	default:
		k.kick(nil)
		return false
	}
}

// queue queues a prepared frame; a full queue drops the socket.
func (k *socket) queue(frame []byte) {
	select {
	case k.out <- outMsg{frame: frame}:
	default:
		k.kick(nil)
	}
}

// kick ends the socket once: with a last frame after the queue, or
// (nil) at once.
func (k *socket) kick(final []byte) {
	k.once.Do(func() {
		k.final = final
		close(k.gone)
	})
}

func frame(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func frameError(msg string) []byte { return frame(typedFrame{Type: "error", Data: &msg}) }

// readyFrame is the first frame on every socket.
type readyFrame struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Transport string `json:"transport"`
	Backend   string `json:"backend"`
	Resumed   bool   `json:"resumed"`
}

type typedFrame struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id,omitempty"`
	Data      *string         `json:"data,omitempty"`
	Timestamp json.RawMessage `json:"timestamp,omitempty"`
}

func dataFrame(typ string, data []byte) []byte {
	s := string(data)
	return frame(typedFrame{Type: typ, Data: &s})
}

// attachOptions are a socket's query options.
type attachOptions struct {
	binary, durable, restore bool
	replay                   int
	announce                 bool // v1 anonymous attach: a session_id frame first
}

// attach makes k the session's socket and queues its opening frames:
// session_id (announce), ready, then the restore snapshot, or on a
// durable reattach the output it missed. A second socket without
// durable is refused; with it, the older one gets relay_replaced.
func (s *session) attach(k *socket, o attachOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.killed { // killed: closed or expired since the lookup (see session.Expire)
		return notFound(s.id)
	}
	resumed, from := false, s.detachedAt
	if old := s.sock; old != nil {
		if !o.durable {
			return invalid(msgAttached)
		}
		old.kick(frame(typedFrame{Type: "relay_replaced", SessionID: s.id}))
		resumed, from = true, s.out.end
	} else if o.durable && s.hadSocket {
		resumed = true
	}
	if o.announce {
		k.queue(dataFrame("session_id", []byte(s.id)))
	}
	transport := "json"
	if o.binary {
		transport = "binary"
	}
	k.queue(frame(readyFrame{Type: "ready", SessionID: s.id, Transport: transport, Backend: "native", Resumed: resumed}))
	switch {
	case o.durable && o.restore:
		k.queue(dataFrame("restore_output", s.out.since(0, o.replay)))
		k.queue(frame(typedFrame{Type: "terminal_restored", SessionID: s.id}))
	case resumed:
		k.queue(frame(typedFrame{Type: "relay_resumed", SessionID: s.id}))
		if gap := s.out.since(from, o.replay); len(gap) > 0 {
			k.send(gap)
		}
	}
	s.sock, s.hadSocket, s.used = k, true, time.Now()
	return nil
}

// detachLocked drops k if it is the session's socket; lost is how much
// of the newest output it did not get. Guarded by s.mu.
func (s *session) detachLocked(k *socket, lost int64) {
	if s.sock == k {
		s.sock, s.detachedAt, s.used = nil, s.out.end-lost, time.Now()
	}
	k.kick(nil)
}

// hijacker lets the upgrader reach the connection through response
// writers that wrap it (they expose Unwrap for http.ResponseController).
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

// upgrade switches to WebSocket; on failure the upgrader has answered.
func upgrade(w http.ResponseWriter, r *http.Request) (*websocket.Conn, bool) {
	c, err := upgrader.Upgrade(hijacker{w}, r, nil)
	return c, err == nil
}

// refuse sends an error frame and closes.
func refuse(c *websocket.Conn, msg string) {
	_ = c.SetWriteDeadline(time.Now().Add(wsWriteWait))
	_ = c.WriteMessage(websocket.TextMessage, frameError(msg))
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, ""))
	_ = c.Close()
}

// serve runs an upgraded socket on s until either side ends it; a
// throwaway session dies with it.
func (p *Plane) serve(c *websocket.Conn, s *session, o attachOptions) {
	k := newSocket(o.binary, p.e.wsQueue)
	if err := s.attach(k, o); err != nil {
		msg := msgNotFound
		if !isNotFound(err) {
			msg, _ = api.MessageOf(err)
		}
		refuse(c, msg)
		if s.throwaway {
			p.e.drop(s)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.write(c)
	}()
	c.SetReadLimit(wsReadLimit)
	for {
		mt, msg, err := c.ReadMessage()
		if err != nil {
			break
		}
		if !p.handleFrame(s, k, decodeFrame(mt == websocket.BinaryMessage, msg)) {
			break
		}
	}
	s.mu.Lock()
	s.detachLocked(k, 0)
	s.mu.Unlock()
	wg.Wait()
	if s.throwaway {
		p.e.drop(s)
	}
}

// handleFrame applies one client frame; false ends the socket.
func (p *Plane) handleFrame(s *session, k *socket, f clientFrame) bool {
	switch f.kind {
	case frameResize:
		_ = s.resize(f.cols, f.rows)
	case framePing:
		k.queue(frame(typedFrame{Type: "pong", Timestamp: f.timestamp}))
	default:
		if len(f.data) > 0 && s.clientWrite(f.data) != nil {
			return false
		}
	}
	s.touch()
	return true
}

// write sends the queue until the socket is kicked, then its last frame,
// and closes the connection (which ends the reader).
func (k *socket) write(c *websocket.Conn) {
	defer c.Close()
	var pending []byte
	send := func(m outMsg) bool {
		_ = c.SetWriteDeadline(time.Now().Add(wsWriteWait))
		switch {
		case m.frame != nil:
			return c.WriteMessage(websocket.TextMessage, m.frame) == nil
		case k.binary:
			return c.WriteMessage(websocket.BinaryMessage, m.output) == nil
		}
		return c.WriteMessage(websocket.TextMessage, dataFrame("output", m.output)) == nil
	}
	// next merges queued output into one message, up to wsCoalesce.
	next := func(m outMsg) outMsg {
		for m.frame == nil && len(m.output) < wsCoalesce {
			select {
			case n := <-k.out:
				if n.frame != nil {
					pending = n.frame
					return m
				}
				m.output = append(m.output, n.output...)
			default:
				return m
			}
		}
		return m
	}
	for {
		if pending != nil {
			f := pending
			pending = nil
			if !send(outMsg{frame: f}) {
				return
			}
			continue
		}
		select {
		case m := <-k.out:
			if !send(next(m)) {
				return
			}
		case <-k.gone:
			if k.final == nil {
				return
			}
			for len(k.out) > 0 {
				if !send(next(<-k.out)) {
					return
				}
			}
			if pending != nil && !send(outMsg{frame: pending}) {
				return
			}
			_ = c.SetWriteDeadline(time.Now().Add(wsWriteWait))
			_ = c.WriteMessage(websocket.TextMessage, k.final)
			_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			return
		}
	}
}

// wsQuery is the attach routes' query.
type wsQuery struct {
	Protocol    *string `json:"protocol"`
	Durable     bool    `json:"durable"`
	Restore     bool    `json:"restore"`
	ReplayBytes *uint64 `json:"replay_bytes"`
	SessionID   string  `json:"session_id"` // v1
}

// options validates the query before the upgrade (a refusal is
// ErrInvalid, answered as JSON before any upgrade).
func (q wsQuery) options(anonymous bool) (attachOptions, error) {
	o := attachOptions{durable: q.Durable, restore: q.Restore, replay: MaxReplayBytes}
	if q.Protocol != nil {
		switch *q.Protocol {
		case "json":
		case "binary":
			o.binary = true
		default:
			return o, invalid("protocol must be json or binary")
		}
	}
	if q.ReplayBytes != nil {
		o.replay = int(min(max(*q.ReplayBytes, MinReplayBytes), MaxReplayBytes))
	}
	switch {
	case anonymous && (q.Durable || q.Restore):
		return o, newErr(ErrInvalid, "durable and restore need an explicit session",
			"create the session first (POST /v2/pty/sessions) and attach to /v2/pty/sessions/{id}/ws")
	case q.Restore && !q.Durable:
		return o, invalid("restore needs durable=true")
	}
	return o, nil
}

// attachWS is GET /v2/pty/sessions/{id}/ws.
func (p *Plane) attachWS(w http.ResponseWriter, r *http.Request) {
	p.attachByID(w, r, r.PathValue("id"))
}

// attachByID upgrades and attaches to an existing session; an unknown
// id is told after the upgrade.
func (p *Plane) attachByID(w http.ResponseWriter, r *http.Request, id string) {
	var q wsQuery
	if !api.Query(w, r, &q) {
		return
	}
	o, err := q.options(false)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	c, ok := upgrade(w, r)
	if !ok {
		return
	}
	s, err := p.e.lookup(id)
	if err != nil || s.throwaway {
		refuse(c, msgNotFound)
		return
	}
	p.serve(c, s, o)
}

// anonymousWS is GET /v2/pty/ws: a shell that lives as long as the
// socket, and GET /v1/shell/ws without session_id: an expiring session
// announced in a session_id frame.
func (p *Plane) anonymousWS(w http.ResponseWriter, r *http.Request, v1 bool) {
	var q wsQuery
	if !api.Query(w, r, &q) {
		return
	}
	if v1 && q.SessionID != "" {
		p.attachByID(w, r, q.SessionID)
		return
	}
	o, err := q.options(true)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	s, err := p.e.create(Options{Retention: RetentionExpiring, throwaway: !v1})
	if err != nil {
		api.WriteError(w, err, capacity400)
		return
	}
	c, ok := upgrade(w, r)
	if !ok {
		p.e.drop(s)
		return
	}
	o.announce = v1
	p.serve(c, s, o)
}
