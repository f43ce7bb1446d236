package cluster

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// gate stages a race: the node's goroutine that reaches a hook point
// waits until the test opens the gate, and the test learns that it got
// there.
type gate struct {
	point, node string
	reached     chan struct{}
	open        chan struct{}
	once        sync.Once
}

func newGate(point, node string) *gate {
	return &gate{point: point, node: node, reached: make(chan struct{}), open: make(chan struct{})}
}

// hold is a Config.hook: it stops the first goroutine at the gate's
// point until the gate opens (later ones pass).
func (g *gate) hold(point, node string) {
	if point != g.point || node != g.node {
		return
	}
	first := false
	g.once.Do(func() { first = true; close(g.reached) })
	if first {
		<-g.open
	}
}

// waitReached waits until the gate's point is reached.
func (g *gate) waitReached(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-g.reached:
	case <-time.After(d):
		t.Fatalf("%s of %s never reached", g.point, g.node)
	}
}

// record returns sid's record in office, parsed, or false.
func record(t *testing.T, r *redistest.Server, office, sid string) (Member, bool) {
	t.Helper()
	v, err := r.Do("HGET", officeKeys(office)[0], sid)
	if err != nil || v == "" {
		return Member{}, false
	}
	m, err := parseMember(sid, v)
	if err != nil {
		t.Fatalf("record %q: %v", v, err)
	}
	return m, true
}

// isMember reports whether SISMEMBER key member holds.
func isMember(t *testing.T, r *redistest.Server, key, member string) bool {
	t.Helper()
	v, err := r.Do("SISMEMBER", key, member)
	return err == nil && v == "1"
}

// TestSweptWhileAliveNoGhost is the review's first reproduction. Node na
// is judged dead (its lease gone, as after a pause longer than the
// lease) and swept by node ns; na comes back, registers and re-seats its
// Computer while the sweep is under way, before the sweeper forgets it.
// The forget must not erase what na re-registered (its index, its
// registration), so that when na really dies its member is swept: before
// the fix its heartbeat kept a lease alive with no index and no
// registration, and its member stayed in Redis for ever ("GHOST").
func TestSweptWhileAliveNoGhost(t *testing.T) {
	r := redistest.Start(t)
	hold := newGate("step", "na")    // na's keeper, held while the sweep runs
	forget := newGate("swept", "na") // ns, about to forget na
	acfg := fastConfig(r.URL(), "na")
	acfg.hook = hold.hold
	scfg := fastConfig(r.URL(), "ns")
	scfg.hook = forget.hold
	// The hooks must not catch the nodes' start-up: arm them after.
	var armed sync.WaitGroup
	armed.Add(1)
	acfg.hook = func(p, n string) { armed.Wait(); hold.hold(p, n) }
	a := startNode(t, acfg)
	s := startNode(t, scfg)
	mustJoin(t, a, "sa1", Seat{}, computer("o", "pc"))
	before, _ := record(t, r, "o", "sa1")
	armed.Done()
	hold.waitReached(t, 2*time.Second) // na's keeper stands still from here
	if _, err := r.Do("DEL", leaseKey("na")); err != nil {
		t.Fatal(err)
	}
	forget.waitReached(t, 5*time.Second) // ns judged na dead and swept o
	if _, ok := record(t, r, "o", "sa1"); ok {
		t.Fatal("the sweep left sa1")
	}
	close(hold.open) // na comes back: registers again, re-seats sa1
	redistest.WaitFor(t, 5*time.Second, "na re-seated sa1 under a new epoch", func() bool {
		m, ok := record(t, r, "o", "sa1")
		return ok && m.Epoch > before.Epoch
	})
	close(forget.open)
	// na stays registered and indexed, whatever the forget did.
	redistest.WaitFor(t, 3*time.Second, "na registered and indexed", func() bool {
		return isMember(t, r, nodesKey, "na") && isMember(t, r, nodeIndex("na"), "o")
	})
	// na dies for good (kill -9: no leave, the lease runs out).
	a.Close()
	died := time.Now()
	redistest.WaitFor(t, acfg.RemovalBound()+3*time.Second, "GHOST: dead node na's member sa1 swept", func() bool {
		_, ok := record(t, r, "o", "sa1")
		return !ok
	})
	t.Logf("swept %v after its death", time.Since(died))
	if _, ok := s.Lookup("o", smcp.RoleComputer, "pc"); ok {
		t.Error("ns still routes to pc")
	}
}

// TestReseatedNotSwept: the same race one step earlier. Node na comes
// back between ns's judgement and its sweep of na's offices, and
// re-seats its Computer; the sweep (of the epoch judged dead) must leave
// the re-seated member alone, or a third node could give its seat out
// while na still serves it (two holders of one name).
func TestReseatedNotSwept(t *testing.T) {
	r := redistest.Start(t)
	hold := newGate("step", "na")
	judged := newGate("judged", "na")
	var armed sync.WaitGroup
	armed.Add(1)
	acfg := fastConfig(r.URL(), "na")
	acfg.hook = func(p, n string) { armed.Wait(); hold.hold(p, n) }
	scfg := fastConfig(r.URL(), "ns")
	scfg.hook = judged.hold
	a := startNode(t, acfg)
	startNode(t, scfg)
	b := startNode(t, fastConfig(r.URL(), "nb"))
	mustJoin(t, a, "sa1", Seat{}, computer("o", "pc"))
	before, _ := record(t, r, "o", "sa1")
	armed.Done()
	hold.waitReached(t, 2*time.Second)
	if _, err := r.Do("DEL", leaseKey("na")); err != nil {
		t.Fatal(err)
	}
	judged.waitReached(t, 5*time.Second)
	close(hold.open)
	redistest.WaitFor(t, 5*time.Second, "na re-seated sa1 under a new epoch", func() bool {
		m, ok := record(t, r, "o", "sa1")
		return ok && m.Epoch > before.Epoch
	})
	close(judged.open)
	// Let the sweep run out, then the seat must still be na's.
	redistest.WaitFor(t, 3*time.Second, "ns forgot nothing of na's", func() bool {
		return isMember(t, r, nodesKey, "na") && isMember(t, r, nodeIndex("na"), "o")
	})
	if _, ok := record(t, r, "o", "sa1"); !ok {
		t.Fatal("the sweep removed sa1, re-seated by its live node")
	}
	redistest.WaitFor(t, 3*time.Second, "na live again", func() bool { return a.state().phase == phaseLive })
	d, err := b.Join(context.Background(), Conn{SID: "thief", Version: "0.4.0"}, Seat{}, computer("o", "pc"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Refuse != RefuseNameTaken {
		t.Fatalf("a third node took pc while na serves it: %+v", d)
	}
}

// TestLostEventReloaded is the review's second reproduction: a node's
// subscription connection is killed in the same MULTI as a Computer's
// leave on another node, so the departure is published while nobody
// listens on that connection. The node must notice the re-made
// subscription and reload the office: before the fix a quiet office kept
// its stale copy for ever ("A routes to departed pc = true").
func TestLostEventReloaded(t *testing.T) {
	for _, mode := range []string{"redis", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			var url string
			var kill func(ctx context.Context, p redis.Pipeliner, id string)
			var rdb redis.UniversalClient
			if mode == "redis" {
				r := redistest.Start(t)
				url = r.URL()
			} else {
				url = redistest.StartCluster(t)
			}
			opts, _, err := ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			rdb = redis.NewUniversalClient(opts)
			t.Cleanup(func() { _ = rdb.Close() })
			a := startNode(t, fastConfig(url, "la"))
			b := startNode(t, fastConfig(url, "lb"))
			mustJoin(t, a, "agent1", Seat{}, agent("o", "A"))
			mustJoin(t, b, "pc1", Seat{}, computer("o", "pc"))
			redistest.WaitFor(t, 3*time.Second, "la sees pc", func() bool {
				_, ok := a.Lookup("o", smcp.RoleComputer, "pc")
				return ok
			})
			ctx := context.Background()
			// The pub/sub connection of la that carries office o's events:
			// on a Redis Cluster, on o's shard master.
			var conn redis.UniversalClient = rdb
			if cc, ok := rdb.(*redis.ClusterClient); ok {
				m, err := cc.MasterForKey(ctx, officeKeys("o")[0])
				if err != nil {
					t.Fatal(err)
				}
				conn = m
			}
			list, err := conn.ClientList(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			var id string
			for line := range strings.SplitSeq(list, "\n") {
				if strings.Contains(line, " name=a2c-la-sub ") && (strings.Contains(line, "sub=1") || strings.Contains(line, "ssub=1") || strings.Contains(line, " cmd=subscribe") || strings.Contains(line, " cmd=ssubscribe")) {
					for f := range strings.FieldsSeq(line) {
						if v, ok := strings.CutPrefix(f, "id="); ok {
							id = v
						}
					}
				}
			}
			if id == "" {
				t.Fatalf("no pub/sub connection of la in:\n%s", list)
			}
			kill = func(ctx context.Context, p redis.Pipeliner, id string) {
				n, _ := strconv.ParseInt(id, 10, 64)
				p.ClientKillByFilter(ctx, "ID", strconv.FormatInt(n, 10))
			}
			// pc leaves lb in Redis, in the same step as la's connection
			// dies; lb forgets it locally as its Leave would.
			b.mu.Lock()
			delete(b.local, "o")
			b.mu.Unlock()
			var tx redis.Pipeliner
			if m, ok := conn.(*redis.Client); ok {
				tx = m.TxPipeline()
			} else {
				t.Fatalf("no single connection to %T", conn)
			}
			kill(ctx, tx, id)
			leaveScript.Eval(ctx, tx, officeKeys("o"), "pc1", "lb", officeChannel("o"), b.pubCmd)
			if _, err := tx.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := record2(ctx, conn, "o", "pc1"); ok {
				t.Fatal("pc1 still seated")
			}
			redistest.WaitFor(t, 5*time.Second, "A routes to departed pc = false", func() bool {
				_, ok := a.Lookup("o", smcp.RoleComputer, "pc")
				return !ok
			})
			gone := false
			for _, e := range a.eventsOf("o") {
				gone = gone || (!e.Enter && e.Member.SID == "pc1")
			}
			if !gone {
				t.Fatal("la's handler never heard that pc1 left")
			}
			if n := a.SubscriptionBreaks(); n < 1 {
				t.Fatalf("la's subscription broke, SubscriptionBreaks = %d", n)
			}
		})
	}
}

func record2(ctx context.Context, c redis.UniversalClient, office, sid string) (string, bool) {
	v, err := c.HGet(ctx, officeKeys(office)[0], sid).Result()
	return v, err == nil
}

// TestSeatNeedsLiveLease: a join takes its seat only while the node's
// lease holds the node's epoch and lives longer than the join's command
// deadline (the lease check and the index update are one script, and
// the join script follows within that deadline). Before, the lease was
// read in one command and the seat taken in another: a node paused
// between the two seated a member after a sweeper had read its index,
// where no sweep would ever find it.
func TestSeatNeedsLiveLease(t *testing.T) {
	r := redistest.Start(t)
	cfg := fastConfig(r.URL(), "na")
	// The keeper must not renew the lease while the test holds it low.
	hold := newGate("step", "na")
	var armed sync.WaitGroup
	armed.Add(1)
	cfg.hook = func(p, n string) { armed.Wait(); hold.hold(p, n) }
	a := startNode(t, cfg)
	epoch := strconv.FormatInt(a.state().epoch, 10)
	armed.Done()
	hold.waitReached(t, 2*time.Second)
	defer close(hold.open)
	cases := []struct {
		name string
		set  []string // the command that puts the lease in the case's state
	}{
		{"lease about to expire", []string{"SET", leaseKey("na"), epoch, "PX", strconv.FormatInt(cfg.leaseMargin().Milliseconds()/2, 10)}},
		{"lease of another epoch", []string{"SET", leaseKey("na"), "999", "PX", "60000"}},
		{"lease gone", []string{"DEL", leaseKey("na")}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Do(tc.set...); err != nil {
				t.Fatal(err)
			}
			office := "o" + strconv.Itoa(i)
			_, err := a.Join(context.Background(), Conn{SID: "s" + strconv.Itoa(i), Version: "0.4.0"}, Seat{}, computer(office, "pc"))
			if err == nil {
				t.Fatal("joined without a live lease")
			}
			if _, ok := record(t, r, office, "s"+strconv.Itoa(i)); ok {
				t.Fatal("a member was seated without a live lease")
			}
			if isMember(t, r, nodeIndex("na"), office) {
				t.Fatal("the office entered the index without a live lease")
			}
			// Put the lease back for the next case.
			if _, err := r.Do("SET", leaseKey("na"), epoch, "PX", "60000"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
