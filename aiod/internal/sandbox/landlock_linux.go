package sandbox

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's scope flags (linux/landlock.h, ABI 6).
const landlockScopeAbstractUnixSocket = 1

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// errNoScope says the kernel cannot scope abstract Unix sockets.
var errNoScope = errors.New("the kernel's Landlock cannot scope abstract Unix sockets (ABI 6, Linux 6.12)")

// scopeAbstractSockets puts the calling, locked thread, and so every
// process it starts from now on, in a Landlock domain that may not
// connect to an abstract Unix socket created outside it. Abstract
// sockets belong to a network namespace, not to the filesystem, so with
// the host's network the mount view alone would leave the host's (a
// desktop bus, an X server) reachable. Landlock and no_new_privs are
// per-thread: the daemon's other threads are unaffected.
func scopeAbstractSockets() error {
	if landlockABI() < 6 {
		return errNoScope
	}
	attr := struct{ fs, net, scoped uint64 }{scoped: landlockScopeAbstractUnixSocket}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return fmt.Errorf("landlock ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %w", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock: %w", e)
	}
	return nil
}
