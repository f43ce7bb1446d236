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

// wsModes are the server's two ways of serving WebSockets
// (--websocket-mode): one epoll event loop, and a reader goroutine per
// connection.
var wsModes = []string{"loop", "goroutine"}

// servers starts the three servers the scenario scripts expect, serving
// WebSockets in mode, and returns their environment.
func servers(t *testing.T, mode string) []string {
	plain := startServer(t, "--websocket-mode", mode)
	auth := startServer(t, "--websocket-mode", mode, "--token", "s3cret")
	relay := startServer(t, "--websocket-mode", mode, "--relay-timeout", "1s")
	return []string{
		"A2C_URL=" + plain.URL,
		"A2C_AUTH_URL=" + auth.URL,
		"A2C_TOKEN_VALUE=s3cret",
		"A2C_RELAY_TIMEOUT_URL=" + relay.URL,
	}
}

// clientMatrix is where a scenario script runs: every server WebSocket
// mode with the clients' default transports (open on polling, then
// upgrade) and with WebSocket only, and polling only, which never reaches
// the WebSocket code and so runs against one mode. A script's scenarios
// that name their own transports keep them.
var clientMatrix = func() []struct{ name, mode, transports string } {
	var m []struct{ name, mode, transports string }
	for _, mode := range wsModes {
		m = append(m,
			struct{ name, mode, transports string }{"upgrade/" + mode, mode, "polling,websocket"},
			struct{ name, mode, transports string }{"websocket/" + mode, mode, "websocket"})
	}
	return append(m, struct{ name, mode, transports string }{"polling", wsModes[0], "polling"})
}()

// runScriptMatrix runs a scenario script once per entry of clientMatrix,
// as parallel subtests: the scripts mostly wait on the network, so the
// runs overlap well even on two cores.
func runScriptMatrix(t *testing.T, name string, args ...string) {
	for _, m := range clientMatrix {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			env := append(servers(t, m.mode), "A2C_TRANSPORTS="+m.transports)
			harness.RunScenarios(t, env, name, args...)
		})
	}
}

func TestPythonClients(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import socketio, requests, websocket").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-socketio, python3-requests, python3-websocket")
	}
	runScriptMatrix(t, "/usr/bin/python3", "test/interop/a2c/python/scenarios.py")
}

func TestNodeClients(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		harness.MissingPeer(t, "node")
	}
	if _, err := os.Stat(filepath.Join(harness.Root(), "test/interop/a2c/node/node_modules/socket.io-client")); err != nil {
		harness.MissingPeer(t, "npm socket.io-client (npm ci in test/interop/a2c/node)")
	}
	runScriptMatrix(t, "node", "test/interop/a2c/node/scenarios.js")
}
