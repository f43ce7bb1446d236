package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// The link's resolver: a small DNS forwarder on the link's host address
// (port 53, UDP and TCP), the only address of the host a sandbox may
// reach. It is what makes a name rule hold:
//
//   - a name a DenyNames pattern matches is answered NXDOMAIN, and its
//     addresses (asked of the upstream at attach time, and whenever the
//     sandbox asks for it) are in the link's deny set;
//   - any other name is asked of the upstream and the answer passed back
//     as it came; when an AllowNames pattern matches the name, the
//     answer's IPv4 addresses join the link's allow set for their TTL
//     (at least minTTL), so the sandbox may connect to them.
//
// A pattern is a name ("example.com", that name only) or "*." and a name
// ("*.example.com", any name below it, not the name itself); case does
// not matter, nor a final dot.

// minTTL is the shortest time an address a name rule let in stays in the
// allow set, whatever the answer's TTL (a client may connect a moment
// after its lookup).
const minTTL = 30 * time.Second

// maxDNS bounds a DNS message the forwarder reads (TCP's own bound).
const maxDNS = 65535

// upstreamTimeout bounds one question to an upstream server.
const upstreamTimeout = 2 * time.Second

// resolver is one link's DNS forwarder.
type resolver struct {
	l        *Link
	upstream []netip.AddrPort
	udp      *net.UDPConn
	tcp      *net.TCPListener
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	// slots bounds the queries answered at once (a query past it is
	// dropped, as a busy resolver's are): one sandbox must not spend the
	// daemon's descriptors and goroutines.
	slots chan struct{}
}

// maxInflight bounds a link's queries in progress, UDP and TCP together.
const maxInflight = 32

// startResolver listens on the link's host address, port 53. The
// address need not exist yet (Reserve runs before the pair is made, and
// a pair made again brings it back): the sockets are bound with
// IP_FREEBIND, and a socket bound to an address outlives the address.
func (l *Link) startResolver(upstream []netip.AddrPort) error {
	at := netip.AddrPortFrom(l.Host, 53).String()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", at)
	if err != nil {
		return fmt.Errorf("egress: the link's resolver: %w", err)
	}
	udp := pc.(*net.UDPConn)
	ln, err := lc.Listen(context.Background(), "tcp4", at)
	if err != nil {
		udp.Close()
		return fmt.Errorf("egress: the link's resolver: %w", err)
	}
	tcp := ln.(*net.TCPListener)
	ctx, stop := context.WithCancel(context.Background())
	r := &resolver{l: l, upstream: upstream, udp: udp, tcp: tcp, ctx: ctx, stop: stop, slots: make(chan struct{}, maxInflight)}
	l.dns = r
	r.wg.Add(2)
	go r.serveUDP()
	go r.serveTCP()
	return nil
}

// close stops the resolver and waits for its goroutines.
func (r *resolver) close() {
	r.stop()
	r.udp.Close()
	r.tcp.Close()
	r.wg.Wait()
}

func (r *resolver) serveUDP() {
	defer r.wg.Done()
	buf := make([]byte, maxDNS)
	for {
		n, from, err := r.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed
		}
		if from.Addr().Unmap() != r.l.Sandbox || !r.acquire() {
			continue // not its sandbox (the rules let none other in), or busy
		}
		q := append([]byte(nil), buf[:n]...)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.release()
			if ans := r.answer(q, "udp"); ans != nil {
				_, _ = r.udp.WriteToUDPAddrPort(ans, from)
			}
		}()
	}
}

func (r *resolver) serveTCP() {
	defer r.wg.Done()
	for {
		c, err := r.tcp.Accept()
		if err != nil {
			return // closed
		}
		from, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		if from.Addr().Unmap() != r.l.Sandbox || !r.acquire() {
			c.Close()
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.release()
			defer c.Close()
			stop := context.AfterFunc(r.ctx, func() { c.Close() })
			defer stop()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			q, err := readTCP(c)
			if err != nil {
				return
			}
			if ans := r.answer(q, "tcp"); ans != nil {
				_ = writeTCP(c, ans)
			}
		}()
	}
}

// acquire takes a slot for one query, or reports false when all are
// taken; release gives it back.
func (r *resolver) acquire() bool {
	select {
	case r.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (r *resolver) release() { <-r.slots }

func readTCP(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(n[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeTCP(w io.Writer, b []byte) error {
	out := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(out, uint16(len(b)))
	copy(out[2:], b)
	_, err := w.Write(out)
	return err
}

// answer answers one query (nil: nothing to send back, the query was no
// DNS query).
func (r *resolver) answer(q []byte, network string) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return reply(h, nil, dnsmessage.RCodeFormatError)
	}
	name := question.Name.String()
	rules := r.l.rules
	if matchName(rules.DenyNames, name) {
		r.wg.Go(func() { r.l.denyAddrs(name) }) // its addresses, for a sandbox that knows them
		return reply(h, &question, dnsmessage.RCodeNameError)
	}
	ans, err := r.ask(q, network)
	if err != nil {
		return reply(h, &question, dnsmessage.RCodeServerFailure)
	}
	if matchName(rules.AllowNames, name) {
		r.l.allowAnswer(ans, name)
	}
	return ans
}

// ask passes the query to the upstream servers, one after the other.
func (r *resolver) ask(q []byte, network string) ([]byte, error) {
	var last error = errors.New("no upstream resolver")
	for _, up := range r.upstream {
		ctx, cancel := context.WithTimeout(r.ctx, upstreamTimeout)
		ans, err := exchange(ctx, network, up, q)
		cancel()
		if err == nil {
			return ans, nil
		}
		last = err
	}
	return nil, last
}

// exchange sends one query to server and reads its answer.
func exchange(ctx context.Context, network string, server netip.AddrPort, q []byte) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, server.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() }) // a resolver closed mid-question
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if network == "tcp" {
		if err := writeTCP(c, q); err != nil {
			return nil, err
		}
		return readTCP(c)
	}
	if _, err := c.Write(q); err != nil {
		return nil, err
	}
	buf := make([]byte, maxDNS)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// reply is an answer of rcode to the query h (with its question, when
// it could be read).
func reply(h dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode})
	if q != nil {
		_ = b.StartQuestions()
		_ = b.Question(*q)
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// maxTTL caps how long an address a name rule let in stays in the allow
// set (a TTL with its top bit set counts as 0, as RFC 2181 has it).
const maxTTL = 24 * time.Hour

// aRecords are the IPv4 addresses an answer gives name, with their TTLs:
// the A records of name, or of the names name leads to through the
// answer's CNAME records; records of any other owner are ignored (an
// upstream's extra records must not open other addresses).
func aRecords(ans []byte, name string) map[netip.Addr]time.Duration {
	var p dnsmessage.Parser
	if _, err := p.Start(ans); err != nil {
		return nil
	}
	if err := p.SkipAllQuestions(); err != nil {
		return nil
	}
	type rec struct {
		owner string
		a     netip.Addr
		ttl   uint32
	}
	var as []rec
	cnames := map[string]string{}
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			break
		}
		owner := strings.ToLower(h.Name.String())
		switch {
		case h.Class == dnsmessage.ClassINET && h.Type == dnsmessage.TypeA:
			a, err := p.AResource()
			if err != nil {
				return nil
			}
			as = append(as, rec{owner, netip.AddrFrom4(a.A), h.TTL})
		case h.Class == dnsmessage.ClassINET && h.Type == dnsmessage.TypeCNAME:
			c, err := p.CNAMEResource()
			if err != nil {
				return nil
			}
			cnames[owner] = strings.ToLower(c.CNAME.String())
		default:
			if p.SkipAnswer() != nil {
				return nil
			}
		}
	}
	names := map[string]bool{}
	n := strings.ToLower(strings.TrimSuffix(name, ".") + ".")
	for i := 0; i < 16 && n != "" && !names[n]; i++ { // a chain, not a loop
		names[n] = true
		n = cnames[n]
	}
	out := map[netip.Addr]time.Duration{}
	for _, r := range as {
		if !names[r.owner] {
			continue
		}
		ttl := time.Duration(r.ttl) * time.Second
		if r.ttl > 1<<31-1 {
			ttl = 0
		}
		out[r.a] = min(max(ttl, minTTL), maxTTL)
	}
	return out
}

// allowAnswer lets the sandbox reach the addresses of an answer to name
// (an AllowNames pattern matches it), for their TTL: one nft call for the
// answer.
func (l *Link) allowAnswer(ans []byte, name string) {
	var b strings.Builder
	for a, ttl := range aRecords(ans, name) {
		fmt.Fprintf(&b, "add element inet %s %s_named { %s timeout %ds }\n", l.n.cfg.Table, l.chain(), a, int(ttl/time.Second))
	}
	if b.Len() > 0 {
		_ = nft(b.String())
	}
}

// denyAddrs puts the addresses a denied name has now in the deny set.
func (l *Link) denyAddrs(name string) {
	if l.dns == nil {
		return
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, RecursionDesired: true})
	_ = b.StartQuestions()
	n, err := dnsmessage.NewName(strings.TrimSuffix(name, ".") + ".")
	if err != nil {
		return
	}
	_ = b.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		return
	}
	ans, err := l.dns.ask(q, "udp")
	if err != nil {
		return
	}
	var sb strings.Builder
	for a := range aRecords(ans, name) {
		fmt.Fprintf(&sb, "add element inet %s %s_deny { %s }\n", l.n.cfg.Table, l.chain(), a)
	}
	if sb.Len() > 0 {
		_ = nft(sb.String())
	}
}

// SystemResolvers are the nameservers of /etc/resolv.conf, port 53: the
// default upstream of a network's resolvers.
func SystemResolvers() []netip.AddrPort {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var out []netip.AddrPort
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() {
				out = append(out, netip.AddrPortFrom(a, 53))
			}
		}
	}
	return out
}
