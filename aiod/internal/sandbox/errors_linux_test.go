package sandbox

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCannotIsolate: only the machine's limits match ErrCannotIsolate
// (what a2c up may fall back on), and they keep their own message and
// cause.
func TestCannotIsolate(t *testing.T) {
	clone := fmt.Errorf("sandbox: starting init: %w", machineError{unix.EPERM})
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errNeedRoot, true},
		{clone, true},
		{fmt.Errorf("isolation: %w", clone), true},
		{errors.New("sandbox: the workspace /root is a home directory"), false},
		{fmt.Errorf("sandbox: starting init: %w", unix.ENOENT), false},
	} {
		if got := errors.Is(c.err, ErrCannotIsolate); got != c.want {
			t.Errorf("%v: cannot isolate %v, want %v", c.err, got, c.want)
		}
	}
	if !errors.Is(clone, unix.EPERM) || clone.Error() != "sandbox: starting init: operation not permitted" {
		t.Errorf("the cause: %v", clone)
	}
}
