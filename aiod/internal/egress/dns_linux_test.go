package egress

import (
	"context"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
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

// TestARecords: only the question's name's records count, through its
// CNAME chain; TTLs are bounded.
func TestARecords(t *testing.T) {
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
	got := aRecords(ans, "www.ok.test")
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
