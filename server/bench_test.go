package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// BenchmarkRelay measures one client:tool_call relayed from an Agent to an
// echoing Computer and back, over WebSocket on the default (event loop)
// server. It is the hot path of the hub: dispatch, route, send.
func BenchmarkRelay(b *testing.B) {
	_, url := newTestServer(b, Config{})
	c := connect(b, url, echo)
	c.join(smcp.RoleComputer, "c", "o")
	a := connect(b, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	raw, _ := json.Marshal(smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Params: json.RawMessage(`{"x":1}`), Timeout: 5})
	msg := sio.Message{Args: []json.RawMessage{raw}}
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.sock.Request(smcp.EventToolCall, msg, 10*time.Second, func(_ sio.Message, err error) { done <- err })
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
