package aiod

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dialInside connects to addr (a loopback address) in the sandbox's
// network namespace. A socket belongs to the network namespace of the
// thread that creates it, for its whole life: so only the socket(2) call
// runs on a sandbox thread (Sandbox.Do, which must not block on the
// network), and the non-blocking connect and its wait happen here,
// through Go's poller, with ctx's deadline.
func (d *Daemon) dialInside(ctx context.Context, network, addr string) (net.Conn, error) {
	fail := func(err error) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: nil, Err: fmt.Errorf("%s in the sandbox: %w", addr, err)}
	}
	ap, err := resolveLoopback(addr)
	if err != nil {
		return fail(err)
	}
	family := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd := -1
	if err := d.sandbox.Do(func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		return fail(err)
	}
	f := os.NewFile(uintptr(fd), "tcp:"+addr) // non-blocking: registered with the poller
	defer f.Close()                           // FileConn holds a duplicate
	if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return fail(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = f.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Now()) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return fail(err)
	}
	var connErr error
	if err := rc.Write(func(fd uintptr) bool {
		// Writable means the connect has finished, one way or the other.
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR); err != nil || v != 0 {
			connErr = cmp.Or[error](err, syscall.Errno(v))
			return true
		}
		_, err := unix.Getpeername(int(fd))
		return err == nil // ENOTCONN: still in progress, wait
	}); err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(err)
	}
	if connErr != nil {
		return fail(connErr)
	}
	_ = f.SetWriteDeadline(time.Time{})
	c, err := net.FileConn(f)
	if err != nil {
		return fail(err)
	}
	return c, nil
}
