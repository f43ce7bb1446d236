// Package egress is a pool's filtered way out for its sandboxes (network
// "egress", aiod pool --egress): each sandbox's
// network namespace gets a veth pair to the host, an address of its own,
// and a route out through the host, which masquerades it (nftables), and
// rules of its own decide where it may go.
//
// # Addresses
//
// A [Network] owns a subnet ([Config.Subnet], default 10.233.0.0/16), cut
// into /30 links: link n has the host's end at base+4n+1 and the
// sandbox's at base+4n+2, its default route. The host's ends are named
// <prefix>-<n>h and the sandbox's <prefix>-<n>s ([Config.Prefix], default
// "a2e", no "-" in it), so one nftables rule names them all and no other
// network's.
//
// # Rules
//
// One nftables table of the network's own ([Config.Table], family inet)
// holds everything, so a pool's rules are made and taken away whole:
//
//   - forward: IPv6 from a link is dropped, and traffic between two
//     sandboxes' links, whatever the rules say. Traffic from a link goes
//     to that link's own chain (a verdict map keyed by interface), and
//     from there: a source that is not the link's own address is dropped
//     (a sandbox that takes another's address sends nothing); the link's
//     own connections go on; its deny set drops, then its named set (the
//     addresses its name rules let in) passes, then (when it has an allow
//     set) only its allow set passes; anything else from a link is
//     dropped. Into a link go the answers to its own connections only
//     (nothing from outside opens one). A link's connections are its own
//     by their conntrack mark, a generation no other link of the network
//     has had: a sandbox that gets the slot of one that ended inherits
//     none of its connections, whichever way.
//   - output: the host itself sends into a link only answers (its
//     resolver's).
//   - input: nothing from a link reaches the host itself (its addresses,
//     its loopback, the pool's API) but its own resolver, from its own
//     address; nothing from elsewhere reaches the subnet's addresses on
//     the host (a link's resolver included): a sandbox only passes
//     through.
//   - postrouting: the subnet is masqueraded on its way out.
//
// [Network.Close] takes every link away before the table: a link left
// without its rules would be open.
//
// Addresses that are never reachable, whatever the rules say: the
// network's own subnet (other sandboxes) and the host (input: a link
// reaches only its own resolver, port 53 of its host address), and
// 169.254.0.0/16 (link-local, where cloud metadata services live) unless
// the rules are an allow list.
//
// # Names
//
// Each link has a resolver of its own (dns_linux.go), a DNS forwarder on
// its host address that asks [Config.Upstream] the question alone (one
// question of a standard query; ANY and zone transfers are refused): a
// name a deny pattern matches, or whose CNAME chain leads to one, is
// NXDOMAIN and its addresses are denied; with an allow list, a name no
// allow pattern matches is REFUSED, never asked (a question is a way out
// too); the addresses of an answer for a name an allow pattern matches
// are let in for their TTL (at least 30 s, at most a day): only the
// records of the name asked and of its CNAME chain, at most 32 an answer
// and 4096 a link, never a loopback, link-local, multicast or reserved
// address nor one of the subnet. A resolver answers its own sandbox's
// address only: at most 32 queries at once and 100 a second (200 in a
// burst); set updates go one nft call at a time per link, joined, and
// an address already there costs none. An exact denied name is looked up
// before its link is used, a denied name asked again once a minute.
// A sandbox's resolv.conf names its gateway.
//
// # The host
//
// New turns IPv4 forwarding on (net.ipv4.ip_forward), which stays on; it
// needs root, iproute2 (ip, nsenter) and nftables (nft). IPv6 is not
// routed: a sandbox's link has no IPv6 address.
package egress
