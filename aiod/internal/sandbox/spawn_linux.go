package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A sandboxed process must be in the sandbox's cgroup before it runs an
// instruction of its own, or a process that forks at once leaves
// children outside every limit. On cgroup v2 clone3's CLONE_INTO_CGROUP
// did that, but the spawner thread now carries the system-call filter
// its children inherit, and the filter answers clone3 with ENOSYS (its
// flags are behind a pointer, out of the filter's sight). So on v2 the
// child is held instead: it is born traced (PTRACE_TRACEME, from Go's
// SysProcAttr.Ptrace), stops at its exec before the new program's first
// instruction, is moved into the group, and is let go (PTRACE_DETACH,
// no signal). The spawner thread is the tracer (ptrace requests must
// come from it), which is why releaseHeld runs on it.
//
// On v1 nothing changes: a child of the spawner thread is born in the
// pids and cpu groups (the thread joined them), and is moved into the
// memory group once started, with the sweeper catching what forked
// first (cgroups). Holding costs a stop and a wake-up per command,
// which v1 does without; Sandbox.hold turns it on there for the tests.

// holdAtExec makes cmd stop at its exec, for releaseHeld, where that is
// how the process reaches its cgroup; it reports whether it did.
func (s *Sandbox) holdAtExec(cmd *exec.Cmd) bool {
	if s.cg == nil || s.cg.v2 == "" && !s.hold {
		return false
	}
	cmd.SysProcAttr.Ptrace = true
	return true
}

// releaseHeld waits for the held process pid to stop at its exec, puts
// it in the sandbox's groups and lets it run. A process that died first
// is left for its owner's Wait (WNOWAIT: its status is not taken here).
// If the process cannot be placed it is killed: it must not run
// outside its limits.
func (s *Sandbox) releaseHeld(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("sandbox: waiting for a new process to stop at its exec: %w", err)
		}
	}
	if info.Code != cldTrapped && info.Code != cldStopped {
		return nil // it exited or was killed
	}
	placeErr := s.cg.placeNew(pid)
	if placeErr != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	if err := unix.PtraceDetach(pid); err != nil && placeErr == nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return fmt.Errorf("sandbox: releasing a new process: %w", err)
	}
	return placeErr
}

// si_code values of a stopped child (linux/signal.h).
const (
	cldStopped = 5
	cldTrapped = 4
)

// placeNew moves a new process into the sandbox's group (on v2 its one
// group, on v1 the memory group: a child of the spawner thread is born
// in the pids and cpu groups), through the file opened on the host: it
// runs on the spawner thread.
func (c *cgroups) placeNew(pid int) error {
	if c == nil {
		return nil
	}
	for _, f := range c.files.procs {
		if _, err := f.Write([]byte(strconv.Itoa(pid))); err != nil {
			return fmt.Errorf("sandbox: placing a process in the cgroup: %w", err)
		}
	}
	return nil
}

// threadFiles are the cgroup files the spawner thread writes after it
// has entered the sandbox's mount namespace, where /sys does not exist:
// opened on the host beforehand (a write through an open cgroup file is
// checked as the writer, not by path).
type threadFiles struct {
	procs     []*os.File // where placeNew puts a new process: v2's cgroup.procs, v1's memory and freezer cgroup.procs
	baseTasks []*os.File // v1: the daemon's own groups of joinedV1, where leaveThread goes back
}

// openFiles opens c's threadFiles; New calls it on the host.
func (c *cgroups) openFiles() error {
	if c == nil {
		return nil
	}
	open := func(path string) (*os.File, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: cgroup: %w", err)
		}
		return f, nil
	}
	if c.v2 != "" {
		f, err := open(filepath.Join(c.v2, "cgroup.procs"))
		if err != nil {
			return err
		}
		c.files.procs = []*os.File{f}
		return nil
	}
	for _, d := range c.dirs(placedV1) {
		f, err := open(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			c.files.close()
			return err
		}
		c.files.procs = append(c.files.procs, f)
	}
	var bases []string
	for _, ctl := range joinedV1 {
		if b, ok := c.base[ctl]; ok && c.v1[ctl] != "" && !contains(bases, b) {
			bases = append(bases, b)
		}
	}
	for _, b := range bases {
		f, err := open(filepath.Join(b, "tasks"))
		if err != nil {
			c.files.close()
			return err
		}
		c.files.baseTasks = append(c.files.baseTasks, f)
	}
	return nil
}

func (t *threadFiles) close() {
	for _, f := range t.procs {
		f.Close()
	}
	t.procs = nil
	for _, f := range t.baseTasks {
		f.Close()
	}
	t.baseTasks = nil
}
