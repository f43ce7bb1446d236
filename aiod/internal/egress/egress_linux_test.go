package egress

import (
	"github.com/a2c-smcp/a2c-go/internal/nettest"

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
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
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

// TestEgress: a sandbox's link reaches the outside host through NAT, its
// allow and deny rules hold by CIDR, and no rule lets it reach another
// sandbox or the host itself; a closed link is gone with its rules.
func TestEgress(t *testing.T) {
	needRoot(t)
	table := fmt.Sprintf("a2ct%d", rand.IntN(1e6))
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.234.0.0/24"), Table: table, Prefix: "a2t"})
	nettest.Must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := nettest.NewOutside(t)
	url := "http://" + out.Addr.String() + ":8080/"
	outNet := out.Net()

	for _, c := range []struct {
		name  string
		rules Rules
		ok    bool
	}{
		{"no rules", Rules{}, true},
		{"allowed by CIDR", Rules{Allow: []netip.Prefix{outNet}}, true},
		{"denied by CIDR", Rules{Deny: []netip.Prefix{outNet}}, false},
		{"not in the allow list", Rules{Allow: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")}}, false},
		{"deny wins over allow", Rules{Allow: []netip.Prefix{outNet}, Deny: []netip.Prefix{netip.PrefixFrom(out.Addr, 32)}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := nettest.NewNetns(t)
			l, err := n.Attach(sb.PID, c.rules)
			nettest.Must(t, err)
			defer l.Close()
			body, ok := nettest.Get(t, sb, url)
			if ok != c.ok {
				t.Fatalf("reached %v, want %v (%q)", ok, c.ok, body)
			}
			// Masqueraded: the outside host sees the host's address.
			if ok && !strings.HasPrefix(body, "outside, from "+out.Host.String()+":") {
				t.Errorf("answer %q", body)
			}
		})
	}

	t.Run("walls", func(t *testing.T) {
		a, b := nettest.NewNetns(t), nettest.NewNetns(t)
		la, err := n.Attach(a.PID, Rules{})
		nettest.Must(t, err)
		defer la.Close()
		lb, err := n.Attach(b.PID, Rules{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
		nettest.Must(t, err)
		defer lb.Close()
		// b serves on its own address; a must not reach it.
		var ln net.Listener
		b.In(t, func() {
			ln, err = net.Listen("tcp", lb.Sandbox.String()+":9000")
			nettest.Must(t, err)
		})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b") })}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		if _, ok := nettest.Get(t, a, "http://"+lb.Sandbox.String()+":9000/"); ok {
			t.Error("a sandbox reached another")
		}
		// The host listens on every address (its API, say): no sandbox
		// reaches it, by its gateway or by another of its addresses.
		hl, err := net.Listen("tcp", "0.0.0.0:0")
		nettest.Must(t, err)
		defer hl.Close()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "host") })}
		go func() { _ = hs.Serve(hl) }()
		defer hs.Close()
		port := hl.Addr().(*net.TCPAddr).Port
		for _, h := range []netip.Addr{la.Host, lb.Host, out.Host} {
			if _, ok := nettest.Get(t, b, fmt.Sprintf("http://%s:%d/", h, port)); ok {
				t.Errorf("a sandbox (allowed 0.0.0.0/0) reached the host at %s", h)
			}
		}
		// Its own loopback is its own: the host's 127.0.0.1 is not there.
		if _, ok := nettest.Get(t, b, fmt.Sprintf("http://127.0.0.1:%d/", port)); ok {
			t.Error("a sandbox reached the host's loopback")
		}
	})

	t.Run("names", func(t *testing.T) {
		testNames(t, n, out)
	})

	t.Run("close", func(t *testing.T) {
		sb := nettest.NewNetns(t)
		l, err := n.Attach(sb.PID, Rules{Deny: []netip.Prefix{outNet}})
		nettest.Must(t, err)
		nettest.Must(t, l.Close())
		nettest.Must(t, l.Close())
		if err := run(nil, "ip", "link", "show", l.hostIf()); err == nil {
			t.Error("the host's end is still there")
		}
		out, err := exec.Command("nft", "list", "table", "inet", table).CombinedOutput()
		if err != nil || strings.Contains(string(out), l.chain()) || strings.Contains(string(out), l.hostIf()) {
			t.Errorf("rules left: %v\n%s", err, out)
		}
	})
}

// lookup asks the link's resolver (its gateway, port 53) for name's A
// records from inside the sandbox; rcode is the answer's.
func lookup(t *testing.T, ns *nettest.Netns, l *Link, name string) (addrs []netip.Addr, rcode dnsmessage.RCode) {
	t.Helper()
	var conn net.Conn
	var err error
	ns.In(t, func() {
		conn, err = net.Dial("udp4", netip.AddrPortFrom(l.Host, 53).String())
	})
	nettest.Must(t, err)
	defer conn.Close()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Write(q)
	nettest.Must(t, err)
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	nettest.Must(t, err)
	var p dnsmessage.Parser
	h, err := p.Start(buf[:n])
	nettest.Must(t, err)
	as, _ := parseAnswer(buf[:n], name)
	for a := range as {
		addrs = append(addrs, a)
	}
	return addrs, h.RCode
}

// testNames: name rules hold through the link's resolver: a name an
// allow pattern matches lets its addresses in once looked up, another
// name is refused and its address stays shut, a denied name is NXDOMAIN and
// its address shut even to a sandbox that knows it.
func testNames(t *testing.T, n *Network, out *nettest.Outside) {
	up := nettest.DNS(t, map[string]netip.Addr{"api.allowed.test": out.Addr, "other.test": out.Addr2, "denied.test": out.Addr2})
	n.cfg.Upstream = []netip.AddrPort{up}
	sb := nettest.NewNetns(t)
	l, err := n.Attach(sb.PID, Rules{AllowNames: []string{"*.allowed.test"}})
	nettest.Must(t, err)
	defer l.Close()
	if _, ok := nettest.Get(t, sb, "http://"+out.Addr.String()+":8080/"); ok {
		t.Fatal("reached an address before its name was looked up")
	}
	addrs, rc := lookup(t, sb, l, "api.allowed.test")
	if rc != dnsmessage.RCodeSuccess || len(addrs) != 1 || addrs[0] != out.Addr {
		t.Fatalf("lookup: %v %v", addrs, rc)
	}
	if _, ok := nettest.Get(t, sb, "http://"+out.Addr.String()+":8080/"); !ok {
		t.Error("the allowed name's address is still shut")
	}
	// With an allow list, a name no pattern allows is not even asked.
	addrs, rc = lookup(t, sb, l, "other.test")
	if rc != dnsmessage.RCodeRefused || len(addrs) != 0 {
		t.Fatalf("other.test: %v %v, want REFUSED", addrs, rc)
	}
	if _, ok := nettest.Get(t, sb, "http://"+out.Addr2.String()+":8080/"); ok {
		t.Error("a name no rule allows opened its address")
	}

	sd := nettest.NewNetns(t)
	ld, err := n.Attach(sd.PID, Rules{DenyNames: []string{"denied.test"}})
	nettest.Must(t, err)
	defer ld.Close()
	if _, rc := lookup(t, sd, ld, "denied.test"); rc != dnsmessage.RCodeNameError {
		t.Errorf("denied.test: %v, want NXDOMAIN", rc)
	}
	// Its address joins the deny set (asked of the upstream at attach).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o, _ := exec.Command("nft", "list", "set", "inet", n.cfg.Table, ld.chain()+"_deny").CombinedOutput()
		if strings.Contains(string(o), out.Addr2.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the denied name's address is not in the deny set:\n%s", o)
		}
	}
	if _, ok := nettest.Get(t, sd, "http://"+out.Addr2.String()+":8080/"); ok {
		t.Error("the denied name's address is reachable")
	}
	if _, ok := nettest.Get(t, sd, "http://"+out.Addr.String()+":8080/"); !ok {
		t.Error("with a deny rule only, the rest must be open")
	}
	// A sandbox reaches its own resolver only: not another link's.
	if _, rc := lookup(t, sd, ld, "other.test"); rc != dnsmessage.RCodeSuccess {
		t.Errorf("own resolver: %v", rc)
	}
	var conn net.Conn
	sd.In(t, func() { conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(l.Host, 53).String(), time.Second) })
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
	nettest.Must(b, err)
	b.Cleanup(func() { _ = n.Close() })
	out := nettest.NewOutside(b)
	url := "http://" + out.Addr.String() + ":8080/"
	sb := nettest.NewNetns(b)
	l, err := n.Attach(sb.PID, Rules{})
	nettest.Must(b, err)
	b.Cleanup(func() { _ = l.Close() })
	client := func(dial func() (net.Conn, error)) *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1,
			DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() }}}
	}
	hostAddr := out.Addr.String() + ":8080"
	for _, c := range []struct {
		name string
		hc   *http.Client
	}{
		{"host", client(func() (net.Conn, error) { return net.Dial("tcp", hostAddr) })},
		{"sandbox", client(func() (net.Conn, error) {
			var conn net.Conn
			var err error
			sb.In(b, func() { conn, err = net.Dial("tcp", hostAddr) })
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

// TestEgressSpoof: a sandbox that takes another's address (or any other)
// sends nothing: not to its resolver (whose answer would land in the
// other sandbox), not out (where the answer would come back to the other
// sandbox, or leave the host unmasqueraded).
func TestEgressSpoof(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.236.0.0/24"), Table: fmt.Sprintf("a2cs%d", rand.IntN(1e6)), Prefix: "a2s"})
	nettest.Must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := nettest.NewOutside(t)
	a, b := nettest.NewNetns(t), nettest.NewNetns(t)
	la, err := n.Attach(a.PID, Rules{})
	nettest.Must(t, err)
	lb, err := n.Attach(b.PID, Rules{})
	nettest.Must(t, err)
	var lis *net.UDPConn
	b.In(t, func() {
		lis, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lb.Sandbox, 5353)))
		nettest.Must(t, err)
	})
	defer lis.Close()
	// An echo on the outside host: what comes to it goes back.
	var echo *net.UDPConn
	outNs := out.NS
	outNs.In(t, func() {
		echo, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(out.Addr, 7)))
		nettest.Must(t, err)
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
	a.IP(t, fmt.Sprintf("addr add %s/32 dev %s\naddr add 192.0.2.77/32 dev %s\n", lb.Sandbox, la.sandboxIf(), la.sandboxIf()))
	send := func(src netip.Addr, to netip.AddrPort, msg []byte) {
		a.In(t, func() {
			c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 5353)), net.UDPAddrFromAddrPort(to))
			nettest.Must(t, err)
			defer c.Close()
			_, err = c.Write(msg)
			nettest.Must(t, err)
		})
	}
	b2 := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4142, RecursionDesired: true})
	_ = b2.StartQuestions()
	_ = b2.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("x.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b2.Finish()
	send(lb.Sandbox, netip.AddrPortFrom(la.Host, 53), q)
	send(lb.Sandbox, netip.AddrPortFrom(out.Addr, 7), []byte("to b"))
	send(netip.MustParseAddr("192.0.2.77"), netip.AddrPortFrom(out.Addr, 7), []byte("from nowhere"))
	// Its own address still goes out: the marker that the others had
	// their chance to arrive first.
	send(la.Sandbox, netip.AddrPortFrom(out.Addr, 7), []byte("marker"))
	select {
	case from := <-heard:
		if from.Addr() != out.Host {
			t.Errorf("the outside host heard %s, want only the masqueraded marker from %s", from, out.Host)
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
	nettest.Must(t, err)
	a := nettest.NewNetns(t)
	l, err := n.Attach(a.PID, Rules{})
	nettest.Must(t, err)
	nettest.Must(t, n.Close())
	if err := run(nil, "ip", "link", "show", l.hostIf()); err == nil {
		t.Error("a link outlived its network")
	}
	if _, ok := nettest.Get(t, a, "http://"+l.Host.String()+":80/"); ok {
		t.Error("the sandbox reaches the host after the network closed")
	}
}

// TestEgressInbound: nothing from outside opens a connection to a
// sandbox, or asks a link's resolver, even with a route to the subnet.
func TestEgressInbound(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.238.0.0/24"), Table: fmt.Sprintf("a2ci%d", rand.IntN(1e6)), Prefix: "a2i"})
	nettest.Must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := nettest.NewOutside(t)
	outNs := out.NS
	outNs.IP(t, fmt.Sprintf("route add 10.238.0.0/24 via %s\n", out.Host))
	sb := nettest.NewNetns(t)
	l, err := n.Attach(sb.PID, Rules{})
	nettest.Must(t, err)
	var ln net.Listener
	sb.In(t, func() {
		ln, err = net.Listen("tcp", l.Sandbox.String()+":9000")
		nettest.Must(t, err)
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "sandbox") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, ok := nettest.Get(t, outNs, "http://"+l.Sandbox.String()+":9000/"); ok {
		t.Error("the outside opened a connection to a sandbox")
	}
	var conn net.Conn
	outNs.In(t, func() { conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(l.Host, 53).String(), time.Second) })
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
	nettest.Must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	nettest.Must(t, run(nil, "ip", "link", "add", "a2l-0h", "type", "veth", "peer", "name", "a2lpeer"))
	t.Cleanup(func() { _ = run(nil, "ip", "link", "del", "a2l-0h") })
	sb := nettest.NewNetns(t)
	if _, err := n.Attach(sb.PID, Rules{}); err == nil {
		t.Fatal("Attach over a taken name succeeded")
	}
	if err := run(nil, "ip", "link", "show", "a2l-0h"); err != nil {
		t.Error("a failed Attach deleted an interface it did not make")
	}
}

// TestEgressReattach: a reserved link keeps its addresses, rules and
// resolver across namespaces (a sandbox whose init died and was started
// again): the new namespace gets the pair, the old one loses it, and the
// rules and names still hold.
func TestEgressReattach(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.241.0.0/24"), Table: fmt.Sprintf("a2cr%d", rand.IntN(1e6)), Prefix: "a2r"})
	nettest.Must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := nettest.NewOutside(t)
	up := nettest.DNS(t, map[string]netip.Addr{"api.allowed.test": out.Addr, "other.test": out.Addr2})
	n.cfg.Upstream = []netip.AddrPort{up}
	l, err := n.Reserve(Rules{AllowNames: []string{"api.allowed.test"}})
	nettest.Must(t, err)
	defer l.Close()
	url := "http://" + out.Addr.String() + ":8080/"
	for i := range 2 {
		sb := nettest.NewNetns(t)
		nettest.Must(t, l.Attach(sb.PID))
		if _, ok := nettest.Get(t, sb, url); ok {
			t.Fatalf("attach %d: reached the address before its name was looked up", i)
		}
		if addrs, rc := lookup(t, sb, l, "api.allowed.test"); rc != dnsmessage.RCodeSuccess || len(addrs) != 1 {
			t.Fatalf("attach %d: lookup %v %v", i, addrs, rc)
		}
		if _, ok := nettest.Get(t, sb, url); !ok {
			t.Fatalf("attach %d: the allowed name's address is shut", i)
		}
		if _, ok := nettest.Get(t, sb, "http://"+out.Addr2.String()+":8080/"); ok {
			t.Fatalf("attach %d: reached an address no rule allows", i)
		}
		// Flush the named set: the next namespace must look the name up
		// again, through the resolver that outlived the pair.
		nettest.Must(t, run(nil, "nft", "flush", "set", "inet", n.cfg.Table, l.chain()+"_named"))
		l.setMu.Lock()
		clear(l.named)
		l.setMu.Unlock()
	}
	l.Close()
	if err := l.Attach(nettest.NewNetns(t).PID); !errors.Is(err, ErrClosed) {
		t.Errorf("Attach on a closed link: %v", err)
	}
	if out, _ := exec.Command("ip", "link", "show", l.hostIf()).CombinedOutput(); !strings.Contains(string(out), "does not exist") {
		t.Errorf("the closed link's pair is still there: %s", out)
	}
}

// TestEgressSlotReuse: a sandbox that gets the slot (the address) of one
// that ended inherits none of its connections: a UDP flow the first
// opened, still in the kernel's connection table, does not carry the
// second's packets past its rules, nor the outside's answers into it.
func TestEgressSlotReuse(t *testing.T) {
	needRoot(t)
	n, err := New(Config{Subnet: netip.MustParsePrefix("10.242.128.0/24"), Table: fmt.Sprintf("a2cu%d", rand.IntN(1e6)), Prefix: "a2u"})
	nettest.Must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	out := nettest.NewOutside(t)
	var echo *net.UDPConn
	out.NS.In(t, func() {
		echo, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(out.Addr, 7)))
		nettest.Must(t, err)
	})
	defer echo.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	// roundTrip sends from port 40000 of ns to the echo and reports
	// whether the echo came back within half a second.
	roundTrip := func(ns *nettest.Netns, src netip.Addr) bool {
		var c *net.UDPConn
		ns.In(t, func() {
			c, err = net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 40000)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(out.Addr, 7)))
			nettest.Must(t, err)
		})
		defer c.Close()
		_, _ = c.Write([]byte("ping"))
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		buf := make([]byte, 16)
		_, err := c.Read(buf)
		return err == nil
	}
	a := nettest.NewNetns(t)
	la, err := n.Attach(a.PID, Rules{})
	nettest.Must(t, err)
	if !roundTrip(a, la.Sandbox) {
		t.Fatal("the first sandbox's flow does not work")
	}
	nettest.Must(t, la.Close())
	b := nettest.NewNetns(t)
	lb, err := n.Attach(b.PID, Rules{Deny: []netip.Prefix{out.Net()}})
	nettest.Must(t, err)
	defer lb.Close()
	if lb.Sandbox != la.Sandbox {
		t.Fatalf("the second sandbox got %s, not the first's %s", lb.Sandbox, la.Sandbox)
	}
	if roundTrip(b, lb.Sandbox) {
		t.Error("a sandbox denied the outside used the connection the slot's last sandbox opened")
	}
}
