package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binDir  string
	binOnce sync.Once
	binMu   sync.Mutex
	built   = map[string]error{}
)

// Main runs the tests of a black-box package and removes the binaries it
// built. A package's TestMain calls it: os.Exit(harness.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// Root is the module's root directory (the folder holding go.mod).
func Root() string {
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

// Bin returns the path of the binary built from ./cmd/<name>, building it
// on first use. A build failure fails the test.
func Bin(t testing.TB, name string) string {
	t.Helper()
	binOnce.Do(func() {
		d, err := os.MkdirTemp("", "a2c-interop-")
		if err != nil {
			panic(err)
		}
		binDir = d
	})
	binMu.Lock()
	defer binMu.Unlock()
	path := filepath.Join(binDir, name)
	err, ok := built[name]
	if !ok {
		build := exec.Command("go", "build", "-o", path, "./cmd/"+name)
		build.Dir = Root()
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("build %s: %v\n%s", name, berr, out)
		}
		built[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// RequirePeers reports whether a missing test peer is a failure (the
// project's test command sets A2C_REQUIRE_PEERS=1) or a reason to skip.
func RequirePeers() bool { return os.Getenv("A2C_REQUIRE_PEERS") == "1" }

// MissingPeer fails the test under RequirePeers and skips it otherwise.
func MissingPeer(t testing.TB, what string) {
	t.Helper()
	if RequirePeers() {
		t.Fatalf("test peer missing: %s (run make test, which installs it)", what)
	}
	t.Skipf("test peer missing: %s (run make test to install it)", what)
}

// Proc is a running binary started by [Run].
type Proc struct {
	URL  string // http://Addr, when the address was awaited
	Addr string // the host:port of the first "addr=" log line

	cmd     *exec.Cmd
	mu      sync.Mutex
	logs    bytes.Buffer
	stopped bool
	exited  chan struct{}
	waitErr error
}

// Cmd is the process's command (its Process field is set).
func (p *Proc) Cmd() *exec.Cmd { return p.cmd }

// Stop ends the process with SIGTERM and checks that it exits cleanly
// within 40 s (then it is killed and the test fails).
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Errorf("%s exited with %v after SIGTERM; logs:\n%s", strings.Join(p.cmd.Args[:min(2, len(p.cmd.Args))], " "), p.waitErr, p.Logs())
		}
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop on SIGTERM", p.cmd.Args[0])
	}
}

// Exited is closed when the process has ended (for any reason).
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Logs is everything the process wrote to stderr so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

var addrRE = regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)

// Run starts cmd, keeps its stderr as the process's logs and, when
// waitAddr is set, waits up to 15 s for the "addr=127.0.0.1:PORT" of its
// first log line. The process is stopped with SIGTERM at cleanup and must
// exit cleanly.
func Run(t testing.TB, cmd *exec.Cmd, waitAddr bool) *Proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
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
	go func() {
		<-scanned // Wait must not close the pipe before its last line is read
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.Stop(t) })
	if !waitAddr {
		return p
	}
	select {
	case p.Addr = <-found:
	case <-p.exited:
		t.Fatalf("%s exited before reporting its address; logs:\n%s", filepath.Base(cmd.Path), p.Logs())
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not report its address; logs:\n%s", filepath.Base(cmd.Path), p.Logs())
	}
	p.URL = "http://" + p.Addr
	return p
}

var resultRE = regexp.MustCompile(`^(PASS|FAIL) (\S+)(?:: (.*))?$`)

// RunScenarios runs an external scenario script from the module root and
// turns each of its "PASS name" / "FAIL name: reason" lines into a
// subtest. A script that fails or reports nothing fails the test.
func RunScenarios(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = Root()
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

// PinnedPorts is environment that moves aiod's default ports (the
// browser's DevTools endpoint, 127.0.0.1:9222, and the computer-use
// worker, 127.0.0.1:18100) to loopback ports where nothing listens: a
// Chromium or a worker the user runs on a default port must not change
// what a test sees. Put it before the test's own entries (for a name
// given twice, exec uses the last).
func PinnedPorts(t testing.TB) []string {
	t.Helper()
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	// A test that points a variable at a peer of its own (t.Setenv) keeps
	// it: only the defaults are replaced.
	var env []string
	if _, set := os.LookupEnv("BROWSER_REMOTE_DEBUGGING_PORT"); !set {
		env = append(env, "BROWSER_REMOTE_DEBUGGING_HOST=127.0.0.1", "BROWSER_REMOTE_DEBUGGING_PORT="+closed())
	}
	if _, set := os.LookupEnv("AIO_COMPUTER_USE_URL"); !set {
		env = append(env, "AIO_COMPUTER_USE_URL=http://127.0.0.1:"+closed())
	}
	return env
}
