//go:build !unix

package cluster

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// fdLink: without Unix descriptors, subscription connections are never
// read on a loop (takeLink refuses), and each has its reader goroutine.
type fdLink struct {
	fd   int
	last atomic.Int64
	err  error
}

var errWouldBlock = errors.New("cluster: no bytes to read")

func takeLink(net.Conn) (*fdLink, error) {
	return nil, errors.New("cluster: no descriptors to poll here")
}

func (*fdLink) read([]byte) (int, error)         { return 0, errWouldBlock }
func (*fdLink) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (*fdLink) SetWriteDeadline(time.Time) error { return nil }
func (*fdLink) SetReadDeadline(time.Time) error  { return nil }
func (*fdLink) writeSome([]byte) (int, error)    { return 0, net.ErrClosed }
func (*fdLink) Close() error                     { return nil }
func (*fdLink) release()                         {}
func (*fdLink) discard()                         {}
