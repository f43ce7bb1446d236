package mcp

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// undeclared are the methods of the MCP capabilities /mcp does not
// declare (it declares tools only), with a request each.
var undeclared = []struct{ method, params string }{
	{"prompts/list", `{}`},
	{"prompts/get", `{"name":"p"}`},
	{"resources/list", `{}`},
	{"resources/templates/list", `{}`},
	{"resources/read", `{"uri":"file:///etc/hostname"}`},
	{"resources/subscribe", `{"uri":"file:///etc/hostname"}`},
	{"resources/unsubscribe", `{"uri":"file:///etc/hostname"}`},
	{"logging/setLevel", `{"level":"debug"}`},
	{"completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}`},
}

// The plain path and a streamable-HTTP session answer the methods of a
// capability /mcp does not declare alike, to the byte: -32601, as the
// declared capabilities ({"tools":{"listChanged":false}}) say. (Before,
// a session answered prompts/list, resources/list and their kin with
// empty lists and logging/setLevel with {}, while the plain path
// refused them.)
func TestUndeclaredMethodsBothPaths(t *testing.T) {
	f := newFixture(t, nil)
	sid := openSession(t, f.url)
	for i, m := range undeclared {
		id := strconv.Itoa(i + 1)
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + m.method + `","params":` + m.params + `}`
		want := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"method not found: \"` + m.method + `\""}}`
		if status, got := post(t, f.url, body); status != 200 || got != want {
			t.Errorf("plain %s: %d %s\nwant %s", m.method, status, got, want)
		}
		if status, _, got := sessionPost(t, f.url, sid, body); status != 200 || got != want {
			t.Errorf("session %s: %d %s\nwant %s", m.method, status, got, want)
		}
	}
}

// An SDK client, over HTTP or in memory, is refused prompts and resources
// the same way (logging/setLevel, deprecated in the SDK, is held by the
// raw test above).
func TestUndeclaredMethodsSDKClients(t *testing.T) {
	f := newFixture(t, nil)
	for _, way := range sdkWays {
		cs := way.open(t, f)
		if caps := cs.InitializeResult().Capabilities; caps.Prompts != nil || caps.Resources != nil || caps.Tools == nil {
			t.Errorf("%s: capabilities %+v", way.name, caps)
		}
		errs := map[string]error{}
		_, errs["prompts/list"] = cs.ListPrompts(t.Context(), nil)
		_, errs["resources/list"] = cs.ListResources(t.Context(), nil)
		for method, err := range errs {
			// Over HTTP the error is decoded into a jsonrpc.Error (at
			// 2026-07-28 on HTTP 404, which the client's error names too);
			// in memory it is the SDK's own value, with the same text.
			var rpc *jsonrpc.Error
			if err == nil || !strings.Contains(err.Error(), `: method not found: "`+method+`"`) ||
				errors.As(err, &rpc) && rpc.Code != codeMethodNotFound || way.name != "in memory" && rpc == nil {
				t.Errorf("%s: %s: %v", way.name, method, err)
			}
		}
	}
}
