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

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// needRoot skips a test when not root (CI is root), and skips or, under
// A2C_REQUIRE_PEERS=1 (make test), fails it when ip, nft or nsenter is
// missing. The test turns the host's IPv4 forwarding on, as New does.
func needRoot(t testing.TB) {
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

func newNetns(t testing.TB) *netns {
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
func (n *netns) in(t testing.TB, f func()) {
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
	addr, addr2 netip.Addr // the server's two addresses
	host        netip.Addr // the host's end
	pid         int        // the process holding its namespace
}

func newOutside(t testing.TB) *outside {
	t.Helper()
	ns := newNetns(t)
	r := rand.IntN(200) + 20
	o := &outside{addr: netip.MustParseAddr(fmt.Sprintf("10.250.%d.2", r)), addr2: netip.MustParseAddr(fmt.Sprintf("10.250.%d.3", r)),
		host: netip.MustParseAddr(fmt.Sprintf("10.250.%d.1", r)), pid: ns.pid}
	h := fmt.Sprintf("tout%d", r) // not the links' prefix: it is no sandbox's link
	must(t, run(nil, "ip", "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(ns.pid)))
	t.Cleanup(func() { _ = run(nil, "ip", "link", "del", h) })
	must(t, run(nil, "ip", "addr", "add", o.host.String()+"/24", "dev", h))
	must(t, run(nil, "ip", "link", "set", h, "up"))
	nsip(t, ns, fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\naddr add %s/24 dev eth0\nlink set eth0 up\n", o.addr, o.addr2))
	var ln net.Listener
	ns.in(t, func() {
		var err error
		ln, err = net.Listen("tcp", "0.0.0.0:8080")
		must(t, err)
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "outside, from "+r.RemoteAddr)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

func must(t testing.TB, err error) {
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

	t.Run("names", func(t *testing.T) {
		testNames(t, n, out)
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

// upstream is a DNS server on the host's loopback standing for the
// machine's resolver: it answers A records from its table.
func upstream(t testing.TB, table map[string]netip.Addr) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			a, ok := table[strings.TrimSuffix(q.Name.String(), ".")]
			if ok && q.Type == dnsmessage.TypeA {
				_ = b.StartAnswers()
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
			}
			out, _ := b.Finish()
			_, _ = pc.WriteTo(out, from)
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// lookup asks the link's resolver (its gateway, port 53) for name's A
// records from inside the sandbox; rcode is the answer's.
func lookup(t *testing.T, ns *netns, l *Link, name string) (addrs []netip.Addr, rcode dnsmessage.RCode) {
	t.Helper()
	var conn net.Conn
	var err error
	ns.in(t, func() {
		conn, err = net.Dial("udp4", netip.AddrPortFrom(l.Host, 53).String())
	})
	must(t, err)
	defer conn.Close()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Write(q)
	must(t, err)
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	must(t, err)
	var p dnsmessage.Parser
	h, err := p.Start(buf[:n])
	must(t, err)
	for a := range aRecords(buf[:n], name) {
		addrs = append(addrs, a)
	}
	return addrs, h.RCode
}

// testNames: name rules hold through the link's resolver: a name an
// allow pattern matches lets its addresses in once looked up, another
// name resolves but its address stays shut, a denied name is NXDOMAIN and
// its address shut even to a sandbox that knows it.
func testNames(t *testing.T, n *Network, out *outside) {
	up := upstream(t, map[string]netip.Addr{"api.allowed.test": out.addr, "other.test": out.addr2, "denied.test": out.addr2})
	n.cfg.Upstream = []netip.AddrPort{up}
	sb := newNetns(t)
	l, err := n.Attach(sb.pid, Rules{AllowNames: []string{"*.allowed.test"}})
	must(t, err)
	defer l.Close()
	if _, ok := get(t, sb, "http://"+out.addr.String()+":8080/"); ok {
		t.Fatal("reached an address before its name was looked up")
	}
	addrs, rc := lookup(t, sb, l, "api.allowed.test")
	if rc != dnsmessage.RCodeSuccess || len(addrs) != 1 || addrs[0] != out.addr {
		t.Fatalf("lookup: %v %v", addrs, rc)
	}
	if _, ok := get(t, sb, "http://"+out.addr.String()+":8080/"); !ok {
		t.Error("the allowed name's address is still shut")
	}
	addrs, rc = lookup(t, sb, l, "other.test")
	if rc != dnsmessage.RCodeSuccess || len(addrs) != 1 {
		t.Fatalf("other.test: %v %v", addrs, rc)
	}
	if _, ok := get(t, sb, "http://"+out.addr2.String()+":8080/"); ok {
		t.Error("a name no rule allows opened its address")
	}

	sd := newNetns(t)
	ld, err := n.Attach(sd.pid, Rules{DenyNames: []string{"denied.test"}})
	must(t, err)
	defer ld.Close()
	if _, rc := lookup(t, sd, ld, "denied.test"); rc != dnsmessage.RCodeNameError {
		t.Errorf("denied.test: %v, want NXDOMAIN", rc)
	}
	// Its address joins the deny set (asked of the upstream at attach).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o, _ := exec.Command("nft", "list", "set", "inet", n.cfg.Table, ld.chain()+"_deny").CombinedOutput()
		if strings.Contains(string(o), out.addr2.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the denied name's address is not in the deny set:\n%s", o)
		}
	}
	if _, ok := get(t, sd, "http://"+out.addr2.String()+":8080/"); ok {
		t.Error("the denied name's address is reachable")
	}
	if _, ok := get(t, sd, "http://"+out.addr.String()+":8080/"); !ok {
		t.Error("with a deny rule only, the rest must be open")
	}
	// A sandbox reaches its own resolver only: not another link's.
	if _, rc := lookup(t, sd, ld, "other.test"); rc != dnsmessage.RCodeSuccess {
		t.Errorf("own resolver: %v", rc)
	}
	var conn net.Conn
	sd.in(t, func() { conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(l.Host, 53).String(), time.Second) })
	if err == nil {
		conn.Close()
		t.Error("a sandbox reached another link's resolver")
	}
}

// BenchmarkEgressHTTP: one HTTP request on a kept-alive connection to
// the outside host, from the host itself ("host") and from a sandbox
// through its link and the NAT ("sandbox"): their ratio is what the way
// out costs (bench/RESULTS.md).
func BenchmarkEgressHTTP(b *testing.B) {
	needRoot(b)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.235.0.0/24"), Table: fmt.Sprintf("a2cb%d", rand.IntN(1e6)), Prefix: "a2b"})
	must(b, err)
	b.Cleanup(func() { _ = n.Close() })
	out := newOutside(b)
	url := "http://" + out.addr.String() + ":8080/"
	sb := newNetns(b)
	l, err := n.Attach(sb.pid, Rules{})
	must(b, err)
	b.Cleanup(func() { _ = l.Close() })
	client := func(dial func() (net.Conn, error)) *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1,
			DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() }}}
	}
	hostAddr := out.addr.String() + ":8080"
	for _, c := range []struct {
		name string
		hc   *http.Client
	}{
		{"host", client(func() (net.Conn, error) { return net.Dial("tcp", hostAddr) })},
		{"sandbox", client(func() (net.Conn, error) {
			var conn net.Conn
			var err error
			sb.in(b, func() { conn, err = net.Dial("tcp", hostAddr) })
			return conn, err
		})},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := c.hc.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// nsip runs ip commands (a batch) in the namespace.
func nsip(t testing.TB, ns *netns, batch string) {
	t.Helper()
	must(t, run([]byte(batch), "nsenter", "-t", fmt.Sprint(ns.pid), "-n", "ip", "-batch", "-"))
}

// TestEgressSpoof: a sandbox that takes another's address (or any other)
// sends nothing: not to its resolver (whose answer would land in the
// other sandbox), not out (where the answer would come back to the other
// sandbox, or leave the host unmasqueraded).
func TestEgressSpoof(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.236.0.0/24"), Table: fmt.Sprintf("a2cs%d", rand.IntN(1e6)), Prefix: "a2s"})
	must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := newOutside(t)
	a, b := newNetns(t), newNetns(t)
	la, err := n.Attach(a.pid, Rules{})
	must(t, err)
	lb, err := n.Attach(b.pid, Rules{})
	must(t, err)
	var lis *net.UDPConn
	b.in(t, func() {
		lis, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lb.Sandbox, 5353)))
		must(t, err)
	})
	defer lis.Close()
	// An echo on the outside host: what comes to it goes back.
	var echo *net.UDPConn
	outNs := &netns{pid: out.pid}
	outNs.in(t, func() {
		echo, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(out.addr, 7)))
		must(t, err)
	})
	defer echo.Close()
	heard := make(chan netip.AddrPort, 8)
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			heard <- from
			_, _ = echo.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	nsip(t, a, fmt.Sprintf("addr add %s/32 dev %s\naddr add 192.0.2.77/32 dev %s\n", lb.Sandbox, la.sandboxIf(), la.sandboxIf()))
	send := func(src netip.Addr, to netip.AddrPort, msg []byte) {
		a.in(t, func() {
			c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 5353)), net.UDPAddrFromAddrPort(to))
			must(t, err)
			defer c.Close()
			_, err = c.Write(msg)
			must(t, err)
		})
	}
	b2 := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4142, RecursionDesired: true})
	_ = b2.StartQuestions()
	_ = b2.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("x.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b2.Finish()
	send(lb.Sandbox, netip.AddrPortFrom(la.Host, 53), q)
	send(lb.Sandbox, netip.AddrPortFrom(out.addr, 7), []byte("to b"))
	send(netip.MustParseAddr("192.0.2.77"), netip.AddrPortFrom(out.addr, 7), []byte("from nowhere"))
	// Its own address still goes out: the marker that the others had
	// their chance to arrive first.
	send(la.Sandbox, netip.AddrPortFrom(out.addr, 7), []byte("marker"))
	select {
	case from := <-heard:
		if from.Addr() != out.host {
			t.Errorf("the outside host heard %s, want only the masqueraded marker from %s", from, out.host)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the marker from the sandbox's own address did not arrive")
	}
	select {
	case from := <-heard:
		t.Errorf("the outside host heard a second packet, from %s", from)
	default:
	}
	_ = lis.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 1500)
	if k, from, err := lis.ReadFromUDPAddrPort(buf); err == nil {
		t.Errorf("sandbox b received %d bytes from %s, sent by sandbox a", k, from)
	}
}

// TestEgressClosed: a closed network leaves nothing open: its links are
// gone with it (a link left without its rules would reach everything).
func TestEgressClosed(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.237.0.0/24"), Table: fmt.Sprintf("a2cc%d", rand.IntN(1e6)), Prefix: "a2c"})
	must(t, err)
	a := newNetns(t)
	l, err := n.Attach(a.pid, Rules{})
	must(t, err)
	must(t, n.Close())
	if err := run(nil, "ip", "link", "show", l.hostIf()); err == nil {
		t.Error("a link outlived its network")
	}
	if _, ok := get(t, a, "http://"+l.Host.String()+":80/"); ok {
		t.Error("the sandbox reaches the host after the network closed")
	}
}

// TestEgressInbound: nothing from outside opens a connection to a
// sandbox, or asks a link's resolver, even with a route to the subnet.
func TestEgressInbound(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.238.0.0/24"), Table: fmt.Sprintf("a2ci%d", rand.IntN(1e6)), Prefix: "a2i"})
	must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := newOutside(t)
	outNs := &netns{pid: out.pid}
	nsip(t, outNs, fmt.Sprintf("route add 10.238.0.0/24 via %s\n", out.host))
	sb := newNetns(t)
	l, err := n.Attach(sb.pid, Rules{})
	must(t, err)
	var ln net.Listener
	sb.in(t, func() {
		ln, err = net.Listen("tcp", l.Sandbox.String()+":9000")
		must(t, err)
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "sandbox") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, ok := get(t, outNs, "http://"+l.Sandbox.String()+":9000/"); ok {
		t.Error("the outside opened a connection to a sandbox")
	}
	var conn net.Conn
	outNs.in(t, func() { conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(l.Host, 53).String(), time.Second) })
	if err == nil {
		conn.Close()
		t.Error("the outside reached a link's resolver")
	}
}

// TestAttachLeavesOthersAlone: an Attach that fails because the link's
// interface name is taken does not delete that interface.
func TestAttachLeavesOthersAlone(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.239.0.0/24"), Table: fmt.Sprintf("a2cl%d", rand.IntN(1e6)), Prefix: "a2l"})
	must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	must(t, run(nil, "ip", "link", "add", "a2l-0h", "type", "veth", "peer", "name", "a2lpeer"))
	t.Cleanup(func() { _ = run(nil, "ip", "link", "del", "a2l-0h") })
	sb := newNetns(t)
	if _, err := n.Attach(sb.pid, Rules{}); err == nil {
		t.Fatal("Attach over a taken name succeeded")
	}
	if err := run(nil, "ip", "link", "show", "a2l-0h"); err != nil {
		t.Error("a failed Attach deleted an interface it did not make")
	}
}
