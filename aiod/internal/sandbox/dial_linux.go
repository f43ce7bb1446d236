package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// DialContext connects to addr ("127.0.0.1:8080", "[::1]:8080",
// "localhost:8080") as a process of the sandbox would: under
// NetworkNone and NetworkEgress, in the sandbox's own network namespace, so its loopback
// is the sandbox's and not the host's (a pool's port proxy reaches the
// server a sandbox started, and two sandboxes may both listen on one
// port); under NetworkHost it is a plain dial. network is "tcp", "tcp4"
// or "tcp6". The host must be an IP address or "localhost": a name is
// not looked up, since the sandbox's namespace has no resolver to ask.
//
// A socket belongs to the network namespace of the thread that created
// it, whatever thread uses it later. So the socket is created on a Do
// thread (which has joined the namespace; see enter), and connected and
// used from the caller's goroutine through the runtime's poller. Only
// the socket call runs on that thread: Go's dialer may start goroutines
// (a second address family, a resolver), which would run on threads of
// the host's namespace, so it is not used there.
func (s *Sandbox) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if s == nil || !s.cfg.ownNet() {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	ap, err := dialAddr(network, addr)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	family := unix.AF_INET
	if ap.Addr().Is6() {
		family = unix.AF_INET6
	}
	fd := -1
	err = s.DoContext(ctx, func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		return err
	})
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("sandbox: socket: %w", err)}
	}
	conn, err := connect(ctx, fd, ap)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	return conn, nil
}

// dialAddr reads addr for DialContext: an IP address or "localhost"
// (127.0.0.1, or ::1 for tcp6), and a port.
func dialAddr(network, addr string) (netip.AddrPort, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return netip.AddrPort{}, fmt.Errorf("sandbox: network %q: only tcp, tcp4 and tcp6", network)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("sandbox: port %q is not a number from 1 to 65535", port)
	}
	var ip netip.Addr
	switch {
	case host == "localhost" && network == "tcp6":
		ip = netip.IPv6Loopback()
	case host == "localhost":
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		if ip, err = netip.ParseAddr(host); err != nil || ip.Zone() != "" {
			return netip.AddrPort{}, fmt.Errorf("sandbox: host %q: an IP address or localhost (names are not looked up in the sandbox)", host)
		}
		ip = ip.Unmap()
	}
	if network == "tcp4" && !ip.Is4() || network == "tcp6" && !ip.Is6() {
		return netip.AddrPort{}, fmt.Errorf("sandbox: %s is not a %s address", ip, network)
	}
	return netip.AddrPortFrom(ip, uint16(p)), nil
}

// connect connects the non-blocking socket fd (owned: closed on error)
// to ap, waiting in the runtime's poller until ctx ends, and returns it
// as a net.Conn.
func connect(ctx context.Context, fd int, ap netip.AddrPort) (net.Conn, error) {
	var sa unix.Sockaddr
	if ap.Addr().Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	err := unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "sandbox-dial") // non-blocking: in the poller
	defer f.Close()                              // net.FileConn holds a copy
	if errors.Is(err, unix.EINPROGRESS) {
		// Writable means the handshake ended; SO_ERROR says how. ctx's
		// end moves the write deadline to now, which wakes the wait.
		if d, ok := ctx.Deadline(); ok {
			_ = f.SetWriteDeadline(d)
		}
		stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
		rc, err := f.SyscallConn()
		if err != nil {
			return nil, err
		}
		var soErr error
		werr := rc.Write(func(fd uintptr) bool {
			n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			switch {
			case err != nil:
				soErr = err
			case n == int(unix.EINPROGRESS) || n == int(unix.EALREADY):
				return false
			case n != 0:
				soErr = unix.Errno(n)
			default:
				// Writable with no error: connected, unless the poller
				// woke early (getpeername then fails with ENOTCONN).
				if _, err := unix.Getpeername(int(fd)); errors.Is(err, unix.ENOTCONN) {
					return false
				}
			}
			return true
		})
		if werr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, werr
		}
		if soErr != nil {
			return nil, soErr
		}
	}
	return net.FileConn(f)
}
