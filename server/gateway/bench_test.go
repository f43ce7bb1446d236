package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/computer"
)

// BenchmarkCall measures one tool call of a Computer's in-process echo
// tool three ways through one hub: the Go Agent SDK (the baseline), and
// the gateway with the Go MCP SDK's client in a 2025-11-25 session and
// at 2026-07-28. The differences are what the gateway adds (client
// included), with a tool that costs next to nothing.
func BenchmarkCall(b *testing.B) {
	r := newRig(b, "", 10*time.Second)
	r.computer(b, "o1", "c1", computer.ApproveAll, testTools(nil))
	ctx := context.Background()
	b.Run("agent", func(b *testing.B) {
		a, err := agent.Dial(ctx, r.base, agent.Options{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		if err := a.Join(ctx, "o1"); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			res, err := a.CallTool(ctx, agent.Call{Computer: "c1", Tool: "t__echo", Params: map[string]any{"text": "hi"}, Timeout: 10 * time.Second})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
	for _, e := range eras {
		b.Run("gateway "+e.name, func(b *testing.B) {
			cs := r.client(b, "/offices/o1/mcp", e, nil)
			for b.Loop() {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "t__echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
	// A plain HTTP client speaking 2026-07-28 (one POST, one JSON
	// answer): the gateway's own cost without an SDK client's.
	b.Run("gateway raw 2026-07-28", func(b *testing.B) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"text":"hi"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		for b.Loop() {
			req, _ := http.NewRequest("POST", r.base+"/offices/o1/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "t__echo")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(out), `echo {\"text\":\"hi\"}`) {
				b.Fatalf("%d %s", resp.StatusCode, out)
			}
		}
	})
}
