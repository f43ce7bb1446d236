//go:build unix

package cluster

import "syscall"

// directWrites: Send writes on the caller's goroutine (see writeNow).
const directWrites = true

// writeNow writes what the socket takes at once, without waiting for it
// to take more: the fd is non-blocking (the Go runtime's), and the
// function given to RawConn.Write returns true whatever happens, so
// RawConn.Write never parks for writability. It returns how many bytes
// were written.
func writeNow(rc syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			k, e := syscall.Write(int(fd), b[n:])
			if k > 0 {
				n += k
			}
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true
			case e != nil:
				werr = e
				return true
			case k <= 0:
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return n, err
}
