// Package interop holds black-box tests: they build the real a2c binary,
// start it on random loopback ports, and drive it with the Python
// (python-socketio) and JavaScript (socket.io-client) ecosystems and with
// the Go Agent SDK.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "a2c-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "a2c")
	build := exec.Command("go", "build", "-o", binPath, "./cmd/a2c")
	build.Dir = moduleRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build a2c:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func moduleRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// requirePeers reports whether a missing test peer is a failure (the
// project's test command sets it) or a reason to skip.
func requirePeers() bool { return os.Getenv("A2C_REQUIRE_PEERS") == "1" }

func missingPeer(t *testing.T, what string) {
	t.Helper()
	if requirePeers() {
		t.Fatalf("test peer missing: %s (run make test, which installs it)", what)
	}
	t.Skipf("test peer missing: %s (run make test to install it)", what)
}

// proc is a running a2c binary.
type proc struct {
	URL     string
	Addr    string
	cmd     *exec.Cmd
	mu      sync.Mutex
	logs    bytes.Buffer
	stopped bool
}

// Stop ends the process with SIGTERM and checks that it exits cleanly.
func (p *proc) Stop(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM; logs:\n%s", p.cmd.Args[1], err, p.Logs())
		}
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("%s did not stop on SIGTERM", p.cmd.Args[1])
	}
}

func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

var addrRE = regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)

// startServer runs "a2c server --listen 127.0.0.1:0 args..." and waits for
// its first log line. The process is stopped with SIGTERM at cleanup and
// must exit cleanly.
func startServer(t *testing.T, args ...string) *proc {
	t.Helper()
	return run(t, exec.Command(binPath, append([]string{"server", "--listen", "127.0.0.1:0"}, args...)...), true)
}

// run starts cmd, keeps its stderr as the process's logs and, when
// waitAddr is set, waits for the "addr=127.0.0.1:PORT" of its first log
// line. The process is stopped with SIGTERM at cleanup and must exit
// cleanly.
func run(t *testing.T, cmd *exec.Cmd, waitAddr bool) *proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := addrRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { p.Stop(t) })
	if !waitAddr {
		return p
	}
	select {
	case p.Addr = <-found:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not report its address; logs:\n%s", filepath.Base(cmd.Path), p.Logs())
	}
	p.URL = "http://" + p.Addr
	return p
}

var resultRE = regexp.MustCompile(`^(PASS|FAIL) (\S+)(?:: (.*))?$`)

// runScenarios runs an external scenario script and turns each of its
// "PASS name" / "FAIL name: reason" lines into a subtest.
func runScenarios(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = moduleRoot()
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var seen int
	for _, line := range strings.Split(string(out), "\n") {
		m := resultRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		seen++
		t.Run(m[2], func(t *testing.T) {
			if m[1] == "FAIL" {
				t.Error(m[3])
			}
		})
	}
	if err != nil || seen == 0 {
		t.Fatalf("%s: %v (ran %d scenarios)\nstdout:\n%s\nstderr:\n%s", name, err, seen, out, stderr.String())
	}
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
		missingPeer(t, "Debian python3-socketio, python3-requests, python3-websocket")
	}
	runScenarios(t, servers(t), "/usr/bin/python3", "test/interop/python/scenarios.py")
}

func TestNodeClients(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		missingPeer(t, "node")
	}
	if _, err := os.Stat(filepath.Join(moduleRoot(), "test/interop/node/node_modules/socket.io-client")); err != nil {
		missingPeer(t, "npm socket.io-client (npm ci in test/interop/node)")
	}
	runScenarios(t, servers(t), "node", "test/interop/node/scenarios.js")
}
