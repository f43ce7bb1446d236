package a2c

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// orderTotal messages are sent per round; the upgrade starts once
	// orderUpgradeAt have arrived over polling. The sender stays at most
	// orderWindow messages ahead of the receiver, so that traffic is in
	// flight, not all delivered, when the upgrade happens.
	orderTotal     = 3000
	orderUpgradeAt = 300
	orderWindow    = 500
	orderRounds    = 5
)

// TestOrderAcrossUpgrade has a Computer open its session on polling and
// upgrade it to a WebSocket while an Agent of its office sends it a
// stream of numbered notify:tool_call_cancel messages (through
// server:tool_call_cancel). The Computer must get every message exactly
// once and in order: over polling before the upgrade, in the last
// long-poll the probe ends, and over the WebSocket after it. Several
// rounds per WebSocket mode, since the switch-over is a narrow window.
func TestOrderAcrossUpgrade(t *testing.T) {
	for _, mode := range wsModes {
		t.Run(mode, func(t *testing.T) {
			srv := startServer(t, "--websocket-mode", mode, "--log-level", "warn")
			for round := range orderRounds {
				orderRound(t, srv.Addr, fmt.Sprintf("order-%d", round))
			}
		})
	}
}

// orderReceiver checks the stream as it arrives, from any transport.
type orderReceiver struct {
	got      int          // messages received, in order so far
	bad      string       // the first gap, duplicate or reorder seen
	progress chan int     // the count after each batch, for the sender
	allowed  atomic.Int64 // the sender may send up to this number
}

// take processes packets in order and returns the acks among them and
// whether a ping must be answered.
func (r *orderReceiver) take(ps []string) (acks []string, ping bool) {
	for _, p := range ps {
		switch {
		case p == "2":
			ping = true
		case len(p) > 2 && p[:2] == "43":
			acks = append(acks, p)
		default:
			name, arg, ok := eventOf(p)
			if !ok || name != "notify:tool_call_cancel" {
				continue
			}
			var m struct {
				ReqID string `json:"req_id"`
			}
			n := -1
			if json.Unmarshal(arg, &m) == nil {
				n, _ = strconv.Atoi(m.ReqID)
			}
			if n != r.got+1 && r.bad == "" {
				r.bad = fmt.Sprintf("message %d after message %d", n, r.got)
			}
			r.got++
		}
	}
	r.allowed.Store(int64(r.got + orderWindow))
	select {
	case r.progress <- r.got:
	default:
	}
	return acks, ping
}

func orderRound(t *testing.T, addr, office string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := &orderReceiver{progress: make(chan int, 1)}

	comp, early, err := openPolling(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	rec.take(early)
	if err := comp.post(ctx, eventPacket("server:join_office", map[string]string{"role": "computer", "name": "C", "office_id": office}, 1)); err != nil {
		t.Fatal(err)
	}
	for joined := false; !joined; {
		ps, err := comp.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acks, _ := rec.take(ps)
		for _, a := range acks {
			if args, ok := ackArgs(a, 1); ok {
				if !joinedOK(args) {
					t.Fatalf("Computer join: %s", args)
				}
				joined = true
			}
		}
	}

	agent, err := dialRawWS(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.close()
	if err := agent.join("agent", "A", office); err != nil {
		t.Fatal(err)
	}
	var owned sync.WaitGroup
	defer owned.Wait()
	defer cancel() // runs before owned.Wait: ends the sender and the poller
	owned.Go(agent.serve)
	defer agent.close() // ends agent.serve before owned.Wait

	// The sender: numbered cancels, at most orderWindow ahead.
	sendErr := make(chan error, 1)
	rec.allowed.Store(orderWindow)
	owned.Go(func() {
		for n := 1; n <= orderTotal; {
			if int64(n) > rec.allowed.Load() {
				select {
				case <-rec.progress:
					continue
				case <-ctx.Done():
					return
				}
			}
			if err := agent.emit("server:tool_call_cancel", map[string]string{"agent": "A", "req_id": strconv.Itoa(n)}); err != nil {
				sendErr <- err
				return
			}
			n++
		}
	})

	// The poller: long-polls until paused, handing each payload over in
	// order; it ends after the GET in flight when paused is set.
	var paused atomic.Bool
	batches := make(chan []string, 16)
	pollErr := make(chan error, 1)
	owned.Go(func() {
		defer close(batches)
		for !paused.Load() {
			ps, err := comp.get(ctx)
			if err != nil {
				pollErr <- err
				return
			}
			select {
			case batches <- ps:
			case <-ctx.Done():
				return
			}
		}
	})
	handle := func(ps []string) {
		if _, ping := rec.take(ps); ping {
			if err := comp.post(ctx, "3"); err != nil {
				t.Errorf("pong: %v", err)
			}
		}
	}

	// Polling until orderUpgradeAt messages have come, then the probe
	// while the poller goes on, then the pause: what the last GET brings
	// is taken before the upgrade packet, as a client must.
	for rec.got < orderUpgradeAt {
		ps, ok := <-batches
		if !ok {
			t.Fatalf("polling ended after %d messages: %v", rec.got, <-pollErr)
		}
		handle(ps)
	}
	viaPolling := rec.got
	ws, err := comp.probe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.ws.Close()
	paused.Store(true)
	for ps := range batches {
		handle(ps)
	}
	select {
	case err := <-pollErr:
		t.Fatalf("polling during the probe: %v", err)
	default:
	}
	viaLastPoll := rec.got - viaPolling
	if err := ws.write("5"); err != nil {
		t.Fatal(err)
	}
	for rec.got < orderTotal && rec.bad == "" {
		p, err := ws.read()
		if err != nil {
			select {
			case e := <-sendErr:
				t.Fatalf("sender: %v", e)
			default:
			}
			t.Fatalf("after %d messages: %v", rec.got, err)
		}
		rec.take([]string{p})
	}
	if rec.bad != "" {
		t.Fatalf("%s: %s (polling %d, during the probe %d, WebSocket %d)", office, rec.bad, viaPolling, viaLastPoll, rec.got-viaPolling-viaLastPoll)
	}
	t.Logf("%s: %d messages in order: %d over polling, %d during the probe, %d over the WebSocket",
		office, rec.got, viaPolling, viaLastPoll, rec.got-viaPolling-viaLastPoll)
}
