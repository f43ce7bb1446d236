package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the node's own subscription client: the connections that
// receive the channels a node follows (its node channel, the channels of
// its offices), written for what go-redis's PubSub did badly here:
//
//   - Cost: a message is decoded into a reused buffer and handed to
//     Deliver where it was read, with no allocation and no hand-off to
//     another goroutine: on the connection's reader goroutine, or with a
//     Poller (the server's Socket.IO event loop) on the loop itself, so
//     that a frame is read, checked and written to the WebSocket it goes
//     to by the one goroutine that serves the WebSockets (see
//     readPolled).
//   - Connections: on a Redis Cluster one connection per master that
//     owns the slot of a followed channel, carrying every such channel
//     (SSUBSCRIBE, one command per slot), instead of one per channel. On
//     a single Redis, one connection (SUBSCRIBE).
//   - Loss: a connection that breaks is made again and its channels
//     subscribed again, and then Resumed names them: whatever was
//     published in between is lost, and the caller reloads. go-redis
//     resubscribed silently.
//
// # Ownership and locks
//
// Three kinds of goroutine, all started by the subscriber and ended by
// Close: one per connection (dial, subscribe what the connection
// carries, read until it breaks, redial with backoff; with a Poller the
// loop reads, and this goroutine only watches the link's health), and one manager
// that decides which connection carries which channel (on a Redis
// Cluster: reads the slot map, follows -MOVED and the sunsubscribe a
// master sends when a slot leaves it).
//
// subscriber.mu guards every piece of state: the channels wanted, the
// connections, what each connection carries and the replies it awaits.
// It is never held across network I/O, with one exception that keeps the
// order of commands: a goroutine that decided to write on a connection
// takes that connection's wmu while still holding mu, then writes after
// releasing mu. So the commands on one connection are written in the
// order their decisions were made (a SUBSCRIBE never overtakes the
// UNSUBSCRIBE decided before it), and a write waits at most OpTimeout
// (its deadline). Lock order: mu, then wmu; the reader takes wmu alone,
// for a PING.
//
// # One channel's life
//
// A wanted channel (subWant) is placed on the connection of its slot's
// master (the only connection on a single Redis). On that connection it
// is idle (not asked for on the current connection), sent (SUBSCRIBE
// written, no confirmation yet) or confirmed. When its connection breaks,
// a confirmed channel becomes lost; every channel of the connection is
// idle again and is sent on the next connection. When a lost channel is
// confirmed again, and no other lost channel of that connection still
// waits, Resumed is called with the channels that came back. A channel
// moved to another master (slot migration) is lost the same way.

const (
	// subPingAfter: a connection silent this long is sent a PING.
	subPingAfter = 2 * time.Second
	// subDeadAfter: a connection silent this long (no PONG either) is
	// broken.
	subDeadAfter = 10 * time.Second
	// subBackoffMin and subBackoffMax bound the wait before a redial.
	subBackoffMin = 100 * time.Millisecond
	subBackoffMax = 2 * time.Second
	// subRefreshEvery is the least time between two reads of the slot
	// map: a storm of -MOVED replies or of failed dials is one read.
	subRefreshEvery = 100 * time.Millisecond
	// subBatch bounds the channels of one SUBSCRIBE command.
	subBatch = 256
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// slotsMaxElems bounds the CLUSTER SLOTS reply: a range of one slot
	// per entry, each with a master and a replica.
	slotsMaxElems = clusterSlots * 32
)

// errSubClosed ends a Subscribe when the subscriber closes.
var errSubClosed = fmt.Errorf("%w: subscriber closed", ErrUnavailable)

// pingCmd is PING; in subscribed mode Redis answers ["pong", ""].
var pingCmd = []byte("*1\r\n$4\r\nPING\r\n")

// subscriberConfig is what a subscriber connects to and whom it tells.
type subscriberConfig struct {
	// Addrs: one host:port for a single Redis; the seed nodes of a Redis
	// Cluster.
	Addrs []string
	// Cluster: Redis Cluster, with shard channels (SSUBSCRIBE) grouped
	// by the master that owns their slot.
	Cluster            bool
	Username, Password string
	TLS                *tls.Config   // nil: plain TCP
	OpTimeout          time.Duration // dial, setup and subscribe confirmation; 0: 3 s
	// Deliver is called for each message where its connection is read
	// (so in order per connection): on the connection's reader
	// goroutine, or with a Poller on the Poller's loop. payload aliases
	// the read buffer and is valid only during the call. Deliver must
	// not block (the connection's reads wait, and on a loop everything
	// else the loop serves) nor call Close.
	Deliver func(channel string, payload []byte)
	// Resumed is called with channels that are subscribed again after
	// they were lost: their connection broke (or their slot moved, or
	// their Subscribe failed) and messages published meanwhile are lost,
	// so the caller reloads what they carry. It runs where the
	// confirmation was read (a goroutine of the subscriber, or the
	// Poller's loop), never under the subscriber's locks, possibly
	// concurrently for channels of different connections; it must not
	// block nor call Close.
	Resumed    func(channels []string)
	Logger     *slog.Logger
	ClientName string // CLIENT SETNAME on each connection; "": none
	// Poller, if set, reads plain TCP connections on its loop (Deliver
	// then runs there); see Config.Poller.
	Poller Poller
}

// subLink is a subscription connection as its writers see it: a net.Conn,
// or a descriptor read on a Poller's loop (fdLink).
type subLink interface {
	Write(b []byte) (int, error)
	SetWriteDeadline(t time.Time) error
	// Close ends the link; its reader then finds it broken.
	Close() error
}

// subscriber keeps subscriptions to a Redis (or a Redis Cluster): see the
// top of this file. Its methods are safe for concurrent use.
type subscriber struct {
	// breaks counts the connections that broke while carrying channels
	// (see Node.SubscriptionBreaks).
	breaks    atomic.Uint64
	cfg       subscriberConfig
	log       *slog.Logger
	auth      []string
	opTimeout time.Duration
	// pingAfter and deadAfter are subPingAfter and subDeadAfter (tests
	// shorten them before the first Subscribe).
	pingAfter, deadAfter time.Duration

	mu      sync.Mutex
	closed  bool
	wanted  map[string]*subWant
	conns   map[string]*subConn // by address
	dirty   []*subWant          // wants the manager must place
	owners  []string            // cluster: slot -> master address; nil: not read yet
	refresh bool                // read the slot map again (cluster), or just wait, before placing
	lastErr error               // the last failure to connect, for Subscribe's error

	lastRefresh time.Time // owned by the manager's goroutine

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type wantState uint8

const (
	wantIdle      wantState = iota // not asked for on its connection's current link
	wantSent                       // (S)SUBSCRIBE written, not confirmed yet
	wantConfirmed                  // confirmed by Redis
)

// subWant is one wanted channel. Guarded by subscriber.mu.
type subWant struct {
	ch    string
	slot  int
	conn  *subConn // the connection that carries it; nil: not placed
	state wantState
	// lost: it was (or was meant to be) received and is not now: Resumed
	// names it once it is confirmed again.
	lost bool
	// ready is closed when the channel is confirmed, or dropped; a new
	// one is made when a confirmed channel is lost.
	ready chan struct{}
	err   error // why Redis refused it (it is dropped)
}

// subCmd is one (S)SUBSCRIBE or (S)UNSUBSCRIBE written, whose replies
// (one per channel, in order, or one error) are awaited.
type subCmd struct {
	unsub bool
	chans []string
	next  int // index in chans of the next reply
}

// subConn is one subscription connection, and the goroutine that keeps
// it: to one Redis, or to one master of a Redis Cluster.
type subConn struct {
	addr string

	// Guarded by subscriber.mu:
	nc          subLink             // nil while (re)connecting
	wants       map[string]*subWant // the channels it carries
	cmds        []subCmd            // written on nc, replies awaited, in order
	lostPending int                 // wants here with lost set
	resumed     []string            // lost wants confirmed here, for Resumed
	stopped     bool                // it carries nothing: the goroutine ends

	wmu sync.Mutex // orders writes on nc; see the top of this file

	// Owned by the connection's goroutine: the name of each channel
	// confirmed on the current link, so Deliver gets a string without
	// allocating one per message; a message for a channel not here is
	// dropped.
	names map[string]string
}

// newSubscriber returns a subscriber with nothing subscribed; it connects
// on the first Subscribe.
func newSubscriber(cfg subscriberConfig) *subscriber {
	s := &subscriber{cfg: cfg, log: cfg.Logger, auth: authArgs(cfg.Username, cfg.Password),
		opTimeout: cfg.OpTimeout, pingAfter: subPingAfter, deadAfter: subDeadAfter,
		wanted: make(map[string]*subWant), conns: make(map[string]*subConn), kick: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opTimeout <= 0 {
		s.opTimeout = 3 * time.Second
	}
	if s.cfg.Deliver == nil {
		s.cfg.Deliver = func(string, []byte) {}
	}
	if s.cfg.Resumed == nil {
		s.cfg.Resumed = func([]string) {}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.manage()
	return s
}

// Subscribe adds channels and returns once Redis has confirmed each of
// them. A channel already subscribed costs nothing; subscriptions are a
// set (one Unsubscribe ends a channel subscribed twice). On failure
// (Redis unreachable past OpTimeout, ctx done, the subscriber closed) it
// returns an error wrapping [ErrUnavailable], and the channels stay
// wanted: they are subscribed when Redis is back, and then named to
// Resumed, as their messages until then are lost. A channel Redis refuses
// (an ACL, say) is dropped, and its error returned; Redis refuses a whole
// command, so the channels sent with it (of the same call, or of calls at
// the same moment) are dropped too, each Subscribe getting the error. A channel that
// Unsubscribe removes while Subscribe waits counts as done.
func (s *subscriber) Subscribe(ctx context.Context, chs ...string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errSubClosed
	}
	wants := make([]*subWant, 0, len(chs))
	readies := make([]chan struct{}, 0, len(chs))
	for _, ch := range chs {
		w := s.wanted[ch]
		if w == nil {
			w = &subWant{ch: ch, slot: keySlot(ch), ready: make(chan struct{})}
			s.wanted[ch] = w
			s.dirty = append(s.dirty, w)
		}
		wants = append(wants, w)
		readies = append(readies, w.ready)
	}
	s.mu.Unlock()
	s.wakeManager()

	t := time.NewTimer(s.opTimeout)
	defer t.Stop()
	var fail error
wait:
	for _, r := range readies {
		select {
		case <-r:
		case <-ctx.Done():
			fail = fmt.Errorf("%w: subscribe: %w", ErrUnavailable, context.Cause(ctx))
			break wait
		case <-t.C:
			fail = fmt.Errorf("%w: subscribe: not confirmed within %v", ErrUnavailable, s.opTimeout)
			break wait
		case <-s.ctx.Done():
			return errSubClosed
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fail != nil {
		if s.lastErr != nil {
			fail = fmt.Errorf("%w (last: %w)", fail, s.lastErr)
		}
		// Still wanted: once confirmed, Resumed names them, so the caller
		// learns when their messages flow.
		for _, w := range wants {
			if s.wanted[w.ch] == w && w.state != wantConfirmed {
				s.setLostLocked(w)
			}
		}
		return fail
	}
	var errs []error
	for _, w := range wants {
		if w.err != nil {
			errs = append(errs, w.err)
		}
	}
	return errors.Join(errs...)
}

// Unsubscribe removes channels. Once Redis has confirmed the removal no
// message of theirs is delivered; one already on its way may still be.
func (s *subscriber) Unsubscribe(chs ...string) {
	s.mu.Lock()
	var out subWrites
	var unsub map[*subConn][]*subWant
	for _, ch := range chs {
		w := s.wanted[ch]
		if w == nil {
			continue
		}
		delete(s.wanted, ch)
		closeReady(w)
		c, state := w.conn, w.state
		if c == nil {
			continue
		}
		s.detachLocked(w)
		if c.nc != nil && state != wantIdle {
			if unsub == nil {
				unsub = make(map[*subConn][]*subWant)
			}
			unsub[c] = append(unsub[c], w)
		}
	}
	for c, ws := range unsub {
		if len(c.wants) > 0 {
			s.sendLocked(&out, c, true, ws)
		}
	}
	s.stopIdleLocked()
	s.mu.Unlock()
	out.flush(s)
}

// Conns is the number of connections that are up.
func (s *subscriber) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c.nc != nil {
			n++
		}
	}
	return n
}

// Close closes every connection and returns when every goroutine of the
// subscriber has ended; a Subscribe waiting fails. It must not be called
// from Deliver or Resumed.
func (s *subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, c := range s.conns {
			s.stopLocked(c)
		}
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *subscriber) wakeManager() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func closeReady(w *subWant) {
	select {
	case <-w.ready:
	default:
		close(w.ready)
	}
}

// attachLocked places w on c; detachLocked takes it off. With
// setLostLocked they keep c.lostPending the count of lost wants on c.
func (s *subscriber) attachLocked(c *subConn, w *subWant) {
	w.conn, w.state = c, wantIdle
	c.wants[w.ch] = w
	if w.lost {
		c.lostPending++
	}
}

func (s *subscriber) detachLocked(w *subWant) {
	c := w.conn
	if c == nil {
		return
	}
	delete(c.wants, w.ch)
	if w.lost {
		c.lostPending--
	}
	w.conn, w.state = nil, wantIdle
}

// setLostLocked marks w lost: not received now, to be named to Resumed
// when it is confirmed again. A confirmed w is no longer ready.
func (s *subscriber) setLostLocked(w *subWant) {
	if w.state == wantConfirmed {
		w.ready = make(chan struct{})
		w.state = wantIdle
	}
	if !w.lost {
		w.lost = true
		if w.conn != nil {
			w.conn.lostPending++
		}
	}
}

// takeResumedLocked returns the channels to name to Resumed for c, once
// no lost channel of c awaits its confirmation.
func takeResumedLocked(c *subConn) []string {
	if c.lostPending > 0 || len(c.resumed) == 0 {
		return nil
	}
	r := c.resumed
	c.resumed = nil
	return r
}

// stopLocked ends connection c: its goroutine ends, and the manager makes
// a new one if a channel of its master is wanted again.
func (s *subscriber) stopLocked(c *subConn) {
	c.stopped = true
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
	if s.conns[c.addr] == c {
		delete(s.conns, c.addr)
	}
}

// stopIdleLocked stops the connections that carry no channel.
func (s *subscriber) stopIdleLocked() {
	for _, c := range s.conns {
		if len(c.wants) == 0 {
			s.stopLocked(c)
		}
	}
}

// subWrites collects commands to write on connections, each under its
// wmu taken while subscriber.mu was held; flush writes them.
type subWrites struct {
	conns []*subConn
	ncs   []subLink
	bufs  [][]byte
}

func (o *subWrites) add(c *subConn, cmd []byte) {
	for i, x := range o.conns {
		if x == c {
			o.bufs[i] = append(o.bufs[i], cmd...)
			return
		}
	}
	c.wmu.Lock()
	o.conns, o.ncs, o.bufs = append(o.conns, c), append(o.ncs, c.nc), append(o.bufs, cmd)
}

// flush writes, off subscriber.mu; a failed write closes the connection,
// which its reader then finds broken.
func (o *subWrites) flush(s *subscriber) {
	for i, c := range o.conns {
		nc := o.ncs[i]
		_ = nc.SetWriteDeadline(time.Now().Add(s.opTimeout))
		if _, err := nc.Write(o.bufs[i]); err != nil {
			_ = nc.Close()
		}
		c.wmu.Unlock()
	}
}

// sendLocked writes (S)SUBSCRIBE, or with unsub (S)UNSUBSCRIBE, of ws on
// c, which is up: one command per slot on a Redis Cluster (a shard
// channel command may not cross slots), at most subBatch channels each.
func (s *subscriber) sendLocked(out *subWrites, c *subConn, unsub bool, ws []*subWant) {
	if len(ws) == 0 {
		return
	}
	name := "SUBSCRIBE"
	if s.cfg.Cluster {
		name = "SSUBSCRIBE"
	}
	if unsub {
		name = strings.Replace(name, "SUB", "UNSUB", 1)
	}
	slices.SortFunc(ws, func(a, b *subWant) int { return a.slot - b.slot })
	var buf []byte
	for len(ws) > 0 {
		n := 1
		for n < len(ws) && n < subBatch && (!s.cfg.Cluster || ws[n].slot == ws[0].slot) {
			n++
		}
		args := make([]string, 0, n+1)
		args = append(args, name)
		for _, w := range ws[:n] {
			args = append(args, w.ch)
			if !unsub {
				w.state = wantSent
			}
		}
		buf = appendCommand(buf, args...)
		c.cmds = append(c.cmds, subCmd{unsub: unsub, chans: args[1:]})
		ws = ws[n:]
	}
	out.add(c, buf)
}

// manage is the manager's goroutine: it places the wanted channels on
// connections (see place) when woken, and again after a delay while
// something could not be placed.
func (s *subscriber) manage() {
	defer s.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
		if retry := s.place(&backoff); retry > 0 {
			t.Reset(retry)
		}
	}
}

// place reads the slot map when it must (a Redis Cluster), then puts each
// channel waiting for it on the connection to its owner, starting that
// connection if needed, and moves a channel whose owner changed. It
// returns when to try again (0: when woken).
func (s *subscriber) place(backoff *time.Duration) time.Duration {
	s.mu.Lock()
	need := s.refresh || (s.cfg.Cluster && s.owners == nil)
	s.mu.Unlock()
	if need {
		// A retry (a -MOVED, a cluster or a Redis busy) waits a little, so
		// a reply that keeps coming costs one round per subRefreshEvery.
		if wait := subRefreshEvery - time.Since(s.lastRefresh); wait > 0 {
			return wait
		}
		s.lastRefresh = time.Now()
		var owners []string
		if s.cfg.Cluster {
			var err error
			if owners, err = s.fetchSlots(); err != nil {
				s.mu.Lock()
				s.lastErr = err
				s.mu.Unlock()
				s.log.Debug("subscriber: cluster slots unavailable", "err", err)
				*backoff = min(max(2**backoff, subBackoffMin), subBackoffMax)
				return *backoff
			}
			*backoff = 0
		}
		s.mu.Lock()
		s.refresh = false
		if owners != nil {
			s.owners = owners
			// Every channel is checked against the new map.
			s.dirty = s.dirty[:0]
			for _, w := range s.wanted {
				s.dirty = append(s.dirty, w)
			}
		}
		s.mu.Unlock()
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0
	}
	var out subWrites
	send := make(map[*subConn][]*subWant)
	var unsub map[*subConn][]*subWant
	retry := time.Duration(0)
	for _, w := range s.dirty {
		if s.wanted[w.ch] != w {
			continue // unsubscribed meanwhile
		}
		owner := ""
		switch {
		case !s.cfg.Cluster:
			owner = s.cfg.Addrs[0]
		case s.owners != nil:
			owner = s.owners[w.slot]
		}
		if owner == "" {
			// No master serves the slot (a cluster being changed): read
			// the map again in a moment.
			s.refresh = true
			retry = subRefreshEvery
			continue
		}
		if c := w.conn; c != nil && c.addr != owner {
			// The slot moved: the channel is lost until the new owner
			// confirms it.
			if w.state != wantIdle {
				if c.nc != nil {
					if unsub == nil {
						unsub = make(map[*subConn][]*subWant)
					}
					unsub[c] = append(unsub[c], w)
				}
				if w.state == wantConfirmed {
					s.setLostLocked(w)
				}
			}
			s.detachLocked(w)
		}
		if w.conn == nil {
			s.attachLocked(s.connLocked(owner), w)
		}
		if c := w.conn; c.nc != nil && w.state == wantIdle {
			send[c] = append(send[c], w)
		}
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	for c, ws := range unsub {
		s.sendLocked(&out, c, true, ws)
	}
	for c, ws := range send {
		s.sendLocked(&out, c, false, ws)
	}
	var resumed [][]string
	for _, c := range s.conns {
		if r := takeResumedLocked(c); r != nil {
			resumed = append(resumed, r)
		}
	}
	s.stopIdleLocked()
	s.mu.Unlock()
	out.flush(s)
	for _, r := range resumed {
		s.cfg.Resumed(r)
	}
	return retry
}

// connLocked returns the connection to addr, starting it if there is
// none.
func (s *subscriber) connLocked(addr string) *subConn {
	if c := s.conns[addr]; c != nil {
		return c
	}
	c := &subConn{addr: addr, wants: make(map[string]*subWant), names: make(map[string]string)}
	s.conns[addr] = c
	s.wg.Add(1)
	go s.keep(c)
	return c
}

// keep is the goroutine of connection c: it dials, subscribes what c
// carries, reads until the connection breaks, and dials again, with a
// backoff that grows while connections fail young; it ends when c is
// stopped or the subscriber closes.
//
// A broken connection is never read again: a read cut in the middle of
// a reply leaves the stream at an unknown place, so the next bytes could
// be taken for a message. Every channel it carried is subscribed again
// on the next connection, and Resumed names them once confirmed.
func (s *subscriber) keep(c *subConn) {
	defer s.wg.Done()
	lr := &liveReader{s: s, c: c}
	rd := newRESPReader(lr, respPubSubElems)
	backoff := time.Duration(0)
	// lastQuick is when a link that worked was last made again at once.
	var lastQuick time.Time
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		s.mu.Lock()
		stopped := c.stopped
		s.mu.Unlock()
		if stopped || s.ctx.Err() != nil {
			return
		}
		nc, err := dialRedis(s.ctx, c.addr, s.cfg.TLS, s.auth, s.cfg.ClientName, s.opTimeout)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			if s.lastErr == nil || s.lastErr.Error() != err.Error() {
				s.log.Warn("subscriber: Redis unreachable", "addr", c.addr, "err", err)
			}
			s.lastErr = err
			if s.cfg.Cluster {
				// The master may be gone (a failover): read the map again.
				s.refresh = true
			}
			s.mu.Unlock()
			s.wakeManager()
			backoff = min(max(2*backoff, subBackoffMin), subBackoffMax)
			continue
		}
		born := time.Now()
		clear(c.names)
		var link subLink = nc
		fl, w := s.poll(c, nc, rd)
		if fl != nil {
			link = fl
		}
		if !s.connected(c, link) {
			_ = link.Close()
			if fl != nil {
				w.Stop()
				fl.release()
			}
			return
		}
		if fl != nil {
			err = s.readPolled(c, fl, w)
		} else {
			lr.reset(nc)
			rd.reset(lr)
			err = s.read(c, rd)
		}
		lost, worked := s.broken(c, link)
		if fl != nil {
			fl.release() // its watch has ended: readPolled stopped it
		}
		if s.ctx.Err() != nil {
			return
		}
		if lost > 0 {
			s.breaks.Add(1)
			s.log.Warn("subscriber: connection broke; subscribing again", "addr", c.addr, "channels", lost, "err", err)
		}
		// While the link is down, frames for this node are lost: a link
		// that worked (it lived, or Redis confirmed a subscription on it:
		// an operator's CLIENT KILL, an output buffer limit) is made again
		// at once, but not twice within subBackoffMax, so a Redis that
		// drops every link at once is not dialled in a loop. One that
		// failed young waits a backoff that doubles each time.
		switch now := time.Now(); {
		case now.Sub(born) >= subBackoffMax, worked && now.Sub(lastQuick) >= subBackoffMax:
			backoff, lastQuick = 0, now
		case worked:
			backoff = subBackoffMin
		default:
			backoff = min(max(2*backoff, subBackoffMin), subBackoffMax)
		}
	}
}

// connected makes nc the link of c and subscribes everything c carries.
// It reports false when c was stopped meanwhile.
func (s *subscriber) connected(c *subConn, nc subLink) bool {
	s.mu.Lock()
	if c.stopped || s.closed {
		s.mu.Unlock()
		return false
	}
	c.nc, c.cmds, c.resumed = nc, c.cmds[:0], nil
	s.lastErr = nil
	ws := make([]*subWant, 0, len(c.wants))
	for _, w := range c.wants {
		w.state = wantIdle
		ws = append(ws, w)
	}
	var out subWrites
	s.sendLocked(&out, c, false, ws)
	s.mu.Unlock()
	out.flush(s)
	return true
}

// broken ends link nc of c: every channel confirmed on it is lost, and
// every channel of c is idle until the next link. It returns how many
// channels c carries, and whether any was confirmed on the link.
func (s *subscriber) broken(c *subConn, nc subLink) (int, bool) {
	_ = nc.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.nc == nc {
		c.nc = nil
	}
	c.cmds, c.resumed = c.cmds[:0], nil
	worked := false
	for _, w := range c.wants {
		if w.state == wantConfirmed {
			worked = true
			s.setLostLocked(w)
		}
		w.state = wantIdle
	}
	return len(c.wants), worked
}

// read is the read loop of one link: it reads until an error (a broken
// or silent link, a malformed reply, the connection stopped), delivering
// messages and applying the replies to the commands written.
//
// Messages cost no lock and no allocation: the channel name comes from
// c.names (filled when Redis confirms a subscription, emptied when it
// confirms its end) and the payload aliases rd's buffer. Everything else
// (a confirmation, an error reply, a server-sent sunsubscribe) is rare and
// takes subscriber.mu.
func (s *subscriber) read(c *subConn, rd *respReader) error {
	for {
		vals, err := rd.next()
		if err != nil {
			return err
		}
		if err := s.handle(c, rd, vals); err != nil {
			return err
		}
	}
}

// handle applies one reply read on c's link: a message goes to Deliver,
// a confirmation or a refusal to the commands awaited. An error breaks
// the link.
func (s *subscriber) handle(c *subConn, rd *respReader, vals []respValue) error {
	switch top := vals[0]; top.kind {
	case '*', '>':
		if len(vals) == 4 && top.n == 3 && isRESPString(vals[1]) && isRESPString(vals[2]) {
			kind := rd.text(vals[1])
			if string(kind) == "message" || string(kind) == "smessage" {
				if !isRESPString(vals[3]) {
					return fmt.Errorf("%w: message without a payload", errProtocol)
				}
				if name, ok := c.names[string(rd.text(vals[2]))]; ok {
					s.cfg.Deliver(name, rd.text(vals[3]))
				}
				return nil
			}
			return s.control(c, string(kind), rd.text(vals[2]))
		}
		// Anything else (["pong", ""], a pattern message) is ignored.
	case '-':
		return s.refused(c, string(rd.text(top)))
	}
	// +PONG (no channel subscribed) and the like: ignored.
	return nil
}

// poll moves link nc onto the Poller's loop, when there is one and nc is
// plain TCP: its descriptor is duplicated, watched, and nc closed (which
// takes it off the Go runtime's poller; the duplicate keeps the socket).
// From then on the loop reads the link into rd and applies what it
// reads; fl is nil when nc stays as it is.
func (s *subscriber) poll(c *subConn, nc net.Conn, rd *respReader) (fl *fdLink, w Watching) {
	if s.cfg.Poller == nil || s.cfg.TLS != nil {
		return nil, nil
	}
	fl, err := takeLink(nc)
	if err != nil {
		return nil, nil
	}
	rd.reset(nil)
	fl.last.Store(time.Now().UnixNano())
	read := fl.read
	w, err = s.cfg.Poller.Watch(fl.fd, func() bool { return s.ready(c, fl, rd, read) })
	if err != nil {
		fl.discard()
		return nil, nil
	}
	_ = nc.Close()
	return fl, w
}

// ready runs on the Poller's loop each time link fl is readable: one read,
// then every whole reply it completes is applied, as read does on a
// reader goroutine. It returns false, with the reason in fl.err, when the
// link is broken; a reply cut by the end of the bytes waits for the rest.
func (s *subscriber) ready(c *subConn, fl *fdLink, rd *respReader, read func([]byte) (int, error)) bool {
	n, err := rd.fill(read)
	switch {
	case n > 0:
		fl.last.Store(time.Now().UnixNano())
	case errors.Is(err, errWouldBlock):
		return true
	case err == nil, errors.Is(err, io.EOF):
		fl.err = io.EOF
		if rd.inReply() {
			fl.err = io.ErrUnexpectedEOF
		}
		return false
	default:
		fl.err = err
		return false
	}
	for {
		vals, err := rd.parse()
		if err == nil && vals == nil {
			return true
		}
		if err == nil {
			err = s.handle(c, rd, vals)
		}
		if err != nil {
			fl.err = err
			return false
		}
	}
}

// errLoopClosed ends a polled link whose loop closed (the server is
// shutting down); the link is made again, on a reader goroutine if no
// loop takes it.
var errLoopClosed = fmt.Errorf("%w: event loop closed", ErrUnavailable)

// readPolled waits while the Poller's loop reads link fl (see ready), and
// keeps the link's health as liveReader does for a reader goroutine: a
// PING after pingAfter of silence, broken after deadAfter. It returns why
// the link ended, with its watch stopped.
func (s *subscriber) readPolled(c *subConn, fl *fdLink, w Watching) error {
	t := time.NewTimer(s.pingAfter)
	defer t.Stop()
	for {
		select {
		case <-w.Done():
			w.Stop() // returns once ready has returned: fl.err is set
			if fl.err == nil {
				return errLoopClosed
			}
			return fl.err
		case <-s.ctx.Done():
			w.Stop()
			return s.ctx.Err()
		case <-t.C:
			silent := time.Since(time.Unix(0, fl.last.Load()))
			if silent >= s.deadAfter {
				w.Stop()
				return errSilent
			}
			next := s.pingAfter - silent
			if silent >= s.pingAfter {
				if err := s.ping(c, fl); err != nil {
					w.Stop()
					return err
				}
				next = s.pingAfter
			}
			t.Reset(min(next, s.deadAfter-silent))
		}
	}
}

func isRESPString(v respValue) bool { return v.kind == '$' || v.kind == '+' }

// control applies a (un)subscribe confirmation, or a sunsubscribe that
// Redis sent by itself (the channel's slot left this master).
func (s *subscriber) control(c *subConn, kind string, chb []byte) error {
	var unsub bool
	switch kind {
	case "subscribe", "ssubscribe":
	case "unsubscribe", "sunsubscribe":
		unsub = true
		delete(c.names, string(chb))
	default:
		return nil
	}
	s.mu.Lock()
	// Is it the reply awaited next? Redis answers a command with one
	// reply per channel, in the order given.
	reply := false
	if len(c.cmds) > 0 {
		cmd := &c.cmds[0]
		if cmd.unsub == unsub && cmd.chans[cmd.next] == string(chb) {
			reply = true
			if cmd.next++; cmd.next == len(cmd.chans) {
				c.cmds[0] = subCmd{}
				c.cmds = c.cmds[1:]
			}
		}
	}
	w := s.wanted[string(chb)]
	if w != nil && w.conn != c {
		w = nil
	}
	var resumed []string
	switch {
	case !unsub && !reply:
		s.mu.Unlock()
		return fmt.Errorf("%w: unexpected %s confirmation", errProtocol, kind)
	case !unsub && w != nil && w.state == wantSent:
		w.state = wantConfirmed
		closeReady(w)
		c.names[w.ch] = w.ch
		if w.lost {
			w.lost = false
			c.lostPending--
			c.resumed = append(c.resumed, w.ch)
		}
	case unsub && !reply && w != nil && w.state != wantIdle:
		// Redis ended the subscription by itself: on a Redis Cluster, the
		// slot moved to another master. Read the map and subscribe there.
		s.log.Info("subscriber: Redis ended a subscription (slot moved?)", "addr", c.addr, "channel", w.ch)
		s.setLostLocked(w)
		w.state = wantIdle
		s.refresh = true
		s.dirty = append(s.dirty, w)
		s.wakeManager()
	}
	resumed = takeResumedLocked(c)
	s.mu.Unlock()
	if resumed != nil {
		s.cfg.Resumed(resumed)
	}
	return nil
}

// refused applies an error reply: it answers the oldest command awaiting
// its replies. A -MOVED (or another redirection, or a cluster that is
// busy) sends its channels back to the manager; another refusal (an ACL,
// say) drops them, with the error for their Subscribe.
func (s *subscriber) refused(c *subConn, msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(c.cmds) == 0 {
		return fmt.Errorf("%w: error reply to no command: %s", errReply, msg)
	}
	cmd := c.cmds[0]
	c.cmds[0] = subCmd{}
	c.cmds = c.cmds[1:]
	if cmd.unsub || cmd.next > 0 {
		// An unsubscribe refused (nothing to undo), or an error after
		// some replies of its command: out of step.
		if cmd.next > 0 {
			return fmt.Errorf("%w: error reply within a command's replies: %s", errReply, msg)
		}
		s.log.Debug("subscriber: unsubscribe refused", "addr", c.addr, "err", msg)
		return nil
	}
	code, rest, _ := strings.Cut(msg, " ")
	retry := false
	switch code {
	case "MOVED":
		// MOVED <slot> <addr>: the slot's owner, until the map is read.
		slotS, addr, _ := strings.Cut(rest, " ")
		if slot, err := strconv.Atoi(slotS); err == nil && slot >= 0 && slot < clusterSlots && s.owners != nil && addr != "" {
			s.owners[slot] = addr
		}
		retry = true
	case "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "BUSY", "MASTERDOWN":
		retry = true
	}
	for _, ch := range cmd.chans {
		w := s.wanted[ch]
		if w == nil || w.conn != c || w.state != wantSent {
			continue
		}
		if retry {
			// Placed again by the manager, after the map is read again.
			s.detachLocked(w)
			s.dirty = append(s.dirty, w)
			continue
		}
		s.detachLocked(w)
		delete(s.wanted, ch)
		w.err = fmt.Errorf("%w: subscribe %s: %s", errReply, ch, msg)
		closeReady(w)
	}
	if retry {
		s.refresh = true
		s.wakeManager()
	} else {
		s.log.Warn("subscriber: Redis refused a subscription", "addr", c.addr, "channels", len(cmd.chans), "err", msg)
	}
	return nil
}

// fetchSlots reads the slot map of a Redis Cluster (CLUSTER SLOTS) from
// the first node that answers: the masters known, then the seeds.
func (s *subscriber) fetchSlots() ([]string, error) {
	s.mu.Lock()
	var addrs []string
	for _, a := range s.owners {
		if a != "" && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	s.mu.Unlock()
	for _, a := range s.cfg.Addrs {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	var errs []error
	for _, a := range addrs {
		owners, err := s.fetchSlotsFrom(a)
		if err == nil {
			return owners, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if s.ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: cluster slots: %w", ErrUnavailable, errors.Join(errs...))
}

func (s *subscriber) fetchSlotsFrom(addr string) ([]string, error) {
	nc, err := dialRedis(s.ctx, addr, s.cfg.TLS, s.auth, s.cfg.ClientName, s.opTimeout)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	stop := context.AfterFunc(s.ctx, func() { _ = nc.SetDeadline(longAgo) })
	defer stop()
	_ = nc.SetDeadline(time.Now().Add(s.opTimeout))
	if _, err := nc.Write(appendCommand(nil, "CLUSTER", "SLOTS")); err != nil {
		return nil, err
	}
	rd := newRESPReader(nc, slotsMaxElems)
	vals, err := rd.next()
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	return parseSlots(rd, vals, host)
}

// parseSlots turns a CLUSTER SLOTS reply into slot -> master address.
// Each entry is [start, end, [host, port, id, ...], replicas...]; an
// empty host means the node that answered (host).
func parseSlots(rd *respReader, vals []respValue, host string) ([]string, error) {
	if vals[0].kind == '-' {
		return nil, fmt.Errorf("%w: %s", errReply, rd.text(vals[0]))
	}
	if vals[0].kind != '*' {
		return nil, fmt.Errorf("%w: CLUSTER SLOTS: not an array", errProtocol)
	}
	owners := make([]string, clusterSlots)
	bad := fmt.Errorf("%w: CLUSTER SLOTS: bad entry", errProtocol)
	i := 1
	for range vals[0].n {
		entry := i
		i = respSkip(vals, i)
		e := vals[entry:i]
		// e: array, start, end, master array, its host, its port, ...
		if len(e) < 6 || e[0].kind != '*' || e[0].n < 3 || e[1].kind != ':' || e[2].kind != ':' ||
			e[3].kind != '*' || e[3].n < 2 || !isRESPString(e[4]) || e[5].kind != ':' {
			return nil, bad
		}
		start, end, port := e[1].n, e[2].n, e[5].n
		if start < 0 || end < start || end >= clusterSlots || port <= 0 || port > 65535 {
			return nil, bad
		}
		h := string(rd.text(e[4]))
		switch h {
		case "":
			h = host
		case "?":
			continue // endpoint unknown: uncovered until the next read
		}
		a := net.JoinHostPort(h, strconv.FormatInt(port, 10))
		for slot := start; slot <= end; slot++ {
			owners[slot] = a
		}
	}
	return owners, nil
}

// liveReader is what a connection's reader reads through: it keeps a
// silent link alive and finds a dead one, with no timer work per message.
//
// The read deadline is not moved when bytes arrive (that would cost a
// timer update per message). When it fires, Read looks at how long the
// link has been silent: under pingAfter, the deadline moves to pingAfter
// after the last bytes; past it, a PING is written (Redis answers within
// a round trip if it is alive) and the deadline moves pingAfter on; at
// deadAfter the link is dead. A deadline that fires in the middle of a
// reply does no harm: the read is simply resumed (a timeout leaves a
// net.Conn, and a tls.Conn, usable), and bufio.Reader never sees it.
type liveReader struct {
	s    *subscriber
	c    *subConn
	nc   net.Conn
	last time.Time // when bytes last arrived
}

// errSilent breaks a link that stayed silent for deadAfter.
var errSilent = fmt.Errorf("%w: subscription connection silent", ErrUnavailable)

func (l *liveReader) reset(nc net.Conn) {
	l.nc, l.last = nc, time.Now()
	_ = nc.SetReadDeadline(l.last.Add(l.s.pingAfter))
}

func (l *liveReader) Read(p []byte) (int, error) {
	for {
		n, err := l.nc.Read(p)
		if n > 0 {
			l.last = time.Now()
			return n, err
		}
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return n, err
		}
		now := time.Now()
		silent := now.Sub(l.last)
		if silent >= l.s.deadAfter {
			return 0, errSilent
		}
		next := l.last.Add(l.s.pingAfter)
		if silent >= l.s.pingAfter {
			if err := l.ping(); err != nil {
				return 0, err
			}
			next = now.Add(l.s.pingAfter)
		}
		if dead := l.last.Add(l.s.deadAfter); next.After(dead) {
			next = dead
		}
		_ = l.nc.SetReadDeadline(next)
	}
}

func (l *liveReader) ping() error { return l.s.ping(l.c, l.nc) }

// ping writes a PING on link, the link of c, in turn with c's other
// writes.
func (s *subscriber) ping(c *subConn, link subLink) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = link.SetWriteDeadline(time.Now().Add(s.opTimeout))
	_, err := link.Write(pingCmd)
	return err
}

// keySlot is the Redis Cluster hash slot of a key or shard channel: the
// CRC16 (XMODEM) of its hash tag (what is between the first '{' and the
// next '}', when not empty), or of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the one Redis
// Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
