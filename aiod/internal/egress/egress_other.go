//go:build !linux

package egress

import (
	"errors"
	"net/netip"
)

// errUnsupported is New's answer off Linux: the way out is veth pairs and
// nftables.
var errUnsupported = errors.New("egress: needs Linux (veth pairs and nftables)")

// Network is one pool's egress network; off Linux there is none.
type Network struct{}

// Link is one sandbox's way out.
type Link struct {
	Host, Sandbox netip.Addr
}

// New fails off Linux.
func New(Config) (*Network, error) { return nil, errUnsupported }

// Close does nothing.
func (n *Network) Close() error { return nil }

// Reserve fails off Linux.
func (n *Network) Reserve(Rules) (*Link, error) { return nil, errUnsupported }

// Attach fails off Linux.
func (n *Network) Attach(int, Rules) (*Link, error) { return nil, errUnsupported }

// Attach fails off Linux.
func (l *Link) Attach(int) error { return errUnsupported }

// Close does nothing.
func (l *Link) Close() error { return nil }
