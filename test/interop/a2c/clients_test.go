// Package a2c holds the black-box tests of A2C-SMCP: they build the real
// a2c binary, start it on random loopback ports, and drive it with the
// Python (python-socketio) and JavaScript (socket.io-client) ecosystems
// and with the Go Agent SDK.
package a2c

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// startServer runs "a2c server --listen 127.0.0.1:0 args..." and waits for
// its first log line. The process is stopped with SIGTERM at cleanup and
// must exit cleanly.
func startServer(t *testing.T, args ...string) *harness.Proc {
	t.Helper()
	return harness.Run(t, exec.Command(harness.Bin(t, "a2c"), append([]string{"server", "--listen", "127.0.0.1:0"}, args...)...), true)
}

// servers starts the three servers the scenario scripts expect and
// returns their environment.
func servers(t *testing.T) []string {
	plain := startServer(t)
	auth := startServer(t, "--token", "s3cret")
	relay := startServer(t, "--relay-timeout", "1s")
	return []string{
		"A2C_URL=" + plain.URL,
		"A2C_AUTH_URL=" + auth.URL,
		"A2C_TOKEN_VALUE=s3cret",
		"A2C_RELAY_TIMEOUT_URL=" + relay.URL,
	}
}

func TestPythonClients(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import socketio, requests, websocket").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-socketio, python3-requests, python3-websocket")
	}
	harness.RunScenarios(t, servers(t), "/usr/bin/python3", "test/interop/a2c/python/scenarios.py")
}

func TestNodeClients(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		harness.MissingPeer(t, "node")
	}
	if _, err := os.Stat(filepath.Join(harness.Root(), "test/interop/a2c/node/node_modules/socket.io-client")); err != nil {
		harness.MissingPeer(t, "npm socket.io-client (npm ci in test/interop/a2c/node)")
	}
	harness.RunScenarios(t, servers(t), "node", "test/interop/a2c/node/scenarios.js")
}
