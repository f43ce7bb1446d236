//go:build !linux

package mcphost

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// platformCommand gives server its own process group, ended when its
// session is over. There is no supervisor outside Linux: a SIGKILL of the
// Computer leaves the group to the system.
func platformCommand(server *exec.Cmd, _ string) (*exec.Cmd, func()) {
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return server, func() {
		if server.Process != nil {
			endGroup(server.Process.Pid, groupGrace)
		}
	}
}

// Supervise is Linux-only; elsewhere it reports so and fails.
func Supervise([]string) int {
	fmt.Fprintf(os.Stderr, "a2c %s: not supported on this system\n", SupervisorArg)
	return 2
}
