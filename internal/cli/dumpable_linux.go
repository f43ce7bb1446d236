package cli

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// hideSelf makes the process non-dumpable, as aiod does: its /proc
// entries (environ, where $A2C_TOKEN may sit, and mem) then belong to
// root, so a command that "a2c up"'s sandbox runs as the same account
// cannot read the token back.
func hideSelf() error {
	const prSetDumpable = 4
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// isTerminal reports whether f is a terminal (a character device that
// answers the terminal's ioctl: /dev/null does not).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
