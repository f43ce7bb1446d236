//go:build !unix

package cluster

import (
	"errors"
	"syscall"
)

// directWrites: without Unix non-blocking writes, the publisher's
// goroutine writes every frame.
const directWrites = false

func writeNow(syscall.RawConn, []byte) (int, error) {
	return 0, errors.ErrUnsupported
}
