package server

import (
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestClusterBacklogFull: a request to a Computer on another node that
// does not fit in the node's backlog of frames is answered at once with
// the typed 500, counted as a failed frame.
func TestClusterBacklogFull(t *testing.T) {
	url := rvRedis(t)
	_, urlA := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na", MaxBacklog: 1}})
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})
	a := connect(t, urlA, nil)
	if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
		t.Fatal(got)
	}
	c := connect(t, urlB, func(*sio.Event) any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}}
	})
	if got := c.join(smcp.RoleComputer, "c", "R"); got != "true,null" {
		t.Fatal(got)
	}
	start := time.Now()
	got := <-rvToolCall(a, "a", "c", 10*time.Second)
	want := `{"code":500,"message":"Cluster backlog full: the hub's Redis is not keeping up; try again later"}`
	if got != want {
		t.Fatalf("answer %s, want %s", got, want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answered after %v: a full backlog fails at once", d)
	}
	expect(t, urlA, "a2c_cluster_frames_failed_total", 1)
	expect(t, urlA, relayed(smcp.EventToolCall, outcomeRefused), 1)
}

// TestClusterForgedFrameRefused: a frame PUBLISHed on a node's channel by
// someone without the cluster key is dropped and counted in
// a2c_cluster_frames_refused_total; the nodes' own calls still work.
func TestClusterForgedFrameRefused(t *testing.T) {
	r := redistest.Start(t)
	_, urlA := newTestServer(t, Config{Cluster: cluster.Config{URL: r.URL(), NodeID: "na"}})
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: r.URL(), NodeID: "nb"}})
	ran := make(chan string, 4)
	c := connect(t, urlB, func(e *sio.Event) any {
		ran <- string(e.Args[0])
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}}
	})
	if got := c.join(smcp.RoleComputer, "c", "R"); got != "true,null" {
		t.Fatal(got)
	}
	forged := cluster.AppendFrame(nil, &cluster.Frame{Kind: cluster.KindRequest, From: "na", To: c.sock.ID(), Office: "R",
		Event: smcp.EventToolCall, Call: 1, TimeoutMS: 5000,
		Payload: appendMessage(nil, jsonMessage(smcp.ToolCallReq{Agent: "a", ReqID: "x", Computer: "c", ToolName: "rm -rf", Timeout: 5}))})
	if _, err := r.Do("PUBLISH", "a2c:{nb}:ch", string(forged)); err != nil {
		t.Fatal(err)
	}
	expect(t, urlB, `a2c_cluster_frames_refused_total{reason="unsealed"}`, 1)
	a := connect(t, urlA, nil)
	if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
		t.Fatal(got)
	}
	if got := <-rvToolCall(a, "a", "c", 10*time.Second); got != `{"content":[{"text":"ok","type":"text"}]}` {
		t.Fatalf("genuine call: %s", got)
	}
	if got := <-ran; !hasReqID(got, "r-a") {
		t.Fatalf("the Computer ran %s, want only the genuine call", got)
	}
	select {
	case got := <-ran:
		t.Fatalf("the Computer ran a second call: %s", got)
	case <-time.After(100 * time.Millisecond):
	}
	expect(t, urlB, `a2c_cluster_frames_refused_total{reason="mac"}`, 0)
}

// hasReqID reports whether a request's JSON carries req_id id.
func hasReqID(raw, id string) bool {
	var req smcp.ToolCallReq
	return smcp.DecodeRequest([]byte(raw), &req) == nil && req.ReqID == id
}

// TestClusterSendersBacklog: on a Redis Cluster frames leave through the
// senders (one per destination node), which count them against the same
// backlog: calls and broadcasts work, and once they are published the
// backlog is empty again on both nodes (every Reserve was released).
func TestClusterSendersBacklog(t *testing.T) {
	url := redistest.StartCluster(t)
	sa, urlA := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na"}})
	sb, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})
	if sa.hub.node.Pipelined() {
		t.Fatal("a Redis Cluster should use the senders")
	}
	a := connect(t, urlA, nil)
	if got := a.join(smcp.RoleAgent, "a", "R"); got != "true,null" {
		t.Fatal(got)
	}
	c := connect(t, urlB, func(*sio.Event) any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}}
	})
	if got := c.join(smcp.RoleComputer, "c", "R"); got != "true,null" {
		t.Fatal(got)
	}
	for range 20 {
		if got := <-rvToolCall(a, "a", "c", 10*time.Second); got != `{"content":[{"text":"ok","type":"text"}]}` {
			t.Fatalf("call: %s", got)
		}
	}
	eventually(t, "both backlogs empty", func() bool { return sa.hub.node.Backlog() == 0 && sb.hub.node.Backlog() == 0 })
	if r := sb.hub.node.Refused(); r != (cluster.Refusals{}) {
		t.Fatalf("refused %+v", r)
	}
}
