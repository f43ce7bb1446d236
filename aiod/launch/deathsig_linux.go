package launch

import "syscall"

// dieWithParent makes the program get SIGKILL when the daemon's thread
// that started it dies (PR_SET_PDEATHSIG), so a kill -9 of the daemon
// leaves no browser or display behind. Not for programs in the sandbox,
// whose init carries it for them (see Program.Sandboxed).
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
