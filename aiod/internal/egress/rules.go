package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Config configures a [Network].
type Config struct {
	// Subnet is cut into the links' /30s; an IPv4 prefix of /8 to /28.
	// Default 10.233.0.0/16.
	Subnet netip.Prefix
	// Table is the nftables table (family inet) of the network's rules;
	// one already there is replaced. Default "a2c_egress".
	Table string
	// Prefix starts the links' interface names (at most 6 bytes of
	// letters and digits, so a name with its number fits 15). Default
	// "a2e".
	Prefix string
	// Upstream are the DNS servers the links' resolvers ask. Default
	// SystemResolvers().
	Upstream []netip.AddrPort
}

// Rules say where a sandbox may go. Deny wins over Allow; with no Allow
// and no AllowNames, everything not denied is allowed (see the package
// documentation for what is never reachable). Names are held through the
// link's resolver (dns_linux.go).
type Rules struct {
	Allow []netip.Prefix
	Deny  []netip.Prefix
	// AllowNames and DenyNames are host names ("example.com") or
	// patterns of the names below one ("*.example.com").
	AllowNames []string
	DenyNames  []string
}

// allowList reports whether only what the rules allow passes.
func (r Rules) allowList() bool { return len(r.Allow) > 0 || len(r.AllowNames) > 0 }

// ErrFull is returned by Reserve when every link of the subnet is taken.
var ErrFull = errors.New("egress: no free address left in the subnet")

// ErrClosed is returned by Reserve on a closed network, and by Attach on
// a closed link.
var ErrClosed = errors.New("egress: closed")

// maxRules bounds each list of a sandbox's rules.
const maxRules = 256

// ParseRules reads a sandbox's allow and deny lists as a create gives
// them: each entry an IPv4 address ("93.184.216.34"), an IPv4 prefix
// ("10.0.0.0/8"), a host name ("pypi.org") or a pattern of the names
// below one ("*.pythonhosted.org"). IPv6 entries are refused (IPv6 is
// not routed). An error names the list and the entry.
func ParseRules(allow, deny []string) (Rules, error) {
	var r Rules
	for _, l := range []struct {
		name    string
		entries []string
		cidrs   *[]netip.Prefix
		names   *[]string
	}{{"allow", allow, &r.Allow, &r.AllowNames}, {"deny", deny, &r.Deny, &r.DenyNames}} {
		if len(l.entries) > maxRules {
			return Rules{}, fmt.Errorf("%s: %d entries; at most %d", l.name, len(l.entries), maxRules)
		}
		for _, e := range l.entries {
			p, err := parseEntry(e)
			switch {
			case err != nil:
				return Rules{}, fmt.Errorf("%s: %w", l.name, err)
			case p.IsValid():
				*l.cidrs = append(*l.cidrs, p)
			default:
				*l.names = append(*l.names, strings.ToLower(strings.TrimSuffix(e, ".")))
			}
		}
	}
	return r, nil
}

// parseEntry reads one entry: a prefix for an address or a CIDR, the
// zero prefix for a name pattern.
func parseEntry(e string) (netip.Prefix, error) {
	show := e
	if len(show) > 64 {
		show = show[:64] + "..."
	}
	if p, err := netip.ParsePrefix(e); err == nil {
		if !p.Addr().Is4() {
			return netip.Prefix{}, fmt.Errorf("%q: only IPv4 (IPv6 is not routed)", show)
		}
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(e); err == nil {
		if !a.Is4() {
			return netip.Prefix{}, fmt.Errorf("%q: only IPv4 (IPv6 is not routed)", show)
		}
		return netip.PrefixFrom(a, 32), nil
	}
	// A mistyped address (digits and dots) is no host name either.
	if strings.Trim(e, "0123456789.") == "" || checkPattern(e) != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 address or CIDR, a host name, or *. and a host name", show)
	}
	return netip.Prefix{}, nil
}

// matchName reports whether name matches one of the patterns.
func matchName(patterns []string, name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(p, "."))
		if rest, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(name, "."+rest) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}

// checkPattern reports whether p is a name pattern: a host name of
// letters, digits, '-' and '_' in labels of 1 to 63, at most 253 in all,
// optionally after "*.".
func checkPattern(p string) error {
	n := strings.TrimSuffix(strings.TrimPrefix(p, "*."), ".")
	ok := n != "" && len(n) <= 253
	for label := range strings.SplitSeq(n, ".") {
		if !ok {
			break
		}
		ok = label != "" && len(label) <= 63
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				ok = false
			}
		}
	}
	if !ok {
		return fmt.Errorf("egress: name rule %q: a host name, or *. and a host name", p)
	}
	return nil
}
