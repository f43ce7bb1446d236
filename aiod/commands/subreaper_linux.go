package commands

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// setSubreaper makes the daemon a child subreaper: a process whose
// parent dies below it is reparented to the daemon, not to init, so a
// command's tree stays findable (and its zombies are the daemon's to
// reap) even after its shell has exited.
func setSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}
