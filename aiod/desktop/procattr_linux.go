package desktop

import "syscall"

// childAttr makes a program the worker starts receive SIGKILL when the
// worker dies (PR_SET_PDEATHSIG), so no xclip or ffmpeg outlives it even
// after a kill -9; an orderly stop ends them itself first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
