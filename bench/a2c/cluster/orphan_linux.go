package main

import (
	"os/exec"
	"syscall"
)

// orphanKill makes the kernel kill the child when the benchmark dies
// without running its cleanup (SIGKILL, a panic on another goroutine).
func orphanKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
