package sio

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Handler serves one namespace on a [Server]. Its methods for one socket
// are called one at a time, in order: Connect, then Event for each event,
// then Disconnect once.
type Handler interface {
	// Connect admits or refuses a socket. A non-nil error refuses it: the
	// peer receives CONNECT_ERROR with the error's text as message and,
	// for a *ConnectError, its Data.
	Connect(s *Socket) error
	// Event delivers one event. It runs on the connection's reader, so it
	// must not block; answer later with e.Ack from any goroutine.
	Event(s *Socket, e *Event)
	// Disconnect reports that the socket has gone, with a reason such as
	// "client namespace disconnect", "transport close" or "ping timeout".
	Disconnect(s *Socket, reason string)
}

// ConnectError refuses a connection with data the client can read.
type ConnectError struct {
	Message string
	Data    any
}

func (e *ConnectError) Error() string { return e.Message }

// Options tune a [Server]. Zero values take the Socket.IO defaults.
type Options struct {
	PingInterval time.Duration // default 25s
	PingTimeout  time.Duration // default 20s
	// MaxPayload caps one message (WebSocket) or one POST body (polling),
	// in bytes; larger input closes the connection. Default 1,000,000.
	MaxPayload int64
	// WriteTimeout bounds one write to a WebSocket peer. Default 10s.
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

func (o *Options) defaults() {
	if o.PingInterval <= 0 {
		o.PingInterval = 25 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 20 * time.Second
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 1_000_000
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server is a Socket.IO v4 server (Engine.IO protocol 4, Socket.IO
// protocol 5) over long-polling and WebSocket. Mount it on the Engine.IO
// path with any http.ServeMux.
type Server struct {
	opts     Options
	upgrader websocket.Upgrader
	nsps     map[string]Handler

	mu     sync.Mutex
	conns  map[string]*econn
	closed bool
}

// NewServer returns a server with no namespaces; add them with Handle
// before serving.
func NewServer(o Options) *Server {
	o.defaults()
	return &Server{
		opts:  o,
		nsps:  make(map[string]Handler),
		conns: make(map[string]*econn),
		upgrader: websocket.Upgrader{
			ReadBufferSize:  1024,
			WriteBufferPool: &sync.Pool{},
			CheckOrigin:     func(*http.Request) bool { return true },
		},
	}
}

// Handle registers the handler of a namespace such as "/smcp".
func (s *Server) Handle(nsp string, h Handler) { s.nsps[nsp] = h }

// Conns is the number of open Engine.IO connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close ends every connection, reporting "server shutting down" to the
// namespace handlers, and refuses new ones.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*econn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown("server shutting down")
	}
}

// engineError writes an Engine.IO error body, as the reference server does.
func engineError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg})
	_, _ = w.Write(b)
}

// ServeHTTP serves the Engine.IO endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("EIO") != "4" {
		engineError(w, http.StatusBadRequest, 5, "Unsupported protocol version")
		return
	}
	transport := q.Get("transport")
	if transport != "polling" && transport != "websocket" {
		engineError(w, http.StatusBadRequest, 0, "Transport unknown")
		return
	}
	sid := q.Get("sid")
	if sid == "" {
		s.handshake(w, r, transport)
		return
	}
	s.mu.Lock()
	c := s.conns[sid]
	s.mu.Unlock()
	if c == nil {
		engineError(w, http.StatusBadRequest, 1, "Session ID unknown")
		return
	}
	switch {
	case transport == "websocket":
		c.upgrade(w, r)
	case r.Method == http.MethodGet:
		c.poll(w, r)
	case r.Method == http.MethodPost:
		c.post(w, r)
	default:
		engineError(w, http.StatusBadRequest, 2, "Bad handshake method")
	}
}

func (s *Server) handshake(w http.ResponseWriter, r *http.Request, transport string) {
	if transport == "polling" && r.Method != http.MethodGet {
		engineError(w, http.StatusBadRequest, 2, "Bad handshake method")
		return
	}
	c := &econn{
		srv: s,
		id:  newID(),
		hs: Handshake{
			Query:      r.URL.Query(),
			Header:     r.Header.Clone(),
			RemoteAddr: r.RemoteAddr,
		},
		poke: make(chan struct{}, 1),
	}
	if transport == "websocket" {
		ws, err := s.upgrader.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader has answered
		}
		c.attach(ws)
		if !s.add(c) {
			_ = ws.Close()
			return
		}
		c.push(openFrame(c.id, []string{}, s.opts.PingInterval, s.opts.PingTimeout, s.opts.MaxPayload))
		c.startHeartbeat()
		go c.readLoop(ws)
		return
	}
	if !s.add(c) {
		engineError(w, http.StatusServiceUnavailable, 0, "Server is shutting down")
		return
	}
	c.startHeartbeat()
	writePayload(w, []frame{openFrame(c.id, []string{"websocket"}, s.opts.PingInterval, s.opts.PingTimeout, s.opts.MaxPayload)})
}

func (s *Server) add(c *econn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c.id] = c
	return true
}

func (s *Server) remove(c *econn) {
	s.mu.Lock()
	if s.conns[c.id] == c {
		delete(s.conns, c.id)
	}
	s.mu.Unlock()
}

func writePayload(w http.ResponseWriter, fs []frame) {
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(encodePayload(fs))
}

// Connection states.
const (
	stPolling int32 = iota
	stUpgrading
	stWebSocket
	stClosed
)

// econn is one Engine.IO connection on the server.
type econn struct {
	srv  *Server
	id   string
	hs   Handshake
	poke chan struct{} // wakes a waiting long-poll GET

	mu       sync.Mutex
	state    int32
	ws       *websocket.Conn
	queue    []frame
	flushing bool
	polling  bool // a long-poll GET is waiting
	closing  bool // a close packet is queued; end after it is written
	sockets  []*Socket
	timer    *time.Timer
	awaiting bool      // a ping is out and no pong has come back
	refresh  time.Time // when the writer next moves the write deadline

	dispatch sync.Mutex // orders packets across concurrent POSTs
	partial  *partialPacket
}

// partialPacket is a binary packet still waiting for its attachments.
type partialPacket struct {
	p   packet
	att [][]byte
}

func (c *econn) attach(ws *websocket.Conn) {
	ws.SetReadLimit(c.srv.opts.MaxPayload)
	c.ws = ws
	c.state = stWebSocket
}

// push queues frames and makes sure someone delivers them.
func (c *econn) push(fs ...frame) error {
	c.mu.Lock()
	if c.state == stClosed || c.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	c.queue = append(c.queue, fs...)
	c.kickLocked()
	c.mu.Unlock()
	return nil
}

func (c *econn) kickLocked() {
	if c.state == stWebSocket {
		if !c.flushing {
			c.flushing = true
			go c.flush()
		}
		return
	}
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// flush writes the queue to the WebSocket until it is empty. At most one
// flush runs per connection; it exits when there is nothing left to write.
func (c *econn) flush() {
	for {
		c.mu.Lock()
		fs := c.queue
		c.queue = nil
		ws := c.ws
		closing := c.closing
		if len(fs) == 0 || c.state != stWebSocket {
			c.flushing = false
			c.mu.Unlock()
			if closing {
				c.finish("server namespace disconnect")
			}
			return
		}
		c.mu.Unlock()
		if err := c.writeFrames(ws, fs); err != nil {
			c.mu.Lock()
			c.flushing = false
			c.mu.Unlock()
			c.finish("transport error")
			return
		}
	}
}

func (c *econn) sendMessage(text []byte, att [][]byte, direct bool) error {
	if direct {
		return c.write(messageFrames(text, att))
	}
	return c.push(messageFrames(text, att)...)
}

// write sends frames on the calling goroutine when the WebSocket is idle
// (nothing queued, no flush running); otherwise it queues them like push.
func (c *econn) write(fs []frame) error {
	c.mu.Lock()
	if c.state == stClosed || c.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.state != stWebSocket || c.flushing || len(c.queue) > 0 {
		c.queue = append(c.queue, fs...)
		c.kickLocked()
		c.mu.Unlock()
		return nil
	}
	c.flushing = true
	ws := c.ws
	c.mu.Unlock()
	err := c.writeFrames(ws, fs)
	c.mu.Lock()
	if err != nil {
		c.flushing = false
		c.mu.Unlock()
		c.finish("transport error")
		return err
	}
	if len(c.queue) > 0 || c.closing {
		go c.flush() // others queued behind us: hand over
	} else {
		c.flushing = false
	}
	c.mu.Unlock()
	return nil
}

func (c *econn) writeFrames(ws *websocket.Conn, fs []frame) error {
	// Only the one writer (flushing set) gets here. The deadline is moved
	// when half of it has passed, not on every write: a stuck write still
	// fails after between WriteTimeout/2 and WriteTimeout.
	if now := time.Now(); now.After(c.refresh) {
		_ = ws.SetWriteDeadline(now.Add(c.srv.opts.WriteTimeout))
		c.refresh = now.Add(c.srv.opts.WriteTimeout / 2)
	}
	for _, f := range fs {
		typ := websocket.TextMessage
		if f.binary {
			typ = websocket.BinaryMessage
		}
		if err := ws.WriteMessage(typ, f.data); err != nil {
			return err
		}
	}
	return nil
}

func (c *econn) disconnect(s *Socket) {
	if !s.markClosed() {
		return
	}
	_ = c.sendMessage(appendHeader(nil, pDisconnect, 0, s.nsp, -1), nil, false)
	c.mu.Lock()
	c.dropLocked(s)
	empty := len(c.sockets) == 0
	c.mu.Unlock()
	c.srv.nsps[s.nsp].Disconnect(s, "server namespace disconnect")
	if empty {
		c.shutdown("server namespace disconnect")
	}
}

func (c *econn) dropLocked(s *Socket) {
	for i, x := range c.sockets {
		if x == s {
			c.sockets = append(c.sockets[:i], c.sockets[i+1:]...)
			return
		}
	}
}

// shutdown ends the connection after telling the peer: the close packet is
// queued behind whatever is pending, and the connection ends once it has
// been written (or soon after, if the peer never polls for it).
func (c *econn) shutdown(reason string) {
	c.mu.Lock()
	if c.state == stClosed || c.closing {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, frameClose)
	c.closing = true
	c.kickLocked()
	c.mu.Unlock()
	time.AfterFunc(time.Second, func() { c.finish(reason) })
}

// finish closes the connection at once. It is idempotent.
func (c *econn) finish(reason string) {
	c.mu.Lock()
	if c.state == stClosed {
		c.mu.Unlock()
		return
	}
	c.state = stClosed
	ws := c.ws
	sockets := c.sockets
	c.sockets = nil
	c.queue = nil
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	select {
	case c.poke <- struct{}{}:
	default:
	}
	if ws != nil {
		_ = ws.Close()
	}
	c.srv.remove(c)
	for _, s := range sockets {
		if s.markClosed() {
			if h := c.srv.nsps[s.nsp]; h != nil {
				h.Disconnect(s, reason)
			}
		}
	}
}

// startHeartbeat sends a ping every PingInterval and closes the connection
// when a pong does not come back within PingTimeout.
func (c *econn) startHeartbeat() {
	c.mu.Lock()
	c.timer = time.AfterFunc(c.srv.opts.PingInterval, c.beat)
	c.mu.Unlock()
}

func (c *econn) beat() {
	c.mu.Lock()
	if c.state == stClosed {
		c.mu.Unlock()
		return
	}
	if c.awaiting {
		c.mu.Unlock()
		c.finish("ping timeout")
		return
	}
	c.awaiting = true
	c.timer.Reset(c.srv.opts.PingTimeout)
	c.mu.Unlock()
	_ = c.push(framePing)
}

func (c *econn) pong() {
	c.mu.Lock()
	if c.awaiting && c.state != stClosed {
		c.awaiting = false
		c.timer.Reset(c.srv.opts.PingInterval)
	}
	c.mu.Unlock()
}

// poll serves a long-polling GET: it waits until there is something to
// send, then sends all of it.
func (c *econn) poll(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.polling || c.state == stWebSocket || c.state == stClosed {
		bad := c.polling
		c.mu.Unlock()
		engineError(w, http.StatusBadRequest, 3, "Bad request")
		if bad {
			c.finish("transport error")
		}
		return
	}
	c.polling = true
	for len(c.queue) == 0 && c.state != stClosed && c.state != stWebSocket {
		c.mu.Unlock()
		select {
		case <-c.poke:
		case <-r.Context().Done():
			c.mu.Lock()
			c.polling = false
			upgraded := c.state == stWebSocket
			c.mu.Unlock()
			if !upgraded {
				c.finish("transport close")
			}
			return
		}
		c.mu.Lock()
	}
	var fs []frame
	if c.state != stWebSocket {
		fs = c.queue
		c.queue = nil
	} else {
		fs = []frame{frameNoop}
	}
	c.polling = false
	closing := c.closing || c.state == stClosed
	c.mu.Unlock()
	if len(fs) == 0 {
		fs = []frame{frameClose}
	}
	writePayload(w, fs)
	if closing {
		c.finish("server namespace disconnect")
	}
}

// post serves a long-polling POST carrying one or more packets.
func (c *econn) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.srv.opts.MaxPayload))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			engineError(w, http.StatusRequestEntityTooLarge, 3, "Payload too large")
		} else {
			engineError(w, http.StatusBadRequest, 3, "Bad request")
		}
		c.finish("transport error")
		return
	}
	fs, err := decodePayload(body)
	if err != nil {
		engineError(w, http.StatusBadRequest, 3, "Bad request")
		c.finish("parse error")
		return
	}
	c.dispatch.Lock()
	for _, f := range fs {
		if !c.onFrame(f) {
			break
		}
	}
	c.dispatch.Unlock()
	w.Header().Set("Content-Type", "text/html")
	_, _ = io.WriteString(w, "ok")
}

// upgrade moves a polling connection to WebSocket: probe, pause polling,
// then switch on the upgrade packet.
func (c *econn) upgrade(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.state != stPolling {
		c.mu.Unlock()
		engineError(w, http.StatusBadRequest, 3, "Bad request")
		return
	}
	c.state = stUpgrading
	c.mu.Unlock()
	ws, err := c.srv.upgrader.Upgrade(w, r, nil)
	if err != nil {
		c.revertUpgrade()
		return
	}
	ws.SetReadLimit(c.srv.opts.MaxPayload)
	_ = ws.SetReadDeadline(time.Now().Add(c.srv.opts.PingTimeout))
	typ, msg, err := ws.ReadMessage()
	if err != nil || typ != websocket.TextMessage || string(msg) != "2probe" {
		_ = ws.Close()
		c.revertUpgrade()
		return
	}
	_ = ws.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, []byte("3probe")); err != nil {
		_ = ws.Close()
		c.revertUpgrade()
		return
	}
	// Release the pending GET so the client can pause polling.
	c.mu.Lock()
	if c.state == stUpgrading {
		c.queue = append(c.queue, frameNoop)
		c.kickLocked()
	}
	c.mu.Unlock()
	for {
		typ, msg, err = ws.ReadMessage()
		if err != nil {
			_ = ws.Close()
			c.revertUpgrade()
			return
		}
		if typ == websocket.TextMessage && len(msg) == 1 && msg[0] == eUpgrade {
			break
		}
		if typ == websocket.TextMessage && string(msg) == "2probe" {
			continue
		}
		_ = ws.Close()
		c.revertUpgrade()
		return
	}
	_ = ws.SetReadDeadline(time.Time{})
	c.mu.Lock()
	if c.state != stUpgrading {
		c.mu.Unlock()
		_ = ws.Close()
		return
	}
	c.attach(ws)
	c.kickLocked()
	c.mu.Unlock()
	select { // a GET still parked must not hang
	case c.poke <- struct{}{}:
	default:
	}
	go c.readLoop(ws)
}

func (c *econn) revertUpgrade() {
	c.mu.Lock()
	if c.state == stUpgrading {
		c.state = stPolling
	}
	c.mu.Unlock()
}

func (c *econn) readLoop(ws *websocket.Conn) {
	for {
		typ, msg, err := ws.ReadMessage()
		if err != nil {
			c.finish("transport close")
			return
		}
		if !c.onFrame(frame{data: msg, binary: typ == websocket.BinaryMessage}) {
			return
		}
	}
}

// onFrame handles one incoming Engine.IO packet. It reports false when the
// connection has been closed because of it.
func (c *econn) onFrame(f frame) bool {
	if f.binary {
		return c.onBinary(f.data)
	}
	if len(f.data) == 0 {
		c.finish("parse error")
		return false
	}
	switch f.data[0] {
	case ePong:
		c.pong()
	case ePing:
		_ = c.push(frame{data: append([]byte{ePong}, f.data[1:]...)})
	case eMessage:
		return c.onPacket(f.data[1:])
	case eClose:
		c.finish("transport close")
		return false
	case eNoop:
	default:
		c.finish("parse error")
		return false
	}
	return true
}

func (c *econn) onBinary(b []byte) bool {
	pp := c.partial
	if pp == nil {
		c.finish("parse error")
		return false
	}
	pp.att = append(pp.att, b)
	if len(pp.att) < pp.p.attachments {
		return true
	}
	c.partial = nil
	return c.deliver(pp.p, pp.att)
}

func (c *econn) socket(nsp string) *Socket {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sockets {
		if s.nsp == nsp {
			return s
		}
	}
	return nil
}

func (c *econn) onPacket(b []byte) bool {
	if c.partial != nil {
		c.finish("parse error")
		return false
	}
	p, err := decodePacket(b)
	if err != nil {
		c.srv.opts.Logger.Debug("sio: bad packet", "err", err)
		c.finish("parse error")
		return false
	}
	switch p.typ {
	case pConnect:
		c.connect(p)
	case pDisconnect:
		if s := c.socket(p.nsp); s != nil {
			c.mu.Lock()
			c.dropLocked(s)
			c.mu.Unlock()
			if s.markClosed() {
				c.srv.nsps[s.nsp].Disconnect(s, "client namespace disconnect")
			}
		}
	case pEvent, pAck:
		return c.deliver(p, nil)
	case pBinaryEvent, pBinaryAck:
		if p.attachments == 0 {
			return c.deliver(p, nil)
		}
		c.partial = &partialPacket{p: p}
	default:
		c.finish("parse error")
		return false
	}
	return true
}

func (c *econn) connect(p packet) {
	h := c.srv.nsps[p.nsp]
	if h == nil {
		_ = c.sendMessage(connectError(p.nsp, "Invalid namespace", nil), nil, false)
		return
	}
	if c.socket(p.nsp) != nil {
		return // already connected; the reference server ignores it too
	}
	hs := c.hs
	if len(p.data) > 0 {
		hs.Auth = json.RawMessage(p.data)
	}
	s := newSocket(newID(), p.nsp, &hs, c)
	if err := h.Connect(s); err != nil {
		var ce *ConnectError
		var data any
		if errors.As(err, &ce) {
			data = ce.Data
		}
		_ = c.sendMessage(connectError(p.nsp, err.Error(), data), nil, false)
		return
	}
	c.mu.Lock()
	if c.state == stClosed {
		c.mu.Unlock()
		return
	}
	c.sockets = append(c.sockets, s)
	c.mu.Unlock()
	ok := appendHeader(nil, pConnect, 0, p.nsp, -1)
	ok = append(ok, `{"sid":`...)
	ok = appendString(ok, s.id)
	ok = append(ok, '}')
	_ = c.sendMessage(ok, nil, false)
}

func connectError(nsp, msg string, data any) []byte {
	body := map[string]any{"message": msg}
	if data != nil {
		body["data"] = data
	}
	b, _ := json.Marshal(body)
	return append(appendHeader(nil, pConnectError, 0, nsp, -1), b...)
}

// deliver hands a complete event or acknowledgement to its socket.
func (c *econn) deliver(p packet, att [][]byte) bool {
	s := c.socket(p.nsp)
	if s == nil {
		return true // not connected to that namespace: ignored
	}
	isEvent := p.typ == pEvent || p.typ == pBinaryEvent
	name, args, err := splitArgs(p.data, isEvent)
	if err != nil {
		c.finish("parse error")
		return false
	}
	m := Message{Args: args, Attachments: att}
	if !isEvent {
		s.onAck(p.id, m)
		return true
	}
	c.srv.nsps[s.nsp].Event(s, &Event{Name: name, Message: m, sock: s, ackID: p.id})
	return true
}
