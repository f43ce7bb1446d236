package cluster

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
)

// TestSendRegressionStaleWriteDeadline: after a reconnect the publisher's
// goroutine writes the backlog with a write deadline; it must be cleared,
// or the next direct write, once it has passed, fails on a healthy Redis.
func TestSendRegressionStaleWriteDeadline(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "ra"))
	r.Stop()
	var ansFailed, reqFailed pubCounter
	a.Send("nobody", &Frame{Kind: KindAnswer, From: "ra", To: "s", Office: "o", Event: "e", Call: 2}, time.Now().Add(20*time.Second), ansFailed.fail)
	r.Restart()
	redistest.WaitFor(t, 5*time.Second, "the answer published", func() bool { return r.CommandStats()["publish"] >= 1 })
	time.Sleep(700 * time.Millisecond) // > OpTimeout (500ms)
	a.Send("nobody", &Frame{Kind: KindRequest, From: "ra", To: "s", Office: "o", Event: "e", Call: 3, TimeoutMS: 1000}, time.Time{}, reqFailed.fail)
	time.Sleep(300 * time.Millisecond)
	t.Logf("publish count %d, req onErr %d, ans onErr %d", r.CommandStats()["publish"], reqFailed.n.Load(), ansFailed.n.Load())
	if reqFailed.n.Load() != 0 {
		t.Fatalf("a request on a healthy connection failed")
	}
}

// TestSendRegressionStaleWriteDeadlineLarge: a frame too large for one
// direct write leaves its rest to the publisher's goroutine (a write
// deadline again): a request sent later must not fail.
func TestSendRegressionStaleWriteDeadlineLarge(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "rb"))
	var failed pubCounter
	a.Send("nobody", &Frame{Kind: KindBroadcast, From: "rb", Office: "o", Event: "big", Payload: make([]byte, 16<<20)}, time.Now().Add(10*time.Second), failed.fail)
	redistest.WaitFor(t, 5*time.Second, "big published", func() bool { return r.CommandStats()["publish"] >= 1 })
	time.Sleep(700 * time.Millisecond)
	a.Send("nobody", &Frame{Kind: KindRequest, From: "rb", To: "s", Office: "o", Event: "e", Call: 3, TimeoutMS: 1000}, time.Time{}, failed.fail)
	time.Sleep(300 * time.Millisecond)
	t.Logf("publish count %d, onErr %d", r.CommandStats()["publish"], failed.n.Load())
	if failed.n.Load() != 0 {
		t.Fatalf("a request on a healthy connection failed")
	}
}

// TestSendRegressionErrorReply: Redis refuses one PUBLISH (here an ACL
// that allows only the nodes' channels): that frame alone fails, once,
// and the request queued right behind it on the same connection is
// published and delivered; the connection is not broken over it.
func TestSendRegressionErrorReply(t *testing.T) {
	r := redistest.Start(t)
	if _, err := r.Do("ACL", "SETUSER", "default", "resetchannels", "&a2c:{r*"); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, fastConfig(r.URL(), "ra"))
	b := startNode(t, fastConfig(r.URL(), "rb"))
	before := r.CommandStats()["publish"]
	var denied, reqFailed pubCounter
	a.Send("nobody", &Frame{Kind: KindBroadcast, From: "ra", Office: "o", Event: "denied"}, time.Now().Add(2*time.Second), denied.fail)
	a.Send("rb", &Frame{Kind: KindRequest, From: "ra", To: "s", Office: "o", Event: "req", Call: 1, TimeoutMS: 1000}, time.Time{}, reqFailed.fail)
	select {
	case f := <-b.frames:
		if f.Event != "req" {
			t.Fatalf("got %+v", f)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("the request behind the refused frame was not delivered (its onErr ran %d times)", reqFailed.n.Load())
	}
	redistest.WaitFor(t, 2*time.Second, "the refused frame failed", func() bool { return denied.n.Load() == 1 })
	time.Sleep(300 * time.Millisecond) // a retry of the refused frame would show here
	if n := denied.n.Load(); n != 1 {
		t.Fatalf("the refused frame failed %d times, want once", n)
	}
	if n := reqFailed.n.Load(); n != 0 {
		t.Fatalf("the request's onErr ran %d times", n)
	}
	if n := r.CommandStats()["publish"] - before; n != 1 {
		t.Fatalf("%d publishes carried out, want 1 (the request)", n)
	}
}

// TestSendRegressionCloseRace: Close racing sends runs each frame's
// onErr at most once.
func TestSendRegressionCloseRace(t *testing.T) {
	r := redistest.Start(t)
	for round := 0; round < 5; round++ {
		a := startNode(t, fastConfig(r.URL(), "cr"))
		const g, each = 4, 2000
		var counts [g * each]atomic32
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for k := range g {
			wg.Go(func() {
				for i := range each {
					idx := k*each + i
					var until time.Time
					if i%2 == 0 {
						until = time.Now().Add(time.Second)
					}
					a.Send("nobody", &Frame{Kind: KindAnswer, From: "cr", To: "s", Office: "o", Event: "e", Call: uint64(idx), Payload: make([]byte, 2000)}, until, func(error) { counts[idx].add() })
				}
			})
		}
		time.Sleep(time.Duration(round) * 2 * time.Millisecond)
		a.Close()
		close(stop)
		wg.Wait()
		for i := range counts {
			if c := counts[i].load(); c > 1 {
				t.Fatalf("round %d: onErr of %d ran %d times", round, i, c)
			}
		}
	}
}

type atomic32 struct{ v atomic.Int32 }

func (a *atomic32) add()        { a.v.Add(1) }
func (a *atomic32) load() int32 { return a.v.Load() }

// TestSendRegressionBreakCycle: after one Redis restart, steady traffic
// flows on one healthy connection: no request fails and the publisher
// does not keep breaking its connection.
func TestSendRegressionBreakCycle(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "cy"))
	b := startNode(t, fastConfig(r.URL(), "cz"))
	r.Stop()
	var ans, req pubCounter
	a.Send("cz", &Frame{Kind: KindAnswer, From: "cy", To: "s", Office: "o", Event: "a", Call: 1}, time.Now().Add(20*time.Second), ans.fail)
	r.Restart()
	redistest.WaitFor(t, 5*time.Second, "published", func() bool { return r.CommandStats()["publish"] >= 1 })
	// The publisher's connection, by the name it gives itself: Redis
	// numbers each connection anew, so the id changes if it reconnects.
	pubID := func() string {
		list, _ := r.Do("CLIENT", "LIST")
		for _, l := range strings.Split(list, "\n") {
			if strings.Contains(l, " name=a2c-cy-pub ") {
				return strings.Fields(l)[0] // id=N
			}
		}
		return ""
	}
	first := pubID()
	if first == "" {
		t.Fatal("no connection named a2c-cy-pub after the restart")
	}
	sentReq := 0
	for i := range 100 { // 5 s of traffic: an answer and a request every 50 ms
		a.Send("cz", &Frame{Kind: KindAnswer, From: "cy", To: "s", Office: "o", Event: "a", Call: uint64(100 + i)}, time.Now().Add(20*time.Second), ans.fail)
		a.Send("cz", &Frame{Kind: KindRequest, From: "cy", To: "s", Office: "o", Event: "r", Call: uint64(1000 + i), TimeoutMS: 1000}, time.Time{}, req.fail)
		sentReq++
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for len(b.frames) > 0 {
		<-b.frames
	}
	last := pubID()
	t.Logf("requests %d, failed %d; answers failed %d; publisher connection %s, then %s", sentReq, req.n.Load(), ans.n.Load(), first, last)
	if req.n.Load() != 0 || ans.n.Load() != 0 {
		t.Errorf("%d requests and %d answers failed on a healthy Redis", req.n.Load(), ans.n.Load())
	}
	if last != first {
		t.Errorf("the publisher's connection was %s, then %s: it reconnected during 5 s of steady traffic on a healthy Redis", first, last)
	}
}
