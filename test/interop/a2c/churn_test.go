package a2c

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// churnConns is how many connections the churn test opens and drops.
const churnConns = 2000

// TestChurnLeavesNoGhosts opens thousands of WebSocket sessions that
// connect, join an office and vanish (the TCP connection dropped, by FIN
// or by reset, with no WebSocket or Engine.IO close), some before their
// join is even acknowledged. Afterwards the server must count no member,
// office or connection, and a fresh Agent must find the offices empty and
// take the Agent seat a vanished Agent held: a session that dies without
// saying goodbye must leave nothing behind. The deadline (15 s) is below
// the heartbeat's 25 s ping interval, so the server has to notice the
// dead connection itself rather than wait for a missed pong.
func TestChurnLeavesNoGhosts(t *testing.T) {
	for _, mode := range wsModes {
		t.Run(mode, func(t *testing.T) { churn(t, mode) })
	}
}

func churn(t *testing.T, mode string) {
	srv := startServer(t, "--websocket-mode", mode, "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Connection i joins office churn-i on its own (see churnOne).
	var (
		next   atomic.Int64
		failed atomic.Int64
		first  sync.Once
		errMsg string
		wg     sync.WaitGroup
	)
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= churnConns || ctx.Err() != nil {
					return
				}
				if err := churnOne(ctx, srv.Addr, i); err != nil {
					failed.Add(1)
					first.Do(func() { errMsg = err.Error() })
				}
			}
		}()
	}
	wg.Wait()
	churned := time.Now()
	t.Logf("%d connections churned in %s", churnConns, churned.Sub(start).Round(time.Millisecond))
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d churn connections failed; first: %s", n, churnConns, errMsg)
	}

	eventually(t, 15*time.Second, "server counts no members, offices or connections after the churn", func() (bool, string) {
		m, err := serverMetrics(ctx, srv.URL)
		if err != nil {
			return false, err.Error()
		}
		why := fmt.Sprintf("a2c_office_members %v, a2c_offices %v, a2c_connections %v",
			m["a2c_office_members"], m["a2c_offices"], m["a2c_connections"])
		return m["a2c_office_members"] == 0 && m["a2c_offices"] == 0 && m["a2c_connections"] == 0, why
	})
	t.Logf("the server counted no members %s after the churn", time.Since(churned).Round(time.Millisecond))

	// A fresh Agent takes the seats of the first and the last vanished
	// Agents (one waited for its ack, one did not) and of a vanished
	// Computer's office, and sees nobody else in each.
	fresh, err := dialRawWS(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.close()
	for _, i := range []int{0, 2, churnConns - 2, churnConns - 1} {
		office := fmt.Sprintf("churn-%d", i)
		if err := fresh.join("agent", "fresh", office); err != nil {
			t.Fatalf("after the churn: %v", err)
		}
		args, err := fresh.call("server:list_room", map[string]string{"agent": "fresh", "req_id": "r-" + office, "office_id": office})
		if err != nil {
			t.Fatal(err)
		}
		var ret struct {
			Sessions []struct {
				Name string `json:"name"`
				Role string `json:"role"`
			} `json:"sessions"`
		}
		if len(args) != 1 || json.Unmarshal(args[0], &ret) != nil {
			t.Fatalf("list_room of %s: ack %s", office, args)
		}
		if len(ret.Sessions) != 1 || ret.Sessions[0].Name != "fresh" || ret.Sessions[0].Role != "agent" {
			t.Errorf("list_room of %s after the churn: %+v, want only the fresh Agent", office, ret.Sessions)
		}
		args, err = fresh.call("server:leave_office", map[string]string{"office_id": office})
		if err != nil || !joinedOK(args) {
			t.Fatalf("leave %s: %s %v", office, args, err)
		}
	}
}

// churnOne is connection i of the churn: connect, join, vanish. The bits
// of i pick the variant: bit 0 the role (Agent or Computer); bit 1
// whether it waits for the join's ack before vanishing; bit 2 reset or
// FIN; bit 3 whether it sends the namespace CONNECT and the join back to
// back, so that the join is handled right after the connect is admitted
// while the connection is already going away.
func churnOne(ctx context.Context, addr string, i int) error {
	c, err := openRawWS(ctx, addr)
	if err != nil {
		return fmt.Errorf("connection %d: %w", i, err)
	}
	role, name := "agent", fmt.Sprintf("a-%d", i)
	if i&1 == 1 {
		role, name = "computer", fmt.Sprintf("c-%d", i)
	}
	waitAck, rst, pipelined := i&2 == 0, i&4 == 0, i&8 != 0
	join := map[string]string{"role": role, "name": name, "office_id": fmt.Sprintf("churn-%d", i)}
	err = c.write(nsConnectPacket)
	if err == nil && !pipelined {
		err = c.connected()
	}
	var id int
	if err == nil {
		id, err = c.send("server:join_office", join)
	}
	if err == nil && waitAck {
		var args []json.RawMessage
		if args, err = c.ack("server:join_office", id); err == nil && !joinedOK(args) {
			err = fmt.Errorf("join refused: %s", args)
		}
	}
	c.vanish(rst)
	if err != nil {
		return fmt.Errorf("connection %d: %w", i, err)
	}
	return nil
}
