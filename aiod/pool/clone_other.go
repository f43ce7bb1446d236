//go:build !linux

package pool

import (
	"errors"
	"os"
)

// cloneFile is unsupported off Linux: the bytes are copied.
func cloneFile(_, _ *os.File) error { return errors.ErrUnsupported }
