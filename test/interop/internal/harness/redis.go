package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a real redis-server started by [Redis] or [RedisCluster]
// on a random 127.0.0.1 port, with persistence off and its working
// directory in a temporary folder. It is stopped at the end of the test
// that started it. The methods may be called from any goroutine; Stop,
// Restart and Kill are meant for the test's own goroutine, while load
// goroutines keep using Addr and URL, which never change.
type RedisServer struct {
	port    int
	dir     string
	cluster bool
	owner   testing.TB

	mu   sync.Mutex
	proc *daemon
}

// Redis starts a redis-server on a free 127.0.0.1 port with no
// persistence (--save "", --appendonly no) and waits until it answers
// PING. The server is stopped at cleanup, and a server that ended by
// itself (a crash) fails the test. A missing redis-server skips the test,
// or fails it under [RequirePeers].
func Redis(t testing.TB) *RedisServer {
	t.Helper()
	return startRedis(t, false)
}

func startRedis(t testing.TB, cluster bool) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		MissingPeer(t, "redis-server (Debian package redis-server)")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		MissingPeer(t, "redis-cli (Debian package redis-server)")
	}
	r := &RedisServer{dir: t.TempDir(), cluster: cluster, owner: t}
	// A port found free can be taken before redis-server binds it; a few
	// fresh ports settle that race.
	var err error
	for range 3 {
		// A cluster node also binds its bus port, port+10000.
		r.port = freePort(t, cluster)
		if err = r.start(); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Addr is the server's host:port, "127.0.0.1:PORT"; it stays the same
// across [RedisServer.Restart].
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is the server's address as a redis:// URL, the form `a2c server
// --redis` takes.
func (r *RedisServer) URL() string { return "redis://" + r.Addr() }

// Port is the server's TCP port.
func (r *RedisServer) Port() int { return r.port }

// PID is the process id of the running redis-server (0 when none runs).
func (r *RedisServer) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil || r.proc.done() {
		return 0
	}
	return r.proc.cmd.Process.Pid
}

// Logs is what the current redis-server process logged so far.
func (r *RedisServer) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return ""
	}
	return r.proc.logs()
}

func (r *RedisServer) args() []string {
	a := []string{
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(r.port),
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--daemonize", "no",
		"--logfile", "", // standard output, kept in the log file below
		"--maxclients", "10000",
	}
	if r.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(r.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
		)
	}
	return a
}

// start runs redis-server and waits up to 15 s for PING to answer PONG.
func (r *RedisServer) start() error {
	d, err := startDaemon("redis-server", exec.Command("redis-server", r.args()...), filepath.Join(r.dir, "redis.log"))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = d
	r.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		reply, err := respDo(r.Addr(), time.Second, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if d.done() {
			d.claim() // a failed start is not a crash to report at Stop
			logs := d.logs()
			if strings.Contains(logs, "Address already in use") {
				return fmt.Errorf("redis-server on port %d: %w; logs:\n%s", r.port, errAddrInUse, logs)
			}
			return fmt.Errorf("redis-server on port %d exited before answering PING: %v; logs:\n%s", r.port, d.err(), logs)
		}
		if time.Now().After(deadline) {
			d.stop(5 * time.Second)
			return fmt.Errorf("redis-server on port %d did not answer PING within 15 s (last: %q, %v); logs:\n%s", r.port, reply, err, d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends redis-server with SIGTERM (Redis's clean shutdown) and waits
// for it; an unclean exit, or one that happened before Stop was called,
// fails the test that started the server. Stopping a stopped server does
// nothing.
func (r *RedisServer) Stop() {
	r.mu.Lock()
	d := r.proc
	r.mu.Unlock()
	if d == nil {
		return
	}
	if err := d.stop(15 * time.Second); err != nil {
		r.owner.Errorf("redis-server on port %d: %v; logs:\n%s", r.port, err, d.logs())
	}
}

// Kill ends redis-server with SIGKILL, as a crash would, and waits until
// the process is gone. The data it held is lost (there is no persistence);
// a cluster node keeps its nodes.conf and rejoins on [RedisServer.Restart].
func (r *RedisServer) Kill() {
	r.mu.Lock()
	d := r.proc
	r.mu.Unlock()
	if d != nil {
		d.kill()
	}
}

// Restart stops the server (when it still runs) and starts a fresh one on
// the same port, then waits until it answers PING: the "Redis restarted"
// of the cluster tests. Its data is gone; a cluster node comes back with
// its slots (nodes.conf is kept) and cluster_state returns to ok by
// itself once the other nodes see it.
func (r *RedisServer) Restart(t testing.TB) {
	t.Helper()
	r.Stop()
	var err error
	// The port was ours a moment ago; another process can still grab it
	// in between, which a retry cannot fix, so the test fails then.
	for range 20 {
		if err = r.start(); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Command runs one command through `redis-cli -p PORT` (for instance
// "INFO", "commandstats" to count the commands a workload sent, or
// "CONFIG", "RESETSTAT" before it) and returns its output with trailing
// blank space trimmed. redis-cli failing to run fails the test; an error
// reply is returned as text ("ERR ...").
func (r *RedisServer) Command(t testing.TB, args ...string) string {
	t.Helper()
	return redisCLI(t, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(r.port)}, args...)...)
}

func redisCLI(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimRight(string(out), " \r\n")
}

// RedisClusterServers is a Redis Cluster of masters only (no replicas)
// on loopback, started by [RedisCluster].
type RedisClusterServers struct {
	// Nodes are the cluster's masters, in the order of Addrs; a test can
	// Kill or Restart one of them.
	Nodes []*RedisServer
}

// RedisCluster starts masters (at least 3, Redis's minimum) redis-server
// processes in cluster mode (--cluster-node-timeout 2000) on free
// 127.0.0.1 ports, whose bus ports (port+10000) were free too, joins them
// with `redis-cli --cluster create ... --cluster-replicas 0`, and waits up
// to 30 s until every node reports cluster_state:ok. Every node is stopped
// at cleanup.
func RedisCluster(t testing.TB, masters int) *RedisClusterServers {
	t.Helper()
	if masters < 3 {
		t.Fatalf("RedisCluster: a Redis Cluster needs at least 3 masters, asked for %d", masters)
	}
	c := &RedisClusterServers{}
	for range masters {
		c.Nodes = append(c.Nodes, startRedis(t, true))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out := redisCLI(t, args...)
	if !strings.Contains(out, "All 16384 slots covered") {
		t.Fatalf("redis-cli --cluster create did not cover every slot:\n%s", out)
	}
	c.WaitOK(t)
	return c
}

// Addrs are the masters' host:port addresses, the form a Redis Cluster
// client (and `a2c server --redis` for a cluster) is given.
func (c *RedisClusterServers) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr()
	}
	return a
}

// WaitOK waits up to 30 s until every node answers CLUSTER INFO with
// cluster_state:ok (after creating the cluster, or after restarting a
// node), and fails the test otherwise.
func (c *RedisClusterServers) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := respDo(n.Addr(), time.Second, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis cluster node %s not ok after 30 s (%v):\n%s\nlogs:\n%s", n.Addr(), err, info, n.Logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// errAddrInUse marks a start that lost its port to another process.
var errAddrInUse = errors.New("address already in use")

// freePort returns a 127.0.0.1 TCP port that was free a moment ago; with
// bus, port+10000 (a Redis Cluster node's bus port) was free too.
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if !bus {
			ln.Close()
			return port
		}
		if port+10000 > 65535 {
			ln.Close()
			continue
		}
		bl, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		ln.Close()
		if err != nil {
			continue
		}
		bl.Close()
		return port
	}
	t.Fatal("no free loopback port (with a free port+10000) after 50 tries")
	return 0
}

// respDo sends one command to a Redis server over a fresh connection in
// the Redis protocol (RESP2) and returns the reply as text: a status or
// bulk string as is, an integer in decimal, an error reply as an error.
// Arrays are not needed by the harness and are refused. The whole
// exchange has the given deadline.
func respDo(addr string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redis: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("redis: bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil // nil bulk string
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("redis: unexpected reply %q", line)
	}
}

// daemon is a server process (redis-server, nginx's master) whose
// standard output and error go to a log file, in its own process group
// so that a process it forked cannot outlive a forced stop.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	logPath string

	mu      sync.Mutex
	ended   bool // Stop or Kill was asked
	exited  chan struct{}
	waitErr error
}

func startDaemon(name string, cmd *exec.Cmd, logPath string) (*daemon, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own copy
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

func (d *daemon) done() bool {
	select {
	case <-d.exited:
		return true
	default:
		return false
	}
}

// err is how the process ended; only meaningful once done.
func (d *daemon) err() error {
	<-d.exited
	return d.waitErr
}

func (d *daemon) logs() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	return string(b)
}

// claim marks the process as ended by us and reports whether it was
// already (an earlier Stop or Kill).
func (d *daemon) claim() (already bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	already, d.ended = d.ended, true
	return already
}

// stop sends SIGTERM and waits up to timeout for a clean exit, then kills
// the process group. It reports an exit that happened before it was asked
// (a crash), a failed exit, or the need to kill.
func (d *daemon) stop(timeout time.Duration) error {
	if d.claim() {
		<-d.exited
		return nil
	}
	if d.done() {
		return fmt.Errorf("%s had exited by itself: %v", d.name, d.waitErr)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		if d.waitErr != nil {
			return fmt.Errorf("%s exited with %v after SIGTERM", d.name, d.waitErr)
		}
		return nil
	case <-time.After(timeout):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", d.name, timeout)
	}
}

// kill sends SIGKILL to the process group and waits for the exit.
func (d *daemon) kill() {
	if d.claim() {
		<-d.exited
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.exited
}
