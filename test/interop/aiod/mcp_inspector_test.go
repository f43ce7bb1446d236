package aiod

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// TestAiodMCPInspector: the newest MCP Inspector's CLI lists aiod's ten
// tools and calls one, through a recording proxy that shows which
// revision it spoke.
func TestAiodMCPInspector(t *testing.T) {
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws)
	target, _ := url.Parse(d.URL)
	var mu sync.Mutex
	var versions []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("MCP-Protocol-Version"); v != "" {
			mu.Lock()
			versions = append(versions, v)
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	inspect := func(args ...string) []byte {
		t.Helper()
		return harness.Inspect(t, front.URL+"/mcp", d.Logs, args...)
	}

	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if out := inspect("--method", "tools/list"); json.Unmarshal(out, &list) != nil || len(list.Tools) != 10 ||
		list.Tools[0].Name != "sandbox_execute_bash" || list.Tools[9].Name != "browser_gui_execute_action" {
		t.Fatalf("tools/list: %s", out)
	}
	var call struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	out := inspect("--method", "tools/call", "--tool-name", "sandbox_execute_bash", "--tool-arg", "cmd=echo inspected")
	if json.Unmarshal(out, &call) != nil || call.IsError || len(call.Content) != 1 ||
		call.Content[0].Text != `{"cwd":"`+ws+`","exit_code":0,"output":"inspected\n","status":"completed"}` {
		t.Fatalf("tools/call: %s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(versions)
	t.Logf("MCP-Protocol-Version of the Inspector's requests: %v", slices.Compact(versions))
}
