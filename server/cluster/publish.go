package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is the node's own publishing connection to a single Redis
// (not a Redis Cluster, not TLS): the path of every frame to another node.
//
// Through go-redis, each frame cost a hand-off from the caller (the
// Socket.IO event loop, or the receiver) to a sender goroutine, then a
// PUBLISH that parked that goroutine until Redis replied: two goroutine
// wake-ups per frame on top of the network's, which on a lightly loaded
// node were most of a cross-node call's CPU. Here the caller writes the
// PUBLISH itself, pipelined on one connection, with a write that never
// waits (what the socket does not take at once is finished by the
// publisher's goroutine), and the replies are consumed in order and each
// frame settled where they are read: on the Poller's event loop (the
// server's Socket.IO loop, as for the subscription links), with one
// goroutine per connection that only enforces the reply deadline and
// ends the connection; without a Poller, on the connection's reader
// goroutine. The guarantees are those of the
// sender it replaces:
//
//   - Order: frames are written in the order of [Node.Send] calls, on one
//     connection, so Redis publishes them in that order; a frame retried
//     after a failure goes back in front of every frame not yet written.
//     A cancel never overtakes the call it cancels.
//   - At most once: a frame with no retry deadline (a request: published
//     twice it could run a tool twice) is written once; if its reply does
//     not arrive (the connection broke, Redis answered an error, no reply
//     within the command timeout) it fails and its onErr runs.
//   - Retry: a frame with a retry deadline (an answer, a broadcast) that
//     fails is written again on the next connection, until its deadline.
//   - Nothing blocks the caller: Send takes a mutex that is never held
//     across network I/O, and writes only what the socket takes at once.
//   - Ownership: the publisher's goroutine (reconnecting, flushing,
//     expiring) and each connection's reader end in close, which fails
//     whatever is still queued or unanswered.
//   - Bounded: a frame counts against the node's backlog (Config.MaxBacklog,
//     in bytes, see Reserve) from Send until its reply or its failure;
//     past the bound it fails at once with ErrBacklogFull.
//   - Sealed: a frame is sealed when Send builds its command; one written
//     again after a broken connection, or late from the backlog, is
//     sealed again first (auth.go's resealAfter).

// pubRetryBackoff is the pause between connection attempts while Redis is
// unreachable (and before a retry after a connection broke young).
const pubRetryBackoff = 100 * time.Millisecond

// pubMaxReply bounds one reply line: PUBLISH answers an integer, and an
// error reply is one short line.
const pubMaxReply = 64 << 10

// errPubClosed fails what is queued when the node closes.
var errPubClosed = errors.New("cluster: node closed")

// ErrBacklogFull fails a frame (its onErr is given it) when the frames
// already waiting to be published to other nodes hold [Config].MaxBacklog
// bytes: Redis is unreachable or not keeping up. It wraps
// [ErrUnavailable]. Counted in the server's metrics (failed frames), not
// logged one by one.
var ErrBacklogFull = fmt.Errorf("%w: backlog of frames to other nodes full", ErrUnavailable)

// backlog counts the bytes of the frames a node holds for publishing,
// against Config.MaxBacklog: the one rule every queue of frames follows.
type backlog struct {
	max  int64
	used atomic.Int64
}

// take counts cost against the bound and reports whether it fit.
func (b *backlog) take(cost int64) bool {
	for {
		u := b.used.Load()
		if u+cost > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+cost) {
			return true
		}
	}
}

func (b *backlog) give(cost int64) { b.used.Add(-cost) }

// Reserve counts a frame of cost bytes ([FrameCost]) against the node's
// backlog ([Config].MaxBacklog) for a queue of frames outside the node
// (the server's senders): [ErrBacklogFull] if it does not fit. Each
// successful Reserve is matched by one Release of the same cost when the
// frame is published or fails. [Node.Send] counts its frames itself.
func (n *Node) Reserve(cost int64) error {
	if !n.backlog.take(cost) {
		return ErrBacklogFull
	}
	return nil
}

// Release gives back what [Node.Reserve] counted.
func (n *Node) Release(cost int64) { n.backlog.give(cost) }

// Backlog reports the bytes of frames waiting to be published to other
// nodes, as [Node.Reserve] and [Node.Send] count them.
func (n *Node) Backlog() int64 { return n.backlog.used.Load() }

// errReply wraps an error reply from Redis to a PUBLISH.
var errReply = errors.New("cluster: Redis error reply")

// pubItem is one PUBLISH command.
type pubItem struct {
	cmd []byte
	// ch is the channel, and frame where the frame starts in cmd: a
	// retried frame is sealed again there.
	ch    string
	frame int
	// cost is what the frame counts against the node's backlog.
	cost int64
	// until is when a failed frame stops being retried; zero: at most once.
	until time.Time
	// writeBy is when a frame still waiting to be written fails (a
	// request while the connection is down).
	writeBy time.Time
	onErr   func(error)
	sent    time.Time // when it was written
}

// pubLink is a publishing connection as the publisher uses it: a
// net.Conn, or a descriptor read on a Poller's loop (fdLink, whose read
// deadline is kept by watch instead).
type pubLink interface {
	Write(b []byte) (int, error)
	SetWriteDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
	Close() error
}

// pubConn is one connection of the publisher and what was written on it.
type pubConn struct {
	c pubLink
	// direct writes what the socket takes at once, never waiting; nil:
	// no direct writes (the flusher writes all).
	direct func(b []byte) (int, error)
	// fl is the connection's descriptor when the Poller's loop reads it
	// (w its watch); nil when a reader goroutine does.
	fl   *fdLink
	w    Watching
	born time.Time
	// The loop's read buffer (polled only): buf[r:wr] is unread; done
	// is the loop's list of settled frames, reused.
	buf   []byte
	r, wr int
	done  []*pubItem
	// Guarded by publisher.mu:
	out      []byte     // bytes a direct write left over, for the flusher
	flushing bool       // the flusher is writing: no direct write now
	sent     []*pubItem // written (or in out), replies pending, in order
	head     int        // sent[head:] are pending
}

func (c *pubConn) pending() []*pubItem { return c.sent[c.head:] }

// publisher pipelines PUBLISH commands on one connection; see the top of
// this file.
type publisher struct {
	addr    string
	auth    []string // AUTH arguments, or nil
	name    string   // CLIENT SETNAME
	timeout time.Duration
	observe func(cmd string, d time.Duration, err error)
	n       *Node

	mu       sync.Mutex
	conn     *pubConn // nil while disconnected
	backlog  []*pubItem
	closed   bool
	nextDial time.Time
	lastErr  error

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newPublisher(n *Node, addr string, auth []string) *publisher {
	p := &publisher{addr: addr, auth: auth, name: "a2c-" + n.id + "-pub", timeout: n.cfg.OpTimeout,
		observe: n.cfg.Observe, n: n, wake: make(chan struct{}, 1)}
	if p.observe == nil {
		p.observe = func(string, time.Duration, error) {}
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// start connects once (so a node starts with its fast path in place; a
// failure is not fatal, the publisher keeps trying) and starts the
// publisher's goroutine.
func (p *publisher) start() {
	p.connect()
	p.wg.Add(1)
	go p.run()
}

// appendPublish appends the RESP encoding of PUBLISH ch <frame f>, f
// sealed by s for ch, and returns where the frame starts. The frame is
// encoded and sealed in place, in b: its length is known beforehand.
func appendPublish(b []byte, ch string, f *Frame, s *sealer) ([]byte, int) {
	b = append(b, "*3\r\n$7\r\nPUBLISH\r\n$"...)
	b = strconv.AppendInt(b, int64(len(ch)), 10)
	b = append(b, "\r\n"...)
	b = append(b, ch...)
	b = append(b, "\r\n$"...)
	b = strconv.AppendInt(b, int64(s.size(f)), 10)
	b = append(b, "\r\n"...)
	at := len(b)
	return append(s.appendFrame(b, ch, f), "\r\n"...), at
}

// appendCommand appends the RESP encoding of a command.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// publish queues one command (the frame cmd[frame:len(cmd)-2] for
// channel ch, of backlog cost cost) and writes it at once when it can.
// onErr (not nil) runs if the frame fails for good; it may run on the
// caller's goroutine before publish returns.
func (p *publisher) publish(cmd []byte, ch string, frame int, cost int64, until time.Time, onErr func(error)) {
	it := &pubItem{cmd: cmd, ch: ch, frame: frame, until: until, onErr: onErr}
	if !p.n.backlog.take(cost) {
		p.fail([]*pubItem{it}, ErrBacklogFull)
		return
	}
	it.cost = cost
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.fail([]*pubItem{it}, errPubClosed)
		return
	}
	c := p.conn
	if c == nil || len(p.backlog) > 0 || c.direct == nil {
		// The flusher writes it, after what is before it.
		if until.IsZero() {
			it.writeBy = time.Now().Add(p.timeout)
		}
		p.backlog = append(p.backlog, it)
		p.mu.Unlock()
		p.signal()
		return
	}
	it.sent = time.Now()
	busy := c.flushing || len(c.pending()) > 0
	p.addSentLocked(c, it)
	if until.IsZero() {
		it.cmd = nil // never written again
	}
	if busy {
		// Replies are awaited: the reader, woken by them, writes this with
		// whatever else queued meanwhile, in one write (or the flusher
		// does, after its own write).
		c.out = append(c.out, cmd...)
		p.mu.Unlock()
		return
	}
	n, err := c.direct(cmd)
	if err != nil {
		failed := p.breakLocked(c, fmt.Errorf("%w: publish: %w", ErrUnavailable, err))
		p.mu.Unlock()
		p.fail(failed, err)
		return
	}
	if n < len(cmd) {
		c.out = append(c.out, cmd[n:]...)
		p.mu.Unlock()
		p.signal()
		return
	}
	p.mu.Unlock()
}

// addSentLocked records an item written on c; the first one pending arms
// the reply deadline.
func (p *publisher) addSentLocked(c *pubConn, it *pubItem) {
	if len(c.pending()) == 0 {
		_ = c.c.SetReadDeadline(it.sent.Add(p.timeout))
	}
	c.sent = append(c.sent, it)
}

func (p *publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// breakLocked ends connection c after a failure: every frame written on
// it and not yet answered either goes back in front of the backlog (a
// frame that may be retried and has time left) or is returned, to fail.
func (p *publisher) breakLocked(c *pubConn, err error) []*pubItem {
	if p.conn != c {
		return nil
	}
	p.conn = nil
	p.lastErr = err
	_ = c.c.Close()
	// A connection that broke young is not dialled again at once: Redis
	// may refuse what it is sent (an error reply) every time.
	p.nextDial = c.born.Add(pubRetryBackoff)
	now := time.Now()
	var retry, failed []*pubItem
	for _, it := range c.pending() {
		if !p.closed && it.cmd != nil && it.until.After(now) {
			retry = append(retry, it)
		} else {
			failed = append(failed, it)
		}
	}
	c.sent, c.head, c.out = nil, 0, nil
	if len(retry) > 0 {
		p.backlog = append(retry, p.backlog...)
	}
	p.signal()
	return failed
}

// fail runs the onErr of frames that failed for good, off every lock,
// and gives back what they counted against the backlog.
func (p *publisher) fail(items []*pubItem, err error) {
	if len(items) == 0 {
		return
	}
	if !errors.Is(err, errPubClosed) && !errors.Is(err, ErrBacklogFull) {
		p.n.log.Warn("frames to other nodes failed: Redis unavailable", "frames", len(items), "err", err)
	}
	for _, it := range items {
		p.n.backlog.give(it.cost)
		p.observe("publish", 0, err)
		if it.onErr != nil {
			it.onErr(err)
		}
	}
}

// run is the publisher's goroutine: it connects (and reconnects), writes
// what direct writes could not, and fails the frames that waited past
// their deadline. It ends when the publisher closes.
func (p *publisher) run() {
	defer p.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
		if d := p.step(); d > 0 {
			t.Reset(d)
		}
	}
}

// step does what the publisher's goroutine has to do now and returns when
// to look again (0: only when woken).
func (p *publisher) step() time.Duration {
	p.mu.Lock()
	expired := p.expireLocked(time.Now())
	c, closed := p.conn, p.closed
	p.mu.Unlock()
	p.fail(expired, fmt.Errorf("%w: frames waited too long", ErrUnavailable))
	if closed {
		return 0
	}
	if c == nil {
		p.mu.Lock()
		wait := time.Until(p.nextDial)
		p.mu.Unlock()
		if wait > 0 {
			return wait
		}
		if !p.connect() {
			return pubRetryBackoff
		}
	}
	for p.flush() {
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.backlog) > 0 || p.conn == nil {
		return pubRetryBackoff
	}
	return 0
}

// expireLocked removes from the backlog the frames whose deadline passed.
func (p *publisher) expireLocked(now time.Time) []*pubItem {
	var out []*pubItem
	keep := p.backlog[:0]
	for _, it := range p.backlog {
		by := it.until
		if by.IsZero() {
			by = it.writeBy
		}
		if now.After(by) {
			out = append(out, it)
			continue
		}
		keep = append(keep, it)
	}
	clear(p.backlog[len(keep):])
	p.backlog = keep
	return out
}

// flush writes the backlog and the bytes a direct write left, with a
// deadline, off the mutex (direct writes wait in the backlog meanwhile).
// It reports whether it wrote something (there may be more).
func (p *publisher) flush() bool {
	p.mu.Lock()
	c := p.conn
	if c == nil || c.flushing || (len(c.out) == 0 && len(p.backlog) == 0) {
		p.mu.Unlock()
		return false
	}
	buf := c.out
	c.out = nil
	now := time.Now()
	for _, it := range p.backlog {
		// Written late or again: a seal older than resealAfter is
		// renewed, so the receiver takes it for a new frame (a retry is
		// not a replay) within its clock window.
		p.n.seal.reseal(it.cmd[it.frame:len(it.cmd)-2], it.ch)
		buf = append(buf, it.cmd...)
		it.sent = now
		if it.until.IsZero() {
			it.cmd = nil
		}
		p.addSentLocked(c, it)
	}
	clear(p.backlog)
	p.backlog = p.backlog[:0]
	c.flushing = true
	p.mu.Unlock()

	_ = c.c.SetWriteDeadline(time.Now().Add(p.timeout))
	_, err := c.c.Write(buf)
	// Cleared at once: the callers' direct writes go through the same
	// descriptor (RawConn.Write), which refuses to write at all once a
	// write deadline has passed.
	_ = c.c.SetWriteDeadline(time.Time{})

	p.mu.Lock()
	c.flushing = false
	var failed []*pubItem
	if err != nil {
		err = fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
		failed = p.breakLocked(c, err)
	}
	p.mu.Unlock()
	p.fail(failed, err)
	return err == nil
}

// connect dials Redis, authenticates and names the connection, and
// starts its reader. It reports whether the publisher is connected.
func (p *publisher) connect() bool {
	c, err := p.dial()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.nextDial = time.Now().Add(pubRetryBackoff)
		if p.lastErr == nil || p.lastErr.Error() != err.Error() {
			p.n.log.Debug("publisher: Redis unreachable", "err", err)
		}
		p.lastErr = err
		return false
	}
	if p.closed {
		_ = c.c.Close()
		if c.fl != nil {
			// Off p.mu: Stop waits for a ready under way, which may be
			// settling replies under p.mu.
			p.mu.Unlock()
			c.w.Stop()
			c.fl.release()
			p.mu.Lock()
		}
		return false
	}
	p.conn = c
	p.lastErr = nil
	p.wg.Add(1)
	if c.fl != nil {
		go p.watch(c)
	} else {
		go p.read(c)
	}
	return true
}

func (p *publisher) dial() (*pubConn, error) {
	nc, err := dialRedis(p.ctx, p.addr, nil, p.auth, p.name, p.timeout)
	if err != nil {
		return nil, err
	}
	c := &pubConn{c: nc, born: time.Now()}
	if p.n.cfg.Poller != nil {
		if fl, err := takeLink(nc); err == nil {
			c.c, c.fl, c.direct, c.buf = fl, fl, fl.writeSome, make([]byte, 4096)
			if c.w, err = p.n.cfg.Poller.Watch(fl.fd, func() bool { return p.ready(c) }); err == nil {
				_ = nc.Close() // the duplicate keeps the socket; Go's poller lets go of it
				return c, nil
			}
			fl.discard()
			c.c, c.fl, c.direct, c.buf = nc, nil, nil, nil
		}
	}
	if sc, ok := nc.(syscall.Conn); ok && directWrites {
		if raw, err := sc.SyscallConn(); err == nil {
			c.direct = func(b []byte) (int, error) { return writeNow(raw, b) }
		}
	}
	return c, nil
}

// read consumes the replies on c, in order, and settles the frames they
// answer; an error reply fails its own frame only. It breaks the
// connection on a malformed reply, a read error, or no reply within the
// command timeout (the read deadline).
func (p *publisher) read(c *pubConn) {
	defer p.wg.Done()
	buf := make([]byte, 4096)
	var done []*pubItem
	r, w := 0, 0
	for {
		var bad error
		r, done, bad = p.replies(c, buf[:w], r, done)
		if bad != nil {
			p.broken(c, bad)
			return
		}
		if buf, r, w, bad = compactReplies(buf, r, w); bad != nil {
			p.broken(c, bad)
			return
		}
		k, err := c.c.(net.Conn).Read(buf[w:])
		w += k
		if err != nil && k == 0 {
			p.broken(c, fmt.Errorf("%w: publish: %w", ErrUnavailable, err))
			return
		}
	}
}

// replies applies the whole reply lines in buf[r:] (settling their frames,
// failing a refused one) and returns where the unread bytes start, done
// emptied for reuse, and an error that breaks the connection.
func (p *publisher) replies(c *pubConn, buf []byte, r int, done []*pubItem) (int, []*pubItem, error) {
	ok := 0
	var bad error
	for bad == nil {
		i := bytes.IndexByte(buf[r:], '\n')
		if i < 0 {
			break
		}
		line := buf[r : r+i+1]
		r += i + 1
		switch {
		case len(line) < 3 || line[len(line)-2] != '\r':
			bad = fmt.Errorf("%w: malformed reply %q", errReply, line)
		case line[0] == ':' || line[0] == '+':
			ok++
		case line[0] == '-':
			// Redis refused this one command (an ACL, say); the stream
			// is still in step, so only its frame fails, and it is not
			// retried: it would be refused again.
			if ok > 0 {
				if done, bad = p.settle(c, ok, done); bad != nil {
					break
				}
				ok = 0
			}
			it, err := p.refused(c)
			switch {
			case it == nil:
				bad = fmt.Errorf("%w: more replies than commands", errReply)
			default:
				p.fail([]*pubItem{it}, fmt.Errorf("%w: %s", errReply, line[1:len(line)-2]))
				bad = err
			}
		default:
			bad = fmt.Errorf("%w: unexpected reply %q", errReply, line)
		}
	}
	if ok > 0 {
		// The replies before a malformed one still settle their frames:
		// Redis published them.
		var err error
		if done, err = p.settle(c, ok, done); bad == nil {
			bad = err
		}
	}
	return r, done, bad
}

// compactReplies makes room after the unread bytes buf[r:w] for the next
// read: it moves them down, or doubles buf (up to pubMaxReply for one
// line).
func compactReplies(buf []byte, r, w int) ([]byte, int, int, error) {
	switch {
	case r == w:
		return buf, 0, 0, nil
	case w < len(buf):
		return buf, r, w, nil
	case r > 0:
		return buf, 0, copy(buf, buf[r:w]), nil
	case len(buf) >= pubMaxReply:
		return buf, r, w, fmt.Errorf("%w: reply too long", errReply)
	}
	return append(buf, make([]byte, len(buf))...), r, w, nil
}

// ready runs on the Poller's loop each time polled connection c is
// readable: one read, then the replies it completes are applied (as read
// does on a reader goroutine). It returns false, with the reason in
// c.fl.err, when the connection is broken; watch then ends it.
func (p *publisher) ready(c *pubConn) bool {
	var err error
	if c.buf, c.r, c.wr, err = compactReplies(c.buf, c.r, c.wr); err != nil {
		c.fl.err = err
		return false
	}
	k, err := c.fl.read(c.buf[c.wr:])
	switch {
	case k > 0:
		c.wr += k
	case errors.Is(err, errWouldBlock):
		return true
	case err == nil:
		c.fl.err = fmt.Errorf("%w: publish: %w", ErrUnavailable, io.EOF)
		return false
	default:
		c.fl.err = fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
		return false
	}
	if c.r, c.done, err = p.replies(c, c.buf[:c.wr], c.r, c.done); err != nil {
		c.fl.err = err
		return false
	}
	return true
}

// watch is the goroutine of polled connection c: the loop reads it, and
// this goroutine breaks it when no reply came within the command timeout
// of the oldest frame awaiting one (checked every quarter of it), or
// when the loop found it broken, and closes its descriptor once the
// loop has let go of it.
func (p *publisher) watch(c *pubConn) {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.timeout/4, time.Millisecond))
	defer tick.Stop()
	var err error
	for err == nil {
		select {
		case <-c.w.Done():
			c.w.Stop() // returns once ready has: fl.err is set
			if err = c.fl.err; err == nil {
				err = fmt.Errorf("%w: publish: %w", ErrUnavailable, errLoopClosed)
			}
		case <-p.ctx.Done():
			err = errPubClosed
		case now := <-tick.C:
			p.mu.Lock()
			if pending := c.pending(); len(pending) > 0 && now.Sub(pending[0].sent) > p.timeout {
				err = fmt.Errorf("%w: publish: no reply within %v", ErrUnavailable, p.timeout)
			}
			p.mu.Unlock()
		}
	}
	c.w.Stop()
	p.broken(c, err)
	c.fl.release()
}

// settle marks the first ok pending frames of c as published, then
// writes what queued behind them (see publish). It returns done, emptied
// for reuse, or an error that breaks the connection.
func (p *publisher) settle(c *pubConn, ok int, done []*pubItem) ([]*pubItem, error) {
	now := time.Now()
	p.mu.Lock()
	pending := c.pending()
	if ok > len(pending) {
		p.mu.Unlock()
		return done, fmt.Errorf("%w: more replies than commands", errReply)
	}
	done = append(done[:0], pending[:ok]...)
	clear(pending[:ok])
	c.head += ok
	if rest := c.pending(); len(rest) == 0 {
		c.sent, c.head = c.sent[:0], 0
		_ = c.c.SetReadDeadline(time.Time{})
	} else {
		oldest := rest[0]
		if c.head >= 1024 && c.head*2 >= len(c.sent) {
			// Move the pending ones down (rest aliases what is cleared).
			k := copy(c.sent, rest)
			clear(c.sent[k:])
			c.sent, c.head = c.sent[:k], 0
		}
		_ = c.c.SetReadDeadline(oldest.sent.Add(p.timeout))
	}
	err := p.writeOutLocked(c)
	p.mu.Unlock()
	for i, it := range done {
		p.n.backlog.give(it.cost)
		p.observe("publish", now.Sub(it.sent), nil)
		done[i] = nil
	}
	return done[:0], err
}

// writeOutLocked writes what queued on c while replies were awaited (see
// publish), now that one has come; what the socket does not take goes to
// the publisher's goroutine.
func (p *publisher) writeOutLocked(c *pubConn) error {
	if len(c.out) == 0 || c.flushing {
		return nil
	}
	if c.direct == nil {
		p.signal()
		return nil
	}
	n, err := c.direct(c.out)
	if err != nil {
		return fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	}
	c.out = c.out[:copy(c.out, c.out[n:])]
	if len(c.out) > 0 {
		p.signal()
	}
	return nil
}

// refused takes the oldest frame awaiting a reply on c, which Redis
// answered with an error (nil if none awaits), and writes what queued
// behind it.
func (p *publisher) refused(c *pubConn) (*pubItem, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pending := c.pending()
	if len(pending) == 0 {
		return nil, nil
	}
	it := pending[0]
	pending[0] = nil
	c.head++
	if rest := c.pending(); len(rest) == 0 {
		c.sent, c.head = c.sent[:0], 0
		_ = c.c.SetReadDeadline(time.Time{})
	} else {
		_ = c.c.SetReadDeadline(rest[0].sent.Add(p.timeout))
	}
	return it, p.writeOutLocked(c)
}

// broken ends connection c after a failure seen by its reader.
func (p *publisher) broken(c *pubConn, err error) {
	p.mu.Lock()
	failed := p.breakLocked(c, err)
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.n.log.Debug("publisher: connection lost", "err", err)
	}
	p.fail(failed, err)
}

// close stops the publisher: what is queued or unanswered fails (onErr),
// and its goroutines end before close returns.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	var failed []*pubItem
	if c := p.conn; c != nil {
		failed = p.breakLocked(c, errPubClosed)
	}
	failed = append(failed, p.backlog...)
	p.backlog = nil
	p.mu.Unlock()
	p.cancel()
	p.fail(failed, errPubClosed)
	p.wg.Wait()
}

// Pipelined reports whether the node sends frames with [Node.Send] (a
// single Redis without TLS). On a Redis Cluster (or with TLS), frames go
// with [Node.PublishBatch] instead.
func (n *Node) Pipelined() bool { return n.pub != nil }

// Send publishes f, sealed, on node's channel (on its office's channel
// when node is "", see [Node.PublishOffice]), in the order of Send calls,
// and never blocks on the network. A zero until sends it at most once: if
// it may not have been published (Redis unreachable, an error reply, no
// reply in time), onErr runs. With until set it is sent again while Redis
// is away, until then, and onErr runs only if that fails too. A frame
// that does not fit in the node's backlog ([Config].MaxBacklog) fails at
// once with [ErrBacklogFull]; other failures wrap [ErrUnavailable].
// onErr must not be nil; it may run before Send returns, and never under
// a lock of the node. Only for a node that is [Node.Pipelined].
func (n *Node) Send(node string, f *Frame, until time.Time, onErr func(error)) {
	ch := officeChannel(f.Office)
	if node != "" {
		ch = nodeChannel(node)
	}
	cmd, at := appendPublish(make([]byte, 0, 48+len(ch)+frameLen(f)+sealSize), ch, f, n.seal)
	n.pub.publish(cmd, ch, at, FrameCost(f), until, onErr)
}

// Publish sends one frame, sealed, to a node's channel: one PUBLISH
// (SPUBLISH on a Redis Cluster), nothing else. It reports ErrUnavailable when Redis
// fails; a frame to a node that is gone is accepted by Redis and lost, so
// the caller's deadline (or the node's sweep) ends the call.
func (n *Node) Publish(ctx context.Context, node string, f *Frame) error {
	c, cancel := n.op(ctx)
	defer cancel()
	ch := nodeChannel(node)
	b := n.seal.appendFrame(nil, ch, f)
	var err error
	if n.cluster {
		err = n.rdb.SPublish(c, ch, b).Err()
	} else {
		err = n.rdb.Publish(c, ch, b).Err()
	}
	if err != nil {
		return fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	}
	return nil
}

// PublishBatch sends several frames, each sealed, to one node's channel
// in one pipelined round trip, in order: one PUBLISH (SPUBLISH) each,
// nothing else. A batch sent again after a failure is sealed again. The server's sender per destination node uses it, so frames that
// queue up under load share a round trip and keep their order. With node
// "", each frame goes to its office's channel instead (see
// [Node.PublishOffice]).
func (n *Node) PublishBatch(ctx context.Context, node string, fs []*Frame) error {
	if len(fs) == 1 && node != "" {
		return n.Publish(ctx, node, fs[0])
	}
	c, cancel := n.op(ctx)
	defer cancel()
	_, err := n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for _, f := range fs {
			ch := nodeChannel(node)
			if node == "" {
				ch = officeChannel(f.Office)
			}
			b := n.seal.appendFrame(nil, ch, f)
			if n.cluster {
				p.SPublish(c, ch, b)
			} else {
				p.Publish(c, ch, b)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	}
	return nil
}

// PublishOffice sends a [KindBroadcast] frame on its office's channel,
// which every node that follows the office receives, the sender's
// included (it ignores its own). A node follows an office before its
// first member's join script runs, so a broadcast reaches a member whose
// join was answered even if the sending node has not seen that join yet;
// a frame to each node of the sender's copy could miss it.
func (n *Node) PublishOffice(ctx context.Context, f *Frame) error {
	return n.PublishBatch(ctx, "", []*Frame{f})
}
