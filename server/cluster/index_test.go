package cluster

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
)

// TestIndexPruned: a node's index names the offices where it holds
// members, not every office it ever held, so a sweep after its death
// stays the size of what it holds. A refused join leaves nothing either.
func TestIndexPruned(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "ia"))
	b := startNode(t, fastConfig(r.URL(), "ib"))
	card := func() int {
		s, err := r.Do("SCARD", nodeIndex("ia"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	ctx := context.Background()
	for i := range 50 {
		o := fmt.Sprintf("o%d", i)
		mustJoin(t, a, "s"+o, Seat{}, computer(o, "c"))
	}
	mustJoin(t, a, "keep", Seat{}, computer("kept", "c"))
	if n := card(); n != 51 {
		t.Fatalf("index holds %d offices, want 51", n)
	}
	for i := range 50 {
		o := fmt.Sprintf("o%d", i)
		if err := a.Leave(ctx, o, "s"+o); err != nil {
			t.Fatal(err)
		}
	}
	if n := card(); n != 1 {
		t.Fatalf("after the leaves the index holds %d offices, want 1 (the office still held)", n)
	}
	mustJoin(t, b, "bagent", Seat{}, agent("taken", "A"))
	if d, err := a.Join(ctx, Conn{SID: "late"}, Seat{}, agent("taken", "A2")); err != nil || d.Refuse != RefuseAgentTaken {
		t.Fatalf("join: %+v %v", d, err)
	}
	if n := card(); n != 1 {
		t.Fatalf("after a refused join the index holds %d offices, want 1", n)
	}
}

// TestNameIndexHeals: an entry of the name index whose office no longer
// seats that name (a removal lost under load) answers "not elsewhere"
// and is removed; a live one answers "elsewhere".
func TestNameIndexHeals(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "na1"))
	ctx := context.Background()
	if _, err := r.Do("SADD", nameKey("ghost"), "gone1", "gone2"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.ComputerElsewhere(ctx, "ghost"); err != nil || ok {
		t.Fatalf("stale entries: elsewhere=%v %v, want false", ok, err)
	}
	if s, _ := r.Do("EXISTS", nameKey("ghost")); s != "0" {
		t.Fatalf("stale entries not removed: EXISTS %s", s)
	}
	mustJoin(t, a, "live", Seat{}, computer("real", "pc"))
	if _, err := r.Do("SADD", nameKey("pc"), "stale"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.ComputerElsewhere(ctx, "pc"); err != nil || !ok {
		t.Fatalf("live entry: elsewhere=%v %v, want true", ok, err)
	}
}

// TestSweepManyOffices: a dead node that held thousands of offices is
// swept within the removal bound: the sweep scripts are pipelined.
func TestSweepManyOffices(t *testing.T) {
	r := redistest.Start(t)
	cfg := fastConfig(r.URL(), "many")
	dead := startNode(t, cfg)
	live := startNode(t, fastConfig(r.URL(), "live"))
	const offices = 3000
	ctx := context.Background()
	for i := range offices {
		o := fmt.Sprintf("m%d", i)
		if _, err := dead.Join(ctx, Conn{SID: "s" + o}, Seat{}, computer(o, "pc")); err != nil {
			t.Fatal(err)
		}
	}
	dead.Close() // holds members: no retire, its lease runs out
	died := time.Now()
	redistest.WaitFor(t, 30*time.Second, "swept", func() bool {
		s, err := r.Do("SCARD", nodesKey)
		return err == nil && s == "1"
	})
	took := time.Since(died)
	for _, i := range []int{0, offices / 2, offices - 1} {
		if n := seats(t, r, fmt.Sprintf("m%d", i)); n != 0 {
			t.Fatalf("office m%d still holds %d members", i, n)
		}
	}
	if bound := cfg.RemovalBound(); took > bound {
		t.Errorf("%d offices swept after %v, bound %v", offices, took, bound)
	}
	t.Logf("%d offices swept %v after the death (bound %v)", offices, took, cfg.RemovalBound())
	_ = live
}
