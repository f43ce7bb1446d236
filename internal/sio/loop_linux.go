//go:build linux

package sio

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// The event loop serves server-side WebSockets without a goroutine per
// connection: a few loops (one per P) wait on epoll, read what arrives,
// parse WebSocket frames and hand complete messages to the connection, all
// on the loop's goroutine. Writes go straight to the non-blocking socket
// from whichever goroutine sends; what the kernel does not take is kept
// and written when the socket is writable again. An idle connection costs
// a few hundred bytes instead of a goroutine stack and two buffers, and a
// relayed message costs no goroutine switch.

// loopSet is the loops of one Server.
type loopSet struct {
	loops []*loop
	next  atomic.Uint32
}

func newLoopSet(o Options) (*loopSet, error) {
	ls := &loopSet{}
	// One loop per four Ps: a loop thread does little but syscalls, and
	// fewer loops mean fewer sleeping threads to wake (on 2 cores, one loop
	// relays faster and cheaper than two).
	n := o.EventLoops
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0)/4)
	}
	for i := 0; i < n; i++ {
		l, err := newLoop(o)
		if err != nil {
			ls.stop()
			return nil, err
		}
		ls.loops = append(ls.loops, l)
		go l.run()
	}
	return ls, nil
}

func (ls *loopSet) stop() {
	for _, l := range ls.loops {
		l.stop()
	}
}

// loop is one epoll instance and the goroutine that waits on it.
type loop struct {
	opts   Options
	epfd   int
	wakefd int // an eventfd that wakes the loop to stop

	mu       sync.Mutex
	peers    map[int32]*loopPeer
	watches  map[int32]*loopWatch // descriptors of others (Server.Watch)
	gen      uint32
	stopping bool

	buf    []byte // read buffer, loop goroutine only
	events []unix.EpollEvent

	// iterations counts returns from epoll_wait that carried events, so
	// tests can see whether the loop idles (see also LoopStats).
	iterations atomic.Uint64
}

func newLoop(o Options) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sio: epoll: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("sio: eventfd: %w", err)
	}
	l := &loop{opts: o, epfd: epfd, wakefd: wakefd, peers: make(map[int32]*loopPeer),
		watches: make(map[int32]*loopWatch), buf: make([]byte, 64<<10), events: make([]unix.EpollEvent, 256)}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return nil, fmt.Errorf("sio: epoll: %w", err)
	}
	return l, nil
}

func (l *loop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(l.wakefd, one[:])
}

func (l *loop) run() {
	for {
		n, err := unix.EpollWait(l.epfd, l.events, -1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.opts.Logger.Error("sio: epoll_wait failed", "err", err)
			break
		}
		if n <= 0 {
			continue
		}
		start := time.Now()
		stop := l.dispatch(n)
		l.iterations.Add(1)
		countIteration(time.Since(start))
		if stop {
			break
		}
	}
	l.closeAll()
	unix.Close(l.epfd)
}

// dispatch handles n events; it reports true when the loop must stop.
func (l *loop) dispatch(n int) bool {
	for i := 0; i < n; i++ {
		ev := l.events[i]
		if ev.Fd == int32(l.wakefd) {
			return true
		}
		l.mu.Lock()
		p := l.peers[ev.Fd]
		var w *loopWatch
		if p == nil {
			w = l.watches[ev.Fd]
		}
		l.mu.Unlock()
		if w != nil && w.gen == uint32(ev.Pad) {
			w.run()
			continue
		}
		if p == nil || p.gen != uint32(ev.Pad) {
			continue // an event of a descriptor since closed
		}
		if ev.Events&unix.EPOLLOUT != 0 {
			p.flushOut()
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) != 0 {
			l.readable(p)
		}
	}
	return false
}

func (l *loop) closeAll() {
	l.mu.Lock()
	peers := make([]*loopPeer, 0, len(l.peers))
	for _, p := range l.peers {
		peers = append(peers, p)
	}
	watches := make([]*loopWatch, 0, len(l.watches))
	for _, w := range l.watches {
		watches = append(watches, w)
	}
	l.mu.Unlock()
	for _, p := range peers {
		l.release(p, "server shutting down")
	}
	for _, w := range watches {
		w.stop()
	}
	unix.Close(l.wakefd)
}

func (l *loop) readable(p *loopPeer) {
	if p.want > 0 {
		// The rest of a large frame goes straight into its own buffer,
		// up to the frame's end and no further (see carry).
		n, err := unix.Read(p.fd, p.rbuf[len(p.rbuf):p.want])
		if err == unix.EAGAIN || err == unix.EINTR {
			return
		}
		if err != nil || n <= 0 {
			l.release(p, reasonTransportClose)
			return
		}
		p.rbuf = p.rbuf[:len(p.rbuf)+n]
		if len(p.rbuf) < p.want {
			return
		}
		if end := p.ingestOwned(); end != "" {
			l.release(p, end)
		}
		return
	}
	n, err := unix.Read(p.fd, l.buf)
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if err != nil || n <= 0 {
		l.release(p, reasonTransportClose)
		return
	}
	if end := p.ingest(l.buf[:n]); end != "" {
		l.release(p, end)
	}
}

// add registers a peer for reading (and writing, if it has output left).
func (l *loop) add(p *loopPeer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return ErrClosed
	}
	l.gen++
	p.gen = l.gen
	p.mu.Lock()
	p.registered = true
	ev := unix.EpollEvent{Events: p.interestLocked(), Fd: int32(p.fd), Pad: int32(p.gen)}
	p.mu.Unlock()
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, p.fd, &ev); err != nil {
		return err
	}
	l.peers[int32(p.fd)] = p
	return nil
}

// loopWatch is a descriptor of another owner read on the loop (see
// Server.Watch). Its mutex is held while ready runs, so stop, taking it,
// returns only once ready is not running; after it, ready never runs
// again, and the owner may close the descriptor.
type loopWatch struct {
	l     *loop
	fd    int
	gen   uint32
	ready func() bool
	w     *Watch

	mu    sync.Mutex
	ended bool
}

// watch registers fd for readiness on one of the loops.
func (ls *loopSet) watch(fd int, ready func() bool) (*Watch, error) {
	l := ls.loops[int(ls.next.Add(1))%len(ls.loops)]
	lw := &loopWatch{l: l, fd: fd, ready: ready, w: &Watch{done: make(chan struct{})}}
	lw.w.stop = lw.stop
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return nil, ErrClosed
	}
	if l.peers[int32(fd)] != nil || l.watches[int32(fd)] != nil {
		return nil, fmt.Errorf("sio: descriptor %d is already on the loop", fd)
	}
	l.gen++
	lw.gen = l.gen
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd), Pad: int32(lw.gen)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return nil, fmt.Errorf("sio: epoll: %w", err)
	}
	l.watches[int32(fd)] = lw
	return lw.w, nil
}

// run calls ready, on the loop goroutine; the watch ends when it returns
// false.
func (w *loopWatch) run() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended && !w.ready() {
		w.endLocked()
	}
}

// stop ends the watch from any goroutine but ready's.
func (w *loopWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.endLocked()
	}
}

// endLocked takes the descriptor off the loop (while it is still open:
// epoll forgets a descriptor only when it is closed, or deleted) and
// closes Done.
func (w *loopWatch) endLocked() {
	w.ended = true
	w.l.mu.Lock()
	if w.l.watches[int32(w.fd)] == w {
		delete(w.l.watches, int32(w.fd))
		_ = unix.EpollCtl(w.l.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
	}
	w.l.mu.Unlock()
	close(w.w.done)
}

// release closes a peer's descriptor and reports the end to its
// connection. Only the loop goroutine calls it for registered peers.
func (l *loop) release(p *loopPeer, reason string) {
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return
	}
	p.dead, p.closed = true, true
	p.out = nil
	p.mu.Unlock()
	l.mu.Lock()
	if l.peers[int32(p.fd)] == p {
		delete(l.peers, int32(p.fd))
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, p.fd, nil)
	}
	unix.Close(p.fd)
	l.mu.Unlock()
	p.c.wsClosed(p, reason)
}

// accept performs the WebSocket handshake itself, takes the socket away
// from net/http and the Go poller, and hands it to a loop; where a loop
// cannot serve the request (TLS, a ResponseWriter that cannot be
// hijacked) gorilla/websocket does.
func (ls *loopSet) accept(w http.ResponseWriter, r *http.Request, c *econn, bind func(wsPeer)) wsPeer {
	p, ok := ls.acceptFor(w, r, c, c.srv.opts.MaxPayload, c.srv.opts.MaxBuffered, func(p *loopPeer) { bind(p) })
	switch {
	case !ok:
		return acceptGorilla(c.srv, w, r, c, bind)
	case p == nil:
		return nil // not a wsPeer holding a nil *loopPeer
	}
	return p
}

// acceptFor serves the WebSocket request r from a loop, for owner, with
// maxMsg as the largest message and maxOut as the largest backlog. bind
// sees the peer before anything is read from it. ok is false, with
// nothing answered, when a loop cannot serve r; p is nil when the
// handshake failed (answered, or the connection closed).
func (ls *loopSet) acceptFor(w http.ResponseWriter, r *http.Request, owner wsOwner, maxMsg int64, maxOut int, bind func(*loopPeer)) (p *loopPeer, ok bool) {
	if r.TLS != nil {
		return nil, false // a TLS connection cannot be read from its descriptor
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, false
	}
	key, ok := checkUpgrade(r)
	if !ok {
		w.Header().Set("Sec-WebSocket-Version", "13")
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return nil, true
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, true
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		conn.Close()
		return nil, true
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		acceptKey(key) + "\r\n\r\n")); err != nil {
		conn.Close()
		return nil, true
	}
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		early = append([]byte(nil), b...)
	}
	raw, err := sc.SyscallConn()
	fd := -1
	if err == nil {
		_ = raw.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) })
	}
	conn.Close() // the duplicate keeps the socket; Go's poller lets go of it
	if err != nil || fd < 0 {
		return nil, true
	}
	l := ls.loops[int(ls.next.Add(1))%len(ls.loops)]
	p = &loopPeer{c: owner, l: l, fd: fd, max: maxMsg, maxOut: maxOut}
	bind(p)
	if len(early) > 0 {
		if end := p.ingest(early); end != "" {
			p.mu.Lock()
			p.dead, p.closed = true, true
			p.mu.Unlock()
			unix.Close(fd)
			owner.wsClosed(p, end)
			return p, true
		}
	}
	if err := l.add(p); err != nil {
		p.mu.Lock()
		p.dead, p.closed = true, true
		p.mu.Unlock()
		unix.Close(fd)
		owner.wsClosed(p, reasonTransportClose)
	}
	return p, true
}

// checkUpgrade validates an RFC 6455 opening handshake and returns the
// client's key.
func checkUpgrade(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet || !hasToken(r.Header, "Connection", "upgrade") ||
		!hasToken(r.Header, "Upgrade", "websocket") || r.Header.Get("Sec-Websocket-Version") != "13" {
		return "", false
	}
	key := r.Header.Get("Sec-Websocket-Key")
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return "", false
	}
	return key, true
}

func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// loopPeer is one WebSocket served by a loop.
type loopPeer struct {
	c      wsOwner
	l      *loop
	fd     int
	gen    uint32
	max    int64 // largest message accepted
	maxOut int   // largest backlog kept for a peer that does not read

	// Read state, used only by the loop goroutine (or by accept before the
	// peer is registered).
	//
	// rbuf holds the start of a frame whose end has not arrived. It grows
	// by append (geometrically), and bytes once in it are moved again only
	// when a frame completes and the tail after it is shifted to the
	// front, so a frame of n bytes arriving in k reads costs O(n) copying,
	// not O(n*k). It is nil whenever no partial frame is pending, so an
	// idle connection holds no read buffer.
	//
	// A large frame (at least ownBufFrame bytes) whose header has arrived,
	// with enough of it received (see carry), gets a buffer of exactly its
	// size instead: want is then that size, and the loop reads the rest
	// straight into rbuf[len(rbuf):want], never past the frame's end. The
	// complete frame is unmasked in place and its payload handed on
	// without a copy; rbuf then belongs to the message, and the next read
	// starts afresh.
	rbuf   []byte
	want   int
	frag   []byte // a fragmented message being assembled
	fragOp byte

	mu         sync.Mutex
	out        []byte // written later, when the socket is writable
	registered bool
	closed     bool // no more writes
	closeAfter bool // close once out is written
	dead       bool // descriptor released
}

// interestLocked is the epoll interest of the peer. Write readiness is
// asked for only while a backlog waits and writing is still allowed: a
// socket whose sending side is shut (or broken) is writable for ever, and
// asking for EPOLLOUT on it would wake the loop on every epoll_wait.
func (p *loopPeer) interestLocked() uint32 {
	ev := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if len(p.out) > 0 && !p.closed {
		ev |= unix.EPOLLOUT
	}
	return ev
}

func (p *loopPeer) rearmLocked() {
	if !p.registered || p.dead {
		return
	}
	ev := unix.EpollEvent{Events: p.interestLocked(), Fd: int32(p.fd), Pad: int32(p.gen)}
	_ = unix.EpollCtl(p.l.epfd, unix.EPOLL_CTL_MOD, p.fd, &ev)
}

var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func (p *loopPeer) send(fs []frame, _ bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.closeAfter {
		return ErrClosed
	}
	if len(p.out) > 0 {
		p.out = appendWSFrames(p.out, fs)
		releaseFrames(fs) // copied
		if len(p.out) > p.maxOut {
			p.shutdownLocked() // a peer that does not read
			return ErrClosed
		}
		return nil
	}
	if framesSize(fs) > 64<<10 {
		err := p.sendVec(fs)
		releaseFrames(fs) // written, or what was left copied to the backlog
		return err
	}
	bp := encodeBufs.Get().(*[]byte)
	b := appendWSFrames((*bp)[:0], fs)
	n, err := writeAll(p.fd, b)
	if err != nil {
		p.shutdownLocked()
	} else if n < len(b) {
		p.out = append([]byte(nil), b[n:]...)
		p.rearmLocked()
	}
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		encodeBufs.Put(bp)
	}
	return err
}

// framesSize is the payload bytes of fs.
func framesSize(fs []frame) int {
	n := 0
	for _, f := range fs {
		n += len(f.data)
	}
	return n
}

// sendVec is send for large frames (p.mu held, no backlog): the frame
// headers and payloads go to the kernel in one writev, so a relayed
// message of hundreds of kilobytes is not copied into an encode buffer
// first. What the socket does not take now is copied to the backlog.
func (p *loopPeer) sendVec(fs []frame) error {
	var hdrs [8][10]byte
	iov := make([][]byte, 0, 2*len(fs))
	for i, f := range fs {
		var h []byte
		if i < len(hdrs) {
			h = hdrs[i][:0]
		}
		h = appendWSHeader(h, f)
		iov = append(iov, h, f.data)
	}
	total := 0
	for _, b := range iov {
		total += len(b)
	}
	n, err := writevAll(p.fd, iov)
	if err != nil {
		p.shutdownLocked()
		return err
	}
	if n < total { // the socket is full: keep what is left
		out := make([]byte, 0, total-n)
		for _, b := range iov {
			if n >= len(b) {
				n -= len(b)
				continue
			}
			out = append(out, b[n:]...)
			n = 0
		}
		if len(out) > 0 {
			p.out = out
			p.rearmLocked()
		}
	}
	return nil
}

// writevAll writes iov with writev until the socket takes no more (EAGAIN
// is not an error) and returns the bytes written. iov is left as it was.
func writevAll(fd int, iov [][]byte) (int, error) {
	iov = append(make([][]byte, 0, len(iov)), iov...)
	total := 0
	for len(iov) > 0 {
		m, err := unix.Writev(fd, iov)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return total, nil
		case err != nil:
			return total, err
		}
		total += m
		for len(iov) > 0 && m >= len(iov[0]) {
			m -= len(iov[0])
			iov = iov[1:]
		}
		if m > 0 {
			iov[0] = iov[0][m:]
		}
	}
	return total, nil
}

// writeAll writes what the socket takes now; EAGAIN is not an error.
func writeAll(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Write(fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return n, nil
		case err != nil:
			return n, err
		}
		n += m
	}
	return n, nil
}

// flushOut writes the backlog when the socket is writable (loop goroutine).
func (p *loopPeer) flushOut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead || len(p.out) == 0 {
		return
	}
	n, err := writeAll(p.fd, p.out)
	if err != nil {
		p.shutdownLocked() // drops the backlog and disarms EPOLLOUT
		return
	}
	p.out = p.out[n:]
	if len(p.out) == 0 {
		p.out = nil
		p.rearmLocked()
		if p.closeAfter {
			p.shutdownLocked()
		}
	}
}

// close ends the WebSocket: the socket is shut down (after the backlog,
// when graceful), which the loop sees and answers by releasing it.
func (p *loopPeer) close(graceful bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.dead {
		return
	}
	if graceful && len(p.out) > 0 {
		p.closeAfter = true
		return
	}
	p.shutdownLocked()
}

// shutdownLocked sends FIN after what the kernel holds; if the peer does
// not close its side within two seconds, reading is shut too, so that the
// loop releases the descriptor.
//
// Invariant: once closed, the peer has no backlog and no EPOLLOUT
// interest. Nothing can be written after SHUT_WR, and the kernel reports
// such a socket as always writable, so a backlog kept here would make
// every epoll_wait return at once and spin the loop thread until the
// descriptor is released.
func (p *loopPeer) shutdownLocked() {
	if p.closed || p.dead {
		return
	}
	p.closed = true
	p.out = nil
	p.rearmLocked()
	_ = unix.Shutdown(p.fd, unix.SHUT_WR)
	time.AfterFunc(2*time.Second, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.dead {
			_ = unix.Shutdown(p.fd, unix.SHUT_RDWR)
		}
	})
}

// ingest parses the frames in data (after any carried partial frame) and
// delivers them. It returns "" to go on reading, or the reason the
// connection ends with: reasonTransportClose after a clean close frame,
// reasonTransportError after a protocol violation (a close frame has been
// sent then).
func (p *loopPeer) ingest(data []byte) string {
	if p.want > 0 {
		// A large frame in its own buffer (the loop reads into it
		// directly; this is for callers that hand us bytes).
		k := min(len(data), p.want-len(p.rbuf))
		p.rbuf = append(p.rbuf, data[:k]...)
		if data = data[k:]; len(p.rbuf) < p.want {
			return ""
		}
		if end := p.ingestOwned(); end != "" || len(data) == 0 {
			return end
		}
	}
	carried := len(p.rbuf) > 0
	if carried {
		p.rbuf = append(p.rbuf, data...)
		data = p.rbuf
	}
	for len(data) > 0 {
		fin, op, payload, n, code := parseWSFrame(data, p.max)
		if code != 0 {
			p.rbuf = nil
			return p.fail(code)
		}
		if n == 0 {
			break // incomplete
		}
		data = data[n:]
		if end := p.onWSFrame(fin, op, payload); end != "" {
			p.rbuf = nil
			return end
		}
	}
	p.carry(data, carried)
	return ""
}

// carry keeps rest, the incomplete frame left at the end of a read, for
// the next one. When carried, rest is the tail of p.rbuf.
func (p *loopPeer) carry(rest []byte, carried bool) {
	if size := wsFrameSize(rest); size >= ownBufFrame && 4*len(rest) >= size {
		// A large frame: give it a buffer of its exact size, which the
		// loop then reads into directly. Only once a quarter of it is
		// here, so that what a peer makes us hold stays within four times
		// what it sent, however many connections stall in the middle of a
		// frame. (Half, the bound of the doubling growth below, costs the
		// relay of a 350 KB message a third more CPU in copies; an eighth
		// saves nothing measurable over a quarter.)
		p.rbuf = append(make([]byte, 0, size), rest...)
		p.want = size
		return
	}
	switch {
	case len(rest) == 0:
		p.rbuf = nil // an idle connection keeps no buffer
	case !carried:
		// rest is in the loop's read buffer, which the next read reuses.
		p.rbuf = append(make([]byte, 0, max(2*len(rest), 512)), rest...)
	case len(rest) == len(p.rbuf):
		// No frame completed: the partial frame stays where it is and
		// the next read appends to it.
	case cap(p.rbuf) > 64<<10 && len(rest) < cap(p.rbuf)/4:
		p.rbuf = append([]byte(nil), rest...) // let a large buffer go
	default:
		p.rbuf = p.rbuf[:copy(p.rbuf, rest)] // shift the tail to the front
	}
}

// ownBufFrame is the size from which a frame being received gets a buffer
// of its own (see loopPeer.rbuf).
const ownBufFrame = 32 << 10

// ingestOwned handles the large frame that fills p.rbuf[:p.want] (and
// nothing else): it is unmasked in place and its payload, a part of
// p.rbuf, is handed on; the buffer now belongs to the message.
func (p *loopPeer) ingestOwned() string {
	b := p.rbuf
	p.rbuf, p.want = nil, 0
	fin, op, hdr, length, code := parseWSHeader(b, p.max)
	if code != 0 {
		return p.fail(code)
	}
	if hdr == 0 || len(b) != hdr+length {
		return p.fail(closeProtocolError) // cannot happen: carry measured this frame
	}
	payload := b[hdr:]
	maskBytes(payload, payload, [4]byte(b[hdr-4:hdr]))
	return p.onWSFrame(fin, op, payload)
}

// onWSFrame handles one parsed frame; it returns what ingest returns.
// Text is checked for UTF-8 as a whole message (after reassembly), since
// a fragment boundary may split a character.
func (p *loopPeer) onWSFrame(fin bool, op byte, payload []byte) string {
	switch op {
	case opText, opBinary:
		if p.fragOp != 0 {
			return p.fail(closeProtocolError)
		}
		if !fin {
			p.fragOp, p.frag = op, payload
			return ""
		}
		return p.deliver(op, payload)
	case opCont:
		if p.fragOp == 0 {
			return p.fail(closeProtocolError)
		}
		if int64(len(p.frag)+len(payload)) > p.max {
			return p.fail(closeTooBig)
		}
		p.frag = append(p.frag, payload...)
		if !fin {
			return ""
		}
		op, msg := p.fragOp, p.frag
		p.frag, p.fragOp = nil, 0
		return p.deliver(op, msg)
	case opPing:
		_ = p.send([]frame{{data: payload, op: opPong}}, true)
		return ""
	case opPong:
		return ""
	case opClose:
		// A valid close is echoed and ends the connection cleanly; an
		// invalid one is answered with the error, never echoed.
		reply, clean := closeReply(payload)
		_ = p.send([]frame{{data: closePayload(reply), op: opClose}}, true)
		p.close(true)
		if clean {
			return reasonTransportClose
		}
		return reasonTransportError
	}
	return p.fail(closeProtocolError)
}

// deliver hands a complete message to the connection.
func (p *loopPeer) deliver(op byte, msg []byte) string {
	if op == opText && !utf8.Valid(msg) {
		return p.fail(closeInvalidPayload)
	}
	if !p.c.wsFrame(p, frame{data: msg, binary: op == opBinary}) {
		return reasonTransportError // the connection has ended or refused the probe
	}
	return ""
}

// fail closes the WebSocket with a close code (1002 protocol error, 1007
// text that is not UTF-8, 1009 message too big) and returns the reason the
// connection ends with.
func (p *loopPeer) fail(code uint16) string {
	_ = p.send([]frame{{data: closePayload(code), op: opClose}}, true)
	p.close(true)
	return reasonTransportError
}

// parseWSFrame reads one client frame from b. n is 0 when b holds an
// incomplete frame; code is a close code when the frame is not acceptable.
// The payload is unmasked into a new slice.
func parseWSFrame(b []byte, max int64) (fin bool, op byte, payload []byte, n int, code uint16) {
	fin, op, hdr, length, code := parseWSHeader(b, max)
	if code != 0 || hdr == 0 || len(b)-hdr < length {
		return false, 0, nil, 0, code
	}
	payload = make([]byte, length)
	maskBytes(payload, b[hdr:hdr+length], [4]byte(b[hdr-4:hdr]))
	return fin, op, payload, hdr + length, 0
}

// parseWSHeader reads the header of a client frame: hdr is its size
// (masking key included) and length the payload's, or hdr is 0 when b
// does not hold the whole header yet. code is a close code when the frame
// is not acceptable; a length over max is refused as soon as it is known.
func parseWSHeader(b []byte, max int64) (fin bool, op byte, hdr, length int, code uint16) {
	if len(b) < 2 {
		return
	}
	fin, op = b[0]&0x80 != 0, b[0]&0x0f
	if b[0]&0x70 != 0 || b[1]&0x80 == 0 { // reserved bits, or an unmasked client frame
		return false, 0, 0, 0, 1002
	}
	n := uint64(b[1] & 0x7f)
	hdr = 2
	switch n {
	case 126:
		if len(b) < 4 {
			return false, 0, 0, 0, 0
		}
		n, hdr = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return false, 0, 0, 0, 0
		}
		n, hdr = binary.BigEndian.Uint64(b[2:]), 10
	}
	if op >= 0x8 && (!fin || n > 125) {
		return false, 0, 0, 0, 1002
	}
	if n > uint64(max) {
		return false, 0, 0, 0, 1009
	}
	hdr += 4
	if len(b) < hdr {
		return false, 0, 0, 0, 0
	}
	return fin, op, hdr, int(n), 0
}

// wsFrameSize is the total size of the frame at the start of b (header and
// payload), or 0 when its header is incomplete or unacceptable (ingest
// has refused the latter already).
func wsFrameSize(b []byte) int {
	_, _, hdr, length, code := parseWSHeader(b, math.MaxInt64)
	if code != 0 || hdr == 0 {
		return 0
	}
	return hdr + length
}

// appendWSFrames encodes frames as unmasked server frames.
func appendWSFrames(dst []byte, fs []frame) []byte {
	for _, f := range fs {
		dst = appendWSHeader(dst, f)
		dst = append(dst, f.data...)
	}
	return dst
}

// appendWSHeader appends the header of f as an unmasked server frame (at
// most 10 bytes).
func appendWSHeader(dst []byte, f frame) []byte {
	op := byte(opText)
	if f.binary {
		op = opBinary
	}
	if f.op != 0 {
		op = f.op
	}
	dst = append(dst, 0x80|op)
	switch n := len(f.data); {
	case n < 126:
		dst = append(dst, byte(n))
	case n < 1<<16:
		dst = append(dst, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return dst
}
