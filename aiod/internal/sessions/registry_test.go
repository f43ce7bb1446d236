package sessions

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is a session whose work and last use the test sets.
type fake struct {
	id      string
	mu      sync.Mutex
	last    time.Time
	working bool
	ended   bool
}

func (f *fake) LastUsed() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fake) Expire(idle time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.working || time.Since(f.last) < idle {
		return false
	}
	f.ended = true
	return true
}

var errFull = errors.New("full")

func TestCapRefuses(t *testing.T) {
	r := NewRegistry[*fake](map[string]Tier{"k": {Max: 1, Full: errFull}})
	a, created, err := r.Open("k", "a", func() *fake { return &fake{id: "a", last: time.Now()} })
	if err != nil || !created {
		t.Fatal(err)
	}
	if again, created, err := r.Open("k", "a", nil); err != nil || created || again != a {
		t.Fatalf("reopen: %v %v", created, err)
	}
	if _, _, err := r.Open("k", "b", func() *fake { return &fake{} }); !errors.Is(err, errFull) {
		t.Fatalf("over the cap: %v", err)
	}
	if _, _, err := r.Open("other", "b", func() *fake { return &fake{} }); err != nil {
		t.Fatalf("tiers are capped apart: %v", err)
	}
	if a.ended {
		t.Fatal("a refusing tier ends nothing")
	}
}

func TestConcurrentOpenMakesOne(t *testing.T) {
	r := NewRegistry[*fake](map[string]Tier{"k": {Max: 5, Full: errFull}})
	var made atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			if _, _, err := r.Open("k", "same", func() *fake { made.Add(1); return &fake{} }); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if made.Load() != 1 || r.Len("k") != 1 {
		t.Fatalf("made %d, holds %d", made.Load(), r.Len("k"))
	}
}

func TestEvictsLeastRecentlyUsedIdle(t *testing.T) {
	r := NewRegistry[*fake](map[string]Tier{"c": {Max: 3, Evict: true, Full: errFull}})
	now := time.Now()
	old := &fake{id: "old", last: now.Add(-time.Hour), working: true} // oldest, but working
	idle := &fake{id: "idle", last: now.Add(-30 * time.Minute)}
	recent := &fake{id: "recent", last: now.Add(-time.Minute)}
	r.Open("c", "old", func() *fake { return old })
	r.Open("c", "idle", func() *fake { return idle })
	r.Open("c", "recent", func() *fake { return recent })
	if _, created, err := r.Open("c", "new", func() *fake { return &fake{last: now} }); err != nil || !created {
		t.Fatalf("evicting tier: %v", err)
	}
	if old.ended || !idle.ended || recent.ended {
		t.Fatalf("evicted the wrong one: old %v idle %v recent %v", old.ended, idle.ended, recent.ended)
	}
	if _, ok := r.Get("c", "idle"); ok {
		t.Fatal("the evicted session is still held")
	}
	// every session works: refused
	for _, id := range []string{"new", "recent"} {
		n, _ := r.Get("c", id)
		n.mu.Lock()
		n.working = true
		n.mu.Unlock()
	}
	if _, _, err := r.Open("c", "more", func() *fake { return &fake{} }); !errors.Is(err, errFull) {
		t.Fatalf("all working: %v", err)
	}
}

func TestReservation(t *testing.T) {
	r := NewRegistry[*fake](map[string]Tier{"w": {Max: 1, Full: errFull}})
	v, err := r.Reserve("w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reserve("w"); !errors.Is(err, errFull) {
		t.Fatalf("a reservation counts against the cap: %v", err)
	}
	v.Release()
	v.Release() // idempotent
	v, err = r.Reserve("w")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Fill("x", &fake{}) || r.Len("w") != 1 {
		t.Fatal("fill")
	}
	v.Release() // after Fill: nothing
	if _, err := r.Reserve("w"); !errors.Is(err, errFull) {
		t.Fatalf("the filled slot counts: %v", err)
	}
}

func TestReclaimEndsIdleOnly(t *testing.T) {
	r := NewRegistry[*fake](map[string]Tier{"k": {Idle: time.Minute}, "forever": {}})
	now := time.Now()
	stale := &fake{last: now.Add(-2 * time.Minute)}
	busy := &fake{last: now.Add(-2 * time.Minute), working: true}
	fresh := &fake{last: now}
	kept := &fake{last: now.Add(-time.Hour)}
	r.Open("k", "stale", func() *fake { return stale })
	r.Open("k", "busy", func() *fake { return busy })
	r.Open("k", "fresh", func() *fake { return fresh })
	r.Open("forever", "kept", func() *fake { return kept })
	ended := r.Reclaim()
	if len(ended) != 1 || ended[0] != stale || !stale.ended || busy.ended || fresh.ended || kept.ended {
		t.Fatalf("ended %v", ended)
	}
	if got := r.List(""); len(got) != 3 || got[0] != busy || got[1] != fresh || got[2] != kept {
		t.Fatalf("left, oldest first: %v", got)
	}
	if taken := r.Take("k", nil); len(taken) != 2 || r.Len("k") != 0 || r.Len("forever") != 1 {
		t.Fatalf("take: %v", taken)
	}
}

// vanishing is a session that a concurrent close removes from the
// registry while an eviction is choosing its victim (LastUsed runs
// outside the registry's lock).
type vanishing struct {
	fake
	onLastUsed func()
}

func (v *vanishing) LastUsed() time.Time {
	if f := v.onLastUsed; f != nil {
		v.onLastUsed = nil
		f()
	}
	return v.fake.LastUsed()
}

// TestEvictionVictimGoneMeanwhile: a victim removed between the
// snapshot and its expiry is not expired (nor is whatever took its id),
// and the eviction looks again and makes room.
func TestEvictionVictimGoneMeanwhile(t *testing.T) {
	r := NewRegistry[*vanishing](map[string]Tier{"c": {Max: 2, Evict: true, Full: errFull}})
	now := time.Now()
	a := &vanishing{fake: fake{id: "a", last: now.Add(-time.Hour)}}
	b := &vanishing{fake: fake{id: "b", last: now.Add(-time.Minute)}}
	r.Open("c", "a", func() *vanishing { return a })
	r.Open("c", "b", func() *vanishing { return b })
	a.onLastUsed = func() { r.Remove("c", "a", a) } // closed by another request meanwhile
	if _, created, err := r.Open("c", "new", func() *vanishing { return &vanishing{fake: fake{last: now}} }); err != nil || !created {
		t.Fatalf("open at the cap: %v", err)
	}
	if a.ended || b.ended {
		t.Fatalf("expired a session that was not the victim: a %v b %v", a.ended, b.ended)
	}
}
