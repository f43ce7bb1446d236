package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// This file joins the server to a cluster of servers (package cluster
// holds the Redis side). The server keeps in s.offices only the members
// whose connections it holds; the office rules are decided cluster-wide
// by the node (one Redis script per change), and what concerns members on
// other nodes travels as frames:
//
//   - a request to a Computer on another node is a KindRequest frame to
//     that node, answered by a KindAnswer (or KindGone) frame; the
//     deadline and the answers on timeout or departure are the same as on
//     one node, and are produced here, on the Agent's node;
//   - notify:update_* and notify:tool_call_cancel go to the local members
//     directly and as one KindBroadcast frame to each other node of the
//     office;
//   - enter and leave notifications of other nodes' members come from the
//     office's membership events.
//
// Nothing here runs on a server without Config.Cluster.URL: every entry
// point checks s.hub first, so the single server's hot path is unchanged.
//
// The Socket.IO handler must never block, and Redis commands do: a join,
// a leave and a disconnect's leave run on the member's own queue (one
// goroutine at a time, in the order the client sent them; see serial).
// Frames on a single Redis are written by the node on the caller's
// goroutine without waiting, pipelined on its publishing connection (see
// sendPipelined and cluster.Node.Send); on a Redis Cluster (or with TLS)
// they leave through one sender goroutine per destination node (see
// sender). Either way their order is kept and what queues up is
// pipelined.

// maxRemoteWait caps the deadline a request frame may ask of this node:
// a frame is not trusted to carry a sane one.
const maxRemoteWait = 24 * time.Hour

// remoteSlack is added to a request frame's deadline for this node's own
// wait: the Agent's node owns the deadline (and its timeout answer); this
// node only has to stop waiting at some point after it.
const remoteSlack = time.Second

// hub is the server's side of a cluster.
type hub struct {
	node  *cluster.Node
	calls cluster.Calls

	ready chan struct{} // closed once node is set
	// lookups bounds the name-index reads of unroutable requests.
	lookups semaphore

	// serving counts the requests from other nodes being served here
	// (waiting for a join, or for the Computer's answer); past
	// maxServing a request is answered "Server busy" at once.
	serving atomic.Int64

	mu      sync.Mutex
	senders map[string]*sender // destination node id -> its sender
	closed  bool
	wg      sync.WaitGroup
}

// maxServing bounds the requests from other nodes served at once: each
// holds its frame and a pending request on a Computer's socket.
const maxServing = 65536

// maxSenders bounds the sender goroutines (one per destination node, on
// a Redis Cluster or with TLS): a destination is the From of a frame
// this node answers, so without a bound frames naming ever new nodes
// would start ever more goroutines.
const maxSenders = 4096

// errTooManySenders fails a frame to one more destination node past
// maxSenders.
var errTooManySenders = fmt.Errorf("%w: too many destination nodes", cluster.ErrUnavailable)

// The answers a call gets when this hub cannot take it (typed, no Go
// error text: see refuse).
var (
	// backlogFull answers a request to a Computer on another node when
	// the frames waiting for Redis already fill Config.Cluster.MaxBacklog.
	backlogFull = smcp.NewError(smcp.CodeInternal, "Cluster backlog full: the hub's Redis is not keeping up; try again later")
	// serverBusy answers a request from another node past maxServing.
	serverBusy = smcp.NewError(smcp.CodeInternal, "Server busy: too many calls from other nodes; try again later")
)

// startHub starts the cluster node; s is fully built except for s.hub.
func (s *Server) startHub(cfg cluster.Config) error {
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	if cfg.Observe == nil {
		cfg.Observe = s.metrics.redisObserved
	}
	if cfg.Poller == nil {
		// Frames from other nodes are read on the event loop of the
		// WebSockets they go to (see cluster.Config.Poller).
		cfg.Poller = loopPoller{s.io}
	}
	h := &hub{senders: make(map[string]*sender), ready: make(chan struct{}), lookups: make(semaphore, 64)}
	// s.hub is set before the node starts (no connection exists yet, so
	// nothing reads it but the node's handlers), and the handlers drop
	// what arrives before the node is in place: frames sent to a
	// previous process that had this node id.
	s.hub = h
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := cluster.Start(ctx, cfg, cluster.Handler{
		Frame: func(f cluster.Frame) {
			if h.started() {
				s.onFrame(f)
			}
		},
		Event: func(ev cluster.Event) {
			if h.started() {
				s.onClusterEvent(ev)
			}
		},
		Evicted: func(office string, m cluster.Member) {
			if h.started() {
				s.onEvicted(office, m)
			}
		},
	})
	if err != nil {
		s.hub = nil
		return err
	}
	h.node = node
	close(h.ready)
	s.metrics.clustered(node.ID(), s)
	return nil
}

// loopPoller lends the Socket.IO server's event loop to the cluster node.
type loopPoller struct{ io *sio.Server }

func (p loopPoller) Watch(fd int, ready func() bool) (cluster.Watching, error) {
	w, err := p.io.Watch(fd, ready)
	if err != nil {
		return nil, err // not a non-nil interface holding a nil *sio.Watch
	}
	return w, nil
}

// started reports whether the node is in place.
func (h *hub) started() bool {
	select {
	case <-h.ready:
		return true
	default:
		return false
	}
}

// NodeID is this server's id in its cluster, or "" when it runs alone.
func (s *Server) NodeID() string {
	if s.hub == nil {
		return ""
	}
	return s.hub.node.ID()
}

// close ends every call waiting on another node, stops the senders and
// leaves Redis. The members were left before (see Shutdown).
func (h *hub) close() {
	h.calls.Close()
	h.mu.Lock()
	h.closed = true
	for _, sd := range h.senders {
		sd.stop()
	}
	h.mu.Unlock()
	h.wg.Wait()
	h.node.Close()
}

// send queues a frame for node. A frame with a zero retryUntil is sent
// at most once: if Redis fails, onErr (if set) is called. That is how
// requests go, since a request published twice could run a tool twice.
// Answers and broadcasts, which are harmless twice, are retried until
// retryUntil while Redis is away, so an answer this node holds reaches
// the Agent's node if Redis returns before the call's deadline. Every
// queued frame counts against the node's backlog (cluster.Config's
// MaxBacklog, the one bound of every queue of frames): past it the frame
// fails at once with cluster.ErrBacklogFull.
func (s *Server) send(node string, f *cluster.Frame, retryUntil time.Time, onErr func(error)) {
	h := s.hub
	if h.node.Pipelined() {
		s.sendPipelined(node, f, retryUntil, onErr)
		return
	}
	cost := cluster.FrameCost(f)
	err := h.node.Reserve(cost)
	h.mu.Lock()
	sd := h.senders[node]
	switch {
	case err != nil:
	case h.closed, retryUntil.IsZero() && !h.node.Healthy():
		// Closing, or a request while cut off from Redis (it would wait
		// for a command timeout only to fail).
		err = cluster.ErrUnavailable
	case sd == nil && len(h.senders) >= maxSenders:
		err = errTooManySenders
	}
	if err != nil {
		// The frame fails now, and its call ends with the usual answer
		// (or the backlog's).
		h.mu.Unlock()
		if !errors.Is(err, cluster.ErrBacklogFull) {
			h.node.Release(cost)
		}
		s.metrics.frameDropped()
		if onErr != nil {
			onErr(err)
		}
		return
	}
	if sd == nil {
		sd = &sender{s: s, node: node, wake: make(chan struct{}, 1), quit: make(chan struct{})}
		h.senders[node] = sd
		h.wg.Add(1)
		go sd.run()
	}
	sd.q = append(sd.q, outFrame{f, retryUntil, onErr, cost})
	h.mu.Unlock()
	select {
	case sd.wake <- struct{}{}:
	default:
	}
	s.metrics.frameOut(f.Kind)
}

// sendPipelined is send on a single Redis: the node writes the frame on
// its publishing connection from this goroutine, without waiting (see
// cluster.Node.Send), so a frame costs no hand-off to a sender.
func (s *Server) sendPipelined(node string, f *cluster.Frame, retryUntil time.Time, onErr func(error)) {
	h := s.hub
	fail := func(err error) {
		s.metrics.frameDropped()
		if onErr != nil {
			onErr(err)
		}
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed || (retryUntil.IsZero() && !h.node.Healthy()) {
		fail(cluster.ErrUnavailable)
		return
	}
	s.metrics.frameOut(f.Kind)
	h.node.Send(node, f, retryUntil, fail)
}

type outFrame struct {
	f     *cluster.Frame
	until time.Time // retried until then; zero: sent at most once
	onErr func(error)
	cost  int64 // reserved against the node's backlog
}

// sender publishes the frames for one node, in the order they were
// queued; the frames that queued while a publish was under way go
// together in one pipeline. It is owned by the hub: it ends when the hub
// closes, or after a minute with nothing to send (its node may be gone
// for good), removing itself under the hub's lock so no frame is queued
// to a sender that has ended.
type sender struct {
	s    *Server
	node string
	q    []outFrame // guarded by hub.mu
	wake chan struct{}
	quit chan struct{}
}

const senderIdle = time.Minute

func (sd *sender) stop() { close(sd.quit) }

func (sd *sender) run() {
	h := sd.s.hub
	defer h.wg.Done()
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	const batch = 256
	for {
		h.mu.Lock()
		q := sd.q
		if len(q) > batch {
			q = q[:batch:batch]
			sd.q = sd.q[batch:]
		} else {
			sd.q = nil
		}
		h.mu.Unlock()
		if len(q) > 0 {
			fs := make([]*cluster.Frame, len(q))
			for i, o := range q {
				fs[i] = o.f
			}
			if err := h.node.PublishBatch(context.Background(), sd.node, fs); err != nil {
				if !sd.retry(q, err) {
					sd.fail()
					return
				}
				continue
			}
			for _, o := range q {
				h.node.Release(o.cost)
			}
			continue
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(senderIdle)
		select {
		case <-sd.wake:
		case <-sd.quit:
			sd.fail()
			return
		case <-idle.C:
			h.mu.Lock()
			if len(sd.q) == 0 && h.senders[sd.node] == sd {
				delete(h.senders, sd.node)
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
		}
	}
}

// retryBackoff is the pause before frames that failed are sent again.
const retryBackoff = 100 * time.Millisecond

// retry handles a batch that Redis refused: the frames that may be
// retried and have time left go back to the head of the queue (their
// order kept) and are sent again after a pause; the others fail. It
// reports false when the hub closes meanwhile.
func (sd *sender) retry(q []outFrame, err error) bool {
	now := time.Now()
	var keep []outFrame
	failed := 0
	for _, o := range q {
		if o.until.After(now) {
			keep = append(keep, o)
			continue
		}
		failed++
		sd.s.hub.node.Release(o.cost)
		sd.s.metrics.frameDropped()
		if o.onErr != nil {
			o.onErr(err)
		}
	}
	if failed > 0 {
		sd.s.log.Warn("frames to another node failed: Redis unavailable", "node", sd.node, "frames", failed, "err", err)
	}
	if len(keep) == 0 {
		return true
	}
	h := sd.s.hub
	h.mu.Lock()
	sd.q = append(keep, sd.q...)
	h.mu.Unlock()
	select {
	case <-sd.quit:
		return false
	case <-time.After(retryBackoff):
		return true
	}
}

// fail ends what is still queued when the hub closes.
func (sd *sender) fail() {
	h := sd.s.hub
	h.mu.Lock()
	q := sd.q
	sd.q = nil
	h.mu.Unlock()
	for _, o := range q {
		h.node.Release(o.cost)
		if o.onErr != nil {
			o.onErr(cluster.ErrUnavailable)
		}
	}
}

// serial runs one member's office operations one at a time, in order, on
// a goroutine that exists while there is work: a join's Redis scripts
// must not block the connection's reader, and a client's join, leave and
// requests must still take effect in the order it sent them. While the
// queue is busy, the member's other events wait in it too (see
// nsHandler.Event).
type serial struct {
	mu      sync.Mutex
	q       []func()
	running bool
}

// maxQueuedOps bounds what one client may have waiting on its queue (its
// events while a join waits on Redis): a client that keeps sending
// meanwhile is disconnected, as one whose socket backlog overflows.
const maxQueuedOps = 256

// tryDo is do for a client's event: it refuses (false) past
// maxQueuedOps.
func (q *serial) tryDo(f func()) bool {
	q.mu.Lock()
	full := len(q.q) >= maxQueuedOps
	q.mu.Unlock()
	if full {
		return false
	}
	q.do(f)
	return true
}

// busy reports whether operations are queued or running.
func (q *serial) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}

// do queues f and starts the queue's goroutine if it is not running.
func (q *serial) do(f func()) {
	q.mu.Lock()
	q.q = append(q.q, f)
	if q.running {
		q.mu.Unlock()
		return
	}
	q.running = true
	q.mu.Unlock()
	go q.run()
}

func (q *serial) run() {
	for {
		q.mu.Lock()
		if len(q.q) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		f := q.q[0]
		q.q[0] = nil
		q.q = q.q[1:]
		q.mu.Unlock()
		f()
	}
}

// semaphore is a counting semaphore that never waits.
type semaphore chan struct{}

// TryAcquire takes a unit if one is free.
func (s semaphore) TryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release gives a unit back.
func (s semaphore) Release() { <-s }

// opContext bounds one office operation against Redis: a few commands,
// each bounded by the node's own timeout.
func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// joinCluster is join for a clustered server, on the member's queue. The
// checks that need no Redis are those of the single server; the rules
// that involve other members are decided by the node, atomically in
// Redis; the local office then changes as on one server.
func (s *Server) joinCluster(m *member, e *sio.Event, req smcp.EnterOfficeReq) {
	s.mu.Lock()
	if msg := s.joinClosedLocked(m); msg != "" {
		s.mu.Unlock()
		ackTuple(e, false, msg)
		return
	}
	var cur cluster.Seat
	if m.office != nil {
		cur = cluster.Seat{Office: m.office.id, Role: m.role, Name: m.name}
	}
	conn := cluster.Conn{SID: m.sock.ID(), Role: m.role, Version: m.version}
	s.mu.Unlock()

	ctx, cancel := opContext()
	defer cancel()
	want := cluster.Seat{Office: req.OfficeID, Role: req.Role, Name: req.Name}
	d, err := s.hub.node.Join(ctx, conn, cur, want)
	if err != nil {
		s.log.Warn("join refused: cluster state unavailable", "sid", conn.SID, "err", err)
		msg := cluster.RefuseUnavailable
		if !errors.Is(err, cluster.ErrUnavailable) {
			msg = "invalid payload"
		}
		ackTuple(e, false, msg)
		return
	}
	switch {
	case d.Refuse != "":
		s.log.Info("join refused", "sid", conn.SID, "reason", d.Refuse)
		ackTuple(e, false, d.Refuse)
		return
	case d.Already:
		ackTuple(e, true, "")
		return
	}
	s.mu.Lock()
	if msg := s.joinClosedLocked(m); msg != "" {
		// The socket left, or the server began to drain, while Redis
		// decided: give the seat back (a drain's leaves may be over).
		s.mu.Unlock()
		_ = s.hub.node.Leave(ctx, req.OfficeID, conn.SID)
		ackTuple(e, false, msg)
		return
	}
	if d.SwitchOffice {
		s.leaveLocalLocked(m) // the node has left the former office in Redis
	}
	s.seatLocked(m, req)
	s.ackJoin(m, e, req.OfficeID)
	s.broadcastLocked(m.office, m, smcp.NotifyEnterOffice, notification(m.office, m))
	s.enteredLocked(m)
	s.mu.Unlock()
}

// leaveCluster is leave for a clustered server, on the member's queue:
// the local office changes at once, Redis (and so the other nodes) next,
// and the answer comes last, so a client that rejoins after it finds its
// seat free cluster-wide.
func (s *Server) leaveCluster(m *member, e *sio.Event, req smcp.LeaveOfficeReq) {
	s.mu.Lock()
	if m.office == nil || m.office.id != req.OfficeID {
		s.mu.Unlock()
		ackTuple(e, false, "Not in this office")
		return
	}
	s.leaveLocalLocked(m)
	s.mu.Unlock()
	ctx, cancel := opContext()
	defer cancel()
	if err := s.hub.node.Leave(ctx, req.OfficeID, m.sock.ID()); err != nil {
		s.log.Warn("leave: Redis unavailable; the record goes at the next re-assert", "sid", m.sock.ID(), "err", err)
	}
	ackTuple(e, true, "")
}

// leaveRemote removes the member's record from Redis after the member
// left locally (disconnect, shutdown): on its queue, after any join still
// in progress.
func (s *Server) leaveRemote(m *member, office string) {
	sid := m.sock.ID()
	m.ops.do(func() {
		ctx, cancel := opContext()
		defer cancel()
		if err := s.hub.node.Leave(ctx, office, sid); err != nil {
			s.log.Warn("leave: Redis unavailable; the record goes at the next re-assert", "sid", sid, "err", err)
		}
	})
}

// routeLater handles a request whose Computer is not in this node's copy
// of the office, on a goroutine of its own (it asks Redis; only this
// error path ever does). The copy may lag a join made on another node a
// moment ago, whose answer the client has already seen: the office is
// reloaded and the Computer looked up again, so a request right after a
// join is routed as on one server. Then, if it is still not found: 4104
// if a Computer of that name sits in another office somewhere in the
// cluster, else 404. The caller holds s.mu (read).
func (s *Server) routeLater(m *member, e *sio.Event, office, computer string, timeout time.Duration, start time.Time, obs *callObs) {
	local := s.names[computer] > 0 // a Computer of that name in another office here
	if !s.hub.lookups.TryAcquire() {
		// A flood of unroutable requests does not become a flood of Redis
		// commands: past the bound the answer comes from what this node
		// knows.
		go s.refuseUnrouted(m, e, local, obs)
		return
	}
	go func() {
		defer s.hub.lookups.Release()
		ctx, cancel := opContext()
		defer cancel()
		if err := s.hub.node.Refresh(ctx, office); err == nil {
			if target, ok := s.hub.node.Lookup(office, smcp.RoleComputer, computer); ok {
				s.relayRemote(e, office, target, timeout-time.Since(start), start, obs)
				return
			}
		}
		elsewhere := local
		if !elsewhere {
			var err error
			if elsewhere, err = s.hub.node.ComputerElsewhere(ctx, computer); err != nil {
				s.log.Debug("name index unavailable: answering not found", "err", err)
			}
		}
		s.refuseUnrouted(m, e, elsewhere, obs)
	}()
}

// refuseUnrouted answers a request that cannot be routed: 4104 when a
// Computer of that name is in another office, else 404.
func (s *Server) refuseUnrouted(m *member, e *sio.Event, elsewhere bool, obs *callObs) {
	if elsewhere {
		s.log.Warn("cross-office request refused", "sid", m.sid(), "event", e.Name)
		s.refuseObserved(e, obs, smcp.NewError(smcp.CodeCrossRoom, "Computer is not in your office"))
		return
	}
	s.refuseObserved(e, obs, smcp.NewError(smcp.CodeNotFound, "Computer not found"))
}

// relayRemote sends a request to a Computer on another node and answers
// the Agent as relay does on one node: with the Computer's answer byte for
// byte, the timeout answer at the same deadline, or the "disconnected"
// answer when the Computer leaves (or its node dies, or Redis fails)
// first.
func (s *Server) relayRemote(e *sio.Event, office string, target cluster.Member, timeout time.Duration, start time.Time, obs *callObs) {
	h := s.hub
	s.inFlight.Add(1)
	s.metrics.inFlight.Inc()
	id := h.calls.Start(target.Node, target.SID, timeout, func(payload []byte, err error) {
		outcome := outcomeOK
		var ans sio.Message
		switch {
		case err == nil:
			if ans, err = decodeMessage(payload, h.node.Authenticated()); err != nil {
				s.log.Warn("malformed answer from another node", "node", target.Node, "err", err)
				outcome = outcomeGone
			}
		case errors.Is(err, cluster.ErrTimeout):
			outcome = outcomeTimeout
		case errors.Is(err, cluster.ErrBacklogFull):
			outcome, ans = outcomeRefused, jsonMessage(backlogFull)
		default:
			outcome = outcomeGone
		}
		// This may run on the node's receiver: never write here.
		s.endRelay(e, ans, outcome, start, false, obs)
	})
	f := &cluster.Frame{
		Kind:      cluster.KindRequest,
		From:      h.node.ID(),
		To:        target.SID,
		Office:    office,
		Event:     e.Name,
		Call:      id,
		TimeoutMS: uint64(timeout / time.Millisecond),
		Payload:   appendMessage(nil, e.Message),
	}
	obs.sent()
	s.send(target.Node, f, time.Time{}, func(err error) {
		if !errors.Is(err, cluster.ErrBacklogFull) {
			err = cluster.ErrGone // Redis failed: the usual "disconnected"
		}
		h.calls.Abort(id, err)
	})
}

// broadcastRemote sends an office event to the members of the office on
// other nodes; each node delivers it to its members there except the
// sender. The caller holds s.mu (read), so the frames queue in the order
// of the office's events.
//
// A notify:update_* is one frame on the office's channel, which every
// node following the office receives, including one whose member joined
// a moment ago and is not yet in this node's copy (a node follows an
// office before its member's join is decided). The cancel of a tool call
// goes instead as one frame to each node of this node's copy, on the
// same ordered queue as the requests to that node, so that it never
// overtakes the call it cancels; a node missing from the copy cannot
// have received that call.
func (s *Server) broadcastRemote(office string, from *member, name string, v any) {
	if s.hub == nil {
		return
	}
	f := &cluster.Frame{Kind: cluster.KindBroadcast, From: s.hub.node.ID(), To: from.sid(), Office: office, Event: name}
	until := time.Now().Add(broadcastRetry)
	if name != smcp.NotifyCancelToolCall {
		f.Payload = appendMessage(nil, jsonMessage(v))
		s.send(officeSender, f, until, nil)
		return
	}
	nodes := s.hub.node.Nodes(office)
	if len(nodes) == 0 {
		return
	}
	f.Payload = appendMessage(nil, jsonMessage(v))
	for _, n := range nodes {
		s.send(n, f, until, nil)
	}
}

// officeSender is the sender of frames published on their office's
// channel rather than to one node (see cluster.Node.PublishBatch).
const officeSender = ""

// broadcastRetry is how long a broadcast to another node is retried while
// Redis is away.
const broadcastRetry = 10 * time.Second

// broadcastEvents are the events a KindBroadcast frame may carry.
var broadcastEvents = map[string]bool{
	smcp.NotifyCancelToolCall: true,
	smcp.NotifyUpdateConfig:   true,
	smcp.NotifyUpdateToolList: true,
	smcp.NotifyUpdateDesktop:  true,
	smcp.NotifyUpdateSkills:   true,
}

// onFrame handles a frame from another node. It runs on the node's
// receiver goroutine, so it only queues (Emit, Request and Ack do).
// Nothing in a frame is trusted: a request is delivered only to a
// Computer this node holds in the frame's office, a broadcast only to
// members of that office, and only events of the right kind.
func (s *Server) onFrame(f cluster.Frame) {
	s.metrics.frameIn(f.Kind)
	switch f.Kind {
	case cluster.KindAnswer, cluster.KindGone:
		s.hub.calls.Answer(f)
	case cluster.KindRequest:
		if s.hub.serving.Add(1) > maxServing {
			s.hub.serving.Add(-1)
			s.answerRemote(f, jsonMessage(serverBusy))
			return
		}
		s.serveRemote(f, true)
	case cluster.KindBroadcast:
		if !broadcastEvents[f.Event] {
			return
		}
		msg, err := decodeMessage(f.Payload, s.hub.node.Authenticated())
		if err != nil {
			return
		}
		s.officeEvent(f.Office, f.Event)
		s.mu.RLock()
		if o := s.offices[f.Office]; o != nil {
			o.each(func(x *member) {
				if x.sock.ID() != f.To {
					_ = x.sock.Emit(f.Event, msg)
				}
			})
		}
		s.mu.RUnlock()
	}
}

// serveRemote relays a request from an Agent on another node to a
// Computer this node holds, and sends the answer back. When this node
// no longer holds the Computer (it left, or the frame is stale or
// forged), or the Computer disconnects first, the answer is KindGone, so
// the Agent's node answers "disconnected" at once. On this node's own
// timeout (later than the Agent node's deadline) nothing is sent: the
// Agent was answered already.
//
// A request may also arrive while the Computer's join is still being
// decided here: the join script has published it, so the Agent may have
// been told of it already. With canWait set, such a request waits on the
// member's queue, behind its join, and is served (or answered "gone")
// once the join has ended.
//
// Each request counts in hub.serving (taken by onFrame) until it is
// answered or dropped: every path of serveRemote ends in served.
func (s *Server) serveRemote(f cluster.Frame, canWait bool) {
	// The Agent's node waits at most TimeoutMS from about now: an answer
	// is worth retrying until then.
	wait := time.Duration(min(f.TimeoutMS, uint64(maxRemoteWait/time.Millisecond))) * time.Millisecond
	until := time.Now().Add(wait)
	reply := func(kind cluster.Kind, payload []byte) {
		s.send(f.From, &cluster.Frame{Kind: kind, From: s.hub.node.ID(), To: f.To, Office: f.Office, Event: f.Event, Call: f.Call, Payload: payload}, until, nil)
	}
	if !s.profile.IsClientEvent(f.Event) || f.TimeoutMS == 0 {
		s.hub.served()
		reply(cluster.KindGone, nil)
		return
	}
	msg, err := decodeMessage(f.Payload, s.hub.node.Authenticated())
	if err != nil {
		s.hub.served()
		reply(cluster.KindGone, nil)
		return
	}
	target, draining, pending := s.remoteTarget(f)
	if target == nil && canWait && !draining && pending != nil && pending.ops.busy() {
		// Waiting, the frame counts against the node's backlog like any
		// other frame held here.
		cost := cluster.FrameCost(&f)
		if s.hub.node.Reserve(cost) == nil {
			if pending.ops.tryDo(func() { s.hub.node.Release(cost); s.serveRemote(f, false) }) {
				return
			}
			s.hub.node.Release(cost)
		}
	}
	if target == nil && canWait && !draining && pending != nil {
		// The join may have ended since the look: it seats the member
		// before its operation ends, so a second look finds it.
		target, draining, _ = s.remoteTarget(f)
	}
	if target == nil || draining {
		s.hub.served()
		reply(cluster.KindGone, nil)
		return
	}
	s.inFlight.Add(1)
	target.sock.Request(f.Event, msg, wait+remoteSlack, func(ans sio.Message, err error) {
		defer s.inFlight.Add(-1)
		defer s.hub.served()
		switch {
		case err == nil:
			reply(cluster.KindAnswer, appendMessage(nil, ans))
		case errors.Is(err, sio.ErrAckTimeout):
		default:
			reply(cluster.KindGone, nil)
		}
	})
}

// served ends one request from another node (see hub.serving).
func (h *hub) served() { h.serving.Add(-1) }

// answerRemote answers a request from another node with the server's own
// answer ans (an ErrorPayload), as the Computer's answer would go.
func (s *Server) answerRemote(f cluster.Frame, ans sio.Message) {
	wait := time.Duration(min(f.TimeoutMS, uint64(maxRemoteWait/time.Millisecond))) * time.Millisecond
	s.send(f.From, &cluster.Frame{Kind: cluster.KindAnswer, From: s.hub.node.ID(), To: f.To, Office: f.Office, Event: f.Event, Call: f.Call,
		Payload: appendMessage(nil, ans)}, time.Now().Add(wait), nil)
}

// remoteTarget looks up the Computer a request frame names, in the
// office it names; with whether the server is draining, and the
// member of that id whatever its office, if any (its join may still be
// running).
func (s *Server) remoteTarget(f cluster.Frame) (target *member, draining bool, pending *member) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if o := s.offices[f.Office]; o != nil {
		for _, c := range o.computers {
			if c.sock.ID() == f.To {
				target = c
				break
			}
		}
	}
	return target, s.draining, s.conns[f.To]
}

// onClusterEvent turns a membership change of another node's member into
// the notifications this node's members of the office receive, and ends
// the calls waiting on a member that left. This node's own members'
// changes were announced when they happened.
func (s *Server) onClusterEvent(ev cluster.Event) {
	if ev.Member.Node == s.hub.node.ID() {
		return
	}
	if ev.Swept {
		// Its node is dead: no answer will come. A plain leave ends
		// nothing: as on one server, a Computer that left its office may
		// still answer on its open connection, and if the connection
		// closes its node answers "gone" (after any answer, on the same
		// ordered queue).
		s.hub.calls.Gone(ev.Member.SID)
	}
	n := smcp.OfficeNotification{OfficeID: ev.Office}
	if ev.Member.Role == smcp.RoleAgent {
		n.Agent = ev.Member.Name
	} else {
		n.Computer = ev.Member.Name
	}
	name := smcp.NotifyLeaveOffice
	if ev.Enter {
		name = smcp.NotifyEnterOffice
	}
	s.mu.RLock()
	if o := s.offices[ev.Office]; o != nil {
		s.broadcastLocked(o, nil, name, n)
	}
	s.mu.RUnlock()
	if s.prov != nil {
		// Another node's member: a sandbox Computer a join here waits
		// for (woken after the notification above, so the Agent hears
		// of it before its join's answer), an Agent whose seat stops
		// this node's idle timer, or the Agent of a dead node, whose
		// office nobody else would release.
		switch {
		case ev.Enter && ev.Member.Role == smcp.RoleComputer:
			s.prov.computerSeated(ev.Office, ev.Member.Name)
		case ev.Enter:
			s.prov.agentSeated(ev.Office)
		case ev.Swept && ev.Member.Role == smcp.RoleAgent:
			s.prov.agentLeft(ev.Office, nil)
		}
	}
}

// onEvicted drops a member whose seat another client took while this node
// was cut off from Redis (its lease expired and it was swept). The
// connection is closed, so the client reconnects and joins again, and
// learns whether the seat is still taken.
func (s *Server) onEvicted(office string, cm cluster.Member) {
	s.mu.Lock()
	var m *member
	if o := s.offices[office]; o != nil {
		o.each(func(x *member) {
			if x.sock.ID() == cm.SID {
				m = x
			}
		})
	}
	if m != nil {
		s.leaveLocalLocked(m)
	}
	s.mu.Unlock()
	if m != nil {
		m.sock.Disconnect()
	}
}

// listRoomCluster answers server:list_room in a cluster, on the member's
// queue (so a leave it sent next waits for it): the office is reloaded
// from Redis first (one script), so a member that joined on another node
// a moment ago is listed, as one server lists it. Without Redis the
// node's copy answers.
func (s *Server) listRoomCluster(e *sio.Event, req smcp.ListRoomReq) {
	ctx, cancel := opContext()
	if err := s.hub.node.Refresh(ctx, req.OfficeID); err != nil {
		s.log.Debug("list_room from the node's copy: Redis unavailable", "err", err)
	}
	cancel()
	s.mu.RLock()
	ret := smcp.ListRoomRet{ReqID: req.ReqID, Sessions: s.clusterSessions(req.OfficeID)}
	s.mu.RUnlock()
	sortSessions(ret.Sessions)
	ackJSON(e, ret)
}

// clusterSessions lists an office's members across the cluster: the
// node's copy, plus the members held here (which the copy may lag behind
// just after a join whose snapshot read failed). The caller holds s.mu.
func (s *Server) clusterSessions(office string) []smcp.SessionInfo {
	seen := make(map[string]bool)
	out := []smcp.SessionInfo{}
	if o := s.offices[office]; o != nil {
		o.each(func(x *member) {
			seen[x.sock.ID()] = true
			out = append(out, smcp.SessionInfo{SID: x.sock.ID(), Name: x.name, Role: x.role, OfficeID: office, A2CVersion: x.version})
		})
	}
	for _, cm := range s.hub.node.Members(office) {
		if !seen[cm.SID] && cm.Node != s.hub.node.ID() {
			out = append(out, smcp.SessionInfo{SID: cm.SID, Name: cm.Name, Role: cm.Role, OfficeID: office, A2CVersion: cm.Version})
		}
	}
	return out
}

// timeoutAnswer is the answer to a request whose deadline passed: a
// CallToolResult marked a2c_timeout for a tool call, else a 408.
func timeoutAnswer(event string) sio.Message {
	if event == smcp.EventToolCall {
		return jsonMessage(smcp.TimeoutResult("Computer did not answer within the tool call's timeout"))
	}
	return jsonMessage(smcp.NewError(smcp.CodeTimeout, "Computer did not answer in time"))
}

// goneAnswer is the answer to a request whose Computer left before
// answering: an isError CallToolResult for a tool call, else a 404.
func goneAnswer(event string) sio.Message {
	if event == smcp.EventToolCall {
		return jsonMessage(smcp.CallToolResult{IsError: true, Content: []json.RawMessage{smcp.TextContent("Computer disconnected before answering")}})
	}
	return jsonMessage(smcp.NewError(smcp.CodeNotFound, "Computer disconnected before answering"))
}

// errMessageFormat is returned for a payload between nodes that does not
// parse.
var errMessageFormat = errors.New("server: malformed message between nodes")

// maxParts bounds the arguments and attachments of a message between
// nodes; Socket.IO requests carry one argument and few attachments.
const maxParts = 1024

// appendMessage encodes a Socket.IO message for a frame: the number of
// arguments, each argument (length, bytes), the number of attachments,
// each attachment (length, bytes); lengths are uvarints. The arguments
// are the JSON texts as received, so the Computer (or the Agent) gets the
// bytes the other end sent.
func appendMessage(b []byte, m sio.Message) []byte {
	n := 2
	for _, a := range m.Args {
		n += len(a) + 5
	}
	for _, a := range m.Attachments {
		n += len(a) + 5
	}
	b = slices.Grow(b, n)
	b = binary.AppendUvarint(b, uint64(len(m.Args)))
	for _, a := range m.Args {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Attachments)))
	for _, a := range m.Attachments {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	return b
}

// decodeMessage parses what appendMessage wrote. It never trusts its
// input: every count and length is checked against what remains, and
// nothing may follow the last part. Unless sealed (the frame came from a
// node holding the cluster key, which took each argument from a client
// message its Socket.IO decoder had parsed as JSON), every argument must
// be valid JSON: a node without a key takes frames from whoever may
// PUBLISH on its Redis.
func decodeMessage(b []byte, sealed bool) (sio.Message, error) {
	var m sio.Message
	parts := func(isJSON bool) ([][]byte, error) {
		k, n := binary.Uvarint(b)
		if n <= 0 || k > maxParts {
			return nil, errMessageFormat
		}
		b = b[n:]
		out := make([][]byte, 0, k)
		for range k {
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) || l > math.MaxInt32 {
				return nil, errMessageFormat
			}
			p := b[n : n+int(l) : n+int(l)]
			if isJSON && !sealed && !json.Valid(p) {
				return nil, fmt.Errorf("%w: an argument is not JSON", errMessageFormat)
			}
			out = append(out, p)
			b = b[n+int(l):]
		}
		return out, nil
	}
	args, err := parts(true)
	if err != nil {
		return m, err
	}
	att, err := parts(false)
	if err != nil {
		return m, err
	}
	if len(b) != 0 {
		return m, fmt.Errorf("%w: trailing bytes", errMessageFormat)
	}
	for _, a := range args {
		m.Args = append(m.Args, json.RawMessage(a))
	}
	if len(att) > 0 {
		m.Attachments = att
	}
	return m, nil
}
