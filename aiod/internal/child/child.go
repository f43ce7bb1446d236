package child

import (
	"os/exec"
	"sync"
	"syscall"
)

var reg struct {
	// fork is held for reading across a start until the pid is
	// registered, and for writing while zombies are reaped, so a child
	// that exits at once is never taken for an orphan.
	fork sync.RWMutex
	mu   sync.Mutex
	pids map[int]struct{}
}

// Start starts cmd through start (cmd.Start, or a wrapper such as
// pty.StartWithAttrs that calls it) and registers its pid before any
// reaper may look. Call Forget once cmd.Wait has returned.
func Start(cmd *exec.Cmd, start func() error) error {
	reg.fork.RLock()
	defer reg.fork.RUnlock()
	if err := start(); err != nil {
		return err
	}
	reg.mu.Lock()
	if reg.pids == nil {
		reg.pids = map[int]struct{}{}
	}
	reg.pids[cmd.Process.Pid] = struct{}{}
	reg.mu.Unlock()
	return nil
}

// Forget drops pid once its exec.Cmd has waited for it.
func Forget(pid int) {
	reg.mu.Lock()
	delete(reg.pids, pid)
	reg.mu.Unlock()
}

// Owned reports whether an exec.Cmd still owns pid.
func Owned(pid int) bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	_, ok := reg.pids[pid]
	return ok
}

// Reap waits, without blocking, for each of the zombies given that no
// exec.Cmd owns, one pid at a time (never wait4(-1), which would take
// exit statuses from os/exec).
func Reap(zombies []int) {
	if len(zombies) == 0 {
		return
	}
	reg.fork.Lock()
	defer reg.fork.Unlock()
	for _, pid := range zombies {
		if Owned(pid) {
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}
