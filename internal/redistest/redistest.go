package redistest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one real redis-server on 127.0.0.1, owned by a test.
type Server struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
	// exited has the process's end (start's goroutine waits for it).
	exited chan error
}

// Start starts a redis-server with no persistence on a free port and
// stops it when the test ends; it skips the test when redis-server is not
// installed (fails it under A2C_REQUIRE_PEERS=1, as make test sets).
func Start(t *testing.T) *Server {
	t.Helper()
	need(t, "redis-server")
	// The free port is only free when it was chosen: another process may
	// take it before redis-server binds (it then exits at once), so a
	// start that ends that way is tried again on another port.
	var err error
	for range 3 {
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			t.Fatal(lerr)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		r := &Server{t: t, port: port, dir: t.TempDir()}
		if err = r.start(); err == nil {
			t.Cleanup(r.Stop)
			return r
		}
	}
	t.Fatal(err)
	return nil
}

// need skips the test when program is not installed, or fails it when
// the environment says the test peers must be there (A2C_REQUIRE_PEERS=1,
// set by make test, the same switch as test/interop's harness): CI must
// not pass with the Redis suites skipped.
func need(t *testing.T, program string) {
	t.Helper()
	if _, err := exec.LookPath(program); err == nil {
		return
	}
	if os.Getenv("A2C_REQUIRE_PEERS") == "1" {
		t.Fatalf("test peer missing: %s (Debian package redis-server; make test installs it)", program)
	}
	t.Skipf("%s not installed (Debian package redis-server)", program)
}

// URL is redis://127.0.0.1:PORT.
func (r *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d", r.port) }

func (r *Server) start() error {
	r.t.Helper()
	var out bytes.Buffer
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	r.cmd.Stdout, r.cmd.Stderr = &out, &out
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited := make(chan error, 1)
	cmd := r.cmd
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := r.Do("PING"); err == nil {
			r.exited = exited
			return nil
		}
		select {
		case err := <-exited:
			r.cmd = nil
			return fmt.Errorf("redis-server on port %d exited (%v): %s", r.port, err, bytes.TrimSpace(out.Bytes()))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			r.cmd = nil
			return fmt.Errorf("redis-server on port %d did not answer in 10 s: %s", r.port, bytes.TrimSpace(out.Bytes()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server (a crash, as far as its clients can tell).
func (r *Server) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	if r.exited != nil {
		<-r.exited // start's goroutine waits for the process
		r.exited = nil
	} else {
		_ = r.cmd.Wait() // a cluster member, started without start
	}
	r.cmd = nil
}

// Restart stops Redis and starts an empty one on the same port.
func (r *Server) Restart() {
	r.Stop()
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

// Do sends one command on a fresh connection and returns the
// reply's lines (enough for PING, CONFIG RESETSTAT and INFO).
func (r *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	switch line[0] {
	case '+', ':':
		return strings.TrimSpace(line[1:]), nil
	case '-':
		return "", fmt.Errorf("redis: %s", strings.TrimSpace(line[1:]))
	case '$':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redis: unexpected reply %q", line)
}

// CommandStats returns INFO commandstats as command -> calls.
func (r *Server) CommandStats() map[string]int {
	r.t.Helper()
	s, err := r.Do("INFO", "commandstats")
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.Atoi(calls)
	}
	return out
}

// WaitFor polls cond every 10 ms until it holds or d passes.
func WaitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StartCluster starts a Redis Cluster of three masters on loopback and
// returns its seed URL list; it skips when redis-cli or redis-server is
// missing (fails under A2C_REQUIRE_PEERS=1).
func StartCluster(t *testing.T) string {
	t.Helper()
	need(t, "redis-cli")
	need(t, "redis-server")
	var servers []*Server
	var addrs, urls []string
	for range 3 {
		port := freeClusterPort(t)
		r := &Server{t: t, port: port, dir: t.TempDir()}
		r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", r.dir,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		WaitFor(t, 10*time.Second, "redis-server up", func() bool { _, err := r.Do("PING"); return err == nil })
		servers = append(servers, r)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
		urls = append(urls, "redis://"+addrs[len(addrs)-1])
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, r := range servers {
		WaitFor(t, 15*time.Second, "cluster_state:ok", func() bool {
			s, err := r.Do("CLUSTER", "INFO")
			return err == nil && strings.Contains(s, "cluster_state:ok")
		})
	}
	return strings.Join(urls, ",")
}

// freeClusterPort finds a port free both itself and +10000 (the bus).
func freeClusterPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return port
	}
	t.Fatal("no free port pair")
	return 0
}
