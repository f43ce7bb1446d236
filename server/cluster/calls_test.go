package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/smcp"
)

func TestCallsEnds(t *testing.T) {
	type result struct {
		payload []byte
		err     error
	}
	tests := []struct {
		name string
		end  func(c *Calls, id uint64)
		want result
	}{
		{"answer", func(c *Calls, id uint64) {
			c.Answer(Frame{Kind: KindAnswer, From: "n", To: "sid", Call: id, Payload: []byte("x")})
		}, result{[]byte("x"), nil}},
		{"gone frame", func(c *Calls, id uint64) { c.Answer(Frame{Kind: KindGone, From: "n", To: "sid", Call: id}) }, result{nil, ErrGone}},
		{"target left", func(c *Calls, _ uint64) { c.Gone("sid") }, result{nil, ErrGone}},
		{"deadline", func(*Calls, uint64) {}, result{nil, ErrTimeout}},
		{"close", func(c *Calls, _ uint64) { c.Close() }, result{nil, ErrGone}},
		{"abort", func(c *Calls, id uint64) { c.Abort(id, ErrUnavailable) }, result{nil, ErrUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Calls
			got := make(chan result, 2)
			id := c.Start("n", "sid", 50*time.Millisecond, func(p []byte, err error) { got <- result{p, err} })
			tt.end(&c, id)
			r := <-got
			if !bytes.Equal(r.payload, tt.want.payload) || !errors.Is(r.err, tt.want.err) {
				t.Fatalf("got %q %v, want %q %v", r.payload, r.err, tt.want.payload, tt.want.err)
			}
			if c.Answer(Frame{Kind: KindAnswer, From: "n", To: "sid", Call: id}) {
				t.Fatal("a second end was accepted")
			}
			select {
			case r := <-got:
				t.Fatalf("ended twice: %v", r)
			case <-time.After(80 * time.Millisecond):
			}
			if c.Len() != 0 {
				t.Fatalf("%d calls left", c.Len())
			}
		})
	}
}

// TestCallsRace: an answer racing the deadline and the target's departure
// ends the call exactly once.
// TestCallsForeignAnswer: an answer is taken only from the node the call
// went to and for its target; a frame with the same call id from another
// node (or a former process of that node id, whose ids were elsewhere)
// is dropped.
func TestCallsForeignAnswer(t *testing.T) {
	var c Calls
	got := make(chan []byte, 1)
	id := c.Start("b", "pc", time.Second, func(p []byte, err error) { got <- p })
	for _, f := range []Frame{
		{Kind: KindAnswer, From: "c", To: "pc", Call: id, Payload: []byte("other node")},
		{Kind: KindAnswer, From: "b", To: "other", Call: id, Payload: []byte("other member")},
		{Kind: KindGone, From: "c", To: "pc", Call: id},
	} {
		if c.Answer(f) {
			t.Fatalf("accepted %+v", f)
		}
	}
	if !c.Answer(Frame{Kind: KindAnswer, From: "b", To: "pc", Call: id, Payload: []byte("ok")}) {
		t.Fatal("the right answer was refused")
	}
	if p := <-got; string(p) != "ok" {
		t.Fatalf("got %q", p)
	}
	var d Calls
	if other := d.Start("b", "pc", time.Second, func([]byte, error) {}); other == id {
		t.Fatalf("two processes' first call ids are equal (%d): ids must start at random", id)
	}
	d.Close()
}

func TestCallsRace(t *testing.T) {
	var c Calls
	var ended atomic.Int64
	for range 2000 {
		id := c.Start("n", "sid", time.Millisecond, func([]byte, error) { ended.Add(1) })
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.Answer(Frame{Kind: KindAnswer, From: "n", To: "sid", Call: id}) }()
		go func() { defer wg.Done(); c.Gone("sid") }()
		wg.Wait()
	}
	redistest.WaitFor(t, 2*time.Second, "all ended", func() bool { return c.Len() == 0 })
	time.Sleep(5 * time.Millisecond) // a timer that lost the race must not fire a second end
	if n := ended.Load(); n != 2000 {
		t.Fatalf("%d ends for 2000 calls", n)
	}
}

// TestCrossNodeCalls: 10,000 requests from node a to a member of node b,
// 32 at a time, each answered by b with its own payload: none lost,
// duplicated or mismatched.
func TestCrossNodeCalls(t *testing.T) {
	r := redistest.Start(t)
	var calls Calls
	ctx := context.Background()
	var b *Node
	a, err := Start(ctx, fastConfig(r.URL(), "ma"), Handler{Frame: func(f Frame) { calls.Answer(f) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err = Start(ctx, fastConfig(r.URL(), "mb"), Handler{Frame: func(f Frame) {
		if f.Kind != KindRequest || f.To != "compsid" || f.Office != "o" {
			return
		}
		ans := Frame{Kind: KindAnswer, From: b.ID(), To: f.To, Office: f.Office, Call: f.Call, Payload: f.Payload}
		_ = b.Publish(ctx, f.From, &ans)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := a.Join(ctx, Conn{SID: "agentsid"}, Seat{}, agent("o", "A")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, Conn{SID: "compsid"}, Seat{}, computer("o", "c1")); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 2*time.Second, "a sees c1", func() bool { _, ok := a.Lookup("o", smcp.RoleComputer, "c1"); return ok })
	const total, workers = 10000, 32
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				target, _ := a.Lookup("o", smcp.RoleComputer, "c1")
				want := []byte(fmt.Sprintf(`[{"n":%d}]`, i))
				done := make(chan struct{})
				id := calls.Start(target.Node, target.SID, 5*time.Second, func(p []byte, err error) {
					if err == nil && bytes.Equal(p, want) {
						ok.Add(1)
					} else {
						bad.Add(1)
					}
					close(done)
				})
				f := Frame{Kind: KindRequest, From: a.ID(), To: target.SID, Office: "o", Event: smcp.EventToolCall, Call: id, TimeoutMS: 5000, Payload: want}
				if err := a.Publish(ctx, target.Node, &f); err != nil {
					calls.Abort(id, err)
				}
				<-done
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if ok.Load() != total || bad.Load() != 0 || calls.Len() != 0 {
		t.Fatalf("ok %d bad %d waiting %d of %d", ok.Load(), bad.Load(), calls.Len(), total)
	}
	t.Logf("%d cross-node calls in %v (%.0f/s, 32 in flight)", total, took, total/took.Seconds())
}
