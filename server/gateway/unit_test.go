package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestValidToolName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"t__echo", true},
		{"c1.t__echo", true},
		{"a-b_c.D9", true},
		{"", false},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"with space", false},
		{"slash/name", false},
		{"ümlaut", false},
	} {
		if got := validToolName(c.name); got != c.ok {
			t.Errorf("validToolName(%q) = %v", c.name, got)
		}
	}
}

func TestInputSchema(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{}}}`, `{"type":"object","properties":{"a":{}}}`},
		{`{"type":"string"}`, `{"type":"object"}`},
		{`{}`, `{"type":"object"}`},
		{`null`, `{"type":"object"}`},
		{``, `{"type":"object"}`},
		{`[1]`, `{"type":"object"}`},
		{`{"type":["object"]}`, `{"type":"object"}`},
	} {
		if got := string(inputSchema(json.RawMessage(c.in))); got != c.want {
			t.Errorf("inputSchema(%s) = %s", c.in, got)
		}
	}
}

// TestMapResult: a Computer's CallToolResult becomes MCP's, its markers
// in _meta; an answer that is no tool result is a failed call (4003).
func TestMapResult(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     string // the MCP result's JSON
		code     int
	}{
		{"text", `{"content":[{"type":"text","text":"hi"}],"isError":false}`,
			`{"content":[{"type":"text","text":"hi"}]}`, 0},
		{"structured", `{"content":[],"structuredContent":{"a":1},"isError":false}`,
			`{"content":[],"structuredContent":{"a":1}}`, 0},
		{"timeout marker", `{"content":[{"type":"text","text":"Tool call timed out"}],"isError":true,"meta":{"a2c_timeout":true}}`,
			`{"_meta":{"a2c_timeout":true},"content":[{"type":"text","text":"Tool call timed out"}],"isError":true}`, 0},
		{"error code", `{"content":[{"type":"text","text":"no"}],"isError":true,"meta":{"error_code":4005,"mcp_server":"b"}}`,
			`{"_meta":{"error_code":4005,"mcp_server":"b"},"content":[{"type":"text","text":"no"}],"isError":true}`, 4005},
		{"image", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}],"isError":false}`,
			`{"content":[{"type":"image","mimeType":"image/png","data":"aGk="}]}`, 0},
		{"unknown content kept as text", `{"content":[{"type":"hologram","x":1}],"isError":false}`,
			`{"content":[{"type":"text","text":"{\"type\":\"hologram\",\"x\":1}"}]}`, 0},
		{"no content", `{"isError":false}`, `{"content":[]}`, 0},
		{"not a result", `[1,2]`,
			`{"_meta":{"error_code":4003},"content":[{"type":"text","text":"The Computer's answer is no tool result."}],"isError":true}`, 4003},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := mapResult(json.RawMessage(c.in))
			got, err := json.Marshal(out)
			if err != nil || string(got) != c.want || code != c.code {
				t.Errorf("got %s (code %d, %v)\nwant %s (code %d)", got, code, err, c.want, c.code)
			}
		})
	}
}

func TestNewEra(t *testing.T) {
	for _, c := range []struct {
		name, header, body string
		want               bool
	}{
		{"header 2026", "2026-07-28", `{}`, true},
		{"header later", "2027-01-01", `{}`, true},
		{"header 2025", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, false},
		{"discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, true},
		{"meta", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, true},
		{"meta earlier", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, false},
		{"initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false},
		{"batch", "", `[{"jsonrpc":"2.0","id":1,"method":"server/discover"}]`, false},
		{"not json", "", `{`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "/mcp", strings.NewReader(c.body))
			if c.header != "" {
				r.Header.Set("Mcp-Protocol-Version", c.header)
			}
			got, err := newEra(r)
			if err != nil || got != c.want {
				t.Fatalf("newEra = %v, %v", got, err)
			}
			if c.header == "" { // the body was read: it must be put back whole
				b := make([]byte, len(c.body)+1)
				n, _ := r.Body.Read(b)
				if string(b[:n]) != c.body {
					t.Errorf("body put back as %q", b[:n])
				}
			}
		})
	}
}

// FuzzMapResult: whatever a Computer answers, the mapping neither panics
// nor makes a result that does not encode.
func FuzzMapResult(f *testing.F) {
	f.Add(`{"content":[{"type":"text","text":"hi"}],"isError":false,"meta":{"error_code":4005}}`)
	f.Add(`{"content":[{"type":"resource","resource":{"uri":"x://y","text":"t"}}]}`)
	f.Add(`{"structuredContent":null,"meta":{"error_code":"x"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, _ := mapResult(json.RawMessage(in))
		if out == nil || out.Content == nil {
			t.Fatal("no result")
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("the result does not encode: %v", err)
		}
		var back sdk.CallToolResult
		b, _ := json.Marshal(out)
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("an MCP client cannot read the result %s: %v", b, err)
		}
	})
}
