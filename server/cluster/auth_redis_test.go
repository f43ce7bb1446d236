package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
)

// capture subscribes a plain Redis client (an attacker's, with read
// access) to ch and returns the messages published there.
func capture(t *testing.T, url, ch string) (<-chan *redis.Message, *redis.Client) {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ps := c.Subscribe(context.Background(), ch)
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	return ps.Channel(), c
}

// TestForgedFramesRefused: the attack of issue 30 on a real Redis. A
// client:tool_call frame from node a to node b is captured on b's
// channel, its arguments changed and PUBLISHed again: b refuses it
// (mac); the captured frame published again as it was (replay), onto
// another node's channel (mac) and an unsealed one (unsealed) are refused
// too, each counted; the nodes' own traffic goes on.
func TestForgedFramesRefused(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "fa"))
	b := startNode(t, fastConfig(r.URL(), "fb"))
	c := startNode(t, fastConfig(r.URL(), "fc"))
	caught, rc := capture(t, r.URL(), nodeChannel("fb"))
	ctx := context.Background()

	req := &Frame{Kind: KindRequest, From: "fa", To: "csid", Office: "o", Event: "client:tool_call", Call: 1, TimeoutMS: 5000,
		Payload: []byte(`[{"tool_name":"echo","params":{"text":"hi"}}]`)}
	send := func(f *Frame) {
		if a.Pipelined() {
			a.Send("fb", f, time.Time{}, func(err error) { t.Errorf("send: %v", err) })
		} else if err := a.Publish(ctx, "fb", f); err != nil {
			t.Fatal(err)
		}
	}
	send(req)
	if got := recv(t, b.frames); string(got.Payload) != string(req.Payload) {
		t.Fatalf("genuine frame: %+v", got)
	}
	var raw []byte
	select {
	case m := <-caught:
		raw = []byte(m.Payload)
	case <-time.After(3 * time.Second):
		t.Fatal("nothing captured")
	}
	if raw[0] != sealedVersion {
		t.Fatalf("frame on the wire is not sealed: %q", raw)
	}

	publish := func(ch string, b []byte) {
		t.Helper()
		if err := rc.Publish(ctx, ch, b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	altered := []byte(strings.Replace(string(raw), `"text":"hi"`, `"text":"rm"`, 1))
	publish(nodeChannel("fb"), altered)                     // changed args: mac
	publish(nodeChannel("fb"), raw)                         // as captured: replay
	publish(nodeChannel("fc"), raw)                         // onto another node: mac
	publish(nodeChannel("fb"), AppendFrame(nil, req))       // unsealed
	publish(nodeChannel("fb"), []byte{sealedVersion, 1, 2}) // malformed
	redistest.WaitFor(t, 3*time.Second, "the refusals counted", func() bool {
		return b.Refused() == Refusals{MAC: 1, Replay: 1, Unsealed: 1, Malformed: 1} && c.Refused().MAC == 1
	})

	// Real traffic still works, and nothing forged was delivered.
	next := *req
	next.Call = 2
	send(&next)
	if got := recv(t, b.frames); got.Call != 2 {
		t.Fatalf("delivered %+v, want the genuine call 2", got)
	}
	select {
	case f := <-b.frames:
		t.Fatalf("a forged frame was delivered: %+v", f)
	case f := <-c.frames:
		t.Fatalf("a frame for b was delivered to c: %+v", f)
	case <-time.After(100 * time.Millisecond):
	}
	if got := b.Refused(); got != (Refusals{MAC: 1, Replay: 1, Unsealed: 1, Malformed: 1}) {
		t.Fatalf("b refused %+v", got)
	}
}

// TestUnsealedWithoutKey: nodes without a key exchange unsealed frames,
// and one published by anyone is accepted (no authentication); a sealed
// frame reaching such a node is refused, as it cannot be checked.
func TestUnsealedWithoutKey(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, unsealed(fastConfig(r.URL(), "ua")))
	b := startNode(t, unsealed(fastConfig(r.URL(), "ub")))
	keyed := startNode(t, fastConfig(r.URL(), "uk"))
	ctx := context.Background()
	f := &Frame{Kind: KindRequest, From: "ua", To: "s", Office: "o", Event: "e", Call: 1, TimeoutMS: 1000}
	if err := a.Publish(ctx, "ub", f); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, b.frames); got.Call != 1 {
		t.Fatalf("got %+v", got)
	}
	if _, err := r.Do("PUBLISH", nodeChannel("ub"), string(AppendFrame(nil, &Frame{Kind: KindAnswer, From: "x", To: "s", Call: 9}))); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, b.frames); got.Call != 9 {
		t.Fatalf("got %+v", got)
	}
	if err := keyed.Publish(ctx, "ub", f); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 3*time.Second, "the sealed frame refused", func() bool { return b.Refused().MAC == 1 })
	if b.Refused() != (Refusals{MAC: 1}) {
		t.Fatalf("refused %+v", b.Refused())
	}
}

// TestBacklogBound: the node's backlog counts frames in bytes, shared by
// Send and Reserve: past MaxBacklog a frame fails at once with
// ErrBacklogFull, and what is published or failed is given back.
func TestBacklogBound(t *testing.T) {
	r := redistest.Start(t)
	cfg := fastConfig(r.URL(), "ka")
	cfg.MaxBacklog = 20000
	a := startNode(t, cfg)
	b := startNode(t, fastConfig(r.URL(), "kb"))
	if !a.Pipelined() {
		t.Skip("needs the pipelined publisher")
	}
	if !errors.Is(ErrBacklogFull, ErrUnavailable) {
		t.Fatal("ErrBacklogFull does not wrap ErrUnavailable")
	}
	// Reserve shares the bound with Send.
	if err := a.Reserve(cfg.MaxBacklog); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	ans := &Frame{Kind: KindAnswer, From: "ka", To: "s", Office: "o", Event: "e", Call: 1, Payload: make([]byte, 3000)}
	a.Send("kb", ans, time.Now().Add(10*time.Second), func(err error) { errs <- err })
	select {
	case err := <-errs:
		if !errors.Is(err, ErrBacklogFull) {
			t.Fatalf("err %v, want ErrBacklogFull", err)
		}
	default:
		t.Fatal("a frame past the bound did not fail at once")
	}
	if err := a.Reserve(1); !errors.Is(err, ErrBacklogFull) {
		t.Fatalf("Reserve past the bound: %v", err)
	}
	a.Release(cfg.MaxBacklog)
	if a.Backlog() != 0 {
		t.Fatalf("backlog %d after Release", a.Backlog())
	}

	// Redis stalls: frames wait, counted, until the bound; then they fail
	// at once; when Redis resumes the waiting ones arrive and the backlog
	// empties.
	pid := redisPID(t, r)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	cost := FrameCost(ans)
	fit := int(cfg.MaxBacklog / cost)
	for i := range fit + 3 {
		f := *ans
		f.Call = uint64(100 + i)
		a.Send("kb", &f, time.Now().Add(10*time.Second), func(err error) { errs <- fmt.Errorf("frame %d: %w", i, err) })
	}
	if got := a.Backlog(); got != int64(fit)*cost {
		t.Fatalf("backlog %d, want %d", got, int64(fit)*cost)
	}
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrBacklogFull) {
			t.Fatalf("%v, want ErrBacklogFull", err)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	for range fit {
		recv(t, b.frames)
	}
	redistest.WaitFor(t, 3*time.Second, "the backlog empty", func() bool { return a.Backlog() == 0 })
	select {
	case err := <-errs:
		t.Fatalf("a waiting frame failed: %v", err)
	default:
	}
}

// TestACLUser: two nodes whose Redis user has exactly the ACL that
// docs/cluster.md recommends (its own keys and channels, no dangerous
// command) run a cluster: joins, membership events, frames between
// them; and that user cannot publish elsewhere nor run a dangerous
// command.
func TestACLUser(t *testing.T) {
	r := redistest.Start(t)
	if _, err := r.Do(aclUser...); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(r.URL(), "redis://", "redis://a2c:pw-for-tests@", 1)
	twoNodesAs(t, url)
	o, _ := redis.ParseURL(url)
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	if err := c.Publish(ctx, "elsewhere", "x").Err(); err == nil {
		t.Fatal("the a2c user may publish outside a2c:*")
	}
	if err := c.Set(ctx, "other", "x", 0).Err(); err == nil {
		t.Fatal("the a2c user may write outside a2c:*")
	}
	if err := c.Do(ctx, "FLUSHALL").Err(); err == nil {
		t.Fatal("the a2c user may FLUSHALL")
	}
}

// aclUser is the ACL of docs/cluster.md, with +cluster|slots for a Redis
// Cluster, password pw-for-tests.
var aclUser = []string{"ACL", "SETUSER", "a2c", "on", ">pw-for-tests", "resetkeys", "~a2c:*", "resetchannels", "&a2c:*", "+@all", "-@dangerous", "+cluster|slots"}

// TestACLUserRedisCluster is TestACLUser on a Redis Cluster (every master
// has the user): shard channels, slots and the cluster client's own
// commands within the ACL.
func TestACLUserRedisCluster(t *testing.T) {
	seeds := redistest.StartCluster(t)
	var urls []string
	for u := range strings.SplitSeq(seeds, ",") {
		o, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(o)
		args := make([]any, len(aclUser))
		for i, a := range aclUser {
			args[i] = a
		}
		err = c.Do(context.Background(), args...).Err()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, strings.Replace(u, "redis://", "redis://a2c:pw-for-tests@", 1))
	}
	twoNodesAs(t, strings.Join(urls, ","))
}

// twoNodesAs runs two nodes on url: joins, membership events, a request
// frame and an office broadcast, with no refusal.
func twoNodesAs(t *testing.T, url string) {
	t.Helper()
	a := startNode(t, fastConfig(url, "aa"))
	b := startNode(t, fastConfig(url, "ab"))
	ctx := context.Background()
	mustJoin(t, a, "agent1", Seat{}, agent("o", "A"))
	mustJoin(t, b, "comp1", Seat{}, computer("o", "c1"))
	redistest.WaitFor(t, 3*time.Second, "a sees b's Computer", func() bool {
		_, ok := a.Lookup("o", "computer", "c1")
		return ok
	})
	f := &Frame{Kind: KindRequest, From: "aa", To: "comp1", Office: "o", Event: "client:tool_call", Call: 1, TimeoutMS: 1000}
	if a.Pipelined() {
		a.Send("ab", f, time.Time{}, func(err error) { t.Errorf("send: %v", err) })
	} else if err := a.Publish(ctx, "ab", f); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, b.frames); got.Call != 1 {
		t.Fatalf("got %+v", got)
	}
	if err := b.PublishOffice(ctx, &Frame{Kind: KindBroadcast, From: "ab", To: "comp1", Office: "o", Event: "notify:update_tool_list"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, a.frames); got.Kind != KindBroadcast {
		t.Fatalf("got %+v", got)
	}
	if err := a.Leave(ctx, "o", "agent1"); err != nil {
		t.Fatal(err)
	}
	if a.Refused() != (Refusals{}) || b.Refused() != (Refusals{}) || !a.Healthy() || !b.Healthy() {
		t.Fatalf("refused %+v %+v, healthy %v %v", a.Refused(), b.Refused(), a.Healthy(), b.Healthy())
	}
}
