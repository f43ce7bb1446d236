//go:build !linux

package aiod

import (
	"context"
	"errors"
	"net"
)

// dialInside is Linux-only, as the sandbox is: no program runs in a
// network of the sandbox's own elsewhere.
func (d *Daemon) dialInside(_ context.Context, network, addr string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New(addr + " in the sandbox: not supported on this system")}
}
