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
