package a2c

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// TestComputerServerEnvHasNoCredential: a Computer started with the hub's
// token and the sandbox's keys in its environment starts its stdio MCP
// servers without them (read from /proc/PID/environ of every process of
// the server's tree: the supervisor, the server, its child), while a
// variable the configuration's own env gives on purpose reaches them.
func TestComputerServerEnvHasNoCredential(t *testing.T) {
	requireLinux(t)
	entry := everythingEntry(t)
	mark := agent.NewReqID()
	killLeftovers(t, mark)
	cfg := filepath.Join(t.TempDir(), "servers.json")
	doc := fmt.Sprintf(`{"name":"tree","type":"stdio","server_parameters":{"command":"sh",
  "args":["-c","sleep 1000 & exec node \"$0\" stdio", %q], "env":{%q:%q, "SANDBOX_API_KEY":"given-on-purpose"}}}`, entry, markEnv, mark)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token", "hub-secret")
	cmd := exec.Command(harness.Bin(t, "a2c"), "computer", "--server", srv.URL, "--office", agent.NewReqID(), "--name", "pc", "--config", cfg)
	cmd.Env = append(os.Environ(), "A2C_TOKEN=hub-secret", "AIO_API_KEY=aio-secret",
		"A2C_REDIS_URL=redis://:pw@127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer x")
	harness.Run(t, cmd, false)
	procs := waitProcs(t, mark, "the server and its child to run", 30*time.Second, func(ps []treeProc) bool {
		return hasProgram(ps, "node") && hasProgram(ps, "sleep")
	})
	for _, p := range procs {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if err != nil {
			t.Fatal(err)
		}
		env = append([]byte{0}, env...) // each entry between NULs
		for _, name := range []string{"A2C_TOKEN", "AIO_API_KEY", "A2C_REDIS_URL", "OTEL_EXPORTER_OTLP_HEADERS"} {
			if bytes.Contains(env, []byte("\x00"+name+"=")) {
				t.Errorf("%s (pid %d) inherited %s", p.Cmdline, p.PID, name)
			}
		}
		if !bytes.Contains(env, []byte("\x00SANDBOX_API_KEY=given-on-purpose\x00")) {
			t.Errorf("%s (pid %d) lacks the config's own SANDBOX_API_KEY", p.Cmdline, p.PID)
		}
	}
}
