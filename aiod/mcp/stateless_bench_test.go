package mcp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkEras is one tools/call of sandbox_get_context (no process:
// the protocol's own cost) on the handshake-era plain path, on it with as
// many bytes as a 2026-07-28 call carries, and at MCP 2026-07-28, over
// loopback HTTP (the client's cost included).
func BenchmarkEras(b *testing.B) {
	f := newFixture(&testing.T{}, nil)
	client := &http.Client{}
	plain := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_get_context","arguments":{}}}`)
	next := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_get_context","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	run := func(b *testing.B, body []byte, hdr ...string) {
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, f.url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	}
	// The plain path given as many bytes as a 2026-07-28 call: its _meta
	// under keys of the same length that name no revision, and four
	// headers of the same sizes that mean nothing. What the 2026-07-28
	// call costs beyond this is its checks.
	sameBytes := []byte(strings.NewReplacer("io.modelcontextprotocol/", "io.modelcontextprotoco1/").Replace(string(next)))
	h := nextHeaders("tools/call", "sandbox_get_context")
	var pad []string
	for i := 0; i+1 < len(h); i += 2 {
		pad = append(pad, "X-"+h[i][2:], h[i+1])
	}
	b.Run("plain", func(b *testing.B) { run(b, plain) })
	b.Run("plain, as many bytes", func(b *testing.B) { run(b, sameBytes, pad...) })
	b.Run("2026-07-28", func(b *testing.B) { run(b, next, h...) })
}
