package egress

import (
	"context"
	"testing"

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
