package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// rvRedis starts a redis-server for one test and returns its URL.
func rvRedis(t *testing.T) string { return redistest.Start(t).URL() }

// rvToolCall sends a tool call from p and returns a channel that gets
// its answer's arguments, joined by commas (or the error).
func rvToolCall(p *peer, agent, computer string, timeout time.Duration) chan string {
	ch := make(chan string, 1)
	b := smcp.Encode(smcp.ToolCallReq{Agent: agent, ReqID: "r-" + agent, Computer: computer, ToolName: "t", Timeout: 30})
	p.sock.Request(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{b}}, timeout, func(m sio.Message, err error) {
		if err != nil {
			ch <- "error: " + err.Error()
			return
		}
		var parts []string
		for _, a := range m.Args {
			parts = append(parts, string(a))
		}
		ch <- strings.Join(parts, ",")
	})
	return ch
}

// TestClusterCallIDReuseAfterRestart: node "na" restarts with the same
// --node-id (as the README describes) while a Computer on node "nb" is
// still working on a call from the previous process. The late answer
// (office X) must not end a call of the new process (office Y).
func TestClusterCallIDReuseAfterRestart(t *testing.T) {
	url := rvRedis(t)
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})

	slow := func(what string, d time.Duration) func(*sio.Event) any {
		return func(*sio.Event) any {
			time.Sleep(d)
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": what}}}
		}
	}
	cx := connect(t, urlB, slow("SECRET OF OFFICE X", 1500*time.Millisecond))
	if got := cx.join(smcp.RoleComputer, "cx", "X"); got != "true,null" {
		t.Fatal(got)
	}
	cy := connect(t, urlB, slow("answer for office Y", 4*time.Second))
	if got := cy.join(smcp.RoleComputer, "cy", "Y"); got != "true,null" {
		t.Fatal(got)
	}

	// First process of node "na".
	sa, err := New(withClusterKey(Config{Cluster: cluster.Config{URL: url, NodeID: "na"}}))
	if err != nil {
		t.Fatal(err)
	}
	tsa := httptest.NewServer(sa.Handler())
	ax := connect(t, tsa.URL, nil)
	if got := ax.join(smcp.RoleAgent, "ax", "X"); got != "true,null" {
		t.Fatal(got)
	}
	first := rvToolCall(ax, "ax", "cx", 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_ = sa.Shutdown(ctx) // SIGTERM, drain timeout passes
	cancel()
	tsa.Close()
	t.Logf("first process's call ended: %s", <-first)

	// The same node id again, at once (its lease was given up).
	_, urlA2 := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na"}})
	ay := connect(t, urlA2, nil)
	if got := ay.join(smcp.RoleAgent, "ay", "Y"); got != "true,null" {
		t.Fatal(got)
	}
	got := <-rvToolCall(ay, "ay", "cy", 20*time.Second)
	if strings.Contains(got, "OFFICE X") {
		t.Fatalf("the Agent of office Y received office X's answer: %s", got)
	}
	t.Logf("office Y's answer: %s", got)
}

// rvAgent fires a tool call at every Computer announced by
// notify:enter_office, as an Agent that lists a newcomer's tools does.
type rvAgent struct {
	sock    *sio.Socket
	answers chan string
}

func (a *rvAgent) Event(_ *sio.Socket, e *sio.Event) {
	if e.Name != smcp.NotifyEnterOffice {
		return
	}
	var n smcp.OfficeNotification
	_ = json.Unmarshal(e.Args[0], &n)
	if n.Computer == "" {
		return
	}
	b := smcp.Encode(smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: n.Computer, ToolName: "t", Timeout: 5})
	a.sock.Request(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{b}}, 10*time.Second, func(m sio.Message, err error) {
		if err != nil {
			a.answers <- "error: " + err.Error()
			return
		}
		a.answers <- string(m.Args[0])
	})
}
func (a *rvAgent) Disconnect(*sio.Socket, string) {}

// TestClusterRequestRightAfterEnter: a Computer announced by
// notify:enter_office is routable at once, as on one server, although its
// node publishes the join (script) before it seats the member locally: a
// request arriving in between waits behind the join on the member's queue
// instead of being answered "Computer disconnected before answering".
func TestClusterRequestRightAfterEnter(t *testing.T) {
	url := rvRedis(t)
	_, urlA := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na"}})
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})
	ag := &rvAgent{answers: make(chan string, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, urlA, sio.ClientOptions{Namespace: smcp.Namespace, Query: map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}}, Transport: sio.WebSocketOnly, Handler: ag})
	if err != nil {
		t.Fatal(err)
	}
	ag.sock = s
	t.Cleanup(s.Disconnect)
	p := &peer{t: t, sock: s}
	if got := p.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
		t.Fatal(got)
	}
	const rounds = 100
	bad := 0
	for i := range rounds {
		c := connect(t, urlB, func(*sio.Event) any {
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}}
		})
		if got := c.join(smcp.RoleComputer, fmt.Sprintf("c%d", i), "R"); got != "true,null" {
			t.Fatal(got)
		}
		got := <-ag.answers
		if strings.Contains(got, "disconnected") {
			bad++
		}
		c.sock.Disconnect()
	}
	if bad > 0 {
		t.Fatalf("%d of %d requests sent on notify:enter_office got the disconnected answer", bad, rounds)
	}
}

// TestClusterAnswerThenLeave: a Computer answers and leaves at once. One
// server relays the answer (it came first); across nodes the answer frame
// and the leave event travel separately, and the answer must still win:
// a plain leave ends no call (only a sweep does).
func TestClusterAnswerThenLeave(t *testing.T) {
	url := rvRedis(t)
	_, urlA := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na"}})
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})
	a := connect(t, urlA, nil)
	if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
		t.Fatal(got)
	}
	const rounds = 100
	bad := 0
	for i := range rounds {
		name := fmt.Sprintf("c%d", i)
		var c *peer
		c = connect(t, urlB, func(e *sio.Event) any {
			b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}})
			_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
			go c.sock.Emit(smcp.EventLeaveOffice, sio.Message{Args: []json.RawMessage{smcp.Encode(smcp.LeaveOfficeReq{OfficeID: "R"})}})
			return nil
		})
		if got := c.join(smcp.RoleComputer, name, "R"); got != "true,null" {
			t.Fatal(got)
		}
		eventually(t, "the Computer in A's copy", func() bool {
			return strings.Contains(strings.Join(a.call(smcp.EventListRoom, smcp.ListRoomReq{Agent: "a", ReqID: "l", OfficeID: "R"}), ""), name)
		})
		got := <-rvToolCall(a, "a", name, 10*time.Second)
		if strings.Contains(got, "disconnected") {
			bad++
		}
		c.sock.Disconnect()
	}
	if bad > 0 {
		t.Fatalf("%d of %d answers given before the leave were replaced by the disconnected answer", bad, rounds)
	}
}

// TestClusterAnswerThenLeaveSingle is TestClusterAnswerThenLeave on one
// server: the behaviour the cluster must match.
func TestClusterAnswerThenLeaveSingle(t *testing.T) {
	_, urlA := newTestServer(t, Config{})
	a := connect(t, urlA, nil)
	if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
		t.Fatal(got)
	}
	bad := 0
	for i := range 100 {
		name := fmt.Sprintf("c%d", i)
		var c *peer
		c = connect(t, urlA, func(e *sio.Event) any {
			b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}})
			_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
			go c.sock.Emit(smcp.EventLeaveOffice, sio.Message{Args: []json.RawMessage{smcp.Encode(smcp.LeaveOfficeReq{OfficeID: "R"})}})
			return nil
		})
		if got := c.join(smcp.RoleComputer, name, "R"); got != "true,null" {
			t.Fatal(got)
		}
		if got := <-rvToolCall(a, "a", name, 10*time.Second); strings.Contains(got, "disconnected") {
			bad++
		}
		c.sock.Disconnect()
	}
	if bad > 0 {
		t.Fatalf("single server: %d", bad)
	}
}

// TestClusterListRoomThenLeave: list_room then leave, sent back to back.
// One server answers list_room with the office (it came first).
func TestClusterListRoomThenLeave(t *testing.T) {
	for _, clustered := range []bool{false, true} {
		t.Run(fmt.Sprint("clustered=", clustered), func(t *testing.T) {
			cfg := Config{}
			if clustered {
				cfg.Cluster = cluster.Config{URL: rvRedis(t), NodeID: "na"}
			}
			_, u := newTestServer(t, cfg)
			a := connect(t, u, nil)
			bad := 0
			for range 20 {
				if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
					t.Fatal(got)
				}
				ch := make(chan string, 1)
				a.sock.Request(smcp.EventListRoom, sio.Message{Args: []json.RawMessage{smcp.Encode(smcp.ListRoomReq{Agent: "a", ReqID: "l", OfficeID: "R"})}}, 5*time.Second, func(m sio.Message, err error) {
					ch <- string(m.Args[0])
				})
				a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "R"})
				if got := <-ch; !strings.Contains(got, "sessions") {
					bad++
					t.Log(got)
				}
			}
			if bad > 0 {
				t.Fatalf("%d of 20 list_room sent before a leave answered as if after it", bad)
			}
		})
	}
}

// TestClusterLeaveThenAnswer: a Computer leaves its office while a call is
// pending, then answers. One server relays the answer (leaving an office
// does not end a request on a connection that stays open).
func TestClusterLeaveThenAnswer(t *testing.T) {
	for _, clustered := range []bool{false, true} {
		t.Run(fmt.Sprint("clustered=", clustered), func(t *testing.T) {
			var urlA, urlB string
			if clustered {
				url := rvRedis(t)
				_, urlA = newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na"}})
				_, urlB = newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})
			} else {
				_, urlA = newTestServer(t, Config{})
				urlB = urlA
			}
			a := connect(t, urlA, nil)
			if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
				t.Fatal(got)
			}
			var c *peer
			c = connect(t, urlB, func(e *sio.Event) any {
				go func() {
					c.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "R"})
					time.Sleep(300 * time.Millisecond)
					b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "the answer"}}})
					_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
				}()
				return nil
			})
			if got := c.join(smcp.RoleComputer, "c", "R"); got != "true,null" {
				t.Fatal(got)
			}
			eventually(t, "the Computer in A's copy", func() bool {
				return strings.Contains(strings.Join(a.call(smcp.EventListRoom, smcp.ListRoomReq{Agent: "a", ReqID: "l", OfficeID: "R"}), ""), `"c"`)
			})
			got := <-rvToolCall(a, "a", "c", 10*time.Second)
			t.Logf("answer: %s", got)
			if !strings.Contains(got, "the answer") {
				t.Fatalf("got %s", got)
			}
		})
	}
}
