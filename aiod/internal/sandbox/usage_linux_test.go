package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUsage: the limits read back as set, and memory, tasks and CPU
// time grow with what the sandbox does.
func TestUsage(t *testing.T) {
	s, _ := newSandbox(t, Config{Memory: 256 << 20, Pids: 64})
	if s.cg == nil {
		t.Skip("no cgroups here:", s.warnings)
	}
	// Held at exec, a process is in the memory group before its first
	// instruction (on v1 it is moved there once started otherwise, and a
	// child forked first is charged elsewhere until the sweep).
	s.hold = true
	u0, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u0.MemoryLimitBytes != 256<<20 || u0.PidsLimit != 64 || u0.Pids == 0 {
		t.Errorf("at start: %+v", u0)
	}
	// Three sleepers are three more tasks.
	var cmds []*exec.Cmd
	for range 3 {
		cmd := exec.Command("/bin/sleep", "600")
		if err := s.Wrap(cmd, cmd.Start)(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	// Pids counts every task of the sandbox (init's threads vary),
	// and none of the daemon's.
	u1, _ := s.Usage()
	tasks := 0
	if dir := s.cg.v1["pids"]; dir != "" {
		for _, tid := range strings.Fields(read(filepath.Join(dir, "tasks"))) {
			if _, err := os.Stat("/proc/self/task/" + tid); err != nil {
				tasks++
			}
		}
	}
	if u1.Pids < u0.Pids+3 || tasks != 0 && uint64(tasks) != u1.Pids {
		t.Errorf("tasks %d -> %d with three sleepers (%d in the group, not the daemon's)", u0.Pids, u1.Pids, tasks)
	}
	// 32 MiB in /tmp (memory) and a second of work (CPU time).
	if out, err := run(t, s, "head -c 33554432 /dev/zero > /tmp/fill; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"); err != nil {
		t.Fatal(out, err)
	}
	u2, _ := s.Usage()
	if u2.MemoryBytes < u0.MemoryBytes+32<<20 {
		t.Errorf("memory %d -> %d with 32 MiB in /tmp", u0.MemoryBytes, u2.MemoryBytes)
	}
	if u2.CPUUsageNs <= u1.CPUUsageNs {
		t.Errorf("CPU time %d -> %d ns", u1.CPUUsageNs, u2.CPUUsageNs)
	}
	t.Logf("%+v", u2)

	none, _ := newSandbox(t, Config{Memory: -1, Pids: -1})
	if u, err := none.Usage(); err != nil || u.MemoryLimitBytes != 0 || u.PidsLimit != 0 {
		t.Errorf("no limits: %+v %v", u, err)
	}
}

// TestName: Config.Name names the sandbox's groups, and a second live
// sandbox of the same name is refused.
func TestName(t *testing.T) {
	s, _ := newSandbox(t, Config{Name: "box-7"})
	if s.cg == nil {
		t.Skip("no cgroups here:", s.warnings)
	}
	want := "aiod-sandbox-" + strconv.Itoa(os.Getpid()) + "-box-7"
	dirs := []string{s.cg.v2}
	for _, d := range s.cg.v1 {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d != "" && filepath.Base(d) != want {
			t.Errorf("group %s, want %s", d, want)
		}
	}
	if twin, err := New(Config{Workspace: t.TempDir(), Name: "box-7"}, nil); err == nil {
		twin.Close()
		t.Error("a second sandbox of one name was started")
	}
	if _, err := os.Stat(dirs[len(dirs)-1]); err != nil {
		t.Errorf("the refused twin removed the first one's group: %v", err)
	}
}
