package harness

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// pgrep lists the pids pgrep finds for args ("-f", pattern), none when it
// finds nothing.
func pgrep(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("pgrep", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return nil // no match
		}
		t.Fatalf("pgrep %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// redisProcs are the redis-server processes serving port.
func redisProcs(t *testing.T, port int) []string {
	t.Helper()
	return pgrep(t, "-f", `^redis-server 127\.0\.0\.1:`+strconv.Itoa(port)+`( |$)`)
}

func requirePgrep(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Skip("pgrep missing (Debian package procps)")
	}
}

func TestRedisStartRestartKill(t *testing.T) {
	r := Redis(t)
	requirePgrep(t)
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") || r.URL() != "redis://"+r.Addr() {
		t.Fatalf("Addr %q URL %q", r.Addr(), r.URL())
	}
	if got := r.Command(t, "PING"); got != "PONG" {
		t.Fatalf("PING: %q", got)
	}
	if got := r.Command(t, "SET", "k", "v"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	if got := r.Command(t, "GET", "k"); got != "v" {
		t.Fatalf("GET: %q", got)
	}
	if got := r.Command(t, "CONFIG", "GET", "save"); got != "save" {
		t.Fatalf("persistence on: CONFIG GET save = %q", got)
	}
	stats := r.Command(t, "INFO", "commandstats")
	if !strings.Contains(stats, "cmdstat_set:calls=1,") {
		t.Fatalf("INFO commandstats lacks one SET:\n%s", stats)
	}
	if got := redisProcs(t, r.Port()); len(got) != 1 || got[0] != strconv.Itoa(r.PID()) {
		t.Fatalf("pgrep finds %v, want [%d]", got, r.PID())
	}

	addr, pid := r.Addr(), r.PID()
	r.Restart(t)
	if r.Addr() != addr || r.PID() == pid || r.PID() == 0 {
		t.Fatalf("after Restart: addr %s pid %d, before %s pid %d", r.Addr(), r.PID(), addr, pid)
	}
	if reply, err := respDo(addr, time.Second, "GET", "k"); err != nil || reply != "" {
		t.Fatalf("after Restart GET k = %q, %v; want nothing kept", reply, err)
	}
	if got := redisProcs(t, r.Port()); len(got) != 1 {
		t.Fatalf("after Restart pgrep finds %v, want one", got)
	}

	r.Kill()
	if r.PID() != 0 {
		t.Fatal("PID after Kill")
	}
	if got := redisProcs(t, r.Port()); len(got) != 0 {
		t.Fatalf("after Kill pgrep finds %v", got)
	}
	if _, err := respDo(addr, time.Second, "PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
	r.Restart(t) // after a kill too
	if reply, err := respDo(addr, time.Second, "PING"); err != nil || reply != "PONG" {
		t.Fatalf("PING after Kill and Restart: %q, %v", reply, err)
	}
	r.Stop()
	if got := redisProcs(t, r.Port()); len(got) != 0 {
		t.Fatalf("after Stop pgrep finds %v", got)
	}
}

func TestRedisCluster(t *testing.T) {
	c := RedisCluster(t, 3)
	requirePgrep(t)
	addrs := c.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs %v", addrs)
	}
	for _, n := range c.Nodes {
		if info := n.Command(t, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
			t.Fatalf("%s CLUSTER INFO:\n%s", n.Addr(), info)
		}
	}
	// Keys spread over the slots: written through one node, read through
	// another, redis-cli -c following the MOVED redirections.
	const keys = 30
	for i := range keys {
		n := c.Nodes[i%3]
		if got := redisCLI(t, "-c", "-h", "127.0.0.1", "-p", strconv.Itoa(n.Port()), "SET", "key"+strconv.Itoa(i), "v"+strconv.Itoa(i)); got != "OK" {
			t.Fatalf("SET key%d through %s: %q", i, n.Addr(), got)
		}
	}
	for i := range keys {
		n := c.Nodes[(i+1)%3]
		if got := redisCLI(t, "-c", "-h", "127.0.0.1", "-p", strconv.Itoa(n.Port()), "GET", "key"+strconv.Itoa(i)); got != "v"+strconv.Itoa(i) {
			t.Fatalf("GET key%d through %s: %q", i, n.Addr(), got)
		}
	}
	total, holding := 0, 0
	for _, n := range c.Nodes {
		size, err := strconv.Atoi(n.Command(t, "DBSIZE"))
		if err != nil {
			t.Fatal(err)
		}
		total += size
		if size > 0 {
			holding++
		}
	}
	if total != keys || holding != 3 {
		t.Fatalf("%d keys on %d nodes, want %d on 3", total, holding, keys)
	}

	// A node killed and restarted rejoins with its slots.
	c.Nodes[1].Kill()
	c.Nodes[1].Restart(t)
	c.WaitOK(t)

	for _, n := range c.Nodes {
		n.Stop()
		if got := redisProcs(t, n.Port()); len(got) != 0 {
			t.Fatalf("after Stop pgrep finds %v for %s", got, n.Addr())
		}
	}
}

// backend is a tiny upstream for nginx: "/" answers its name, "/ws"
// upgrades to a WebSocket that echoes each text message as "name:msg".
func backend(t *testing.T, name string) *httptest.Server {
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte(name+":"), msg...)); err != nil {
				return
			}
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// get fetches nginx's "/" from sourceIP on a fresh connection and returns
// the body and the X-Upstream-Addr header.
func get(t *testing.T, n *NginxProxy, sourceIP string) (body, upstream string) {
	t.Helper()
	client := LoopbackHTTPClient(sourceIP)
	client.Transport.(*http.Transport).DisableKeepAlives = true
	resp, err := client.Get(n.URL() + "/")
	if err != nil {
		t.Fatalf("GET from %s: %v", sourceIP, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET from %s: %s %q %v\n%s", sourceIP, resp.Status, b, err, n.Logs())
	}
	return string(b), resp.Header.Get("X-Upstream-Addr")
}

func TestNginx(t *testing.T) {
	a, b := backend(t, "a"), backend(t, "b")
	aAddr, bAddr := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")
	name := map[string]string{aAddr: "a", bAddr: "b"}
	n := Nginx(t, []string{aAddr, bAddr})
	requirePgrep(t)
	if !strings.HasPrefix(n.Addr(), "127.0.0.1:") || n.URL() != "http://"+n.Addr() {
		t.Fatalf("Addr %q URL %q", n.Addr(), n.URL())
	}

	// Sticky: one source address always reaches the same backend.
	first, _ := get(t, n, "127.0.0.2")
	for range 20 {
		if body, up := get(t, n, "127.0.0.2"); body != first || name[up] != body {
			t.Fatalf("from 127.0.0.2: %q via %s, first %q", body, up, first)
		}
	}
	// Several source addresses reach both backends.
	seen := map[string]string{} // source -> backend
	count := map[string]int{}
	for i := 2; i < 22; i++ {
		ip := "127.0.0." + strconv.Itoa(i)
		body, _ := get(t, n, ip)
		seen[ip] = body
		count[body]++
	}
	if count["a"] == 0 || count["b"] == 0 {
		t.Fatalf("20 source addresses reached only %v", count)
	}
	if up := n.Route(t, ipFor(seen, "b")); up != bAddr {
		t.Fatalf("Route from a source served by b: %s", up)
	}
	if ip := n.SourceFor(t, bAddr); seen[ip] != "b" {
		t.Fatalf("SourceFor(b) = %s, which reached %q", ip, seen[ip])
	}
	if up := n.Route(t, "127.0.0.2"); name[up] != first {
		t.Fatalf("Route(127.0.0.2) = %s, served %q", up, first)
	}

	// A WebSocket through nginx reaches the source's backend and echoes.
	for _, ip := range []string{n.SourceFor(t, aAddr), n.SourceFor(t, bAddr)} {
		d := websocket.Dialer{NetDialContext: LoopbackDialer(ip).DialContext, HandshakeTimeout: 10 * time.Second}
		ws, resp, err := d.Dial("ws://"+n.Addr()+"/ws", nil)
		if err != nil {
			t.Fatalf("WebSocket from %s: %v (%v)\n%s", ip, err, resp, n.Logs())
		}
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i := range 3 {
			msg := fmt.Sprintf("hello %d", i)
			if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := ws.ReadMessage()
			if err != nil || string(got) != seen[ip]+":"+msg {
				t.Fatalf("WebSocket echo from %s: %q, %v; want %q", ip, got, err, seen[ip]+":"+msg)
			}
		}
		ws.Close()
	}

	// A dead upstream (a killed node refuses connections) is skipped:
	// its clients reach the other one, before any reload.
	a.Close()
	for ip := range seen {
		if body, up := get(t, n, ip); body != "b" || !strings.HasSuffix(up, bAddr) {
			t.Fatalf("with a closed, from %s: %q via %s", ip, body, up)
		}
		if up := n.Route(t, ip); up != bAddr {
			t.Fatalf("Route from %s with a closed: %s", ip, up)
		}
	}

	// Reload to b alone: every source reaches b.
	master := n.PID()
	n.Reload(t, []string{bAddr})
	if n.PID() != master {
		t.Fatalf("reload changed the master: %d -> %d", master, n.PID())
	}
	for ip := range seen {
		if body, up := get(t, n, ip); body != "b" || up != bAddr {
			t.Fatalf("after Reload from %s: %q via %s", ip, body, up)
		}
	}

	// Stop ends the master and its workers.
	workers := pgrep(t, "-P", strconv.Itoa(master))
	if len(workers) == 0 {
		t.Fatal("no nginx worker under the master")
	}
	n.Stop()
	if got := pgrep(t, "-f", "nginx.*"+n.prefix); len(got) != 0 {
		t.Fatalf("after Stop nginx master still there: %v", got)
	}
	for _, w := range workers {
		pid, _ := strconv.Atoi(w)
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Fatalf("after Stop worker %d still there (%v)", pid, err)
		}
	}
}

// ipFor is a source address that reached backend name.
func ipFor(seen map[string]string, name string) string {
	for ip, b := range seen {
		if b == name {
			return ip
		}
	}
	return ""
}

func TestLoopbackDialer(t *testing.T) {
	for _, tc := range []struct {
		ip    string
		panic bool
	}{
		{"127.0.0.2", false},
		{"127.1.2.3", false},
		{"10.0.0.1", true},
		{"::1", true},
		{"nonsense", true},
	} {
		t.Run(tc.ip, func(t *testing.T) {
			defer func() {
				if r := recover(); (r != nil) != tc.panic {
					t.Fatalf("panic %v, want panic %v", r, tc.panic)
				}
			}()
			d := LoopbackDialer(tc.ip)
			if got := d.LocalAddr.String(); got != tc.ip+":0" {
				t.Fatalf("LocalAddr %s", got)
			}
		})
	}
	// A connection really comes from the source address.
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.RemoteAddr)
	}))
	defer s.Close()
	resp, err := LoopbackHTTPClient("127.0.0.7").Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(b), "127.0.0.7:") {
		t.Fatalf("remote address %q", b)
	}
}
