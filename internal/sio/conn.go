package sio

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// wsPeer is the WebSocket under an Engine.IO connection: the event loop's
// connection or a gorilla connection with its reader goroutine. Its reader
// hands every message to econn.wsFrame and reports the end once with
// econn.wsClosed.
type wsPeer interface {
	// send writes frames in order. It never blocks on a slow peer: what
	// cannot be written now is kept and written later, up to a limit past
	// which the connection is closed. direct allows writing on the calling
	// goroutine (see Event.AckDirect); the event loop always does.
	send(fs []frame, direct bool) error
	// close ends the WebSocket. When graceful, frames already sent are
	// delivered first.
	close(graceful bool)
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

	mu    sync.Mutex
	state int32
	// ws is the attached WebSocket in stWebSocket. It is nil there only
	// while a direct WebSocket handshake is still binding its peer: frames
	// sent meanwhile wait in queue and go out behind the open packet.
	ws          wsPeer
	probe       wsPeer  // the WebSocket being probed in stUpgrading
	queue       []frame // frames waiting for a long-poll GET (or the upgrade)
	queued      int     // bytes in queue, bounded by Options.MaxBuffered
	polling     bool    // a long-poll GET is waiting
	posting     bool    // a POST is being read and dispatched
	closing     bool    // a close packet is queued; end after it is written
	closeReason string  // why shutdown queued the close packet
	sockets     []*Socket
	timer       *time.Timer
	awaiting    bool // a ping is out and no pong has come back

	// dispatch orders everything the namespace handlers hear of this
	// connection: incoming frames (across concurrent POSTs, and while a
	// namespace connect runs: frames that arrive meanwhile are held), and
	// the Disconnect reports, which run under it too (see later). So a
	// handler never sees an Event during or after its socket's Disconnect.
	dispatch   sync.Mutex
	connecting bool
	held       []frame
	heldBytes  int // bytes in held
	partial    *partialPacket
}

// partialPacket is a binary packet still waiting for its attachments.
// When discard is set the packet is for a namespace the peer has not
// joined: its attachments are counted off, never kept.
type partialPacket struct {
	p       packet
	att     [][]byte
	n       int // attachments received
	bytes   int // bytes in att
	discard bool
}

// pendingLimit is what one connection may keep in memory on its way in:
// the frames held while a namespace connect is decided plus the
// attachments of the binary packet being assembled. Two messages' worth:
// a peer cannot make the server hold more by announcing attachments.
func (c *econn) pendingLimit() int { return int(2 * c.srv.opts.MaxPayload) }

// push sends frames without blocking: straight to the WebSocket, or into
// the queue for the next long-poll GET.
func (c *econn) push(fs ...frame) error { return c.send(fs, false) }

func (c *econn) send(fs []frame, direct bool) error {
	c.mu.Lock()
	if c.state == stClosed || c.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.state == stWebSocket && c.ws != nil {
		ws := c.ws
		c.mu.Unlock()
		return ws.send(fs, direct)
	}
	for _, f := range fs {
		c.queued += len(f.data)
	}
	if c.queued > c.srv.opts.MaxBuffered {
		// A polling peer that never comes for its packets: drop them and
		// end the connection rather than grow without bound.
		c.queue, c.queued = nil, 0
		c.mu.Unlock()
		c.srv.opts.Logger.Debug("sio: send queue over its limit", "sid", c.id)
		c.finish("transport error")
		return ErrClosed
	}
	c.queue = append(c.queue, fs...)
	c.mu.Unlock()
	c.wake()
	return nil
}

// later runs f under c.dispatch on its own goroutine. It is how the
// namespace handlers hear of a disconnect: never while an event of the
// connection is being handled (an event being delivered finishes first),
// and never inline under whatever locks the closing caller holds (a
// sender over its queue limit may hold a lock the handler takes). The
// goroutine ends as soon as f returns.
func (c *econn) later(f func()) {
	go func() {
		c.dispatch.Lock()
		defer c.dispatch.Unlock()
		f()
	}()
}

func (c *econn) wake() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

func (c *econn) sendMessage(msg []byte, att [][]byte, direct bool) error {
	return c.send(messageFrames(msg, att), direct)
}

func (c *econn) disconnect(s *Socket) {
	if !s.markClosed() {
		return
	}
	_ = c.sendMessage(appendHeader([]byte{eMessage}, pDisconnect, 0, s.nsp, -1), nil, false)
	c.mu.Lock()
	c.dropLocked(s)
	empty := len(c.sockets) == 0
	c.mu.Unlock()
	c.later(func() { c.srv.nsps[s.nsp].Disconnect(s, "server namespace disconnect") })
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

// shutdown ends the connection after telling the peer: the close packet
// goes out behind whatever is pending, then the connection ends (at the
// latest a second later, if a polling peer never comes for it).
func (c *econn) shutdown(reason string) {
	c.mu.Lock()
	if c.state == stClosed || c.closing {
		c.mu.Unlock()
		return
	}
	c.closeReason = reason
	if c.state == stWebSocket && c.ws != nil {
		ws := c.ws
		c.mu.Unlock()
		_ = ws.send([]frame{frameClose}, false)
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		ws.close(true)
	} else {
		// Polling, or a direct WebSocket still binding its peer (which
		// sends the queue, then closes, when it binds).
		c.queue = append(c.queue, frameClose)
		c.closing = true
		c.mu.Unlock()
		c.wake()
	}
	time.AfterFunc(time.Second, func() { c.finish(reason) })
}

// finish closes the connection at once. It is idempotent, takes no lock
// but the connection's own, and may be called from anywhere: the sockets
// leave the connection now (so no event is delivered to them from here
// on), and their handlers hear of it under c.dispatch (see later).
func (c *econn) finish(reason string) {
	c.mu.Lock()
	if c.state == stClosed {
		c.mu.Unlock()
		return
	}
	c.state = stClosed
	ws, probe := c.ws, c.probe
	sockets := c.sockets
	c.sockets = nil
	c.queue, c.queued = nil, 0
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.wake()
	if ws != nil {
		ws.close(false)
	}
	if probe != nil {
		probe.close(false)
	}
	c.srv.remove(c)
	c.later(func() {
		c.held, c.heldBytes, c.partial = nil, 0, nil
		for _, s := range sockets {
			if s.markClosed() {
				if h := c.srv.nsps[s.nsp]; h != nil {
					h.Disconnect(s, reason)
				}
			}
		}
	})
}

// startHeartbeat sends a ping every PingInterval and closes the connection
// when a pong does not come back within PingTimeout. It also closes a
// connection that has joined no namespace within ConnectTimeout.
func (c *econn) startHeartbeat() {
	c.mu.Lock()
	c.timer = time.AfterFunc(c.srv.opts.PingInterval, c.beat)
	c.mu.Unlock()
	time.AfterFunc(c.srv.opts.ConnectTimeout, func() {
		c.dispatch.Lock()
		connecting := c.connecting
		c.dispatch.Unlock()
		c.mu.Lock()
		idle := len(c.sockets) == 0 && !connecting && c.state != stClosed
		c.mu.Unlock()
		if idle {
			c.finish("connect timeout")
		}
	})
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
		c.queue, c.queued = nil, 0
	} else {
		fs = []frame{frameNoop}
	}
	c.polling = false
	closing := c.closing || c.state == stClosed
	reason := c.closeReason
	c.mu.Unlock()
	if len(fs) == 0 {
		fs = []frame{frameClose}
	}
	if err := c.srv.writePayload(w, fs); err != nil {
		c.finish("transport error") // a peer that does not read its answer
		return
	}
	if closing {
		c.finish(reason)
	}
}

// post serves a long-polling POST carrying one or more packets. One POST
// at a time, as in the reference server: a second one while the first is
// read is a transport error. After the upgrade a POST is refused (400)
// and the connection goes on over its WebSocket.
func (c *econn) post(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.state == stWebSocket || c.state == stClosed || c.posting {
		overlap := c.posting
		c.mu.Unlock()
		engineError(w, http.StatusBadRequest, 3, "Bad request")
		if overlap {
			c.finish("transport error")
		}
		return
	}
	c.posting = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.posting = false
		c.mu.Unlock()
	}()
	body, err := c.srv.readBody(w, r)
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
	for _, f := range fs {
		if !c.input(f) {
			break
		}
	}
	w.Header().Set("Content-Type", "text/html")
	_, _ = io.WriteString(w, "ok")
}

// upgrade starts moving a polling connection to WebSocket. The probe
// ("2probe" -> "3probe"), the pause of polling and the switch on "5" then
// happen as the WebSocket's frames arrive (wsFrame).
func (c *econn) upgrade(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.state != stPolling {
		c.mu.Unlock()
		engineError(w, http.StatusBadRequest, 3, "Bad request")
		return
	}
	c.state = stUpgrading
	c.mu.Unlock()
	p := c.srv.acceptWS(w, r, c, func(p wsPeer) {
		c.mu.Lock()
		if c.state == stUpgrading {
			c.probe = p
		}
		c.mu.Unlock()
	})
	if p == nil {
		c.revertUpgrade(nil)
		return
	}
	time.AfterFunc(c.srv.opts.PingTimeout, func() {
		c.mu.Lock()
		// A probe that has not become the connection's WebSocket by now
		// is closed, including one whose connection ended while it was
		// being accepted (bind never recorded it as the probe, so nothing
		// else would ever close it).
		stuck := c.ws != p
		c.mu.Unlock()
		if stuck {
			p.close(false)
			c.revertUpgrade(p)
		}
	})
}

func (c *econn) revertUpgrade(p wsPeer) {
	c.mu.Lock()
	if c.state == stUpgrading && (p == nil || c.probe == p) {
		c.state = stPolling
		c.probe = nil
	}
	c.mu.Unlock()
}

// wsFrame receives every message of a WebSocket peer of c. Before the
// upgrade completes it runs the probe; after, it is the connection's
// input. It reports false when the peer must stop reading.
func (c *econn) wsFrame(p wsPeer, f frame) bool {
	c.mu.Lock()
	attached := c.ws == p && c.state == stWebSocket
	c.mu.Unlock()
	if attached {
		return c.input(f)
	}
	switch {
	case !f.binary && string(f.data) == "2probe":
		if err := p.send([]frame{{data: []byte("3probe")}}, true); err != nil {
			return false
		}
		c.mu.Lock()
		if c.probe == p {
			c.queue = append(c.queue, frameNoop) // release the parked GET
		}
		c.mu.Unlock()
		c.wake()
		return true
	case !f.binary && len(f.data) == 1 && f.data[0] == eUpgrade:
		c.mu.Lock()
		if c.probe != p || c.state != stUpgrading {
			c.mu.Unlock()
			return false
		}
		c.probe = nil
		c.ws = p
		c.state = stWebSocket
		// What polling had queued goes out first, while c.mu is held: a
		// sender that sees stWebSocket writes straight to p, so releasing
		// the lock before this send would let it overtake the queue.
		// p.send without direct only queues (or writes non-blocking), so
		// it is safe under c.mu.
		queued := c.queue[:0]
		for _, f := range c.queue {
			if !(len(f.data) == 1 && f.data[0] == eNoop && !f.binary) {
				queued = append(queued, f)
			}
		}
		c.queue, c.queued = nil, 0
		if len(queued) > 0 {
			_ = p.send(queued, false)
		}
		c.mu.Unlock()
		if hook := c.srv.upgradeHook.Load(); hook != nil {
			(*hook)()
		}
		c.wake() // a GET still parked must not hang
		return true
	}
	p.close(false)
	c.revertUpgrade(p)
	return false
}

// wsClosed reports that a WebSocket peer of c has ended.
func (c *econn) wsClosed(p wsPeer, reason string) {
	c.mu.Lock()
	attached := c.ws == p
	c.mu.Unlock()
	if attached {
		c.finish(reason)
		return
	}
	c.revertUpgrade(p)
}

// input takes one incoming Engine.IO packet in order. While a namespace
// connect is being decided the packets that follow are held, then
// replayed. It reports false when the connection has closed.
func (c *econn) input(f frame) bool {
	c.dispatch.Lock()
	defer c.dispatch.Unlock()
	if c.connecting {
		c.heldBytes += len(f.data)
		if len(c.held) >= maxHeld || c.heldBytes+c.partialBytes() > c.pendingLimit() {
			c.finish("parse error") // flooding while its connect is decided
			return false
		}
		c.held = append(c.held, f)
		return true
	}
	return c.onFrame(f)
}

func (c *econn) partialBytes() int {
	if c.partial == nil {
		return 0
	}
	return c.partial.bytes
}

// maxHeld bounds the packets kept while a namespace connect is decided.
const maxHeld = 256

// onFrame handles one incoming Engine.IO packet; c.dispatch is held. It
// reports false when the connection has been closed because of it.
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

// onBinary takes one attachment of the packet being assembled. What is
// kept counts against pendingLimit with the held frames; attachments of a
// packet for a namespace the peer has not joined are counted, not kept.
func (c *econn) onBinary(b []byte) bool {
	pp := c.partial
	if pp == nil {
		c.finish("parse error")
		return false
	}
	pp.n++
	if !pp.discard {
		pp.bytes += len(b)
		if pp.bytes+c.heldBytes > c.pendingLimit() {
			c.finish("parse error")
			return false
		}
		pp.att = append(pp.att, b)
	}
	if pp.n < pp.p.attachments {
		return true
	}
	c.partial = nil
	if pp.discard {
		return true
	}
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
		c.partial = &partialPacket{p: p, discard: c.socket(p.nsp) == nil}
	default:
		c.finish("parse error")
		return false
	}
	return true
}

// connect runs the namespace's Connect hook on its own goroutine, since an
// authenticator may wait on the network; packets that arrive meanwhile are
// held. c.dispatch is held.
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
	c.connecting = true
	go func() {
		err := h.Connect(s)
		c.admit(s, p.nsp, err)
		c.dispatch.Lock()
		c.connecting = false
		for len(c.held) > 0 && !c.connecting {
			f := c.held[0]
			c.held = c.held[1:]
			c.heldBytes -= len(f.data)
			if !c.onFrame(f) {
				c.held, c.heldBytes = nil, 0
			}
		}
		if len(c.held) == 0 {
			c.held, c.heldBytes = nil, 0
		}
		c.dispatch.Unlock()
	}()
}

// admit answers a CONNECT once its hook has decided.
func (c *econn) admit(s *Socket, nsp string, err error) {
	if err != nil {
		var ce *ConnectError
		var data any
		if errors.As(err, &ce) {
			data = ce.Data
		}
		_ = c.sendMessage(connectError(nsp, err.Error(), data), nil, false)
		return
	}
	c.mu.Lock()
	if c.state == stClosed {
		c.mu.Unlock()
		if s.markClosed() {
			c.srv.nsps[nsp].Disconnect(s, "transport close")
		}
		return
	}
	c.sockets = append(c.sockets, s)
	c.mu.Unlock()
	ok := appendHeader([]byte{eMessage}, pConnect, 0, nsp, -1)
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
	return append(appendHeader([]byte{eMessage}, pConnectError, 0, nsp, -1), b...)
}

// deliver hands a complete event or acknowledgement to its socket.
func (c *econn) deliver(p packet, att [][]byte) bool {
	s := c.socket(p.nsp)
	if s == nil {
		return true // not connected to that namespace: ignored
	}
	isEvent := p.typ == pEvent || p.typ == pBinaryEvent
	name, args, err := splitArgs(p.data, isEvent)
	if err == nil && (p.typ == pBinaryEvent || p.typ == pBinaryAck) {
		err = checkPlaceholders(args, len(att))
	}
	if err != nil {
		c.srv.opts.Logger.Debug("sio: bad packet", "err", err)
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
