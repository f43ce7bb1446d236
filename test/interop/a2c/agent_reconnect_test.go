package a2c

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// echoMCP is an MCP server (official Go SDK, streamable HTTP) with one
// tool, echo, that answers "Echo: <message>".
func echoMCP(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + a.Message}}}, struct{}{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// listAgents asks the server, through a scripted Computer of the office,
// which Agents the office holds.
func listAgents(t *testing.T, observer *computer, office string) []string {
	t.Helper()
	b, _ := json.Marshal(smcp.ListRoomReq{Agent: "observer", ReqID: agent.NewReqID(), OfficeID: office})
	ch := make(chan sio.Message, 1)
	observer.sock.Request(smcp.EventListRoom, sio.Message{Args: []json.RawMessage{b}}, 5*time.Second, func(m sio.Message, err error) {
		if err != nil {
			t.Errorf("list_room: %v", err)
		}
		ch <- m
	})
	m := <-ch
	var ret smcp.ListRoomRet
	if len(m.Args) == 0 || json.Unmarshal(m.Args[0], &ret) != nil {
		t.Fatalf("list_room answer %q", m.Args)
	}
	var names []string
	for _, s := range ret.Sessions {
		if s.Role == smcp.RoleAgent {
			names = append(names, s.Name)
		}
	}
	return names
}

// TestGoAgentReconnect restarts a real "a2c server" process on the same
// port under a joined Go Agent and a real "a2c computer": the Agent
// reconnects and rejoins by itself (the new server lists it), and its next
// tool call reaches the Computer, which has reconnected too. A second
// restart rotates the server's token: the Agent's token provider, called
// before every connection, hands over the new one and the Agent rejoins.
func TestGoAgentReconnect(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := startServer(t, "--listen", addr, "--token", "token-1")
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"name":"rc","type":"streamable","server_parameters":{"url":%q}}`, echoMCP(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	office := agent.NewReqID()
	startComputer(t, srv.URL, office, "pc", cfg, "--token", "token-1")

	var (
		mu     sync.Mutex
		token  = "token-1"
		issued []string
	)
	disconnects := make(chan string, 8)
	reconnects := make(chan struct{}, 8)
	a := dialAgent(t, srv.URL, "agent", agent.Options{
		AuthFunc: func(context.Context) (map[string]any, error) {
			mu.Lock()
			defer mu.Unlock()
			issued = append(issued, token)
			return map[string]any{"x-api-key": token}, nil
		},
		Reconnect:    agent.ReconnectOptions{MinDelay: 100 * time.Millisecond, MaxDelay: time.Second},
		OnDisconnect: func(r string) { disconnects <- r },
		OnReconnect:  func() { reconnects <- struct{}{} },
	})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	call := func(msg string) {
		t.Helper()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "rc__echo", Params: map[string]any{"message": msg}, Timeout: 10 * time.Second})
		if err != nil || res.IsError || res.Text() != "Echo: "+msg {
			t.Fatalf("call %q = %+v, %v", msg, res, err)
		}
	}
	waitTools(t, a, "pc", "rc__echo")
	call("before")

	restart := func(tok string) {
		t.Helper()
		srv.Stop(t)
		awaitEvent(t, disconnects, "the Agent's OnDisconnect")
		mu.Lock()
		token = tok
		mu.Unlock()
		srv = startServer(t, "--listen", addr, "--token", tok)
		awaitEvent(t, reconnects, "the Agent's OnReconnect")
		if a.Office() != office || a.Err() != nil {
			t.Fatalf("after reconnect: office %q, err %v", a.Office(), a.Err())
		}
		observer := dialComputerAuth(t, srv.URL, office, "observer", tok)
		if got := listAgents(t, observer, office); len(got) != 1 || got[0] != "agent" {
			t.Fatalf("the restarted server lists agents %q", got)
		}
		observer.sock.Disconnect()
	}

	restart("token-1")
	waitTools(t, a, "pc", "rc__echo") // the Computer is back too
	call("after restart")

	restart("token-2")
	mu.Lock()
	last := issued[len(issued)-1]
	n := len(issued)
	mu.Unlock()
	if last != "token-2" || n < 3 {
		t.Errorf("tokens issued %d times, the last %q", n, last)
	}
	if _, err := a.ListRoom(ctx10(t)); err != nil {
		t.Fatalf("list_room with the rotated token: %v", err)
	}
}

// dialComputerAuth is dialComputer with a token in the auth field the
// server reads by default.
func dialComputerAuth(t *testing.T, serverURL, office, name, token string) *computer {
	t.Helper()
	return dialComputerWith(t, serverURL, office, name, nil, map[string]any{"x-api-key": token})
}

// awaitEvent waits up to 30 s for one value on ch.
func awaitEvent[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}
