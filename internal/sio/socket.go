package sio

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Message is the argument list of an event or an acknowledgement: raw JSON
// values, copied through unchanged, and the binary attachments that
// placeholders inside them refer to.
type Message struct {
	Args        []json.RawMessage
	Attachments [][]byte
}

// Errors reported to acknowledgement callbacks.
var (
	// ErrClosed means the socket closed before the peer acknowledged.
	ErrClosed = errors.New("sio: socket closed")
	// ErrAckTimeout means the peer did not acknowledge in time.
	ErrAckTimeout = errors.New("sio: acknowledgement timed out")
)

// Handshake is what a peer presented when it connected.
type Handshake struct {
	Query      url.Values
	Header     http.Header
	RemoteAddr string
	// Auth is the raw JSON object of the CONNECT packet, or nil.
	Auth json.RawMessage
}

// Event is one incoming event. Handlers may keep it and answer later with
// [Event.Ack], from any goroutine.
type Event struct {
	Name string
	Message
	sock  *Socket
	ackID int64
	acked bool
	// local, when set, receives the acknowledgement of an event made by
	// NewLocalEvent instead of a socket.
	local func(Message)
}

// NewLocalEvent returns an event that no socket sent: a request the
// process makes of itself (the hub's console calls a Computer through the
// same relay as an Agent). It wants an acknowledgement, which reply
// receives once, on the goroutine that acknowledges.
func NewLocalEvent(name string, m Message, reply func(Message)) *Event {
	return &Event{Name: name, Message: m, local: reply}
}

// WantsAck reports whether the sender asked for an acknowledgement.
func (e *Event) WantsAck() bool { return e.ackID >= 0 }

// Ack answers the event. It does nothing if the sender asked for no
// acknowledgement or the event was already answered.
func (e *Event) Ack(m Message) error {
	if e.ackID < 0 || e.acked {
		return nil
	}
	e.acked = true
	if e.local != nil {
		e.local(m)
		return nil
	}
	return e.sock.send(encodeAck(messageBuf(e.sock.nsp, "", m), e.sock.nsp, e.ackID, m), m.Attachments, false)
}

// AckDirect is [Event.Ack] that writes on the calling goroutine when the
// connection has nothing else queued, saving a goroutine hand-off. If the
// peer stops reading it may block for the write timeout, so never call it
// while holding a lock other connections need.
func (e *Event) AckDirect(m Message) error {
	if e.ackID < 0 || e.acked {
		return nil
	}
	e.acked = true
	if e.local != nil {
		e.local(m)
		return nil
	}
	return e.sock.send(encodeAck(messageBuf(e.sock.nsp, "", m), e.sock.nsp, e.ackID, m), m.Attachments, true)
}

// transport is what a Socket writes to: one Engine.IO connection.
type transport interface {
	// sendMessage sends one Engine.IO message (eMessage followed by the
	// text Socket.IO packet) and then its binary attachments. Unless
	// direct is set it only queues, and never blocks. The transport
	// keeps msg (it may be written later): the caller must not reuse it.
	sendMessage(msg []byte, attachments [][]byte, direct bool) error
	// disconnect takes the socket off its connection, telling the peer.
	disconnect(s *Socket)
}

type pendingAck struct {
	cb    func(Message, error)
	timer *time.Timer
}

// Socket is one namespace connection of one peer, on either side. Emit and
// Request may be called from any goroutine; events are delivered to the
// handler one at a time, in the order the peer sent them.
type Socket struct {
	id  string
	nsp string
	hs  *Handshake
	t   transport

	// Value is free for the owner of the socket: the server sets it in its
	// connect hook, before any event is delivered.
	Value any

	mu      sync.Mutex
	closed  bool
	nextID  int64
	pending map[int64]*pendingAck
}

func newSocket(id, nsp string, hs *Handshake, t transport) *Socket {
	return &Socket{id: id, nsp: nsp, hs: hs, t: t}
}

// ID is the Socket.IO session id of the socket (not the Engine.IO one).
func (s *Socket) ID() string { return s.id }

// Namespace is the namespace the socket belongs to.
func (s *Socket) Namespace() string { return s.nsp }

// Handshake is what the peer presented when it connected (server side).
func (s *Socket) Handshake() *Handshake { return s.hs }

func (s *Socket) send(msg []byte, att [][]byte, direct bool) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return s.t.sendMessage(msg, att, direct)
}

// Emit sends an event that asks for no acknowledgement.
func (s *Socket) Emit(name string, m Message) error {
	return s.send(encodeEvent(messageBuf(s.nsp, name, m), s.nsp, -1, name, m), m.Attachments, false)
}

// Request sends an event that asks for an acknowledgement and calls cb
// exactly once: with the peer's answer, with [ErrAckTimeout] after timeout
// (if timeout > 0), or with [ErrClosed] when the socket closes first. cb
// runs on an internal goroutine and must not block.
func (s *Socket) Request(name string, m Message, timeout time.Duration, cb func(Message, error)) {
	s.request(name, m, timeout, cb, false)
}

// RequestDirect is [Socket.Request] that writes on the calling goroutine
// when the connection has nothing else queued; see [Event.AckDirect].
func (s *Socket) RequestDirect(name string, m Message, timeout time.Duration, cb func(Message, error)) {
	s.request(name, m, timeout, cb, true)
}

func (s *Socket) request(name string, m Message, timeout time.Duration, cb func(Message, error), direct bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cb(Message{}, ErrClosed)
		return
	}
	id := s.nextID
	s.nextID++
	p := &pendingAck{cb: cb}
	if s.pending == nil {
		s.pending = make(map[int64]*pendingAck)
	}
	s.pending[id] = p
	if timeout > 0 {
		p.timer = time.AfterFunc(timeout, func() {
			if s.takePending(id) != nil {
				cb(Message{}, ErrAckTimeout)
			}
		})
	}
	s.mu.Unlock()
	if err := s.t.sendMessage(encodeEvent(messageBuf(s.nsp, name, m), s.nsp, id, name, m), m.Attachments, direct); err != nil {
		if s.takePending(id) != nil {
			cb(Message{}, err)
		}
	}
}

func (s *Socket) takePending(id int64) *pendingAck {
	s.mu.Lock()
	p := s.pending[id]
	if p != nil {
		delete(s.pending, id)
	}
	s.mu.Unlock()
	if p != nil && p.timer != nil {
		p.timer.Stop()
	}
	return p
}

// onAck delivers an acknowledgement; unknown or late ids are dropped.
func (s *Socket) onAck(id int64, m Message) {
	if p := s.takePending(id); p != nil {
		p.cb(m, nil)
	}
}

// Disconnect leaves the namespace, telling the peer, and reports it to the
// handler with reason "server namespace disconnect" (server side) or "io
// client disconnect" (client side). On a client it also closes the
// connection.
func (s *Socket) Disconnect() { s.t.disconnect(s) }

// markClosed flips the socket to closed and fails every pending
// acknowledgement. It reports whether this call closed it.
func (s *Socket) markClosed() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, p := range pending {
		if p.timer != nil {
			p.timer.Stop()
		}
		p.cb(Message{}, ErrClosed)
	}
	return true
}

// Closed reports whether the socket has left its connection.
func (s *Socket) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
