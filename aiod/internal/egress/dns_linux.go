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
	"golang.org/x/time/rate"
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
	// daemon's descriptors and goroutines. limiter bounds them in time.
	slots   chan struct{}
	limiter *rate.Limiter
	// denyLooked is when each denied name was last looked up (denyName);
	// denySlots bounds those lookups at once.
	denyMu     sync.Mutex
	denyLooked map[string]time.Time
	denySlots  chan struct{}
}

// queryRate and queryBurst bound the queries a link's resolver answers:
// past them a query is dropped, as a busy resolver's are.
const (
	queryRate  = 100 // a second
	queryBurst = 200
)

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
	r := &resolver{l: l, upstream: upstream, udp: udp, tcp: tcp, ctx: ctx, stop: stop, slots: make(chan struct{}, maxInflight),
		limiter: rate.NewLimiter(queryRate, queryBurst), denyLooked: map[string]time.Time{}, denySlots: make(chan struct{}, denyLookups)}
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
// taken or the link is past its rate; release gives it back.
func (r *resolver) acquire() bool {
	if !r.limiter.Allow() {
		return false
	}
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
// DNS query). Only a standard query of one question is answered, never
// passed on as it came: the upstream is asked the question alone, so
// nothing else a sandbox writes reaches it.
//
//   - A name a deny pattern matches, or whose answer's CNAME chain leads
//     to one, is NXDOMAIN, and its addresses join the deny set.
//   - With an allow list, a name no allow pattern matches is REFUSED
//     (not asked: a name is a way out too, to whoever answers it).
//   - ANY, AXFR and IXFR are REFUSED; another opcode is NOTIMP.
func (r *resolver) answer(q []byte, network string) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	if h.OpCode != 0 {
		return reply(h, nil, dnsmessage.RCodeNotImplemented)
	}
	question, err := p.Question()
	if err != nil {
		return reply(h, nil, dnsmessage.RCodeFormatError)
	}
	if _, err := p.Question(); err != dnsmessage.ErrSectionDone {
		return reply(h, nil, dnsmessage.RCodeFormatError) // one question only
	}
	switch question.Type {
	case dnsmessage.TypeALL, dnsmessage.TypeAXFR, dnsmessage.Type(251): // 251: IXFR
		return reply(h, &question, dnsmessage.RCodeRefused)
	}
	name := question.Name.String()
	rules := r.l.rules
	if matchName(rules.DenyNames, name) {
		r.denyName(name) // its addresses, for a sandbox that knows them
		return reply(h, &question, dnsmessage.RCodeNameError)
	}
	allowed := matchName(rules.AllowNames, name)
	if rules.allowList() && !allowed {
		return reply(h, &question, dnsmessage.RCodeRefused)
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(question)
	ask, err := b.Finish()
	if err != nil {
		return reply(h, &question, dnsmessage.RCodeFormatError)
	}
	ans, err := r.ask(ask, network)
	if err != nil {
		return reply(h, &question, dnsmessage.RCodeServerFailure)
	}
	addrs, chain := parseAnswer(ans, name)
	for _, n := range chain[1:] {
		if matchName(rules.DenyNames, n) {
			r.l.denySet(addrs)
			return reply(h, &question, dnsmessage.RCodeNameError)
		}
	}
	if allowed {
		r.l.allowAnswer(addrs)
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
	buf := make([]byte, 4096) // the question goes without EDNS: an answer fits 512 bytes, or is truncated
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

// maxRecords bounds the addresses one answer may let in.
const maxRecords = 32

// parseAnswer reads an answer for name: the names of its CNAME chain from
// name on (name first), and the IPv4 addresses it gives them, with
// their TTLs (at least minTTL, at most maxTTL); records of any other
// owner are ignored (an upstream's extra records must not open other
// addresses), and so is anything past maxRecords addresses.
func parseAnswer(ans []byte, name string) (addrs map[netip.Addr]time.Duration, chain []string) {
	n := strings.ToLower(strings.TrimSuffix(name, ".") + ".")
	chain = []string{n}
	var p dnsmessage.Parser
	if _, err := p.Start(ans); err != nil {
		return nil, chain
	}
	if err := p.SkipAllQuestions(); err != nil {
		return nil, chain
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
				return nil, chain
			}
			as = append(as, rec{owner, netip.AddrFrom4(a.A), h.TTL})
		case h.Class == dnsmessage.ClassINET && h.Type == dnsmessage.TypeCNAME:
			c, err := p.CNAMEResource()
			if err != nil {
				return nil, chain
			}
			cnames[owner] = strings.ToLower(c.CNAME.String())
		default:
			if p.SkipAnswer() != nil {
				return nil, chain
			}
		}
	}
	names := map[string]bool{n: true}
	for i := 0; i < 16; i++ { // a chain, not a loop
		next, ok := cnames[n]
		if !ok || names[next] {
			break
		}
		names[next] = true
		chain = append(chain, next)
		n = next
	}
	addrs = map[netip.Addr]time.Duration{}
	for _, r := range as {
		if !names[r.owner] || len(addrs) == maxRecords {
			continue
		}
		ttl := time.Duration(r.ttl) * time.Second
		if r.ttl > 1<<31-1 {
			ttl = 0
		}
		addrs[r.a] = min(max(ttl, minTTL), maxTTL)
	}
	return addrs, chain
}

// nameOpens reports whether an answer may open a: never an address no
// host outside could have (loopback, link-local, where cloud metadata
// services live, multicast, reserved, broadcast, unspecified) nor one of
// the network's own subnet. A CIDR rule may still allow them.
func (n *Network) nameOpens(a netip.Addr) bool {
	return a.Is4() && a.IsGlobalUnicast() && !a.IsLinkLocalUnicast() && !n.cfg.Subnet.Contains(a) &&
		!netip.MustParsePrefix("0.0.0.0/8").Contains(a) && !netip.MustParsePrefix("240.0.0.0/4").Contains(a)
}

// allowAnswer lets the sandbox reach addrs (an answer to a name an
// AllowNames pattern matches) for their TTLs. An address already let in
// for more than half that time is not sent again: a sandbox asking one
// name over and over costs no nft call.
func (l *Link) allowAnswer(addrs map[netip.Addr]time.Duration) {
	var b strings.Builder
	now := time.Now()
	var sent []netip.Addr
	l.setMu.Lock()
	for a, ttl := range addrs {
		if !l.n.nameOpens(a) || l.named[a].After(now.Add(ttl/2)) {
			continue
		}
		l.named[a] = now.Add(ttl)
		sent = append(sent, a)
		fmt.Fprintf(&b, "add element inet %s %s_named { %s timeout %ds }\n", l.n.cfg.Table, l.chain(), a, int(ttl/time.Second))
	}
	for a, until := range l.named { // forget what the set has let go
		if until.Before(now) {
			delete(l.named, a)
		}
	}
	l.setMu.Unlock()
	if b.Len() > 0 && l.updates.apply(b.String()) != nil {
		// Not in the set (full, say): the next answer tries again.
		l.setMu.Lock()
		for _, a := range sent {
			delete(l.named, a)
		}
		l.setMu.Unlock()
	}
}

// denySet puts addrs in the link's deny set (those not there yet).
func (l *Link) denySet(addrs map[netip.Addr]time.Duration) {
	var b strings.Builder
	l.setMu.Lock()
	for a := range addrs {
		if l.denied[a] {
			continue
		}
		l.denied[a] = true
		fmt.Fprintf(&b, "add element inet %s %s_deny { %s }\n", l.n.cfg.Table, l.chain(), a)
	}
	l.setMu.Unlock()
	if b.Len() > 0 {
		_ = l.updates.apply(b.String())
	}
}

// denyLookups bounds a link's lookups of denied names at once; one past
// them is skipped (its name is NXDOMAIN all the same).
const denyLookups = 4

// denyAgain is how long a denied name's lookup stands before the name,
// asked again, is looked up again.
const denyAgain = time.Minute

// denyName looks a denied name up, in the background (under the
// resolver's WaitGroup), at most once a denyAgain and denyLookups at
// once, and puts its addresses in the deny set.
func (r *resolver) denyName(name string) {
	key := strings.ToLower(strings.TrimSuffix(name, "."))
	r.denyMu.Lock()
	if t, ok := r.denyLooked[key]; ok && time.Since(t) < denyAgain {
		r.denyMu.Unlock()
		return
	}
	if len(r.denyLooked) > 4096 { // a flood of names below a pattern
		clear(r.denyLooked)
	}
	r.denyLooked[key] = time.Now()
	r.denyMu.Unlock()
	select {
	case r.denySlots <- struct{}{}:
	default:
		return
	}
	r.wg.Go(func() {
		defer func() { <-r.denySlots }()
		r.l.denyAddrs(name)
	})
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
	addrs, _ := parseAnswer(ans, name)
	l.denySet(addrs)
}

// updates applies a link's set updates one nft call at a time: updates
// that arrive while one runs are joined into the next, and each caller
// returns once its own is applied (the answer that let an address in
// goes back only then).
type updates struct {
	mu      sync.Mutex
	running bool
	pending []string
	waiters []chan error
}

func (u *updates) apply(script string) error {
	done := make(chan error, 1)
	u.mu.Lock()
	u.pending = append(u.pending, script)
	u.waiters = append(u.waiters, done)
	if u.running {
		u.mu.Unlock()
		return <-done
	}
	u.running = true
	for len(u.pending) > 0 {
		batch, waiters := strings.Join(u.pending, ""), u.waiters
		u.pending, u.waiters = nil, nil
		u.mu.Unlock()
		err := nft(batch)
		for _, w := range waiters {
			w <- err
		}
		u.mu.Lock()
	}
	u.running = false
	u.mu.Unlock()
	return <-done
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
