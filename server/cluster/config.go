package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config configures a [Node]. Only URL is required.
type Config struct {
	// URL names Redis: redis://[user:pass@]host:port[/db],
	// rediss://... for TLS, or several such URLs (or host:port
	// addresses) separated by commas for a Redis Cluster, whose nodes are
	// then found from any of them. See [ParseURL].
	URL string
	// NodeID names this node in Redis and on the other nodes. Default: 16
	// random hex digits. Letters, digits, '-', '_' and '.' only.
	NodeID string
	// LeaseTTL is how long the node's lease lives without a heartbeat:
	// a node whose lease has expired is dead. Default 5s.
	LeaseTTL time.Duration
	// Heartbeat is how often the lease is renewed. Default LeaseTTL/5.
	Heartbeat time.Duration
	// SweepEvery is how often this node looks for dead nodes to sweep.
	// Default 1s.
	SweepEvery time.Duration
	// OpTimeout bounds every Redis command this package sends. Default 1s.
	OpTimeout time.Duration
	// Observe, if set, is told of every Redis command the node sends (a
	// pipeline counts as one, named "pipeline"): its lower-case name, how
	// long it took and its error (nil on success; a missing key is not an
	// error). The server turns it into its Redis latency and error
	// metrics; it must not block.
	Observe func(cmd string, d time.Duration, err error)
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Key is the cluster key every node of the cluster shares: each frame
	// a node publishes is sealed with it (an HMAC bound to the channel,
	// with the sender's clock and a sequence number), and a frame whose
	// seal does not hold, is more than 30 s old or is seen a second time
	// is refused (see the package documentation). At least [MinKeySize]
	// bytes; use 32 random ones. nil or empty: frames are neither sealed
	// nor checked, and anyone who may PUBLISH on the Redis can make a node
	// relay a request of their choosing.
	Key []byte
	// MaxBacklog bounds the bytes of frames waiting to be published to
	// other nodes (Redis unreachable or not keeping up), counted by
	// [FrameCost], across every queue of the node and of the server
	// around it ([Node.Reserve]). A frame that would pass it fails at once
	// with [ErrBacklogFull]. Default 64 MiB.
	MaxBacklog int64
	// Poller, if set, reads the node's subscription connections and its
	// publishing connection (plain TCP ones: not rediss://) on an event
	// loop the process already runs, so a frame from another node, and
	// the reply to a frame published, are handled on the goroutine that
	// serves the WebSockets, with no goroutine of their own to wake: the
	// server passes its Socket.IO event loop. nil, or a Poller that
	// refuses: each connection has its reader goroutine.
	Poller Poller

	// hook, set by this package's tests only, is called at the points of
	// the node's work where a race with another node can be staged
	// ("step": the keeper's round; "judged": a sweep found node dead;
	// "swept": it swept its offices and is about to forget it).
	hook func(point, node string)
}

func (c *Config) fill() error {
	if c.NodeID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.NodeID = hex.EncodeToString(b[:])
	}
	if !validID(c.NodeID) {
		return fmt.Errorf("cluster: node id %q: use 1 to 128 letters, digits, '-', '_' or '.'", c.NodeID)
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.LeaseTTL / 5
	}
	if c.Heartbeat >= c.LeaseTTL {
		return fmt.Errorf("cluster: heartbeat %v must be shorter than the lease %v", c.Heartbeat, c.LeaseTTL)
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = time.Second
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	if c.LeaseTTL-c.Heartbeat <= c.leaseMargin() {
		return fmt.Errorf("cluster: the lease %v must outlast the command timeout %v plus one and a half heartbeats %v", c.LeaseTTL, c.OpTimeout, c.Heartbeat)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.Key) > 0 && len(c.Key) < MinKeySize {
		return fmt.Errorf("cluster: the cluster key has %d bytes; it needs at least %d (32 random bytes are best)", len(c.Key), MinKeySize)
	}
	if c.MaxBacklog <= 0 {
		c.MaxBacklog = DefaultMaxBacklog
	}
	return nil
}

// Poller runs readiness callbacks for descriptors on an event loop (see
// [Config].Poller).
type Poller interface {
	// Watch calls ready on the loop each time the non-blocking
	// descriptor fd is readable (level-triggered), until ready returns
	// false or the watch is stopped. ready reads once, never blocks, and
	// never stops its own watch. The descriptor stays the caller's, to
	// close once Stop has returned.
	Watch(fd int, ready func() bool) (Watching, error)
}

// Watching is a watch begun by [Poller].Watch.
type Watching interface {
	// Stop ends the watch; when it returns, ready is not running and
	// never runs again. Safe to call more than once.
	Stop()
	// Done is closed when the watch has ended, by ready's false, by Stop,
	// or because the loop closed.
	Done() <-chan struct{}
}

// DefaultMaxBacklog is [Config].MaxBacklog's default: 64 MiB.
const DefaultMaxBacklog = 64 << 20

// leaseMargin is how long the lease must still live for a join to seat a
// member (see Node.seat): the join's command deadline, plus half a
// heartbeat for the clocks of this process and Redis to disagree.
func (c Config) leaseMargin() time.Duration { return c.OpTimeout + c.Heartbeat/2 }

// RemovalBound is the longest time from a node's death (kill -9) to the
// publication of its members' departures: the lease must expire (at most
// LeaseTTL after the last heartbeat), then the next sweep finds it (within
// SweepEvery) and runs one index read and one script per office, each
// within OpTimeout (counted twice for the index and the scripts of a
// node's offices, which run back to back). With the defaults: 5 + 1 + 2 =
// 8 s, well inside the 15 s the documentation promises.
func (c Config) RemovalBound() time.Duration {
	return c.LeaseTTL + c.SweepEvery + 2*c.OpTimeout
}

// ParseURL turns a Redis URL (or a comma-separated list for a Redis
// Cluster) into go-redis options, and reports whether it names a
// cluster. One URL is a single Redis (or one Valkey); two or more are the
// seed nodes of a Redis Cluster, which must agree on user, password and
// TLS (the first one's are used) and select database 0.
func ParseURL(s string) (*redis.UniversalOptions, bool, error) {
	var parts []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil, false, errors.New("cluster: empty Redis URL")
	}
	u := &redis.UniversalOptions{}
	for i, p := range parts {
		if !strings.Contains(p, "://") {
			p = "redis://" + p
		}
		o, err := redis.ParseURL(p)
		if err != nil {
			return nil, false, fmt.Errorf("cluster: Redis URL %d: %w", i+1, err)
		}
		if i == 0 {
			u.Username, u.Password, u.DB, u.TLSConfig = o.Username, o.Password, o.DB, o.TLSConfig
		}
		u.Addrs = append(u.Addrs, o.Addr)
	}
	cluster := len(parts) > 1
	if cluster && u.DB != 0 {
		return nil, false, errors.New("cluster: a Redis Cluster has database 0 only")
	}
	u.IsClusterMode = cluster
	// No command is re-sent by the client library: it would re-send one
	// Redis already ran when the connection broke after the write (a
	// PUBLISH of a request twice could run a tool twice). Every caller
	// here handles a failure itself: requests end, answers and broadcasts
	// are retried by the server until their deadline, the heartbeat and
	// the sweeper try again on their next tick, joins are refused.
	u.MaxRetries = -1
	return u, cluster, nil
}
