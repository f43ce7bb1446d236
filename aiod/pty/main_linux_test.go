package pty

import (
	"os"
	"syscall"
	"testing"
)

// TestMain makes the test process a child subreaper (PR_SET_CHILD_SUBREAPER,
// 36), as the daemon is: processes a terminal leaves behind are then
// re-parented to this process, where the leak checks (procsWith) look
// for them, rather than to init.
func TestMain(m *testing.M) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36, 1, 0); errno != 0 {
		os.Stderr.WriteString("pty tests: cannot become a child subreaper: " + errno.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}
