package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCgroupLimits writes the limits into directories laid out as cgroup
// v2 and v1 hierarchies (plain files here), and reads what each
// controller was told.
func TestCgroupLimits(t *testing.T) {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	cfg := Config{Memory: 1 << 30, Pids: 100, CPUs: 1.5}

	base := t.TempDir()
	_ = os.WriteFile(filepath.Join(base, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644)
	_ = os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), nil, 0o644)
	c, err := newCgroupV2(cfg, base, "aiod-sandbox-1-1")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "aiod-sandbox-1-1")
	for file, want := range map[string]string{"memory.max": "1073741824", "pids.max": "100", "cpu.max": "150000 100000", "memory.swap.max": "0"} {
		if got := read(filepath.Join(dir, file)); got != want {
			t.Errorf("v2 %s = %q, want %q", file, got, want)
		}
	}
	if got := read(filepath.Join(base, "cgroup.subtree_control")); got != "+memory +pids +cpu" {
		t.Errorf("v2 subtree_control = %q", got)
	}
	if c.v2fd < 0 {
		t.Error("no descriptor for CLONE_INTO_CGROUP")
	}
	c.remove()

	v1 := &cgroups{v1: map[string]string{}, v2fd: -1}
	for _, ctl := range cgroupV1Controllers {
		v1.v1[ctl] = t.TempDir()
	}
	if err := v1.limitV1(Config{Memory: 512 << 20, Pids: -1, CPUs: 0.5}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"memory/memory.limit_in_bytes": "536870912", "pids/pids.max": "max",
		"cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000"} {
		ctl, name, _ := strings.Cut(file, "/")
		if got := read(filepath.Join(v1.v1[ctl], name)); got != want {
			t.Errorf("v1 %s = %q, want %q", file, got, want)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\09`: `/bad\09`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLeaveThreadV1: a thread that joined the v1 groups and then entered
// a mount namespace where the cgroup files are gone (the sandbox's has
// no /sys) still goes back to the daemon's own groups. The hierarchy is
// plain files here, so the logic is checked on any machine; a tmpfs
// over it plays the sandbox's view.
func TestLeaveThreadV1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace needs root")
	}
	c := &cgroups{v1: map[string]string{}, base: map[string]string{}, v2fd: -1}
	root := t.TempDir()
	for _, ctl := range cgroupV1Controllers {
		c.base[ctl] = filepath.Join(root, ctl)
		c.v1[ctl] = filepath.Join(root, ctl, "aiod-sandbox-1-1")
		for _, f := range []string{filepath.Join(c.base[ctl], "tasks"), filepath.Join(c.v1[ctl], "tasks"), filepath.Join(c.v1[ctl], "cgroup.procs")} {
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.openFiles(); err != nil {
		t.Fatal(err)
	}
	defer c.files.close()
	tid := make(chan int, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread leaves the host's mount namespace and ends with the goroutine
		tid <- unix.Gettid()
		if err := c.joinThread(); err != nil {
			errc <- err
			return
		}
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("tmpfs", root, "tmpfs", 0, ""); err != nil {
			errc <- err
			return
		}
		if _, err := os.Stat(filepath.Join(c.base["pids"], "tasks")); err == nil {
			errc <- os.ErrExist
			return
		}
		c.leaveThread()
		errc <- nil
	}()
	id := strconv.Itoa(<-tid)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, ctl := range []string{"pids", "cpu"} {
		if got := read(filepath.Join(c.base[ctl], "tasks")); got != id {
			t.Errorf("%s: the daemon's tasks hold %q, want the thread %s", ctl, got, id)
		}
	}
}

func read(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// TestSweepAfterStart: on v1, a process of the sandbox outside its
// memory and freezer groups (as one forked before its parent was
// placed) is moved in by the monitor's sweep after the next start.
func TestSweepAfterStart(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	if s.cg == nil || s.cg.v1 == nil {
		t.Skip("the sweep is cgroup v1's")
	}
	stray := exec.Command("/bin/sleep", "600")
	if err := s.Wrap(stray, stray.Start)(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stray.Process.Kill(); _ = stray.Wait() }()
	pid := stray.Process.Pid
	// Out, into the daemon's own groups.
	for _, ctl := range placedV1 {
		if base, ok := s.cg.base[ctl]; ok {
			if err := os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := run(t, s, "true"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, ctl := range placedV1 {
		dir, ok := s.cg.v1[ctl]
		if !ok {
			continue
		}
		for {
			if _, in := procs(dir)[pid]; in {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stray %d is not back in the %s group", pid, ctl)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
