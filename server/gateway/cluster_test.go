package gateway

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/computer"
	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/server/cluster"
)

// TestGatewayCluster: in a cluster, the gateway of one node serves an
// office whose Computers another node holds: it lists their tools (from
// Redis), relays a call, cancels one (the process gone within 1 s), and
// tells its client of a Computer that enters there (by reading the office
// again, as this node follows no office it holds no member of).
func TestGatewayCluster(t *testing.T) {
	redis := redistest.Start(t)
	key := []byte("gateway tests' cluster key, 32 B")
	node := func(id string) (*server.Server, string) {
		s, err := server.New(server.Config{Cluster: cluster.Config{URL: redis.URL(), NodeID: id, Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
			ts.Close()
		})
		return s, ts.URL
	}
	a, aURL := node("na")
	_, bURL := node("nb")
	gw, err := New(Config{Hub: a, CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	a.HandleMCP(gw)
	onA := &rig{hub: a, gw: gw, base: aURL}
	onB := &rig{base: bURL}

	started := make(pids, 1)
	onB.computer(t, "o1", "c1", computer.ApproveAll, testTools(started))
	changed := make(chan struct{}, 8)
	cs := onA.client(t, "/offices/o1/mcp", eras[0], &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	waitTools(t, cs, changed, "t__echo", "t__sleep")
	out, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || text(out) != `echo {"text":"x"}` {
		t.Fatalf("call across nodes: %v %s", err, marshal(out))
	}

	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "t__sleep"}) }()
	pid := <-started
	cancel()
	if !gone(pid, time.Second) {
		t.Fatalf("process %d still there 1 s after the cancel", pid)
	}

	onB.computer(t, "o1", "c2", computer.ApproveAll, testTools(nil))
	waitTools(t, cs, changed, "c1.t__echo", "c1.t__sleep", "c2.t__echo", "c2.t__sleep")
}
