//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
)

// measureFloor is the kernel's own cost of what a sandbox's start must
// do, measured n times: a cgroup made (memory and pids, as the pool's),
// /bin/true cloned into fresh mount, PID, IPC, UTS and network
// namespaces and placed in the cgroup, waited for, the cgroup removed.
// Nothing of the view is built: this is the floor under any sandbox.
func measureFloor(n int) lat.Samples {
	dirs := cgroupDirs()
	var s lat.Samples
	for i := 0; i < n+n/10; i++ {
		t0 := time.Now()
		var made []string
		for _, d := range dirs {
			g := filepath.Join(d, "bench-floor-"+strconv.Itoa(os.Getpid()))
			check(os.Mkdir(g, 0o755))
			made = append(made, g)
		}
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC |
			syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET}
		check(cmd.Start())
		for _, g := range made {
			// Placed after its start, as on cgroup v1 the pool does; it may
			// have exited already.
			_ = os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0)
		}
		check(cmd.Wait())
		for _, g := range made {
			for os.Remove(g) != nil { // a zombie's charge leaves the group a moment after the wait
				time.Sleep(50 * time.Microsecond)
			}
		}
		if i >= n/10 {
			s = append(s, time.Since(t0))
		}
	}
	slices.Sort(s)
	return s
}

// cgroupDirs are the memory and pids hierarchies' roots (v1), or the
// unified root (v2).
func cgroupDirs() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	var out []string
	for _, c := range []string{"memory", "pids"} {
		d := filepath.Join("/sys/fs/cgroup", c)
		if _, err := os.Stat(d); err != nil {
			check(fmt.Errorf("cgroup v1 %s hierarchy: %w", c, err))
		}
		out = append(out, d)
	}
	return out
}
