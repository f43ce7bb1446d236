package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Office events (a2c:{O}:ev) are published by the Lua scripts and are not
// sealed. These tests play an attacker who may PUBLISH on the Redis (the
// threat model of the cluster key) but has no key and writes no a2c:* key.

// forgedEventSetup: Agent "a" on node "na", a slow Computer "c" (3 s per
// call) on node "nb", office "O". It returns the attacker's client, the
// Agent, the Computer's sid and its member record.
func forgedEventSetup(t *testing.T) (*redis.Client, *peer, string, string, string) {
	r := redistest.Start(t)
	_, urlA := newTestServer(t, Config{Cluster: cluster.Config{URL: r.URL(), NodeID: "na"}})
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: r.URL(), NodeID: "nb"}})
	c := connect(t, urlB, func(*sio.Event) any {
		time.Sleep(3 * time.Second)
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "REAL ANSWER"}}}
	})
	if got := c.join(smcp.RoleComputer, "c", "O"); got != "true,null" {
		t.Fatal(got)
	}
	a := connect(t, urlA, nil)
	if got := a.join(smcp.RoleAgent, "a", "O"); got != "true,null" {
		t.Fatal(got)
	}
	o, _ := redis.ParseURL(r.URL())
	rc := redis.NewClient(o)
	t.Cleanup(func() { _ = rc.Close() })
	sid := c.sock.ID()
	rec, err := rc.HGet(context.Background(), "a2c:{O}:m", sid).Result()
	if err != nil {
		t.Fatal(err)
	}
	return rc, a, sid, rec, "a2c:{O}:ev"
}

func officeVersion(t *testing.T, rc *redis.Client) int64 {
	v, err := rc.Get(context.Background(), "a2c:{O}:v").Int64()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAttackForgedSweptEventEndsCall: one PUBLISH of a fake "swept"
// event for a live Computer must not end the Agent's cross-node call. It
// did (at once, with "Computer disconnected", while the tool still ran)
// when nodes applied events; now an event only makes them read the
// office again, and the Computer is still there.
func TestAttackForgedSweptEventEndsCall(t *testing.T) {
	rc, a, sid, rec, ch := forgedEventSetup(t)
	start := time.Now()
	ans := rvToolCall(a, "a", "c", 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	v := officeVersion(t, rc)
	if err := rc.Publish(context.Background(), ch, fmt.Sprintf("!%d|%s|%s", v+1, sid, rec)).Err(); err != nil {
		t.Fatal(err)
	}
	got := <-ans
	t.Logf("after %v: %s", time.Since(start), got)
	if !strings.Contains(got, "REAL ANSWER") {
		t.Errorf("a forged office event ended a live call: %s", got)
	}
}

// TestAttackForgedEventsFreezeCopy: PUBLISHing a forged leave of the
// Computer and no-op leave events with the next versions must not take
// the Computer out of the node's copy. When nodes applied events it
// pushed the copy's version ahead of Redis, so every real event and
// snapshot was then taken for an old one, and the Computer stayed "not
// in your office" for good; now the copy's version comes only from
// snapshots.
func TestAttackForgedEventsFreezeCopy(t *testing.T) {
	rc, a, sid, rec, ch := forgedEventSetup(t)
	ctx := context.Background()
	v := officeVersion(t, rc)
	if err := rc.Publish(ctx, ch, fmt.Sprintf("-%d|%s|%s", v+1, sid, rec)).Err(); err != nil {
		t.Fatal(err)
	}
	// Some more versions ahead, so real changes stay hidden too.
	for i := int64(2); i <= 50; i++ {
		_ = rc.Publish(ctx, ch, "-"+strconv.FormatInt(v+i, 10)+"|ghost|computer|nb|1|0.0.0|ghost").Err()
	}
	time.Sleep(300 * time.Millisecond)
	got := <-rvToolCall(a, "a", "c", 20*time.Second)
	t.Logf("call after forged events: %s", got)
	if !strings.Contains(got, "REAL ANSWER") {
		t.Errorf("the Computer, still in the office in Redis, is unreachable after forged events: %s", got)
	}
	// It does not heal: several heartbeats later, and after a real
	// change in the office (another Agent-side member joins and leaves).
	time.Sleep(4 * time.Second)
	got = <-rvToolCall(a, "a", "c", 20*time.Second)
	t.Logf("call 4 s later: %s", got)
	if !strings.Contains(got, "REAL ANSWER") {
		t.Errorf("still unreachable 4 s later: %s", got)
	}
}

// TestAttackForgedSweptAgentReleasesSandbox: with --sandbox-pool, a fake
// "swept" event for the live Agent of an office (on node A) must not make
// node B, which holds the office's sandbox Computer, drop the Agent from
// its copy: B would start its idle timer and, when it ran out, release
// (kill) the sandbox under the Agent, as it did when nodes applied
// events.
func TestAttackForgedSweptAgentReleasesSandbox(t *testing.T) {
	url := rvRedis(t)
	p := newProvisionedPair(t, url, 200*time.Millisecond)
	a, fb := p.agent, p.fb
	o, _ := redis.ParseURL(url)
	rc := redis.NewClient(o)
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	rec, err := rc.HGet(ctx, "a2c:{o1}:m", a.sock.ID()).Result()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := rc.Get(ctx, "a2c:{o1}:v").Int64()
	if err := rc.Publish(ctx, "a2c:{o1}:ev", fmt.Sprintf("!%d|%s|%s", v+1, a.sock.ID(), rec)).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-fb.released:
		t.Errorf("node B released the sandbox of office %s while its Agent sits on node A", o)
	case <-time.After(2 * time.Second):
	}
}
