package sio

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// gorillaPeer serves a WebSocket with gorilla/websocket: one reader
// goroutine, and writes that go out on the caller's goroutine when the
// connection is idle (direct) or through a short-lived flusher otherwise.
type gorillaPeer struct {
	c       wsOwner
	ws      *websocket.Conn
	timeout time.Duration
	max     int
	// idle bounds the wait for the next message: the heartbeat makes a
	// live peer send a pong every PingInterval, so one silent for
	// PingInterval+PingTimeout is gone (the connection's heartbeat ends
	// it first). It is what ends the reader of a socket the connection
	// never took (a probe bound too late).
	idle     time.Duration
	readNext time.Time // when the reader next moves the read deadline

	mu         sync.Mutex
	queue      []frame
	queued     int // bytes in queue
	flushing   bool
	closed     bool
	closeAfter bool
	refresh    time.Time // when the writer next moves the write deadline
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:   1024,
	WriteBufferPool:  &sync.Pool{},
	HandshakeTimeout: 10 * time.Second, // the 101 answer's write deadline, as the event loop's
	CheckOrigin:      func(*http.Request) bool { return true },
}

// acceptGorilla upgrades r with gorilla/websocket, with s's limits, and
// starts the reader goroutine that hands c what arrives; bind sees the
// peer first. It returns nil when the upgrade failed (and was answered).
func acceptGorilla(s *Server, w http.ResponseWriter, r *http.Request, c wsOwner, bind func(wsPeer)) wsPeer {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	ws.SetReadLimit(s.opts.MaxPayload)
	p := &gorillaPeer{c: c, ws: ws, timeout: s.opts.WriteTimeout, max: s.opts.MaxBuffered,
		idle: s.opts.PingInterval + s.opts.PingTimeout}
	bind(p)
	go p.readLoop()
	return p
}

// readLoop is the peer's reader goroutine. It owns the end of the socket:
// whatever way it returns, the socket has been closed, so neither the
// goroutine nor the descriptor outlives the WebSocket. gorilla/websocket
// answers pings, echoes valid close frames and answers protocol errors
// (1002, including invalid close codes) and oversized messages (1009)
// itself; UTF-8 in text messages is checked here.
func (p *gorillaPeer) readLoop() {
	for {
		// The deadline is set 2*idle ahead and moved only once idle has
		// passed, which saves a timer update per message and still leaves
		// at least idle after every message.
		if now := time.Now(); now.After(p.readNext) {
			_ = p.ws.SetReadDeadline(now.Add(2 * p.idle))
			p.readNext = now.Add(p.idle)
		}
		typ, msg, err := p.ws.ReadMessage()
		if err != nil {
			p.close(false)
			p.c.wsClosed(p, readEndReason(err))
			return
		}
		if typ == websocket.TextMessage && !utf8.Valid(msg) {
			_ = p.ws.WriteControl(websocket.CloseMessage, closePayload(closeInvalidPayload), time.Now().Add(p.timeout))
			p.close(false)
			p.c.wsClosed(p, reasonTransportError)
			return
		}
		if !p.c.wsFrame(p, frame{data: msg, binary: typ == websocket.BinaryMessage}) {
			// The connection has ended or refused this socket (a probe
			// that did not match): close it, or it stays open with no
			// reader.
			p.close(false)
			return
		}
	}
}

// readEndReason names the end of a WebSocket from the error that ended
// its reading: a close frame from the peer (gorilla returns a
// *websocket.CloseError only for a valid one) or a network end is a
// clean "transport close"; a protocol violation or an oversized message,
// which gorilla has answered with a close code, is a "transport error".
func readEndReason(err error) string {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, net.ErrClosed):
		return reasonTransportClose
	}
	return reasonTransportError
}

func (p *gorillaPeer) send(fs []frame, direct bool) error {
	p.mu.Lock()
	if p.closed || p.closeAfter {
		p.mu.Unlock()
		return ErrClosed
	}
	if !direct || p.flushing || len(p.queue) > 0 {
		for _, f := range fs {
			p.queued += len(f.data)
		}
		p.queue = append(p.queue, fs...)
		if p.queued > p.max {
			p.mu.Unlock()
			p.close(false) // a peer that does not read
			return ErrClosed
		}
		if !p.flushing {
			p.flushing = true
			go p.flush()
		}
		p.mu.Unlock()
		return nil
	}
	p.flushing = true
	p.mu.Unlock()
	err := p.write(fs)
	p.mu.Lock()
	if err == nil && (len(p.queue) > 0 || p.closeAfter) {
		go p.flush() // others queued behind us: hand over
	} else {
		p.flushing = false
	}
	p.mu.Unlock()
	if err != nil {
		p.close(false)
	}
	return err
}

// write is called by the one writer (flushing set). The deadline moves
// when half of it has passed, not on every write: a stuck write still
// fails after between timeout/2 and timeout.
func (p *gorillaPeer) write(fs []frame) error {
	if now := time.Now(); now.After(p.refresh) {
		_ = p.ws.SetWriteDeadline(now.Add(p.timeout))
		p.refresh = now.Add(p.timeout / 2)
	}
	for _, f := range fs {
		typ := websocket.TextMessage
		if f.binary {
			typ = websocket.BinaryMessage
		}
		if err := p.ws.WriteMessage(typ, f.data); err != nil {
			return err
		}
	}
	return nil
}

func (p *gorillaPeer) flush() {
	for {
		p.mu.Lock()
		fs := p.queue
		p.queue, p.queued = nil, 0
		if len(fs) == 0 || p.closed {
			p.flushing = false
			after := p.closeAfter
			p.mu.Unlock()
			if after {
				p.close(false)
			}
			return
		}
		p.mu.Unlock()
		if err := p.write(fs); err != nil {
			p.mu.Lock()
			p.flushing = false
			p.mu.Unlock()
			p.close(false)
			return
		}
	}
}

func (p *gorillaPeer) close(graceful bool) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if graceful && (p.flushing || len(p.queue) > 0) {
		p.closeAfter = true
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	_ = p.ws.Close()
}
