package nettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// Netns is a network namespace the test made: a process (sleep) holds
// it until the test ends.
type Netns struct {
	PID int
}

// NewNetns makes a network namespace for the rest of the test.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	// No Pdeathsig: it fires when the forking thread ends, and In ends
	// the threads it locks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &Netns{PID: cmd.Process.Pid}
}

// In runs f on a thread that joined the namespace: a socket f makes
// belongs to the namespace, wherever it is used later.
func (n *Netns) In(t testing.TB, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", n.PID), unix.O_RDONLY|unix.O_CLOEXEC, 0)
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

// IP runs ip commands (a batch, one a line) in the namespace.
func (n *Netns) IP(t testing.TB, batch string) {
	t.Helper()
	Must(t, Run([]byte(batch), "nsenter", "-t", fmt.Sprint(n.PID), "-n", "ip", "-batch", "-"))
}

// Outside is a host on a network of the test's own ("the internet"): a
// namespace linked to the host by a veth pair, serving HTTP on port 8080
// of both its addresses, answering "outside, from REMOTE".
type Outside struct {
	Addr, Addr2 netip.Addr // the server's two addresses, in one /24
	Host        netip.Addr // the host's end of the link
	NS          *Netns
}

// NewOutside makes the outside host for the rest of the test.
func NewOutside(t testing.TB) *Outside {
	t.Helper()
	ns := NewNetns(t)
	// A /24 of 10.250.0.0/16 named by its third byte: tests of several
	// packages run at once, so a taken one (its interface name exists)
	// is tried again with another.
	var o *Outside
	var h string
	for try := 0; ; try++ {
		r := rand.IntN(230) + 20
		o = &Outside{Addr: netip.MustParseAddr(fmt.Sprintf("10.250.%d.2", r)), Addr2: netip.MustParseAddr(fmt.Sprintf("10.250.%d.3", r)),
			Host: netip.MustParseAddr(fmt.Sprintf("10.250.%d.1", r)), NS: ns}
		h = fmt.Sprintf("tout%d", r) // no pool's or egress test's link prefix
		err := Run(nil, "ip", "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(ns.PID))
		if err == nil {
			break
		}
		if try == 10 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = Run(nil, "ip", "link", "del", h) })
	Must(t, Run(nil, "ip", "addr", "add", o.Host.String()+"/24", "dev", h))
	Must(t, Run(nil, "ip", "link", "set", h, "up"))
	ns.IP(t, fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\naddr add %s/24 dev eth0\nlink set eth0 up\n", o.Addr, o.Addr2))
	var ln net.Listener
	ns.In(t, func() {
		var err error
		ln, err = net.Listen("tcp", "0.0.0.0:8080")
		Must(t, err)
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "outside, from "+r.RemoteAddr)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

// Net is the outside host's /24.
func (o *Outside) Net() netip.Prefix { return netip.PrefixFrom(o.Addr, 24).Masked() }

// DNS is a DNS server on the host's loopback standing for the machine's
// resolver: it answers A questions from table (names without the final
// dot), and any other with no record.
func DNS(t testing.TB, table map[string]netip.Addr) netip.AddrPort {
	t.Helper()
	return DNSWith(t, table, nil)
}

// DNSWith is DNS with CNAME records too: a name of cnames answers with
// its CNAME, then the A record of the name it leads to, as a recursive
// resolver does.
func DNSWith(t testing.TB, table map[string]netip.Addr, cnames map[string]string) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	Must(t, err)
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
			name := q.Name
			_ = b.StartAnswers()
			if target, ok := cnames[strings.TrimSuffix(name.String(), ".")]; ok && q.Type == dnsmessage.TypeA {
				next := dnsmessage.MustNewName(target + ".")
				_ = b.CNAMEResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.CNAMEResource{CNAME: next})
				name = next
			}
			a, ok := table[strings.TrimSuffix(name.String(), ".")]
			if ok && q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
			}
			out, _ := b.Finish()
			_, _ = pc.WriteTo(out, from)
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// Get fetches url from inside the namespace; ok is false when no
// connection could be made within a second (a dropped packet has no
// other answer than silence).
func Get(t testing.TB, ns *Netns, url string) (body string, ok bool) {
	t.Helper()
	var conn net.Conn
	var err error
	hostPort, _, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	ns.In(t, func() {
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

// Must fails the test on an error.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Run runs a command with stdin, its output in the error.
func Run(stdin []byte, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
