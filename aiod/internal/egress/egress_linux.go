package egress

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Network is one pool's egress network. Make one with [New]; it is safe
// for concurrent use.
type Network struct {
	cfg   Config
	slots int // /30 links the subnet holds

	mu     sync.Mutex
	closed bool
	used   map[int]bool
	links  map[int]*Link
	gen    uint32 // the last link's generation (mu)
}

// Link is one sandbox's way out: its veth pair and its rules.
type Link struct {
	n    *Network
	slot int
	// Host and Sandbox are the link's two addresses: the sandbox's
	// gateway (and resolver, port 53) and its own.
	Host, Sandbox netip.Addr

	rules Rules
	dns   *resolver // nil until started
	// gen marks the connections this link opens (ct mark): an answer
	// is let back in, and a connection goes on without the rules, only
	// when it is this link's, never one a sandbox that had this slot
	// before opened (a new sandbox inherits nothing).
	gen uint32

	// setMu guards named (what the named set holds, until when) and
	// denied (what the deny set holds), so an address already there
	// costs no nft call; updates applies the calls.
	setMu   sync.Mutex
	named   map[netip.Addr]time.Time
	denied  map[netip.Addr]bool
	updates updates

	// mu orders Attach and Close.
	mu      sync.Mutex
	closed  bool
	created bool // setupPair made the veth pair (teardown may delete it)
}

var namePart = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// New makes the network's nftables table (replacing one of that name) and
// turns IPv4 forwarding on.
func New(cfg Config) (*Network, error) {
	if !cfg.Subnet.IsValid() {
		cfg.Subnet = netip.MustParsePrefix("10.233.0.0/16")
	}
	cfg.Subnet = cfg.Subnet.Masked()
	if !cfg.Subnet.Addr().Is4() || cfg.Subnet.Bits() < 8 || cfg.Subnet.Bits() > 28 {
		return nil, fmt.Errorf("egress: subnet %s: an IPv4 prefix of /8 to /28", cfg.Subnet)
	}
	if cfg.Table == "" {
		cfg.Table = "a2c_egress"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "a2e"
	}
	if cfg.Upstream == nil {
		cfg.Upstream = SystemResolvers()
	}
	if !namePart.MatchString(cfg.Table) || !namePart.MatchString(cfg.Prefix) || len(cfg.Prefix) > 5 || strings.Contains(cfg.Prefix, "_") {
		return nil, fmt.Errorf("egress: table %q or prefix %q: lower-case letters and digits (the prefix at most 5)", cfg.Table, cfg.Prefix)
	}
	// Generations start anywhere: a connection a pool before this one
	// left in the kernel's table never carries a mark of this one's.
	n := &Network{cfg: cfg, slots: 1 << (32 - cfg.Subnet.Bits() - 2), used: map[int]bool{}, links: map[int]*Link{}, gen: rand.Uint32()}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("egress: turning IPv4 forwarding on: %w", err)
	}
	// Interface names are <prefix>-<n>h and <prefix>-<n>s: the "-" no
	// prefix holds keeps one network's wildcard off another's links.
	t, p := cfg.Table, cfg.Prefix+"-"
	script := fmt.Sprintf(`table inet %[1]s
delete table inet %[1]s
table inet %[1]s {
	map links {
		type ifname : verdict
	}
	map inlinks {
		type ifname : verdict
	}
	map outlinks {
		type ifname : verdict
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "%[2]s*" meta nfproto ipv6 drop
		iifname "%[2]s*" oifname "%[2]s*" drop
		oifname "%[2]s*" oifname vmap @outlinks
		oifname "%[2]s*" drop
		iifname "%[2]s*" iifname vmap @links
		iifname "%[2]s*" drop
	}
	chain output {
		type filter hook output priority filter; policy accept;
		oifname "%[2]s*" ct state established,related accept
		oifname "%[2]s*" drop
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "%[2]s*" iifname vmap @inlinks
		iifname "%[2]s*" drop
		ip daddr %[3]s drop
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[3]s oifname != "%[2]s*" masquerade
	}
}
`, t, p, cfg.Subnet)
	if err := nft(script); err != nil {
		return nil, err
	}
	return n, nil
}

// Close takes every link away (their resolvers, their veth pairs), then
// the network's table (forwarding stays on): a link left without its
// rules would be open.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	links := make([]*Link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, l := range links {
		_ = l.Close()
	}
	return nft(fmt.Sprintf("delete table inet %s\n", n.cfg.Table))
}

// Attach gives the network namespace of process pid (a sandbox's init) a
// link out with rules r: [Network.Reserve], then [Link.Attach].
func (n *Network) Attach(pid int, r Rules) (*Link, error) {
	l, err := n.Reserve(r)
	if err != nil {
		return nil, err
	}
	if err := l.Attach(pid); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Reserve takes a link's addresses and makes its rules and its resolver,
// for a network namespace [Link.Attach] gives it later: a sandbox's
// addresses, and so its resolv.conf, are known before its init starts,
// and stay the same when an init that died is started again.
func (n *Network) Reserve(r Rules) (*Link, error) {
	for _, p := range append(append([]netip.Prefix{}, r.Allow...), r.Deny...) {
		if !p.IsValid() || !p.Addr().Is4() {
			return nil, fmt.Errorf("egress: rule %s: only IPv4 prefixes", p)
		}
	}
	for _, p := range append(append([]string{}, r.AllowNames...), r.DenyNames...) {
		if err := checkPattern(p); err != nil {
			return nil, err
		}
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	slot := -1
	for i := range n.slots {
		if !n.used[i] {
			slot = i
			break
		}
	}
	if slot < 0 {
		n.mu.Unlock()
		return nil, ErrFull
	}
	n.used[slot] = true
	n.gen++
	if n.gen == 0 { // 0 is every unmarked connection's
		n.gen++
	}
	gen := n.gen
	n.mu.Unlock()
	base := n.cfg.Subnet.Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3]) + uint32(4*slot)
	addr := func(k uint32) netip.Addr {
		x := v + k
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	l := &Link{n: n, slot: slot, Host: addr(1), Sandbox: addr(2), rules: r, gen: gen, named: map[netip.Addr]time.Time{}, denied: map[netip.Addr]bool{}}
	err := l.setupRules(r)
	if err == nil {
		err = l.startResolver(n.cfg.Upstream)
	}
	if err != nil {
		l.teardown()
		return nil, err
	}
	// A denied name's addresses are in the deny set before the link
	// has a sandbox (each lookup bounded by the upstreams' timeouts).
	var lookups sync.WaitGroup
	for _, name := range r.DenyNames {
		if !strings.HasPrefix(name, "*.") {
			lookups.Go(func() { l.denyAddrs(name) })
		}
	}
	lookups.Wait()
	n.mu.Lock()
	n.links[slot] = l
	n.mu.Unlock()
	return l, nil
}

// Attach gives the network namespace of process pid the link: a veth
// pair, the sandbox's end moved into the namespace, addressed, up, and
// its default route; the namespace's loopback is brought up too. A link
// attached before (to an init that died) loses that pair first. On an
// error the link has no pair, and its rules and resolver stay.
func (l *Link) Attach(pid int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.created {
		_ = run(nil, "ip", "link", "del", l.hostIf())
		l.created = false
	}
	err := l.setupPair(pid)
	if err != nil && l.created {
		_ = run(nil, "ip", "link", "del", l.hostIf())
		l.created = false
	}
	return err
}

func (l *Link) hostIf() string    { return l.n.cfg.Prefix + "-" + strconv.Itoa(l.slot) + "h" }
func (l *Link) sandboxIf() string { return l.n.cfg.Prefix + "-" + strconv.Itoa(l.slot) + "s" }
func (l *Link) chain() string     { return "link" + strconv.Itoa(l.slot) }

// setupPair makes the veth pair into pid's namespace (l.mu held): one
// ip batch on the host, one in the namespace (each process costs a few
// milliseconds of a create).
func (l *Link) setupPair(pid int) error {
	h, s := l.hostIf(), l.sandboxIf()
	if err := run(fmt.Appendf(nil, "link add %s type veth peer name %s netns %d\n", h, s, pid), "ip", "-batch", "-"); err != nil {
		return err
	}
	l.created = true
	if err := run(fmt.Appendf(nil, "addr add %s/30 dev %s\nlink set %s up\n", l.Host, h, h), "ip", "-batch", "-"); err != nil {
		return err
	}
	inside := fmt.Sprintf("link set lo up\naddr add %s/30 dev %s\nlink set %s up\nroute add default via %s\n", l.Sandbox, s, s, l.Host)
	return run([]byte(inside), "nsenter", "-t", strconv.Itoa(pid), "-n", "ip", "-batch", "-")
}

// setupRules makes the link's chains and sets, keyed by the name its
// host end will have: they are in place before the pair exists.
func (l *Link) setupRules(r Rules) error {
	h := l.hostIf()
	deny := append([]netip.Prefix{}, r.Deny...)
	if !r.allowList() {
		deny = append(deny, netip.MustParsePrefix("169.254.0.0/16"))
	}
	var b strings.Builder
	t, c := l.n.cfg.Table, l.chain()
	fmt.Fprintf(&b, "add chain inet %s %s\n", t, c)
	// Only the link's own address leaves it: a sandbox that takes
	// another's address (or any other) sends nothing.
	fmt.Fprintf(&b, "add rule inet %s %s ip saddr != %s drop\n", t, c, l.Sandbox)
	// Its own connections go on (a named address whose time ran out
	// does not cut a download); another's (a sandbox that had this slot
	// before) meet the rules as new ones do.
	fmt.Fprintf(&b, "add rule inet %s %s ct state established,related ct mark %d accept\n", t, c, l.gen)
	fmt.Fprintf(&b, "add set inet %s %s_deny { type ipv4_addr; flags interval; auto-merge; }\n", t, c)
	if len(deny) > 0 {
		fmt.Fprintf(&b, "add element inet %s %s_deny { %s }\n", t, c, prefixes(deny))
	}
	fmt.Fprintf(&b, "add rule inet %s %s ip daddr @%s_deny drop\n", t, c, c)
	// Addresses a name rule let in, each for its answer's TTL.
	fmt.Fprintf(&b, "add set inet %s %s_named { type ipv4_addr; flags timeout; size %d; }\n", t, c, maxNamed)
	fmt.Fprintf(&b, "add rule inet %s %s ip daddr @%s_named ct mark set %d accept\n", t, c, c, l.gen)
	if r.allowList() {
		if len(r.Allow) > 0 {
			fmt.Fprintf(&b, "add set inet %s %s_allow { type ipv4_addr; flags interval; auto-merge; }\n", t, c)
			fmt.Fprintf(&b, "add element inet %s %s_allow { %s }\n", t, c, prefixes(r.Allow))
			fmt.Fprintf(&b, "add rule inet %s %s ip daddr @%s_allow ct mark set %d accept\n", t, c, c, l.gen)
		}
		fmt.Fprintf(&b, "add rule inet %s %s drop\n", t, c)
	} else {
		fmt.Fprintf(&b, "add rule inet %s %s ct mark set %d accept\n", t, c, l.gen)
	}
	fmt.Fprintf(&b, "add element inet %s links { \"%s\" : jump %s }\n", t, h, c)
	// Into the link: answers to its own connections only.
	fmt.Fprintf(&b, "add chain inet %s %s_out\n", t, c)
	fmt.Fprintf(&b, "add rule inet %s %s_out ct state established,related ct mark %d accept\n", t, c, l.gen)
	fmt.Fprintf(&b, "add rule inet %s %s_out drop\n", t, c)
	fmt.Fprintf(&b, "add element inet %s outlinks { \"%s\" : jump %s_out }\n", t, h, c)
	// The host: its resolver on the link's own address, nothing else.
	fmt.Fprintf(&b, "add chain inet %s %s_in\n", t, c)
	fmt.Fprintf(&b, "add rule inet %s %s_in ip saddr != %s drop\n", t, c, l.Sandbox)
	fmt.Fprintf(&b, "add rule inet %s %s_in ip daddr %s udp dport 53 accept\n", t, c, l.Host)
	fmt.Fprintf(&b, "add rule inet %s %s_in ip daddr %s tcp dport 53 accept\n", t, c, l.Host)
	fmt.Fprintf(&b, "add rule inet %s %s_in drop\n", t, c)
	fmt.Fprintf(&b, "add element inet %s inlinks { \"%s\" : jump %s_in }\n", t, h, c)
	return nft(b.String())
}

// Close takes the link away: its veth pair (both ends), its rules, its
// addresses (free for another sandbox). Closing twice is a no-op.
func (l *Link) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.teardown()
}

// teardown undoes setup, whatever part of it was done, and frees the
// link's addresses.
func (l *Link) teardown() error {
	if l.dns != nil {
		l.dns.close()
	}
	t, c := l.n.cfg.Table, l.chain()
	// Each step on its own: one that was never done fails alone.
	_ = nft(fmt.Sprintf("delete element inet %s links { \"%s\" }\n", t, l.hostIf()))
	_ = nft(fmt.Sprintf("delete element inet %s inlinks { \"%s\" }\n", t, l.hostIf()))
	_ = nft(fmt.Sprintf("delete element inet %s outlinks { \"%s\" }\n", t, l.hostIf()))
	_ = nft(fmt.Sprintf("delete chain inet %s %s\n", t, c))
	_ = nft(fmt.Sprintf("delete chain inet %s %s_in\n", t, c))
	_ = nft(fmt.Sprintf("delete chain inet %s %s_out\n", t, c))
	for _, set := range []string{"deny", "allow", "named"} {
		_ = nft(fmt.Sprintf("delete set inet %s %s_%s\n", t, c, set))
	}
	// Only a pair this link made (an interface of that name made by
	// anyone else is not this link's); the namespace may have gone first,
	// taking the pair with it: a device that is not there is what this
	// step wants.
	if l.created {
		_ = run(nil, "ip", "link", "del", l.hostIf())
	}
	l.n.mu.Lock()
	delete(l.n.used, l.slot)
	delete(l.n.links, l.slot)
	l.n.mu.Unlock()
	return nil
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Masked().String()
	}
	return strings.Join(s, ", ")
}

// nft runs an nftables script (nft -f -).
func nft(script string) error {
	return run([]byte(script), "nft", "-f", "-")
}

// maxNamed bounds the addresses a link's names have let in at once.
const maxNamed = 4096

// runTimeout bounds one ip or nft command.
const runTimeout = 10 * time.Second

// run runs a command with stdin, its output in the error.
func run(stdin []byte, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("egress: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
