package sio

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Transport selects how a client connects.
type Transport int

const (
	// PollingFirst opens with an HTTP long-polling handshake and then
	// upgrades to WebSocket, staying on polling if the upgrade fails. This
	// is what the A2C-SMCP specification requires of SDKs.
	PollingFirst Transport = iota
	// WebSocketOnly connects straight over WebSocket.
	WebSocketOnly
	// PollingOnly never upgrades.
	PollingOnly
)

// ClientHandler receives what the server sends to a client socket. Its
// methods are called one at a time, in order.
type ClientHandler interface {
	Event(s *Socket, e *Event)
	Disconnect(s *Socket, reason string)
}

// ClientOptions configure [Dial].
type ClientOptions struct {
	Path      string // Engine.IO path, default "/socket.io/"
	Namespace string // default "/"
	Query     url.Values
	Header    http.Header
	// Auth is sent in the CONNECT packet; it must marshal to a JSON object.
	Auth      any
	Transport Transport
	Handler   ClientHandler
	// HTTPClient is used for long-polling; default a client with no
	// overall timeout (each request has its own deadline).
	HTTPClient *http.Client
}

// HTTPError is a handshake the server refused with an HTTP status.
type HTTPError struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("sio: handshake refused: HTTP %d", e.StatusCode)
}

// CloseError is a WebSocket the server closed with a close code before the
// connection was established (for example A2C-SMCP's 4900).
type CloseError struct {
	Code int
	Text string
}

func (e *CloseError) Error() string { return fmt.Sprintf("sio: closed with code %d", e.Code) }

// ErrTooLarge means a message does not fit the server's maxPayload (as its
// handshake announced it): one WebSocket message, or one polling POST,
// larger than that would make the server close the connection.
var ErrTooLarge = errors.New("sio: message exceeds the server's maxPayload")

// cconn is the client side of one Engine.IO connection.
type cconn struct {
	o        ClientOptions
	base     *url.URL // http(s) URL of the Engine.IO path, without query
	sid      string
	interval time.Duration
	timeout  time.Duration
	maxLoad  int64 // the server's maxPayload; 0 when it announced none
	hc       *http.Client

	postMu sync.Mutex // one POST at a time, as the server requires
	// dispatch is held while a received frame is handled and while the
	// handler hears of the disconnect, so Disconnect never runs during an
	// Event and no Event follows it.
	dispatch sync.Mutex

	wmu         sync.Mutex // serialises writes to ws
	mu          sync.Mutex
	ws          *websocket.Conn
	queue       []frame
	flushing    bool
	closed      bool
	established bool // Dial returned the socket
	sock        *Socket
	partial     *partialPacket
	// connected receives the CONNECT answer during Dial.
	connected chan error

	ctx    context.Context // ends when the connection terminates
	cancel context.CancelFunc
}

// Dial connects to a Socket.IO server and joins one namespace. rawURL is
// the server's base URL (http, https, ws or wss); the path comes from
// opts.Path. It returns when the namespace has accepted or refused the
// connection, or ctx ends.
func Dial(ctx context.Context, rawURL string, o ClientOptions) (*Socket, error) {
	if o.Path == "" {
		o.Path = "/socket.io/"
	}
	if o.Namespace == "" {
		o.Namespace = "/"
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("sio: bad url: %w", err)
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return nil, fmt.Errorf("sio: unsupported url scheme %q", u.Scheme)
	}
	u.Path = o.Path
	u.RawQuery = ""
	c := &cconn{o: o, base: u, hc: o.HTTPClient, connected: make(chan error, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sock = newSocket("", o.Namespace, nil, c)
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if o.Transport == WebSocketOnly {
		err = c.openWebSocket(ctx)
	} else {
		err = c.openPolling(ctx)
		if err == nil && o.Transport == PollingFirst {
			if uerr := c.upgrade(ctx); uerr != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
		}
	}
	if err != nil {
		c.terminate("handshake failed")
		return nil, err
	}
	c.mu.Lock()
	ws := c.ws
	c.mu.Unlock()
	if ws != nil {
		go c.readLoop(ws)
	} else {
		go c.pollLoop()
	}
	auth := []byte(nil)
	if o.Auth != nil {
		auth, err = json.Marshal(o.Auth)
		if err != nil || len(auth) == 0 || auth[0] != '{' {
			c.terminate("bad auth")
			return nil, fmt.Errorf("sio: auth must be a JSON object")
		}
	}
	if err := c.sendMessage(append(appendHeader([]byte{eMessage}, pConnect, 0, o.Namespace, -1), auth...), nil, true); err != nil {
		c.terminate("transport error")
		return nil, err
	}
	select {
	case err := <-c.connected:
		if err != nil {
			c.terminate("connect refused")
			return nil, err
		}
		c.mu.Lock()
		closed := c.closed
		c.established = !closed
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return c.sock, nil
	case <-ctx.Done():
		c.terminate("connect timeout")
		return nil, ctx.Err()
	}
}

func (c *cconn) engineURL(transport string) string {
	q := url.Values{}
	for k, v := range c.o.Query {
		q[k] = v
	}
	q.Set("EIO", "4")
	q.Set("transport", transport)
	if c.sid != "" {
		q.Set("sid", c.sid)
	}
	u := *c.base
	if transport == "websocket" {
		if u.Scheme == "https" {
			u.Scheme = "wss"
		} else {
			u.Scheme = "ws"
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *cconn) readOpen(f frame) error {
	if f.binary || len(f.data) == 0 || f.data[0] != eOpen {
		return fmt.Errorf("%w: expected open packet", errMalformed)
	}
	var op openPacket
	if err := json.Unmarshal(f.data[1:], &op); err != nil || op.SID == "" {
		return fmt.Errorf("%w: bad open packet", errMalformed)
	}
	c.sid = op.SID
	c.interval = time.Duration(op.PingInterval) * time.Millisecond
	c.timeout = time.Duration(op.PingTimeout) * time.Millisecond
	c.maxLoad = op.MaxPayload
	if c.interval <= 0 {
		c.interval = 25 * time.Second
	}
	if c.timeout <= 0 {
		c.timeout = 20 * time.Second
	}
	return nil
}

func (c *cconn) openPolling(ctx context.Context) error {
	fs, err := c.get(ctx)
	if err != nil {
		return err
	}
	if err := c.readOpen(fs[0]); err != nil {
		return err
	}
	c.dispatch.Lock()
	defer c.dispatch.Unlock()
	for _, f := range fs[1:] {
		c.onFrame(f)
	}
	return nil
}

// get performs one long-polling GET.
func (c *cconn) get(ctx context.Context) ([]frame, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.engineURL("polling"), nil)
	if err != nil {
		return nil, err
	}
	for k, v := range c.o.Header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxClientRead))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}
	}
	return decodePayload(body)
}

func (c *cconn) dialWS(ctx context.Context) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, WriteBufferPool: &sync.Pool{}, ReadBufferSize: 1024}
	ws, resp, err := d.DialContext(ctx, c.engineURL("websocket"), c.o.Header)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			return nil, &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}
		}
		return nil, err
	}
	ws.SetReadLimit(maxClientRead)
	return ws, nil
}

// maxClientRead bounds what the client reads in one go from a server: a
// long-polling answer, or one WebSocket message (a larger one closes the
// connection with 1009), so that a hostile server cannot make it hold
// unbounded memory.
const maxClientRead = 16 << 20

// readWS reads one message with a deadline, turning a close into CloseError.
func readWS(ws *websocket.Conn, deadline time.Time) (int, []byte, error) {
	_ = ws.SetReadDeadline(deadline)
	typ, msg, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return 0, nil, &CloseError{Code: ce.Code, Text: ce.Text}
	}
	return typ, msg, err
}

// msgReader reads the messages of a client's WebSocket (on its reader
// goroutine) with fewer allocations and copies than gorilla's
// ReadMessage, whose io.ReadAll reads a large message in dozens of
// growing pieces and then copies it whole (over a millisecond for a
// 350 KB client:put_blob chunk):
//
//   - a message is read into a scratch buffer that doubles as needed;
//   - a large one (over 64 KiB) that fills at least half the buffer is
//     handed on as it is, and the next message gets a new buffer of the
//     same size, which a run of same-sized chunks then fills with no
//     growth and no copy;
//   - anything else is copied out at its exact size and the scratch
//     kept, unless it is large and the message used little of it: then
//     it is dropped, so a connection that once received a large message
//     does not keep its buffer.
type msgReader struct {
	buf  []byte // scratch, reused; nil until needed
	next int    // capacity of the next scratch, after one was handed on
}

func (m *msgReader) read(ws *websocket.Conn, deadline time.Time) (int, []byte, error) {
	_ = ws.SetReadDeadline(deadline)
	typ, r, err := ws.NextReader()
	if err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return 0, nil, &CloseError{Code: ce.Code, Text: ce.Text}
		}
		return 0, nil, err
	}
	if m.buf == nil {
		m.buf = make([]byte, 0, max(m.next, 4096))
		m.next = 0
	}
	b := m.buf[:0]
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b)) // double
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			m.buf = nil
			return 0, nil, err
		}
	}
	switch {
	case len(b) > 64<<10 && len(b) >= cap(b)/2:
		m.buf, m.next = nil, cap(b)
		return typ, b, nil // handed on: the next message gets a new buffer
	case cap(b) > 64<<10 && len(b) < cap(b)/16:
		m.buf = nil // little use for a large buffer
	default:
		m.buf = b[:0]
	}
	return typ, bytes.Clone(b), nil
}

func ctxDeadline(ctx context.Context, d time.Duration) time.Time {
	t := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(t) {
		return dl
	}
	return t
}

func (c *cconn) openWebSocket(ctx context.Context) error {
	ws, err := c.dialWS(ctx)
	if err != nil {
		return err
	}
	typ, msg, err := readWS(ws, ctxDeadline(ctx, 30*time.Second))
	if err == nil && typ != websocket.TextMessage {
		err = fmt.Errorf("%w: expected open packet", errMalformed)
	}
	if err == nil {
		err = c.readOpen(frame{data: msg})
	}
	if err != nil {
		_ = ws.Close()
		return err
	}
	c.mu.Lock()
	c.ws = ws
	c.mu.Unlock()
	return nil
}

// upgrade probes a WebSocket for the polling session and switches to it.
func (c *cconn) upgrade(ctx context.Context) error {
	ws, err := c.dialWS(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error { _ = ws.Close(); return err }
	_ = ws.SetWriteDeadline(ctxDeadline(ctx, 10*time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte("2probe")); err != nil {
		return fail(err)
	}
	typ, msg, err := readWS(ws, ctxDeadline(ctx, c.timeout))
	if err != nil {
		return fail(err)
	}
	if typ != websocket.TextMessage || string(msg) != "3probe" {
		return fail(fmt.Errorf("%w: bad probe answer", errMalformed))
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte{eUpgrade}); err != nil {
		return fail(err)
	}
	_ = ws.SetWriteDeadline(time.Time{})
	c.mu.Lock()
	c.ws = ws
	c.mu.Unlock()
	return nil
}

// sendMessage writes on the calling goroutine when the WebSocket is idle;
// a client has no lock shared with other connections, so it always may.
func (c *cconn) sendMessage(msg []byte, att [][]byte, _ bool) error {
	return c.write(messageFrames(msg, att))
}

func (c *cconn) write(fs []frame) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.maxLoad > 0 {
		for _, f := range fs {
			if int64(frameSize(f, c.ws == nil)) > c.maxLoad {
				c.mu.Unlock()
				return ErrTooLarge
			}
		}
	}
	if c.ws == nil || c.flushing || len(c.queue) > 0 {
		c.mu.Unlock()
		return c.push(fs...)
	}
	c.flushing = true
	ws := c.ws
	c.mu.Unlock()
	err := c.writeWS(ws, fs)
	c.mu.Lock()
	if err != nil {
		c.flushing = false
		c.mu.Unlock()
		c.terminate("transport error")
		return err
	}
	if len(c.queue) > 0 {
		go c.flush()
	} else {
		c.flushing = false
	}
	c.mu.Unlock()
	return nil
}

// clientWriteTimeout bounds one write of the client's frames: a server
// that reads nothing for this long ends the connection.
const clientWriteTimeout = 10 * time.Second

func (c *cconn) writeWS(ws *websocket.Conn, fs []frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// Each message is one frame written by us on the net.Conn, not
	// gorilla's fragments (see wsframe.go), so the deadline is set on the
	// net.Conn itself, before every write: gorilla's SetWriteDeadline only
	// records one for gorilla's own writers, and the net.Conn keeps
	// whatever deadline gorilla last applied there (the upgrade probe's,
	// bounded by Dial's context, or a pong's one second), which would
	// fail every later write.
	nc := ws.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
	for _, f := range fs {
		if err := writeClientFrame(nc, f); err != nil {
			return err
		}
	}
	// Written (and the engine's own messages masked over): every caller
	// drops fs after this.
	releaseFrames(fs)
	return nil
}

func (c *cconn) push(fs ...frame) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.queue = append(c.queue, fs...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	c.mu.Unlock()
	return nil
}

func (c *cconn) flush() {
	for {
		c.mu.Lock()
		fs := c.queue
		c.queue = nil
		ws := c.ws
		if len(fs) == 0 || c.closed {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		var err error
		if ws != nil {
			err = c.writeWS(ws, fs)
		} else {
			for len(fs) > 0 && err == nil {
				n := c.batch(fs)
				err = c.post(fs[:n])
				fs = fs[n:]
			}
		}
		if err != nil {
			c.mu.Lock()
			c.flushing = false
			c.mu.Unlock()
			c.terminate("transport error")
			return
		}
	}
}

// frameSize is what f takes in a polling payload (polling) or as one
// WebSocket message.
func frameSize(f frame, polling bool) int {
	if !polling {
		return len(f.data)
	}
	if f.binary {
		return 1 + base64.StdEncoding.EncodedLen(len(f.data))
	}
	return len(f.data)
}

// batch returns how many of fs (at least one) fit one POST under the
// server's maxPayload.
func (c *cconn) batch(fs []frame) int {
	if c.maxLoad <= 0 {
		return len(fs)
	}
	n, size := 0, 0
	for _, f := range fs {
		add := frameSize(f, true)
		if n > 0 {
			add++ // the record separator
		}
		if n > 0 && int64(size+add) > c.maxLoad {
			break
		}
		size += add
		n++
	}
	return n
}

func (c *cconn) post(fs []frame) error {
	c.postMu.Lock()
	defer c.postMu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.engineURL("polling"), bytes.NewReader(encodePayload(fs)))
	if err != nil {
		return err
	}
	for k, v := range c.o.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header}
	}
	return nil
}

func (c *cconn) readLoop(ws *websocket.Conn) {
	var r msgReader
	for {
		typ, msg, err := r.read(ws, time.Now().Add(c.interval+c.timeout))
		if err != nil {
			c.terminate("transport close")
			return
		}
		c.dispatch.Lock()
		ok := c.onFrame(frame{data: msg, binary: typ == websocket.BinaryMessage})
		c.dispatch.Unlock()
		if !ok {
			return
		}
	}
}

func (c *cconn) pollLoop() {
	for {
		ctx, cancel := context.WithTimeout(c.ctx, c.interval+c.timeout)
		fs, err := c.get(ctx)
		cancel()
		if err != nil {
			c.terminate("transport close")
			return
		}
		c.dispatch.Lock()
		ok := true
		for _, f := range fs {
			if ok = c.onFrame(f); !ok {
				break
			}
		}
		c.dispatch.Unlock()
		if !ok {
			return
		}
	}
}

func (c *cconn) onFrame(f frame) bool {
	if f.binary {
		pp := c.partial
		if pp == nil {
			c.terminate("parse error")
			return false
		}
		pp.att = append(pp.att, f.data)
		if len(pp.att) == pp.p.attachments {
			c.partial = nil
			c.deliver(pp.p, pp.att)
		}
		return true
	}
	if len(f.data) == 0 {
		c.terminate("parse error")
		return false
	}
	switch f.data[0] {
	case ePing:
		_ = c.push(frame{data: append([]byte{ePong}, f.data[1:]...)})
	case eMessage:
		p, err := decodePacket(f.data[1:])
		if err != nil || c.partial != nil {
			c.terminate("parse error")
			return false
		}
		if p.nsp != c.o.Namespace {
			return true
		}
		switch p.typ {
		case pConnect:
			var ok struct {
				SID string `json:"sid"`
			}
			_ = json.Unmarshal(p.data, &ok)
			c.sock.id = ok.SID
			c.signalConnected(nil)
		case pConnectError:
			var ce struct {
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			}
			_ = json.Unmarshal(p.data, &ce)
			c.signalConnected(&ConnectError{Message: ce.Message, Data: ce.Data})
		case pDisconnect:
			c.terminate("io server disconnect")
			return false
		case pBinaryEvent, pBinaryAck:
			if p.attachments > 0 {
				c.partial = &partialPacket{p: p}
				return true
			}
			c.deliver(p, nil)
		default:
			c.deliver(p, nil)
		}
	case eClose:
		c.terminate("transport close")
		return false
	case eNoop, ePong, eOpen:
	}
	return true
}

func (c *cconn) signalConnected(err error) {
	select {
	case c.connected <- err:
	default:
	}
}

func (c *cconn) deliver(p packet, att [][]byte) {
	isEvent := p.typ == pEvent || p.typ == pBinaryEvent
	name, args, err := splitArgs(p.data, isEvent)
	if err != nil {
		return
	}
	if p.typ == pBinaryEvent || p.typ == pBinaryAck {
		if checkPlaceholders(args, len(att)) != nil {
			c.terminate("parse error")
			return
		}
	}
	m := Message{Args: args, Attachments: att}
	if !isEvent {
		c.sock.onAck(p.id, m)
		return
	}
	if c.sock.Closed() {
		return // the handler has heard (or is about to hear) of the end
	}
	if c.o.Handler != nil {
		c.o.Handler.Event(c.sock, &Event{Name: name, Message: m, sock: c.sock, ackID: p.id})
	} else if p.id >= 0 {
		_ = c.sendMessage(encodeAck([]byte{eMessage}, c.sock.nsp, p.id, Message{}), nil, true)
	}
}

// terminate closes the connection once and reports the reason.
func (c *cconn) terminate(reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	ws := c.ws
	established := c.established
	c.mu.Unlock()
	c.cancel()
	if ws != nil {
		_ = ws.Close()
	}
	c.signalConnected(errors.New("sio: connection closed: " + reason))
	// The handler hears only of sockets that Dial returned, under
	// dispatch: at once when no frame is being handled, else (a frame's
	// handler is running, possibly the very one that called us) on a
	// goroutine that waits for it to end.
	if s := c.sock; s != nil && s.markClosed() && established && c.o.Handler != nil {
		if c.dispatch.TryLock() {
			defer c.dispatch.Unlock()
			c.o.Handler.Disconnect(s, reason)
			return
		}
		go func() {
			c.dispatch.Lock()
			defer c.dispatch.Unlock()
			c.o.Handler.Disconnect(s, reason)
		}()
	}
}

// disconnect leaves the namespace and closes the connection: DISCONNECT
// and the Engine.IO close packet are sent first, best effort.
func (c *cconn) disconnect(s *Socket) {
	c.mu.Lock()
	ws := c.ws
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	pkt := append([]byte{eMessage}, appendHeader(nil, pDisconnect, 0, s.nsp, -1)...)
	if ws != nil {
		c.wmu.Lock()
		_ = ws.SetWriteDeadline(time.Now().Add(time.Second))
		_ = ws.WriteMessage(websocket.TextMessage, pkt)
		_ = ws.WriteMessage(websocket.TextMessage, []byte{eClose})
		c.wmu.Unlock()
	} else {
		_ = c.post([]frame{{data: pkt}, frameClose})
	}
	c.terminate("io client disconnect")
}
