package aiod

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestChildrenInheritNoSecret runs `env` through the commands, code and
// terminal planes of a daemon whose key also sits in another variable (as
// a2c up takes it from A2C_TOKEN) and checks that no variable holding a
// secret reaches the child: the key's other holders, the hub's token,
// the upstream MCP servers (URLs with credentials) and the Redis URL.
func TestChildrenInheritNoSecret(t *testing.T) {
	const key = "k3y-Only-In-Env"
	t.Setenv("LAUNCHER_SECRET", key)
	t.Setenv("A2C_TOKEN", "hub-token-xyz")
	t.Setenv("EXTRA_MCP_SERVERS", `{"p":{"url":"http://u:hunter2@127.0.0.1:9/mcp"}}`)
	t.Setenv("A2C_REDIS_URL", "redis://:redispw@127.0.0.1:6379")
	t.Setenv("AIOD_VISIBLE", "plain-value")
	base := start(t, Config{Workspace: t.TempDir(), APIKey: key})
	auth := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	leaks := []string{key, "LAUNCHER_SECRET", "hub-token-xyz", "hunter2", "redispw"}

	check := func(plane, out string) {
		t.Helper()
		if !strings.Contains(out, "AIOD_VISIBLE=plain-value") {
			t.Fatalf("%s: the child's environment was not read: %q", plane, out)
		}
		for _, l := range leaks {
			if strings.Contains(out, l) {
				t.Errorf("%s: the child sees %q", plane, l)
			}
		}
	}

	_, body := do(t, "POST", base+"/v2/commands", `{"command":"env"}`, auth)
	var cmd struct {
		Data struct{ Stdout string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &cmd); err != nil {
		t.Fatalf("commands: %v: %s", err, body)
	}
	check("commands", cmd.Data.Stdout)

	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		_, body = do(t, "POST", base+"/v2/code/execute", `{"language":"python","code":"import os\nprint('\\n'.join(k+'='+v for k,v in os.environ.items()))"}`, auth)
		check("code", body)
	}

	_, body = do(t, "POST", base+"/v1/shell/exec", `{"command":"env"}`, auth)
	check("terminal", body)
}
