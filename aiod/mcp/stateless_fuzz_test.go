package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// FuzzNext holds /mcp to its contract for any body and any MCP headers,
// through its router (ServeHTTP), so the 2026-07-28 path and the plain
// path beside it are both reached: it never panics; the answer is 202
// with no body, or JSON-RPC (one response, or a batch's array); a
// 2026-07-28 answer is on the status the revision gives its code; and a
// tool runs at 2026-07-28 only for a tools/call whose headers name it.
func FuzzNext(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct{ body, method, name, version string }{
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`, "server/discover", "", "2026-07-28"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`, "tools/list", "", "2026-07-28"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_get_context",` + meta + `}}`, "tools/call", "sandbox_get_context", "2026-07-28"},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, "notifications/cancelled", "", "2026-07-28"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`, "tools/list", "", "2026-07-28"},
		{`[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`, "tools/list", "", "2099-01-01"},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":{"x":1},` + meta + `}}`, "tools/call", "{", "2026-07-28"},
	} {
		f.Add([]byte(c.body), c.method, c.name, c.version)
	}
	var ran atomic.Int64
	fz := New(Config{
		Context:    func(context.Context) (any, error) { return map[string]any{"version": "fuzz"}, nil },
		BeforeCall: func(context.Context) error { ran.Add(1); return nil },
	})
	f.Fuzz(func(t *testing.T, body []byte, method, name, version string) {
		msgs, batch, perr := parseBody(body)
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range map[string]string{"Mcp-Method": method, "Mcp-Name": name, "MCP-Protocol-Version": version} {
			if v != "" && !strings.ContainsAny(v, "\r\n\x00") {
				r.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		before := ran.Load()
		fz.ServeHTTP(w, r)
		called := ran.Load() != before
		next := perr == nil && newEra(r, msgs, batch)
		if w.Code == http.StatusAccepted {
			if w.Body.Len() != 0 {
				t.Fatalf("202 with a body: %s", w.Body)
			}
			return
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%d %q: not JSON", w.Code, w.Body)
		}
		if !next {
			return // the plain path, held by FuzzRPC and its tests
		}
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || (resp.Result == nil) == (resp.Error == nil) {
			t.Fatalf("%d %s: not one JSON-RPC answer", w.Code, w.Body)
		}
		want := http.StatusOK
		if resp.Error != nil {
			want = nextStatus(resp.Error)
			switch resp.Error.Code {
			case codeInvalidRequest:
				want = w.Code // 400 or 415, refused before the message
				if w.Code != http.StatusBadRequest && w.Code != http.StatusUnsupportedMediaType {
					t.Fatalf("-32600 on %d", w.Code)
				}
			}
		}
		if w.Code != want {
			t.Fatalf("status %d for %s", w.Code, w.Body)
		}
		// A tool ran only for a tools/call that passed every check: its
		// answer is a result, or the dispatcher's own error.
		if next && called && (batch || msgs[0].Method != "tools/call" || method != "tools/call" || version != statelessProtocol) {
			t.Fatalf("a tool ran for %s with Mcp-Method %q, version %q: %s", msgs[0].Method, method, version, w.Body)
		}
	})
}
