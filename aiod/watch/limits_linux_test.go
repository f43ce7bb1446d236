package watch

import (
	"testing"

	"golang.org/x/sys/unix"
)

// mountinfo names the pseudo filesystems by type, per device.
func TestParseMountinfo(t *testing.T) {
	in := "21 26 0:20 / /proc rw,relatime - proc proc rw\n" +
		"22 26 0:21 / /sys rw,relatime shared:7 - sysfs sysfs rw\n" +
		"23 26 0:6 / /dev rw - devtmpfs devtmpfs rw\n" +
		"26 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n" +
		"30 22 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n" +
		"bad line\n"
	m := parseMountinfo([]byte(in), nil)
	for dev, want := range map[[2]uint32]bool{{0, 20}: true, {0, 21}: true, {0, 6}: true, {259, 2}: false, {0, 27}: true} {
		if got, ok := m[unix.Mkdev(dev[0], dev[1])]; !ok || got != want {
			t.Errorf("%v: %v %v", dev, got, ok)
		}
	}
	var mt mountTable
	mt.refresh()
	if !mt.pseudoPath("/proc") || !mt.pseudoPath("/sys") || mt.pseudoPath(t.TempDir()) {
		t.Fatalf("/proc %v /sys %v tmp %v", mt.pseudoPath("/proc"), mt.pseudoPath("/sys"), mt.pseudoPath(t.TempDir()))
	}
}
