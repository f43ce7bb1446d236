package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NginxProxy is a real nginx (the Debian package) started by [Nginx] in
// front of a list of upstream host:port addresses, configured the way a
// Socket.IO deployment needs it:
//
//   - HTTP/1.1 to the upstreams, with the WebSocket upgrade passed on
//     (Upgrade: $http_upgrade, Connection: upgrade) and a read timeout of
//     an hour, so an idle WebSocket is not cut;
//   - proxy_buffering off, so long-polling answers and events are relayed
//     as they are written;
//   - sticky sessions by client address, `hash $remote_addr consistent`,
//     so every long-polling request of one session reaches the node that
//     holds it. Not ip_hash: it hashes only the first three octets of an
//     IPv4 address, so every 127.0.0.x client would land on one node.
//
// Tests spread clients over the nodes by dialling nginx from different
// loopback source addresses (127.0.0.2, 127.0.0.3, ...: all of 127/8 is
// loopback on Linux) with [LoopbackDialer] or [LoopbackHTTPClient];
// [NginxProxy.Route] tells which upstream a source address reaches and
// [NginxProxy.SourceFor] finds a source address for a wanted upstream.
// Every answer proxied carries the upstreams nginx tried in the
// X-Upstream-Addr header (nginx's $upstream_addr: the one that answered
// last, after any that refused).
//
// An upstream that refuses connections (a killed node) is skipped for
// the next one on the hash ring after one failure, for 10 s (nginx's
// max_fails=1 fail_timeout=10s); [NginxProxy.Reload] takes it out for good.
//
// nginx runs with its prefix, configuration, pid file, logs and
// temporary folders in a temporary directory, master in the foreground
// (daemon off) and one worker; it is stopped at the end of the test.
type NginxProxy struct {
	port   int
	prefix string
	owner  testing.TB

	mu         sync.Mutex
	proc       *daemon
	generation int
}

// Nginx starts nginx on a free 127.0.0.1 port in front of upstreams
// (host:port each, at least one) and waits until it serves. A missing
// nginx skips the test, or fails it under [RequirePeers].
func Nginx(t testing.TB, upstreams []string) *NginxProxy {
	t.Helper()
	if _, err := exec.LookPath("nginx"); err != nil {
		MissingPeer(t, "nginx (Debian package nginx)")
	}
	if len(upstreams) == 0 {
		t.Fatal("Nginx: no upstreams")
	}
	n := &NginxProxy{prefix: t.TempDir(), owner: t}
	for _, d := range []string{"tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"} {
		if err := os.MkdirAll(filepath.Join(n.prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	for range 3 { // a port found free can be taken before nginx binds it
		n.port = freePort(t, false)
		if err = n.start(upstreams); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// Addr is nginx's host:port, "127.0.0.1:PORT".
func (n *NginxProxy) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// URL is nginx's base URL, "http://127.0.0.1:PORT".
func (n *NginxProxy) URL() string { return "http://" + n.Addr() }

// PID is the process id of nginx's master (0 when it does not run).
func (n *NginxProxy) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.done() {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// Logs is nginx's error log so far, then its access log.
func (n *NginxProxy) Logs() string {
	var b strings.Builder
	for _, f := range []string{"error.log", "access.log"} {
		data, _ := os.ReadFile(filepath.Join(n.prefix, f))
		fmt.Fprintf(&b, "--- %s\n%s", f, data)
	}
	return b.String()
}

func (n *NginxProxy) confPath() string { return filepath.Join(n.prefix, "nginx.conf") }

// cmdArgs are the options every nginx invocation (start, test, reload)
// shares: the prefix, the configuration and the early error log, so that
// nothing outside the prefix is read or written.
func (n *NginxProxy) cmdArgs(extra ...string) []string {
	return append([]string{"-p", n.prefix + "/", "-c", n.confPath(), "-e", filepath.Join(n.prefix, "error.log")}, extra...)
}

func (n *NginxProxy) start(upstreams []string) error {
	if err := n.writeConf(upstreams); err != nil {
		return err
	}
	d, err := startDaemon("nginx", exec.Command("nginx", n.cmdArgs("-g", "daemon off;")...), filepath.Join(n.prefix, "nginx.out"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proc = d
	n.mu.Unlock()
	if err := n.awaitGeneration(d, 15*time.Second); err != nil {
		if d.done() {
			d.claim() // a failed start is not a crash to report at Stop
			if strings.Contains(n.Logs()+d.logs(), "Address already in use") {
				return fmt.Errorf("nginx on port %d: %w", n.port, errAddrInUse)
			}
		} else {
			_ = d.stop(5 * time.Second)
		}
		return fmt.Errorf("nginx on port %d: %w; output:\n%s\n%s", n.port, err, d.logs(), n.Logs())
	}
	return nil
}

// generationPath answers the configuration's generation; [NginxProxy]
// polls it to know that a start or a reload took effect. It is answered
// by nginx itself, never proxied.
const generationPath = "/.harness-nginx-generation"

// awaitGeneration waits until nginx answers generationPath with the
// current generation on a fresh connection.
func (n *NginxProxy) awaitGeneration(d *daemon, timeout time.Duration) error {
	n.mu.Lock()
	want := strconv.Itoa(n.generation)
	n.mu.Unlock()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := client.Get(n.URL() + generationPath)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == want {
				return nil
			}
			last = fmt.Sprintf("%s %q", resp.Status, body)
		} else {
			last = err.Error()
		}
		if d.done() {
			return fmt.Errorf("nginx exited: %v", d.err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("generation %s not served within %s (last: %s)", want, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeConf writes nginx.conf for upstreams under a new generation.
func (n *NginxProxy) writeConf(upstreams []string) error {
	n.mu.Lock()
	n.generation++
	gen := n.generation
	n.mu.Unlock()
	// As root, nginx runs its workers as the "user" directive says
	// (nobody by default), who could not enter the test's 0700 temporary
	// directory; the current user keeps the workers able to write their
	// temporary files. Not root, nginx cannot switch users and the
	// directive would only earn a warning.
	userLine := ""
	if os.Geteuid() == 0 {
		group := "root"
		if u, err := user.Current(); err == nil {
			if g, err := user.LookupGroupId(u.Gid); err == nil {
				group = g.Name
			}
			userLine = fmt.Sprintf("user %s %s;\n", u.Username, group)
		}
	}
	var servers strings.Builder
	for _, u := range upstreams {
		fmt.Fprintf(&servers, "        server %s max_fails=1 fail_timeout=10s;\n", u)
	}
	p := n.prefix
	conf := fmt.Sprintf(`# Written by the test harness (generation %[1]d).
%[2]sworker_processes 1;
worker_rlimit_nofile 20000;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log notice;

events {
    worker_connections 8192;
}

http {
    access_log %[3]s/access.log;
    client_body_temp_path %[3]s/tmp/body;
    proxy_temp_path %[3]s/tmp/proxy;
    fastcgi_temp_path %[3]s/tmp/fastcgi;
    uwsgi_temp_path %[3]s/tmp/uwsgi;
    scgi_temp_path %[3]s/tmp/scgi;

    upstream a2c {
        # Sticky by the whole client address (not ip_hash, which hashes
        # 127.0.0.x to one node).
        hash $remote_addr consistent;
%[4]s    }

    server {
        listen 127.0.0.1:%[5]d;
        client_max_body_size 0;

        location = %[6]s {
            default_type text/plain;
            return 200 "%[1]d";
        }

        location / {
            proxy_pass http://a2c;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_connect_timeout 2s;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            proxy_buffering off;
            proxy_request_buffering off;
            add_header X-Upstream-Addr $upstream_addr always;
        }
    }
}
`, gen, userLine, p, servers.String(), n.port, generationPath)
	return os.WriteFile(n.confPath(), []byte(conf), 0o644)
}

// Reload points nginx at a new list of upstreams (to take a dead node
// out, for instance): it rewrites the configuration, checks it with
// `nginx -t`, signals the master with `nginx -s reload`, and waits until
// the new configuration answers. Connections already proxied (open
// WebSockets) stay with the old worker until they close.
func (n *NginxProxy) Reload(t testing.TB, upstreams []string) {
	t.Helper()
	if len(upstreams) == 0 {
		t.Fatal("Nginx.Reload: no upstreams")
	}
	n.mu.Lock()
	d := n.proc
	n.mu.Unlock()
	if d == nil || d.done() {
		t.Fatal("Nginx.Reload: nginx does not run")
	}
	old := childPIDs(d.cmd.Process.Pid)
	if err := n.writeConf(upstreams); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{n.cmdArgs("-t", "-q"), n.cmdArgs("-s", "reload")} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, "nginx", args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("nginx %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := n.awaitGeneration(d, 15*time.Second); err != nil {
		t.Fatalf("nginx reload: %v; logs:\n%s", err, n.Logs())
	}
	// A new worker answering is not enough: until an old worker has
	// closed its copy of the listening socket it still accepts some new
	// connections, under the old configuration.
	inode, err := listenInode(n.port)
	if err != nil {
		t.Fatalf("nginx reload: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range old {
		for holdsSocket(pid, inode) {
			if time.Now().After(deadline) {
				t.Fatalf("nginx reload: old worker %d still accepts after 15 s; logs:\n%s", pid, n.Logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// childPIDs are the processes whose parent is pid (nginx's workers),
// found in /proc.
func childPIDs(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// listenInode is the inode of the socket listening on 127.0.0.1:port,
// from /proc/net/tcp.
func listenInode(port int) (string, error) {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" {
			return f[9], nil
		}
	}
	return "", fmt.Errorf("no socket listens on 127.0.0.1:%d", port)
}

// holdsSocket reports whether process pid still has the socket inode
// open (false once it is gone).
func holdsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range entries {
		if link, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && link == want {
			return true
		}
	}
	return false
}

// Stop ends nginx with SIGTERM (the master stops its workers, then
// itself) and waits for it; an unclean exit, or one before Stop was
// called, fails the test that started nginx. Stopping it twice does
// nothing.
func (n *NginxProxy) Stop() {
	n.mu.Lock()
	d := n.proc
	n.mu.Unlock()
	if d == nil {
		return
	}
	if err := d.stop(15 * time.Second); err != nil {
		n.owner.Errorf("nginx on port %d: %v; logs:\n%s", n.port, err, n.Logs())
	}
}

// Route is the upstream (host:port) that answers a client dialling nginx
// from the loopback address sourceIP, read from the X-Upstream-Addr
// header of a request through it (a fresh connection). The upstream must
// answer HTTP (any status).
func (n *NginxProxy) Route(t testing.TB, sourceIP string) string {
	t.Helper()
	client := LoopbackHTTPClient(sourceIP)
	defer client.CloseIdleConnections()
	resp, err := client.Get(n.URL() + "/")
	if err != nil {
		t.Fatalf("nginx route from %s: %v", sourceIP, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Upstreams tried before the one that answered come first, comma
	// separated ("127.0.0.1:A, 127.0.0.1:B" when A refused).
	hdr := resp.Header.Get("X-Upstream-Addr")
	up := strings.TrimSpace(hdr[strings.LastIndexByte(hdr, ',')+1:])
	if up == "" {
		t.Fatalf("nginx route from %s: no X-Upstream-Addr (%s)", sourceIP, resp.Status)
	}
	return up
}

// SourceFor returns a loopback source address (127.0.0.2 to
// 127.0.0.254, skipping those in avoid) whose clients nginx sends to
// upstream, so that a test can place a client on a chosen node.
func (n *NginxProxy) SourceFor(t testing.TB, upstream string, avoid ...string) string {
	t.Helper()
	for i := 2; i < 255; i++ {
		ip := "127.0.0." + strconv.Itoa(i)
		if contains(avoid, ip) {
			continue
		}
		if n.Route(t, ip) == upstream {
			return ip
		}
	}
	t.Fatalf("nginx: no loopback source address reaches %s", upstream)
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// LoopbackDialer is a dialer whose connections come from the loopback
// address ip ("127.0.0.2"; any port), so that nginx's hash on the client
// address places them; 10 s connect timeout. It panics when ip is not an
// IPv4 loopback address (a mistake in the test).
func LoopbackDialer(ip string) *net.Dialer {
	addr := net.ParseIP(ip)
	if addr == nil || addr.To4() == nil || !addr.IsLoopback() {
		panic(fmt.Sprintf("harness.LoopbackDialer: %q is not an IPv4 loopback address", ip))
	}
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: addr}, Timeout: 10 * time.Second}
}

// LoopbackHTTPClient is an HTTP client whose connections come from the
// loopback address ip (see [LoopbackDialer]), with a 30 s timeout per
// request.
func LoopbackHTTPClient(ip string) *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{DialContext: LoopbackDialer(ip).DialContext, ForceAttemptHTTP2: false},
	}
}
