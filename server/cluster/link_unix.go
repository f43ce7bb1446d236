//go:build unix

package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdLink is a subscription connection read on a Poller's loop: a
// duplicate of the connection's descriptor, taken off the Go runtime's
// poller (see subscriber.poll). The loop reads it (read, from ready);
// writers (SUBSCRIBE, PING) write it directly.
//
// The descriptor's life is the one risk: a descriptor closed while
// another goroutine still uses its number could read or write a socket
// opened since under the same number. So it is closed once, by release,
// which the link's goroutine calls after the watch has ended (no read
// can follow), and which waits for any write or Close in progress (they
// hold mu for reading, and find the link released after it). Close only
// shuts the socket down: the loop then reads the end of the stream, and
// the link's goroutine releases it.
type fdLink struct {
	fd int
	// last is when bytes last arrived (Unix nanoseconds), for the
	// link's health (readPolled).
	last atomic.Int64
	// err is why the loop stopped reading: written by ready before it
	// returns false, read once the watch has ended.
	err error

	releasing atomic.Bool // release has begun (the descriptor is still open)
	mu        sync.RWMutex
	released  bool
	// deadline bounds a write waiting for the socket to take bytes; set
	// and used under subConn.wmu, which orders the writers.
	deadline time.Time
}

// errWouldBlock is a read that found no bytes (EAGAIN).
var errWouldBlock = errors.New("cluster: no bytes to read")

// takeLink duplicates nc's descriptor (close-on-exec, non-blocking) for a
// loop to read. nc stays open: the caller closes it once the loop has
// the duplicate.
func takeLink(nc net.Conn) (*fdLink, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, errors.New("cluster: connection without a descriptor")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("cluster: dup: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("cluster: non-blocking: %w", err)
	}
	return &fdLink{fd: fd}, nil
}

// read reads once without waiting; errWouldBlock when there is nothing.
// Only the loop calls it, while the watch lives.
func (l *fdLink) read(b []byte) (int, error) {
	for {
		n, err := unix.Read(l.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, errWouldBlock
		case err != nil:
			return 0, err
		}
		return n, nil
	}
}

// Write writes all of b, waiting for the socket to take it until the
// deadline.
func (l *fdLink) Write(b []byte) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.released {
		return 0, net.ErrClosed
	}
	n := 0
	for {
		k, err := l.writeLocked(b[n:])
		if n += k; err != nil || n == len(b) {
			return n, err
		}
		// The socket's buffer is full (Redis is not reading): wait until
		// it takes more, or the deadline.
		wait := time.Until(l.deadline)
		if l.deadline.IsZero() {
			wait = time.Minute
		}
		if wait <= 0 {
			return n, os.ErrDeadlineExceeded
		}
		pfd := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLOUT}}
		if _, err := unix.Poll(pfd, int(wait.Milliseconds())+1); err != nil && err != unix.EINTR {
			return n, err
		}
	}
}

// writeSome writes what the socket takes at once, without waiting for it
// to take more, and returns how many bytes that was (the publisher's
// direct writes).
func (l *fdLink) writeSome(b []byte) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.released {
		return 0, net.ErrClosed
	}
	return l.writeLocked(b)
}

// writeLocked writes b until the socket takes no more (EAGAIN, which is
// not an error here) and returns how many bytes it took. The caller holds
// mu (for reading) and found the link not released.
func (l *fdLink) writeLocked(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Write(l.fd, b[n:])
		if k > 0 {
			n += k
		}
		switch {
		case err == nil, err == unix.EINTR:
		case err == unix.EAGAIN:
			return n, nil
		default:
			return n, err
		}
	}
	return n, nil
}

// SetReadDeadline does nothing: the loop reads without waiting, and the
// link's goroutine keeps its health (the subscriber's readPolled, the
// publisher's watch).
func (l *fdLink) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline sets the deadline of the writes that follow.
func (l *fdLink) SetWriteDeadline(t time.Time) error {
	l.deadline = t
	return nil
}

// Close shuts the socket down: reads see the end of the stream (the loop
// finds the link broken) and writes fail. The descriptor stays open
// until release.
func (l *fdLink) Close() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.released {
		_ = unix.Shutdown(l.fd, unix.SHUT_RDWR)
	}
	return nil
}

// discard closes a duplicate that no watch took: without a shutdown, which
// would end the connection it shares with the original.
func (l *fdLink) discard() {
	l.releasing.Store(true)
	l.released = true
	unix.Close(l.fd)
}

// release closes the descriptor, once the link's watch has ended. Only
// the link's owner calls it. The socket is shut down first, which ends a
// write waiting for room at once, rather than at its deadline, before
// release waits for it.
func (l *fdLink) release() {
	if l.releasing.Swap(true) {
		return
	}
	_ = unix.Shutdown(l.fd, unix.SHUT_RDWR)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = true
	unix.Close(l.fd)
}
