package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needRoot skips a test when not root (CI is root), and skips or, under
// A2C_REQUIRE_PEERS=1 (make test), fails it when ip, nft or nsenter is
// missing. The test turns the host's IPv4 forwarding on, as New does.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("egress needs root (CI runs as root)")
	}
	missing := ""
	for _, p := range []string{"ip", "nft", "nsenter"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = p + " (Debian iproute2, nftables, util-linux)"
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("A2C_REQUIRE_PEERS") == "1" {
		t.Fatalf("needs %s", missing)
	}
	t.Skipf("needs %s", missing)
}

// netns is a network namespace the test made: a process (sleep) holds it.
type netns struct {
	pid int
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	// No Pdeathsig: it fires when the forking thread ends, and in() ends
	// the threads it locks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &netns{pid: cmd.Process.Pid}
}

// in runs f on a thread that joined the namespace: a socket f makes
// belongs to the namespace, wherever it is used later.
func (n *netns) in(t *testing.T, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", n.pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// outside is a host on a network of the test's own ("the internet"): a
// namespace linked to the host by a veth pair, serving HTTP.
type outside struct {
	addr netip.Addr // the server's
	host netip.Addr // the host's end
}

func newOutside(t *testing.T) *outside {
	t.Helper()
	ns := newNetns(t)
	r := rand.IntN(200) + 20
	o := &outside{addr: netip.MustParseAddr(fmt.Sprintf("10.250.%d.2", r)), host: netip.MustParseAddr(fmt.Sprintf("10.250.%d.1", r))}
	h := fmt.Sprintf("tout%d", r) // not the links' prefix: it is no sandbox's link
	must(t, run(nil, "ip", "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(ns.pid)))
	t.Cleanup(func() { _ = run(nil, "ip", "link", "del", h) })
	must(t, run(nil, "ip", "addr", "add", o.host.String()+"/24", "dev", h))
	must(t, run(nil, "ip", "link", "set", h, "up"))
	must(t, run([]byte(fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n", o.addr)),
		"nsenter", "-t", fmt.Sprint(ns.pid), "-n", "ip", "-batch", "-"))
	var ln net.Listener
	ns.in(t, func() {
		var err error
		ln, err = net.Listen("tcp", o.addr.String()+":8080")
		must(t, err)
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "outside, from "+r.RemoteAddr)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// get fetches url from inside the namespace; ok is false when no
// connection could be made within a second (a dropped packet has no
// other answer than silence).
func get(t *testing.T, ns *netns, url string) (body string, ok bool) {
	t.Helper()
	var conn net.Conn
	var err error
	hostPort, _, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	ns.in(t, func() {
		d := net.Dialer{Timeout: time.Second}
		conn, err = d.Dial("tcp", hostPort)
	})
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "unreachable") {
			return "", false
		}
		t.Fatalf("dial %s: %v", url, err)
	}
	defer conn.Close()
	c := http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), true
}

// TestEgress: a sandbox's link reaches the outside host through NAT, its
// allow and deny rules hold by CIDR, and no rule lets it reach another
// sandbox or the host itself; a closed link is gone with its rules.
func TestEgress(t *testing.T) {
	needRoot(t)
	table := fmt.Sprintf("a2ct%d", rand.IntN(1e6))
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.234.0.0/24"), Table: table, Prefix: "a2t"})
	must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := newOutside(t)
	url := "http://" + out.addr.String() + ":8080/"
	outNet := netip.PrefixFrom(out.addr, 24).Masked()

	for _, c := range []struct {
		name  string
		rules Rules
		ok    bool
	}{
		{"no rules", Rules{}, true},
		{"allowed by CIDR", Rules{Allow: []netip.Prefix{outNet}}, true},
		{"denied by CIDR", Rules{Deny: []netip.Prefix{outNet}}, false},
		{"not in the allow list", Rules{Allow: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")}}, false},
		{"deny wins over allow", Rules{Allow: []netip.Prefix{outNet}, Deny: []netip.Prefix{netip.PrefixFrom(out.addr, 32)}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := newNetns(t)
			l, err := n.Attach(sb.pid, c.rules)
			must(t, err)
			defer l.Close()
			body, ok := get(t, sb, url)
			if ok != c.ok {
				t.Fatalf("reached %v, want %v (%q)", ok, c.ok, body)
			}
			// Masqueraded: the outside host sees the host's address.
			if ok && !strings.HasPrefix(body, "outside, from "+out.host.String()+":") {
				t.Errorf("answer %q", body)
			}
		})
	}

	t.Run("walls", func(t *testing.T) {
		a, b := newNetns(t), newNetns(t)
		la, err := n.Attach(a.pid, Rules{})
		must(t, err)
		defer la.Close()
		lb, err := n.Attach(b.pid, Rules{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
		must(t, err)
		defer lb.Close()
		// b serves on its own address; a must not reach it.
		var ln net.Listener
		b.in(t, func() {
			ln, err = net.Listen("tcp", lb.Sandbox.String()+":9000")
			must(t, err)
		})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b") })}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		if _, ok := get(t, a, "http://"+lb.Sandbox.String()+":9000/"); ok {
			t.Error("a sandbox reached another")
		}
		// The host listens on every address (its API, say): no sandbox
		// reaches it, by its gateway or by another of its addresses.
		hl, err := net.Listen("tcp", "0.0.0.0:0")
		must(t, err)
		defer hl.Close()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "host") })}
		go func() { _ = hs.Serve(hl) }()
		defer hs.Close()
		port := hl.Addr().(*net.TCPAddr).Port
		for _, h := range []netip.Addr{la.Host, lb.Host, out.host} {
			if _, ok := get(t, b, fmt.Sprintf("http://%s:%d/", h, port)); ok {
				t.Errorf("a sandbox (allowed 0.0.0.0/0) reached the host at %s", h)
			}
		}
		// Its own loopback is its own: the host's 127.0.0.1 is not there.
		if _, ok := get(t, b, fmt.Sprintf("http://127.0.0.1:%d/", port)); ok {
			t.Error("a sandbox reached the host's loopback")
		}
	})

	t.Run("close", func(t *testing.T) {
		sb := newNetns(t)
		l, err := n.Attach(sb.pid, Rules{Deny: []netip.Prefix{outNet}})
		must(t, err)
		must(t, l.Close())
		must(t, l.Close())
		if err := run(nil, "ip", "link", "show", l.hostIf()); err == nil {
			t.Error("the host's end is still there")
		}
		out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput()
		if err != nil || strings.Contains(string(out), l.chain()) || strings.Contains(string(out), l.hostIf()) {
			t.Errorf("rules left: %v\n%s", err, out)
		}
	})
}
