package egress

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseRules(t *testing.T) {
	pfx := netip.MustParsePrefix
	for _, c := range []struct {
		name        string
		allow, deny []string
		want        Rules
		err         string
	}{
		{"empty", nil, nil, Rules{}, ""},
		{"cidr and address", []string{"10.0.0.0/8", "93.184.216.34"}, []string{"10.1.2.3/16"},
			Rules{Allow: []netip.Prefix{pfx("10.0.0.0/8"), pfx("93.184.216.34/32")}, Deny: []netip.Prefix{pfx("10.1.0.0/16")}}, ""},
		{"names", []string{"PyPI.org.", "*.pythonhosted.org"}, []string{"evil.example"},
			Rules{AllowNames: []string{"pypi.org", "*.pythonhosted.org"}, DenyNames: []string{"evil.example"}}, ""},
		{"ipv6 cidr", []string{"2001:db8::/32"}, nil, Rules{}, "allow: \"2001:db8::/32\": only IPv4"},
		{"ipv6 address", nil, []string{"::1"}, Rules{}, "deny: \"::1\": only IPv4"},
		{"bad cidr", []string{"10.0.0.0/33"}, nil, Rules{}, "is not an IPv4 address or CIDR, a host name"},
		{"bad address", []string{"300.1.1.1"}, nil, Rules{}, "is not an IPv4 address or CIDR, a host name"},
		{"url", []string{"http://x.test"}, nil, Rules{}, "a host name"},
		{"wildcard inside", []string{"a.*.test"}, nil, Rules{}, "a host name"},
		{"bare star", []string{"*"}, nil, Rules{}, "a host name"},
		{"empty entry", []string{""}, nil, Rules{}, "a host name"},
		{"label too long", []string{strings.Repeat("a", 64) + ".test"}, nil, Rules{}, "a host name"},
		{"control byte", []string{"a\x00.test"}, nil, Rules{}, "a host name"},
		{"too many", make([]string, 257), nil, Rules{}, "allow: 257 entries; at most 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRules(c.allow, c.deny)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

// FuzzParseRules: no entry panics the parser, and whatever it accepts
// is an IPv4 prefix or a name the pattern check accepts.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "1.2.3.4", "*.example.com", "::1", "a..b", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, e string) {
		r, err := ParseRules([]string{e}, nil)
		if err != nil {
			return
		}
		for _, p := range r.Allow {
			if !p.Addr().Is4() {
				t.Fatalf("%q gave %s", e, p)
			}
		}
		for _, n := range r.AllowNames {
			if checkPattern(n) != nil {
				t.Fatalf("%q gave a name the check refuses: %q", e, n)
			}
		}
	})
}
