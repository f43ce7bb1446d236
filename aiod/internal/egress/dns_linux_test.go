package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/a2c-smcp/a2c-go/internal/nettest"
)

func TestMatchName(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		name     string
		want     bool
	}{
		{[]string{"example.com"}, "example.com.", true},
		{[]string{"example.com"}, "EXAMPLE.com", true},
		{[]string{"example.com"}, "api.example.com", false},
		{[]string{"*.example.com"}, "api.example.com", true},
		{[]string{"*.example.com"}, "a.b.example.com.", true},
		{[]string{"*.example.com"}, "example.com", false},
		{[]string{"*.example.com"}, "badexample.com", false},
		{[]string{"example.com."}, "example.com", true},
		{nil, "example.com", false},
	} {
		if got := matchName(c.patterns, c.name); got != c.want {
			t.Errorf("matchName(%q, %q) = %v", c.patterns, c.name, got)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for p, ok := range map[string]bool{
		"example.com": true, "*.example.com": true, "example.com.": true,
		"": false, "*.": false, "*": false, "a*.example.com": false, "http://x": false, "a b": false,
	} {
		if got := checkPattern(p) == nil; got != ok {
			t.Errorf("checkPattern(%q) ok = %v", p, got)
		}
	}
}

// FuzzAnswer: whatever a sandbox sends its resolver, the answer neither
// panics nor answers a response, and a query it can read gets an answer
// with the query's id.
func FuzzAnswer(f *testing.F) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("x.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	f.Add(q)
	f.Add([]byte{0, 1, 2})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r := &resolver{l: &Link{rules: Rules{AllowNames: []string{"*.test"}}}, ctx: ctx} // no upstream: SERVFAIL
	f.Fuzz(func(t *testing.T, in []byte) {
		ans := r.answer(in, "udp")
		if ans == nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(ans)
		if err != nil || !h.Response {
			t.Fatalf("answer %x: %v", ans, err)
		}
		var qp dnsmessage.Parser
		if qh, err := qp.Start(in); err == nil && qh.ID != h.ID {
			t.Fatalf("id %d for a query of id %d", h.ID, qh.ID)
		}
	})
}

// TestParseAnswer: only the question's name's records count, through its
// CNAME chain; TTLs are bounded.
func TestParseAnswer(t *testing.T) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, Response: true})
	_ = b.StartQuestions()
	q := dnsmessage.MustNewName("www.ok.test.")
	_ = b.Question(dnsmessage.Question{Name: q, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	_ = b.StartAnswers()
	rh := func(name string, ttl uint32) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: ttl}
	}
	_ = b.CNAMEResource(rh("WWW.ok.test.", 60), dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("edge.cdn.test.")})
	_ = b.AResource(rh("edge.cdn.test.", 4294967295), dnsmessage.AResource{A: [4]byte{198, 51, 100, 1}})
	_ = b.AResource(rh("unrelated.evil.", 60), dnsmessage.AResource{A: [4]byte{203, 0, 113, 66}})
	_ = b.AResource(rh("www.ok.test.", 999999999), dnsmessage.AResource{A: [4]byte{198, 51, 100, 2}})
	ans, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	got, chain := parseAnswer(ans, "www.ok.test")
	if strings.Join(chain, " ") != "www.ok.test. edge.cdn.test." {
		t.Errorf("chain %q", chain)
	}
	want := map[string]time.Duration{"198.51.100.1": minTTL, "198.51.100.2": maxTTL}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for a, ttl := range got {
		if want[a.String()] != ttl {
			t.Errorf("%s: ttl %v, want %v", a, ttl, want[a.String()])
		}
	}
}

// query is a DNS query of one question (and extra when given).
func query(t *testing.T, op dnsmessage.OpCode, typ dnsmessage.Type, names ...string) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 77, OpCode: op, RecursionDesired: true})
	_ = b.StartQuestions()
	for _, n := range names {
		_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: typ, Class: dnsmessage.ClassINET})
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func rcode(t *testing.T, ans []byte) dnsmessage.RCode {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(ans)
	if err != nil || !h.Response || h.ID != 77 {
		t.Fatalf("answer %x: %v", ans, err)
	}
	return h.RCode
}

// TestResolverRefusals: what the resolver answers without asking
// anyone, and what it answers once the upstream (the test's, on the
// loopback) has: a denied name, or one whose CNAME chain leads to one, is
// NXDOMAIN; with an allow list a name no pattern allows is REFUSED; only
// a standard query of one question, never ANY or a zone transfer.
func TestResolverRefusals(t *testing.T) {
	up := nettest.DNSWith(t, map[string]netip.Addr{"x.evil.test": netip.MustParseAddr("198.51.100.9"), "ok.test": netip.MustParseAddr("198.51.100.1")},
		map[string]string{"cdn.good.test": "x.evil.test", "www.good.test": "ok.test"})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for _, c := range []struct {
		name  string
		rules Rules
		q     []byte
		want  dnsmessage.RCode
	}{
		{"update", Rules{}, query(t, 5, dnsmessage.TypeA, "a.test."), dnsmessage.RCodeNotImplemented},
		{"two questions", Rules{}, query(t, 0, dnsmessage.TypeA, "a.test.", "b.test."), dnsmessage.RCodeFormatError},
		{"any", Rules{}, query(t, 0, dnsmessage.TypeALL, "a.test."), dnsmessage.RCodeRefused},
		{"axfr", Rules{}, query(t, 0, dnsmessage.TypeAXFR, "a.test."), dnsmessage.RCodeRefused},
		{"denied", Rules{DenyNames: []string{"*.evil.test"}}, query(t, 0, dnsmessage.TypeA, "x.evil.test."), dnsmessage.RCodeNameError},
		{"not allowed", Rules{AllowNames: []string{"*.good.test"}}, query(t, 0, dnsmessage.TypeTXT, "c2VjcmV0.exfil.test."), dnsmessage.RCodeRefused},
		{"cidr allow list resolves no name", Rules{Allow: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}, query(t, 0, dnsmessage.TypeA, "ok.test."), dnsmessage.RCodeRefused},
		{"chain to a denied name", Rules{AllowNames: []string{"*.good.test"}, DenyNames: []string{"*.evil.test"}}, query(t, 0, dnsmessage.TypeA, "cdn.good.test."), dnsmessage.RCodeNameError},
		{"chain to an allowed one", Rules{AllowNames: []string{"*.good.test"}, DenyNames: []string{"*.evil.test"}}, query(t, 0, dnsmessage.TypeA, "www.good.test."), dnsmessage.RCodeSuccess},
		{"no rules", Rules{}, query(t, 0, dnsmessage.TypeA, "ok.test."), dnsmessage.RCodeSuccess},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No table: the set updates fail, quietly, as a full set's.
			l := &Link{n: &Network{cfg: Config{Table: "none", Subnet: netip.MustParsePrefix("10.233.0.0/16")}}, rules: c.rules,
				named: map[netip.Addr]time.Time{}, denied: map[netip.Addr]bool{}}
			r := &resolver{l: l, ctx: ctx, upstream: []netip.AddrPort{up}, limiter: nil, denyLooked: map[string]time.Time{}, denySlots: make(chan struct{}, denyLookups)}
			l.dns = r
			if got := rcode(t, r.answer(c.q, "udp")); got != c.want {
				t.Errorf("rcode %v, want %v", got, c.want)
			}
			r.wg.Wait()
		})
	}
}

// TestNameOpens: an answer never opens what no host outside could have.
func TestNameOpens(t *testing.T) {
	n := &Network{cfg: Config{Subnet: netip.MustParsePrefix("10.233.0.0/16")}}
	for a, ok := range map[string]bool{"93.184.216.34": true, "10.1.2.3": true, "169.254.169.254": false, "127.0.0.1": false,
		"10.233.0.5": false, "224.0.0.1": false, "255.255.255.255": false, "0.1.2.3": false, "240.0.0.1": false} {
		if got := n.nameOpens(netip.MustParseAddr(a)); got != ok {
			t.Errorf("%s: %v, want %v", a, got, ok)
		}
	}
}
