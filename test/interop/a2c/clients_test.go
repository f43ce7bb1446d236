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

	"github.com/a2c-smcp/a2c-go/smcp"
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

// protocolVersions are the server versions every scenario script runs
// against: the default (a2c server without --protocol-version, 0.4.0) and
// the older minor a process may still be started with. The scripts read
// the version from A2C_VERSION and derive every version-dependent
// expectation (4008 bodies, list_room's a2c_version, put_blob, tags).
var protocolVersions = []struct {
	version string
	flags   []string
}{
	{smcp.ProtocolVersion, nil},
	{"0.3.0", []string{"--protocol-version", "0.3.0"}},
}

// servers starts the three servers the scenario scripts expect, serving
// WebSockets in mode with the extra flags (the protocol version), and
// returns their environment and the plain server.
func servers(t *testing.T, mode string, flags []string) ([]string, *harness.Proc) {
	plain := startServer(t, append([]string{"--websocket-mode", mode}, flags...)...)
	auth := startServer(t, append([]string{"--websocket-mode", mode, "--token", "s3cret"}, flags...)...)
	relay := startServer(t, append([]string{"--websocket-mode", mode, "--relay-timeout", "1s"}, flags...)...)
	return []string{
		"A2C_URL=" + plain.URL,
		"A2C_AUTH_URL=" + auth.URL,
		"A2C_TOKEN_VALUE=s3cret",
		"A2C_RELAY_TIMEOUT_URL=" + relay.URL,
	}, plain
}

// clientMatrix is where a scenario script runs: every server WebSocket
// mode with the clients' default transports (open on polling, then
// upgrade) and with WebSocket only, and polling only, which never reaches
// the WebSocket code and so runs against one mode. A script's scenarios
// that name their own transports keep them. The entries with computers
// also get real a2c Computers in offices of their plain server (see
// [computerEnv]) for the scenarios about put_blob, skills and tool tags;
// the others skip those scenarios, so each version starts two sets.
var clientMatrix = func() []struct {
	name, mode, transports string
	computers              bool
} {
	type entry = struct {
		name, mode, transports string
		computers              bool
	}
	var m []entry
	for _, mode := range wsModes {
		m = append(m,
			entry{"upgrade/" + mode, mode, "polling,websocket", mode == wsModes[0]},
			entry{"websocket/" + mode, mode, "websocket", false})
	}
	return append(m, entry{"polling", wsModes[0], "polling", true})
}()

// runScriptMatrix runs a scenario script once per protocol version and
// entry of clientMatrix; a version's entries run as parallel subtests:
// the scripts mostly wait on the network, so the runs overlap well even
// on two cores.
func runScriptMatrix(t *testing.T, name string, args ...string) {
	// Built before the parallel entries start, so that no compiler runs
	// beside scenarios that time their notifications.
	harness.Bin(t, "a2c")
	harness.BinPkg(t, "./test/interop/a2c/testdata/toolsrv")
	for _, v := range protocolVersions {
		t.Run(v.version, func(t *testing.T) {
			for _, m := range clientMatrix {
				t.Run(m.name, func(t *testing.T) {
					t.Parallel()
					env, plain := servers(t, m.mode, v.flags)
					env = append(env, "A2C_TRANSPORTS="+m.transports, "A2C_VERSION="+v.version)
					if m.computers {
						env = append(env, computerEnv(t, plain.URL, v.flags)...)
					}
					harness.RunScenarios(t, env, name, args...)
				})
			}
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
