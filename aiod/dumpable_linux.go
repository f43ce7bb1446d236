package aiod

import "syscall"

// hideSelf makes the daemon non-dumpable: its /proc entries (environ,
// where the API key sits, and mem) then belong to root, so a command
// running as the daemon's own non-root account cannot read the key back.
// A command running as root can read anything; run commands as another
// account (AIO_DEFAULT_USER, `user`) where that matters.
func hideSelf() error {
	const prSetDumpable = 4
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
