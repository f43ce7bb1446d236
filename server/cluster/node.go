package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// ErrUnavailable is returned (wrapped) when Redis cannot be reached or
// answered with an error: the cluster-wide state cannot be read or
// changed now.
var ErrUnavailable = errors.New("cluster: Redis unavailable")

// ErrNodeIDInUse is returned by [Start] when a live node holds the id.
var ErrNodeIDInUse = errors.New("cluster: node id in use by a live node")

// Handler receives what arrives for a node. Its functions are called from
// one goroutine per subscription, in arrival order, never under a lock of
// the node: they may call the node's methods. They must not block for
// long (queue, as sio.Socket.Emit does).
type Handler struct {
	// Frame receives a frame published to this node.
	Frame func(Frame)
	// Event receives each membership change of an office in which this
	// node holds a member, its own members' changes included (the server
	// skips those: it announced them itself). A departure of another
	// node's member ends the calls waiting on it.
	Event func(Event)
	// Evicted is called when re-asserting a member after an outage finds
	// its seat taken by another member: the node must drop the
	// connection's membership (and tell it, as a leave).
	Evicted func(office string, m Member)
}

// Node is one `a2c server` in a cluster: it holds a lease in Redis, sweeps
// dead nodes, keeps the office rules cluster-wide with scripts, follows
// the membership of the offices where it holds members, and exchanges
// frames with the other nodes. Close stops everything it started.
type Node struct {
	cfg     Config
	id      string
	rdb     redis.UniversalClient
	cluster bool
	pubCmd  string
	h       Handler
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	healthy atomic.Bool
	// needSync is set when events may have been missed (an outage, a lost
	// lease): the next healthy heartbeat re-asserts and reloads.
	needSync atomic.Bool
	// settleUntil (unix nanoseconds) ends the settling that follows a
	// loss of this node's lease (Redis restarted empty, or an outage
	// longer than the lease): until then the other nodes may not have
	// re-asserted their members, so joins are refused, office events are
	// ignored and reloads wait (a snapshot would report their members as
	// gone), and nobody is swept. needReload asks for the reload of every
	// followed office once it ends.
	settleUntil atomic.Int64
	needReload  atomic.Bool
	// lastHeard (unix nanoseconds) is when the shared subscription last
	// received anything (see pingShared).
	lastHeard atomic.Int64
	// sweepAfter (unix nanoseconds) holds the sweeper back after any
	// outage: a live node needs a heartbeat or two to renew a lease that
	// ran low (or out) while Redis was away.
	sweepAfter atomic.Int64

	// subMu orders the subscriptions to office channels with the views
	// they feed, so an unsubscribe never overtakes a newer subscribe.
	subMu  sync.Mutex
	mu     sync.Mutex
	local  map[string]map[string]Member // office -> sid -> member held here
	views  map[string]*view             // event channel -> followed office
	subs   map[string]*redis.PubSub     // cluster mode: channel -> its own subscription
	shared *redis.PubSub                // single Redis: every channel on one connection

	// pub publishes frames on a single Redis without TLS (see publish.go);
	// nil on a Redis Cluster or with TLS, where go-redis publishes them.
	pub *publisher
}

// view is this node's copy of an office's membership, current as of
// version. Events received before the first snapshot wait in pending.
type view struct {
	office  string
	loaded  bool
	version int64
	members map[string]Member
	pending []Event
	// pins counts the joins in progress that need the view: it is not
	// dropped while one runs, even if the node holds nobody there yet.
	pins int
}

// Start connects to Redis, registers the node (lease and registry),
// subscribes to its channel and starts the heartbeat, the sweeper and the
// receivers. It fails if Redis does not answer within cfg.OpTimeout.
func Start(ctx context.Context, cfg Config, h Handler) (*Node, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	opts, cluster, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = cfg.OpTimeout, cfg.OpTimeout, cfg.OpTimeout
	opts.ClientName = "a2c-" + cfg.NodeID
	n := &Node{cfg: cfg, id: cfg.NodeID, rdb: redis.NewUniversalClient(opts), cluster: cluster, pubCmd: "PUBLISH", h: h,
		log:   cfg.Logger.With("node", cfg.NodeID),
		local: make(map[string]map[string]Member), views: make(map[string]*view), subs: make(map[string]*redis.PubSub)}
	if cluster {
		n.pubCmd = "SPUBLISH"
	}
	if cfg.Observe != nil {
		n.rdb.AddHook(observer{cfg.Observe})
	}
	logOnce.Do(func() { redis.SetLogger(redisLog{cfg.Logger}) })
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.claim(ctx); err != nil {
		n.cancel()
		_ = n.rdb.Close()
		return nil, err
	}
	if !cluster && opts.TLSConfig == nil && len(opts.Addrs) == 1 {
		var auth []string
		switch {
		case opts.Username != "":
			auth = []string{opts.Username, opts.Password}
		case opts.Password != "":
			auth = []string{opts.Password}
		}
		n.pub = newPublisher(n, opts.Addrs[0], auth)
		n.pub.start()
	}
	if !cluster {
		n.shared = n.rdb.Subscribe(n.ctx)
		n.wg.Add(1)
		go n.receiveShared(n.shared)
	}
	if err := n.subscribe(ctx, nodeChannel(n.id)); err != nil {
		n.Close()
		return nil, err
	}
	n.healthy.Store(true)
	n.wg.Add(2)
	go n.heartbeat()
	go n.sweeper()
	return n, nil
}

// logOnce routes the client library's own logs (reconnection attempts)
// to the first node's logger at debug level instead of stderr; the
// library's logger is process-wide.
var logOnce sync.Once

type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(_ context.Context, format string, v ...any) {
	r.l.Debug("redis client: " + fmt.Sprintf(format, v...))
}

// ID is the node's id.
func (n *Node) ID() string { return n.id }

// Healthy reports whether the last exchange with Redis succeeded.
func (n *Node) Healthy() bool { return n.healthy.Load() }

// Close stops the heartbeat, the sweeper and the receivers and closes the
// connections. It does not remove the node's members: a node that stops
// cleanly leaves its members first (Leave); one that does not is swept
// when its lease expires.
func (n *Node) Close() {
	n.retire()
	n.cancel()
	if n.pub != nil {
		n.pub.close()
	}
	n.mu.Lock()
	if n.shared != nil {
		_ = n.shared.Close()
	}
	for _, ps := range n.subs {
		_ = ps.Close()
	}
	n.mu.Unlock()
	n.wg.Wait()
	_ = n.rdb.Close()
}

// retire removes the node's lease, index and registration when it holds
// no member any more (it left them all), so that a process started again
// with the same id does not wait for the lease to expire. A node that
// still holds members keeps them for the sweep.
func (n *Node) retire() {
	n.mu.Lock()
	held := len(n.local) > 0
	n.mu.Unlock()
	if held || n.ctx.Err() != nil {
		return
	}
	c, cancel := n.op(n.ctx)
	defer cancel()
	_, _ = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		p.SRem(c, nodesKey, n.id)
		p.Del(c, nodeIndex(n.id), leaseKey(n.id))
		return nil
	})
}

func (n *Node) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.cfg.OpTimeout)
}

// claim takes the node's lease for a new process. A node id given by the
// operator may still be leased by this id's previous process (killed a
// moment ago) or held by a live process started with the same id: the
// claim waits up to LeaseTTL plus two heartbeats for the lease to expire
// and fails if it is still renewed, so two processes never share an id.
// A previous process's leftovers (members, index) are then swept, as
// another node's sweeper would, before the node takes any seat.
func (n *Node) claim(ctx context.Context) error {
	deadline := time.Now().Add(n.cfg.LeaseTTL + 2*n.cfg.Heartbeat)
	for {
		c, cancel := n.op(ctx)
		ok, err := n.rdb.SetNX(c, leaseKey(n.id), n.id, n.cfg.LeaseTTL).Result()
		cancel()
		if err != nil {
			return fmt.Errorf("%w: register: %w", ErrUnavailable, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %q", ErrNodeIDInUse, n.id)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: register: %w", ErrUnavailable, ctx.Err())
		case <-time.After(n.cfg.Heartbeat / 2):
		}
	}
	if err := n.sweepNode(ctx, n.id); err != nil {
		return fmt.Errorf("%w: sweeping a previous process's members: %w", ErrUnavailable, err)
	}
	return n.register(ctx)
}

func (n *Node) register(ctx context.Context) error {
	c, cancel := n.op(ctx)
	defer cancel()
	_, err := n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		p.SAdd(c, nodesKey, n.id)
		p.Set(c, leaseKey(n.id), n.id, n.cfg.LeaseTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: register: %w", ErrUnavailable, err)
	}
	return nil
}

// subscribe adds a channel: to the shared subscription on a single Redis,
// or as a sharded subscription of its own on a Redis Cluster (a shard
// channel is served by its slot's master, so channels of different slots
// cannot share a connection).
func (n *Node) subscribe(ctx context.Context, ch string) error {
	if !n.cluster {
		c, cancel := n.op(ctx)
		defer cancel()
		if err := n.shared.Subscribe(c, ch); err != nil {
			return fmt.Errorf("%w: subscribe: %w", ErrUnavailable, err)
		}
		return nil
	}
	// The callers hold subMu, so no other subscribe of ch runs meanwhile;
	// n.mu is not held across the network (Lookup and Nodes need it on
	// every relay).
	n.mu.Lock()
	have := n.subs[ch] != nil || n.ctx.Err() != nil
	n.mu.Unlock()
	if have {
		return nil
	}
	ps := n.rdb.SSubscribe(n.ctx)
	c, cancel := n.op(ctx)
	err := ps.SSubscribe(c, ch)
	cancel()
	if err != nil {
		_ = ps.Close()
		return fmt.Errorf("%w: subscribe: %w", ErrUnavailable, err)
	}
	n.mu.Lock()
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		_ = ps.Close()
		return nil
	}
	n.subs[ch] = ps
	n.wg.Add(1)
	n.mu.Unlock()
	go n.receive(ps)
	return nil
}

func (n *Node) unsubscribe(ch string) {
	if !n.cluster {
		c, cancel := n.op(n.ctx)
		defer cancel()
		_ = n.shared.Unsubscribe(c, ch)
		return
	}
	n.mu.Lock()
	ps := n.subs[ch]
	delete(n.subs, ch)
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

// sharedSilence is how long the shared subscription may hear nothing
// before its read fails and go-redis reconnects it: the heartbeat pings a
// subscription silent for sharedPing, so a live one hears a PONG well
// before.
const (
	sharedPing    = 2 * time.Second
	sharedSilence = 10 * time.Second
)

// receiveShared dispatches the messages of the shared subscription (a
// single Redis) until it closes. It reads them itself, where
// PubSub.Channel would hand each over a Go channel from a goroutine of its
// own and wake a health-check goroutine for it: two wake-ups per frame,
// four per cross-node call. Every read has a deadline (a context, renewed
// as messages come): go-redis takes a read that reaches it as a failed
// connection, closes it and subscribes again on a new one, so a read
// never resumes in the middle of a message. The heartbeat pings a silent
// subscription (pingShared), so a live connection never reaches it.
func (n *Node) receiveShared(ps *redis.PubSub) {
	defer n.wg.Done()
	mine := nodeChannel(n.id)
	var rd readDeadline
	defer rd.stop()
	rd.renew(n.ctx)
	failed := 0
	for {
		if time.Until(rd.at) < sharedSilence/2 {
			rd.renew(n.ctx)
		}
		msg, err := ps.Receive(rd.ctx)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || n.ctx.Err() != nil {
				return
			}
			// The connection failed (or stayed silent past the deadline)
			// and go-redis has dropped it; the next read subscribes again.
			// A second failure in a row waits a little, as Channel does.
			if failed++; failed > 1 {
				select {
				case <-n.ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			rd.renew(n.ctx)
			continue
		}
		failed = 0
		n.lastHeard.Store(time.Now().UnixNano())
		if m, ok := msg.(*redis.Message); ok {
			n.dispatch(mine, m)
		}
	}
}

// readDeadline is the context whose deadline bounds the shared
// subscription's reads, renewed (one timer) every sharedSilence/2 of
// traffic rather than per message.
type readDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

func (r *readDeadline) renew(parent context.Context) {
	r.stop()
	r.at = time.Now().Add(sharedSilence)
	r.ctx, r.cancel = context.WithDeadline(parent, r.at)
}

func (r *readDeadline) stop() {
	if r.cancel != nil {
		r.cancel()
	}
}

// pingShared pings the shared subscription when it has heard nothing for
// sharedPing: the PONG keeps its reads within their deadline, and a
// failed write makes go-redis reconnect it. The heartbeat calls it.
func (n *Node) pingShared(ctx context.Context) {
	if n.shared == nil || time.Since(time.Unix(0, n.lastHeard.Load())) < sharedPing {
		return
	}
	c, cancel := n.op(ctx)
	_ = n.shared.Ping(c)
	cancel()
}

// receive dispatches the messages of one subscription until it closes.
// It reads through PubSub.Channel, which reads with no deadline in the
// middle of a message (a read cut by a deadline and then resumed would
// lose its place in the stream and could parse payload bytes as a
// message), health-checks a silent connection and reconnects and
// resubscribes by itself.
func (n *Node) receive(ps *redis.PubSub) {
	defer n.wg.Done()
	mine := nodeChannel(n.id)
	for msg := range ps.Channel(redis.WithChannelSize(1024)) {
		n.dispatch(mine, msg)
	}
}

// dispatch hands one message of a subscription to the handler.
func (n *Node) dispatch(mine string, msg *redis.Message) {
	if msg.Channel == mine {
		f, err := DecodeFrame([]byte(msg.Payload))
		if err != nil {
			n.log.Warn("frame dropped", "err", err)
			return
		}
		if n.h.Frame != nil {
			n.h.Frame(f)
		}
		return
	}
	if len(msg.Payload) > 0 && msg.Payload[0] == frameVersion {
		n.onOfficeFrame(msg.Channel, msg.Payload)
		return
	}
	n.onEvent(msg.Channel, msg.Payload)
}

// onOfficeFrame delivers a broadcast published on an office's channel
// (see PublishOffice): only a KindBroadcast of that very office, and not
// this node's own.
func (n *Node) onOfficeFrame(ch, payload string) {
	f, err := DecodeFrame([]byte(payload))
	if err != nil || f.Kind != KindBroadcast || f.From == n.id || officeChannel(f.Office) != ch {
		if err == nil {
			err = fmt.Errorf("%w: not a broadcast of this office", ErrFrame)
		}
		if f.From != n.id {
			n.log.Warn("office frame dropped", "channel", ch, "err", err)
		}
		return
	}
	if n.h.Frame != nil {
		n.h.Frame(f)
	}
}

// Publish sends one frame to a node's channel: one PUBLISH (SPUBLISH on a
// Redis Cluster), nothing else. It reports ErrUnavailable when Redis
// fails; a frame to a node that is gone is accepted by Redis and lost, so
// the caller's deadline (or the node's sweep) ends the call.
func (n *Node) Publish(ctx context.Context, node string, f *Frame) error {
	c, cancel := n.op(ctx)
	defer cancel()
	b := AppendFrame(make([]byte, 0, 64+len(f.Payload)), f)
	var err error
	if n.cluster {
		err = n.rdb.SPublish(c, nodeChannel(node), b).Err()
	} else {
		err = n.rdb.Publish(c, nodeChannel(node), b).Err()
	}
	if err != nil {
		return fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	}
	return nil
}

// PublishBatch sends several frames to one node's channel in one
// pipelined round trip, in order: one PUBLISH (SPUBLISH) each, nothing
// else. The server's sender per destination node uses it, so frames that
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
			b := AppendFrame(make([]byte, 0, 64+len(f.Payload)), f)
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

// Refresh reloads the node's copy of an office it follows from Redis
// (one script), reporting what changed as events. The server calls it
// before it answers from the copy where a change made on another node a
// moment ago must be seen: a request whose Computer is not in the copy,
// and server:list_room. It does nothing while the node settles.
func (n *Node) Refresh(ctx context.Context, office string) error {
	if n.settling() {
		return nil
	}
	n.mu.Lock()
	_, ok := n.views[officeChannel(office)]
	n.mu.Unlock()
	if !ok {
		return nil
	}
	return n.load(ctx, office, false)
}

// Office returns the members of any office, from the node's copy when it
// follows the office, else read from Redis (one script). It is for
// inspection (the server's office listing), not for routing.
func (n *Node) Office(ctx context.Context, office string) ([]Member, error) {
	n.mu.Lock()
	v := n.views[officeChannel(office)]
	if v != nil && v.loaded {
		out := make([]Member, 0, len(v.members))
		for _, m := range v.members {
			out = append(out, m)
		}
		n.mu.Unlock()
		return out, nil
	}
	n.mu.Unlock()
	c, cancel := n.op(ctx)
	defer cancel()
	res, err := snapshotScript.Run(c, n.rdb, officeKeys(office)).Slice()
	if err != nil {
		return nil, n.fail("snapshot", err)
	}
	var out []Member
	for i := 1; i+1 < len(res); i += 2 {
		sid, _ := res[i].(string)
		rec, _ := res[i+1].(string)
		if m, err := parseMember(sid, rec); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// Conn is the connection that asks to join, as its node knows it.
type Conn struct {
	SID string
	// Role is the role of the connection's first join ("" before it).
	Role smcp.Role
	// Version is the a2c_version it presented at the handshake.
	Version string
}

// Join applies the office rules cluster-wide to the connection c, which
// now sits at cur (the zero Seat if nowhere), asking for req. It returns the same decision as
// the single-node rules; when accepted the seat is taken in Redis and the
// entry is published, and a Computer that switched offices has left the
// former one. An error (ErrUnavailable) means nothing was decided: the
// caller refuses with [RefuseUnavailable].
func (n *Node) Join(ctx context.Context, c Conn, cur, req Seat) (Decision, error) {
	if d, done := decideLocal(c.Role, cur, req); done {
		return d, nil
	}
	sid := c.SID
	if !validID(sid) || !validVersion(c.Version) || req.Name == "" || len(req.Name) > MaxField {
		return Decision{}, fmt.Errorf("cluster: invalid member %q %q %q", sid, c.Version, req.Name)
	}
	if !n.healthy.Load() {
		return Decision{}, fmt.Errorf("%w: not connected", ErrUnavailable)
	}
	if n.settling() {
		return Decision{}, fmt.Errorf("%w: settling after Redis lost the cluster state", ErrUnavailable)
	}
	m := Member{SID: sid, Role: req.Role, Name: req.Name, Node: n.id, Version: c.Version}
	if err := n.follow(ctx, req.Office); err != nil {
		return Decision{}, err
	}
	defer n.unpin(req.Office)
	code, holder, err := n.seat(ctx, req.Office, m)
	if err == nil && code >= 2 && code <= 3 && holder != "" && holder != n.id && !n.alive(ctx, holder) {
		// The seat's holder is on a dead node not swept yet: sweep this
		// office for it now, then try once more.
		if _, err = n.sweepOffice(ctx, holder, req.Office); err == nil {
			code, _, err = n.seat(ctx, req.Office, m)
		}
	}
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	switch code {
	case 0, 1:
		n.mu.Lock()
		if n.local[req.Office] == nil {
			n.local[req.Office] = make(map[string]Member)
		}
		n.local[req.Office][sid] = m
		n.mu.Unlock()
		d.Already = code == 1 && cur.Office == req.Office
		if cur.Office != "" && cur.Office != req.Office {
			d.SwitchOffice = true
			if err := n.Leave(ctx, cur.Office, sid); err != nil {
				n.log.Warn("switching office: leave deferred to the next re-assert", "office", cur.Office, "err", err)
			}
		}
		if err := n.load(ctx, req.Office, false); err != nil {
			n.needSync.Store(true)
		}
		return d, nil
	case 2:
		d.Refuse = RefuseAgentTaken
	case 3:
		d.Refuse = RefuseNameTaken
	default:
		d.Refuse = RefuseOtherName
	}
	return d, nil
}

// seat runs the join script. The office is added to the node's index
// first, so the index always covers the node's seats and a sweep after a
// crash between the two finds every one.
func (n *Node) seat(ctx context.Context, office string, m Member) (code int64, holder string, err error) {
	c, cancel := n.op(ctx)
	defer cancel()
	// The lease is read with the index update: if it is gone, Redis lost
	// the cluster state (restarted empty) and this node has not noticed
	// yet; a seat taken now could be another node's live member's, not
	// re-asserted yet. The heartbeat registers again and settles first.
	var lease *redis.IntCmd
	_, err = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		lease = p.Exists(c, leaseKey(n.id))
		p.SAdd(c, nodeIndex(n.id), office)
		return nil
	})
	if err != nil {
		return 0, "", n.fail("index", err)
	}
	if lease.Val() == 0 {
		n.needSync.Store(true)
		return 0, "", fmt.Errorf("%w: this node's lease is gone", ErrUnavailable)
	}
	res, err := joinScript.Run(c, n.rdb, officeKeys(office), m.SID, string(m.Role), m.Name, m.Node, officeChannel(office), n.pubCmd, m.Version).Slice()
	if err != nil {
		return 0, "", n.fail("join", err)
	}
	if len(res) == 0 {
		return 0, "", fmt.Errorf("%w: join: empty reply", ErrUnavailable)
	}
	code, _ = res[0].(int64)
	if len(res) > 1 {
		holder, _ = res[1].(string)
	}
	if code >= 0 && code <= 1 && m.Role == smcp.RoleComputer {
		_ = n.rdb.SAdd(c, nameKey(m.Name), office).Err()
	}
	return code, holder, nil
}

// Leave removes the connection sid, held by this node, from office and
// publishes its departure. Without Redis the member is forgotten locally
// at once and its record removed by the next re-assert.
func (n *Node) Leave(ctx context.Context, office, sid string) error {
	n.mu.Lock()
	m, held := n.local[office][sid]
	if held {
		delete(n.local[office], sid)
		if len(n.local[office]) == 0 {
			delete(n.local, office)
		}
	}
	n.mu.Unlock()
	left := false // the record is gone from Redis: the index may drop the office
	defer func() { n.unfollowIfIdle(office, left) }()
	c, cancel := n.op(ctx)
	defer cancel()
	rec, err := leaveScript.Run(c, n.rdb, officeKeys(office), sid, n.id, officeChannel(office), n.pubCmd).Text()
	if errors.Is(err, redis.Nil) {
		left = true
		return nil
	}
	if err != nil {
		n.needSync.Store(true)
		return n.fail("leave", err)
	}
	left = true
	if held && m.Role == smcp.RoleComputer {
		n.dropName(c, rec, office)
	}
	return nil
}

// dropName removes office from the name index of the Computer in rec,
// unless the office holds that name again.
func (n *Node) dropName(ctx context.Context, rec, office string) {
	m, err := parseMember("x", rec)
	if err != nil || m.Role != smcp.RoleComputer {
		return
	}
	_ = n.rdb.SRem(ctx, nameKey(m.Name), office).Err()
}

// ComputerElsewhere reports whether a Computer of this name sits in any
// office: it tells "not in your office" (4104) from "not found" (404) on
// the error path of a relay, never on a call that is delivered.
//
// The index is updated after the seat scripts, best effort, so it may
// name an office where the name no longer sits (a removal lost under
// load): the offices it names are checked against their seats, and the
// stale entries removed, so the answer heals instead of staying wrong.
func (n *Node) ComputerElsewhere(ctx context.Context, name string) (bool, error) {
	c, cancel := n.op(ctx)
	defer cancel()
	const sample = 16
	offices, err := n.rdb.SRandMemberN(c, nameKey(name), sample).Result()
	if err != nil {
		return false, n.fail("names", err)
	}
	if len(offices) == 0 {
		return false, nil
	}
	seats := make([]*redis.StringCmd, len(offices))
	_, err = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for i, o := range offices {
			seats[i] = p.HGet(c, officeKeys(o)[1], "c:"+name)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, n.fail("names", err)
	}
	var stale []any
	for i, cmd := range seats {
		if cmd.Err() == nil {
			return true, nil
		}
		stale = append(stale, offices[i])
	}
	_ = n.rdb.SRem(c, nameKey(name), stale...).Err()
	// Every office sampled was stale; a larger index may still hold a
	// live one.
	return len(offices) == sample, nil
}

// Lookup finds a member of a followed office by role and name in the
// node's copy, with no Redis command: this is how a request is routed.
func (n *Node) Lookup(office string, role smcp.Role, name string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v := n.views[officeChannel(office)]; v != nil {
		for _, m := range v.members {
			if m.Role == role && m.Name == name {
				return m, true
			}
		}
	}
	return Member{}, false
}

// Members returns the members of a followed office (every node's), in no
// order, from the node's copy.
func (n *Node) Members(office string) []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.views[officeChannel(office)]
	if v == nil {
		return nil
	}
	out := make([]Member, 0, len(v.members))
	for _, m := range v.members {
		out = append(out, m)
	}
	return out
}

// Nodes returns the ids of the nodes other than this one that hold a
// member of office: where a broadcast goes, one frame each.
func (n *Node) Nodes(office string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.views[officeChannel(office)]
	if v == nil {
		return nil
	}
	seen := map[string]bool{n.id: true}
	var out []string
	for _, m := range v.members {
		if !seen[m.Node] {
			seen[m.Node] = true
			out = append(out, m.Node)
		}
	}
	return out
}

// follow makes sure the node receives office's events before it changes
// the office, so that no event after its snapshot is missed, and pins the
// view until the caller's unpin.
func (n *Node) follow(ctx context.Context, office string) error {
	ch := officeChannel(office)
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	v, ok := n.views[ch]
	if !ok {
		v = &view{office: office, members: make(map[string]Member)}
		n.views[ch] = v
	}
	v.pins++
	n.mu.Unlock()
	if ok {
		return nil
	}
	if err := n.subscribe(ctx, ch); err != nil {
		// Not followed after all: the caller will not unpin.
		n.mu.Lock()
		if v.pins--; v.pins == 0 && len(n.local[office]) == 0 {
			delete(n.views, ch)
		}
		n.mu.Unlock()
		return err
	}
	return nil
}

// unpin ends a join's hold on the office's view.
func (n *Node) unpin(office string) {
	n.mu.Lock()
	if v := n.views[officeChannel(office)]; v != nil {
		v.pins--
	}
	n.mu.Unlock()
	// A join that took no seat leaves no record: the office may leave
	// the index again (a failed one set needSync, which prevents it).
	n.unfollowIfIdle(office, true)
}

// unfollowIfIdle stops following an office where the node holds nobody
// and no join is in progress.
//
// With prune (the caller removed its member's record), the office also
// leaves the node's index, so the index, and a sweep after this node's
// death, stays the size of the offices it holds. That is safe under
// subMu: a join of this node into the office pins the view (under subMu)
// before it adds the office to the index, so it comes after. Not while
// a re-assert is due: the index is how it finds records left behind.
func (n *Node) unfollowIfIdle(office string, prune bool) {
	ch := officeChannel(office)
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	v, ok := n.views[ch]
	idle := ok && len(n.local[office]) == 0 && v.pins == 0
	if idle {
		delete(n.views, ch)
	}
	n.mu.Unlock()
	if idle {
		n.unsubscribe(ch)
		if prune && !n.needSync.Load() {
			c, cancel := n.op(n.ctx)
			_ = n.rdb.SRem(c, nodeIndex(n.id), office).Err()
			cancel()
		}
	}
}

// load reads an office's snapshot and makes it the node's copy, then
// applies the events that arrived meanwhile with a later version. The
// differences from the former copy are reported as events (version 0),
// so a member that vanished during an outage ends its pending calls. A
// snapshot older than the copy (events applied while it was read) is
// dropped, unless force says the versions may have started again (Redis
// lost its state: the re-assert and the end of settling).
func (n *Node) load(ctx context.Context, office string, force bool) error {
	c, cancel := n.op(ctx)
	defer cancel()
	res, err := snapshotScript.Run(c, n.rdb, officeKeys(office)).Slice()
	if err != nil {
		return n.fail("snapshot", err)
	}
	if len(res) == 0 || len(res)%2 == 0 {
		return fmt.Errorf("%w: snapshot: %d values", errMember, len(res))
	}
	ver, _ := res[0].(int64)
	fresh := make(map[string]Member, len(res)/2)
	for i := 1; i+1 < len(res); i += 2 {
		sid, _ := res[i].(string)
		rec, _ := res[i+1].(string)
		m, err := parseMember(sid, rec)
		if err != nil {
			n.log.Warn("member record skipped", "office", office, "err", err)
			continue
		}
		fresh[sid] = m
	}
	var out []Event
	n.mu.Lock()
	v := n.views[officeChannel(office)]
	if v == nil {
		n.mu.Unlock()
		return nil
	}
	if v.loaded && !force && ver < v.version {
		n.mu.Unlock()
		return nil
	}
	for sid, m := range v.members {
		if _, ok := fresh[sid]; !ok {
			out = append(out, Event{Office: office, Member: m})
		}
	}
	for sid, m := range fresh {
		if old, ok := v.members[sid]; !ok || old != m {
			out = append(out, Event{Office: office, Enter: true, Member: m})
		}
	}
	v.members, v.version, v.loaded = fresh, ver, true
	pending := v.pending
	v.pending = nil
	for _, ev := range pending {
		out = append(out, n.applyLocked(v, ev)...)
	}
	n.mu.Unlock()
	n.emit(out)
	return nil
}

// onEvent applies one message of an office channel to the node's copy.
// While the node settles, events are not applied (their versions start
// again after a restart) and the reload at the end catches up.
func (n *Node) onEvent(ch, payload string) {
	if n.settling() {
		n.needReload.Store(true)
		return
	}
	n.mu.Lock()
	v := n.views[ch]
	if v == nil {
		n.mu.Unlock()
		return
	}
	ev, err := parseEvent(v.office, payload)
	if err != nil {
		n.mu.Unlock()
		n.log.Warn("event dropped", "office", v.office, "err", err)
		return
	}
	if !v.loaded {
		v.pending = append(v.pending, ev)
		n.mu.Unlock()
		return
	}
	if ev.Version > v.version+1 {
		// A gap: an event was missed. Reload the office.
		office := v.office
		n.mu.Unlock()
		if err := n.load(n.ctx, office, false); err != nil {
			n.needSync.Store(true)
		}
		return
	}
	out := n.applyLocked(v, ev)
	n.mu.Unlock()
	n.emit(out)
}

func (n *Node) applyLocked(v *view, ev Event) []Event {
	if ev.Version <= v.version {
		return nil
	}
	v.version = ev.Version
	if ev.Enter {
		v.members[ev.Member.SID] = ev.Member
	} else {
		delete(v.members, ev.Member.SID)
	}
	return []Event{ev}
}

func (n *Node) emit(evs []Event) {
	if n.h.Event == nil {
		return
	}
	for _, ev := range evs {
		n.h.Event(ev)
	}
}

// fail records a Redis failure and wraps it.
func (n *Node) fail(what string, err error) error {
	if n.ctx.Err() == nil {
		n.healthy.Store(false)
		n.needSync.Store(true)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

// settling reports whether the node is settling after it lost its lease.
func (n *Node) settling() bool { return time.Now().UnixNano() < n.settleUntil.Load() }

func (n *Node) alive(ctx context.Context, node string) bool {
	c, cancel := n.op(ctx)
	defer cancel()
	k, err := n.rdb.Exists(c, leaseKey(node)).Result()
	return err != nil || k > 0 // in doubt, alive
}

// CensusKey is a group of [Node.Census]: the node holding the members and
// their role.
type CensusKey struct {
	Node string
	Role smcp.Role
}

// Census counts the members of the offices this node follows, by the node
// that holds each and role, from the node's copy: what the server's
// metrics show of where the cluster's members sit.
func (n *Node) Census() map[CensusKey]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[CensusKey]int)
	for _, v := range n.views {
		for _, m := range v.members {
			out[CensusKey{m.Node, m.Role}]++
		}
	}
	return out
}
