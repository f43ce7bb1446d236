package sio

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Handler serves one namespace on a [Server]. Its methods for one socket
// are called one at a time, in order: Connect, then Event for each event,
// then Disconnect once. Disconnect never overlaps an Event of the same
// connection and no Event follows it (it is reported under the
// connection's dispatch lock, possibly on a goroutine of its own).
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
	// WriteTimeout bounds one write to a WebSocket peer, and the writing
	// of one long-polling response (handshake or GET), so a peer that
	// never reads holds nothing for longer. Default 10s.
	WriteTimeout time.Duration
	// BodyIdleTimeout cuts a long-polling POST whose body makes no
	// progress for this long (headers sent, body never finished): the
	// request fails and the connection closes. Progress, not total time,
	// counts: a slow body that keeps arriving is read. Default 30s.
	BodyIdleTimeout time.Duration
	// MaxBuffered caps what may wait in memory for a peer that does not
	// read: the WebSocket backlog, or the packets queued for a polling
	// peer's next GET. Past it the connection is closed. Default 16 MiB.
	// What a peer may make the server hold on the way in (frames held
	// while a namespace connect is decided, attachments of a binary
	// packet) is bounded separately, by twice MaxPayload.
	MaxBuffered int
	// GoroutinePerConn serves each WebSocket with a reader goroutine (and
	// gorilla/websocket) instead of the event loop. It is the only mode on
	// systems without epoll.
	GoroutinePerConn bool
	// ConnectTimeout closes a connection that has joined no namespace
	// this long after it opened. Default 45s, as in Socket.IO.
	ConnectTimeout time.Duration
	// EventLoops is the number of event loops; 0 means one per four
	// GOMAXPROCS, at least one.
	EventLoops int
	Logger     *slog.Logger
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
	if o.BodyIdleTimeout <= 0 {
		o.BodyIdleTimeout = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 45 * time.Second
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = 16 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server is a Socket.IO v4 server (Engine.IO protocol 4, Socket.IO
// protocol 5) over long-polling and WebSocket. Mount it on the Engine.IO
// path with any http.ServeMux.
type Server struct {
	opts Options
	nsps map[string]Handler

	mu     sync.Mutex
	conns  map[string]*econn
	closed bool
	loops  *loopSet // nil until the first WebSocket, or with GoroutinePerConn

	// upgradeHook, when a test sets it, runs right after a connection has
	// switched to WebSocket: its sends are the first that see the switch.
	upgradeHook atomic.Pointer[func()]
}

// NewServer returns a server with no namespaces; add them with Handle
// before serving.
func NewServer(o Options) *Server {
	o.defaults()
	return &Server{
		opts:  o,
		nsps:  make(map[string]Handler),
		conns: make(map[string]*econn),
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
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	if loops != nil {
		loops.stop()
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
	s.boundBody(w, r)
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
		// A direct WebSocket: the peer is attached from the start and the
		// open packet is its first frame. Until bind runs, c is in
		// stWebSocket with no ws: whatever is sent (or a shutdown's close
		// packet) waits in c.queue and goes out behind the open packet.
		c.state = stWebSocket
		if !s.add(c) {
			engineError(w, http.StatusServiceUnavailable, 0, "Server is shutting down")
			return
		}
		open := openFrame(c.id, []string{}, s.opts.PingInterval, s.opts.PingTimeout, s.opts.MaxPayload)
		p := s.acceptWS(w, r, c, func(p wsPeer) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.state == stClosed {
				p.close(false)
				return
			}
			c.ws = p
			fs := append([]frame{open}, c.queue...)
			c.queue, c.queued = nil, 0
			_ = p.send(fs, false) // only queues or writes non-blocking: safe under c.mu
			if c.closing {
				p.close(true)
			}
		})
		if p == nil {
			s.remove(c)
			return
		}
		c.startHeartbeat()
		return
	}
	if !s.add(c) {
		engineError(w, http.StatusServiceUnavailable, 0, "Server is shutting down")
		return
	}
	c.startHeartbeat()
	if err := s.writePayload(w, []frame{openFrame(c.id, []string{"websocket"}, s.opts.PingInterval, s.opts.PingTimeout, s.opts.MaxPayload)}); err != nil {
		c.finish("transport error")
	}
}

// acceptWS completes a WebSocket upgrade for c, calls bind with the new
// peer, then starts reading it. On failure it has answered the request
// and returns nil.
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request, c *econn, bind func(wsPeer)) wsPeer {
	if !s.opts.GoroutinePerConn {
		if ls, err := s.loopSet(); err == nil {
			return ls.accept(w, r, c, bind)
		}
	}
	return acceptGorilla(s, w, r, c, bind)
}

func (s *Server) loopSet() (*loopSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed // Close stops the loops it saw; none is made after
	}
	if s.loops == nil {
		ls, err := newLoopSet(s.opts)
		if err != nil {
			s.opts.GoroutinePerConn = true // no event loop here: never try again
			return nil, err
		}
		s.loops = ls
	}
	return s.loops, nil
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

// writePayload answers a long-polling request with frames. The response
// is written and flushed under a write deadline of WriteTimeout, which is
// then cleared (net/http keeps a deadline for the next request on the same
// connection otherwise), so a peer that never reads cannot hold the
// handler, or the frames, beyond it.
func (s *Server) writePayload(w http.ResponseWriter, fs []frame) error {
	body := encodePayload(fs)
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rc := http.NewResponseController(w)
	bounded := rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout)) == nil
	_, err := w.Write(body)
	if err == nil {
		err = rc.Flush()
	}
	if bounded {
		_ = rc.SetWriteDeadline(time.Time{})
	}
	return err
}

// BoundBodies wraps a handler so that a request body that stalls cannot
// hold a connection: reading it, and net/http's own reading of what a
// handler left unread before it answers (a refusal, a 404), fails once the
// body has made no progress for [Options.BodyIdleTimeout]. The Engine.IO
// endpoint applies it itself; wrap the rest of a mux it is mounted on.
func (s *Server) BoundBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.boundBody(w, r)
		next.ServeHTTP(w, r)
	})
}

// boundBody sets the first body deadline of a request that has a body
// (readBody moves it on each read and clears it when the body is done).
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyIdleTimeout))
	}
}

// readBody reads a POST body of at most MaxPayload bytes. Each read must
// make progress within BodyIdleTimeout (a read deadline moved before every
// read), so a body that stalls is cut instead of holding the request and
// its descriptor forever.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxPayload)
	pr := &progressReader{r: body, rc: rc, idle: s.opts.BodyIdleTimeout}
	b, err := io.ReadAll(pr)
	if err != nil {
		// The rest of the body is not worth waiting for: without this,
		// net/http would try to read it before answering.
		w.Header().Set("Connection", "close")
	} else if pr.bounded {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return b, err
}

// progressReader moves the connection's read deadline before each read.
type progressReader struct {
	r       io.Reader
	rc      *http.ResponseController
	idle    time.Duration
	bounded bool // the deadline could be set (not on every ResponseWriter)
}

func (p *progressReader) Read(b []byte) (int, error) {
	if p.rc.SetReadDeadline(time.Now().Add(p.idle)) == nil {
		p.bounded = true
	}
	return p.r.Read(b)
}
