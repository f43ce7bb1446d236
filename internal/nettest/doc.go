// Package nettest is the network kit of tests that need a network of
// their own (the egress network's, the pool's): network namespaces held
// by a process of the test, an "outside" host in one of them linked to
// the host by a veth pair, and a DNS server standing for the machine's.
// Nothing here touches the machine's real network: every address is in
// 10.250.0.0/16 or on the loopback, every interface is the test's own
// and removed at its end. It needs root and iproute2 (ip, nsenter).
package nettest
