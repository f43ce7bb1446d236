package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
