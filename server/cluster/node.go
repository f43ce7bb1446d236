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

	// st is the node's standing with Redis, published by the keeper
	// (see state.go); troubles and kick are how other goroutines tell the
	// keeper what they ran into.
	st       atomic.Pointer[state]
	troubles atomic.Uint32
	kick     chan struct{}

	// reloads are the followed offices whose copy must be read again
	// (a version gap, a re-subscription, the end of settling), done by
	// the loader goroutine off the receivers' path; the value is the
	// load's force. loaderWake wakes it.
	reloadMu   sync.Mutex
	reloads    map[string]bool
	loaderWake chan struct{}

	// subMu orders the subscriptions to office channels with the views
	// they feed, so an unsubscribe never overtakes a newer subscribe.
	subMu sync.Mutex
	mu    sync.Mutex
	local map[string]map[string]Member // office -> sid -> member held here
	views map[string]*view             // event channel -> followed office

	// sub receives the node channel (mine) and the followed offices'
	// channels (see subscribe.go).
	sub  *subscriber
	mine string

	// pub publishes frames on a single Redis without TLS (see publish.go);
	// nil on a Redis Cluster or with TLS, where go-redis publishes them.
	pub *publisher
	// seal seals the frames sent and checks those received (auth.go).
	seal *sealer
	// backlog counts the bytes of frames waiting to be published, the
	// server's queues' included (see Reserve).
	backlog backlog
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
		local: make(map[string]map[string]Member), views: make(map[string]*view), mine: nodeChannel(cfg.NodeID),
		kick: make(chan struct{}, 1), reloads: make(map[string]bool), loaderWake: make(chan struct{}, 1)}
	n.seal = newSealer(cfg.Key, n.log)
	n.backlog.max = cfg.MaxBacklog
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
		n.pub = newPublisher(n, opts.Addrs[0], authArgs(opts.Username, opts.Password))
		n.pub.start()
	}
	n.sub = newSubscriber(subscriberConfig{
		Addrs: opts.Addrs, Cluster: cluster,
		Username: opts.Username, Password: opts.Password, TLS: opts.TLSConfig,
		OpTimeout: cfg.OpTimeout, Deliver: n.deliver, Resumed: n.resumed,
		Logger: n.log, ClientName: "a2c-" + cfg.NodeID + "-sub", Poller: cfg.Poller,
	})
	if err := n.subscribe(ctx, nodeChannel(n.id)); err != nil {
		n.Close()
		return nil, err
	}
	n.wg.Add(3)
	go n.keeper()
	go n.sweeper()
	go n.loader()
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

// Healthy reports whether the node stands well with Redis: its lease is
// held and no command has failed since the keeper's last successful
// round (it is also true while the node settles).
func (n *Node) Healthy() bool { return n.state().phase != phaseCut }

// Epoch is the node's current registration: it goes up each time the
// node takes its lease again (at start, and after losing it), and every
// member the node seats carries it (see [Member].Epoch).
func (n *Node) Epoch() int64 { return n.state().epoch }

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
	_ = n.sub.Close()
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
		p.PExpire(c, epochKey(n.id), 24*time.Hour)
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
// A previous process's leftovers (members of the earlier epochs, index)
// are then swept, as another node's sweeper would, before the node takes
// any seat.
func (n *Node) claim(ctx context.Context) error {
	deadline := time.Now().Add(n.cfg.LeaseTTL + 2*n.cfg.Heartbeat)
	var epoch int64
	for {
		var err error
		if epoch, err = n.register(ctx, true); err != nil {
			return err
		}
		if epoch > 0 {
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
	n.publishState(state{phase: phaseLive, epoch: epoch})
	c, cancel := n.op(ctx)
	offices, err := n.rdb.SMembers(c, nodeIndex(n.id)).Result()
	cancel()
	if err == nil && len(offices) > 0 {
		err = n.sweepOffices(ctx, n.id, offices, epoch-1)
	}
	if err == nil {
		c, cancel := n.op(ctx)
		err = n.rdb.Del(c, nodeIndex(n.id)).Err()
		cancel()
		if len(offices) > 0 {
			n.log.Debug("a previous process's records swept", "offices", len(offices))
		}
	}
	if err != nil {
		return fmt.Errorf("%w: sweeping a previous process's members: %w", ErrUnavailable, err)
	}
	return nil
}

// register takes the node's lease under a new epoch, returned, and
// registers the node. With nx it does so only if no lease exists, and
// returns 0 otherwise.
func (n *Node) register(ctx context.Context, nx bool) (int64, error) {
	c, cancel := n.op(ctx)
	defer cancel()
	mode := ""
	if nx {
		mode = "nx"
	}
	epoch, err := registerScript.Run(c, n.rdb, nodeKeys(n.id)[:2], n.cfg.LeaseTTL.Milliseconds(), mode).Int64()
	if err == nil && epoch > 0 {
		err = n.rdb.SAdd(c, nodesKey, n.id).Err()
	}
	if err != nil {
		return 0, fmt.Errorf("%w: register: %w", ErrUnavailable, err)
	}
	return epoch, nil
}

// at calls the test hook, if any.
func (n *Node) at(point, node string) {
	if n.cfg.hook != nil {
		n.cfg.hook(point, node)
	}
}

// fail reports a Redis failure to the keeper (its effect on Redis is
// unknown: the keeper re-asserts) and wraps it.
func (n *Node) fail(what string, err error) error {
	if n.ctx.Err() == nil {
		n.report(troubleFailed)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

// settling reports whether the node is settling after it lost its lease.
func (n *Node) settling() bool { return n.state().phase == phaseSettling }

// judge tells whether node is dead: -1 while its lease lives (or in
// doubt), else the last epoch to sweep.
func (n *Node) judge(ctx context.Context, node string) int64 {
	c, cancel := n.op(ctx)
	defer cancel()
	v, err := judgeScript.Run(c, n.rdb, nodeKeys(node)[:2]).Int64()
	if err != nil {
		return -1 // in doubt, alive
	}
	return v
}
