//go:build linux

// Command layers measures where a sandbox's layers could live (issue 32:
// snapshots, forks and templates of a sandbox's writable layer), on this
// machine, as root:
//
//	go run ./bench/layers [-runs 5] [-big 1024] [-small 10] [-dir /tmp]
//
// It makes a btrfs filesystem in a sparse image file on a loop device
// (the pool's --root need not be on btrfs), with the loop device in
// direct-I/O mode (no second page cache of the image), a subvolume for a
// sandbox's upper layer, and times, -runs times each:
//
//   - a read-only snapshot (the sandbox's snapshot) after -small MiB and
//     after -big MiB were written and are on disk (settled), the btrfs
//     process included, and the ioctl alone;
//   - the same right after the data was written (still in the page
//     cache): the snapshot must flush it first, so this is the writeback
//     floor, not the snapshot's;
//   - a writable snapshot of a snapshot (a fork, or a create from a
//     template);
//   - a snapshot with quota groups on (a --disk bound).
//
// Needs btrfs-progs. It prints markdown for bench/RESULTS.md and removes
// what it made.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
)

// undo are what to take down (mount, loop device, files), latest first,
// on every way out, a failed check's included.
var undo []func()

func cleanup() {
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	undo = nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers bench:", err)
		cleanup()
		os.Exit(1)
	}
}

func run(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		check(fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out))
	}
	return strings.TrimSpace(string(out))
}

func main() {
	runs := flag.Int("runs", 5, "times each measure is taken")
	big := flag.Int("big", 1024, "MiB written for the large case")
	small := flag.Int("small", 10, "MiB written for the small case")
	dir := flag.String("dir", os.TempDir(), "where the image file goes")
	commit := flag.Int("commit", 0, "btrfs commit interval in seconds (mount option commit=N; 0: the default, 30)")
	maxDirty := flag.Int("max-dirty", 0, "bound the filesystem's dirty data to this many MiB (its bdi's strict_limit and max_bytes; 0: no bound)")
	flag.Parse()
	if os.Geteuid() != 0 {
		check(fmt.Errorf("needs root (loop devices, mounts)"))
	}
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		check(fmt.Errorf("needs btrfs-progs"))
	}
	work, err := os.MkdirTemp(*dir, "a2c-bench-layers-")
	check(err)
	defer cleanup()
	undo = append(undo, func() { _ = os.RemoveAll(work) })
	img, mnt := filepath.Join(work, "layers.img"), filepath.Join(work, "mnt")
	check(os.Mkdir(mnt, 0o755))
	f, err := os.Create(img)
	check(err)
	check(f.Truncate(int64(*big)*int64(*runs+4)<<20 + 2<<30)) // sparse: the fresh cases keep a copy each
	f.Close()
	run("mkfs.btrfs", "-q", img)
	loop := run("losetup", "--find", "--show", "--direct-io=on", img)
	undo = append(undo, func() { _ = exec.Command("losetup", "-d", loop).Run() })
	opts := ""
	if *commit > 0 {
		opts = fmt.Sprintf("commit=%d", *commit)
	}
	check(unix.Mount(loop, mnt, "btrfs", 0, opts))
	undo = append(undo, func() { _ = unix.Unmount(mnt, 0) })
	if *maxDirty > 0 {
		bdi := bdiOf(loop)
		check(os.WriteFile(filepath.Join(bdi, "strict_limit"), []byte("1"), 0o644))
		check(os.WriteFile(filepath.Join(bdi, "max_bytes"), []byte(fmt.Sprint(*maxDirty<<20)), 0o644))
	}

	fmt.Printf("## Where layers live: btrfs in an image on a loop device (`go run ./bench/layers -runs %d -big %d -small %d -commit %d -max-dirty %d`)\n\n",
		*runs, *big, *small, *commit, *maxDirty)
	fmt.Printf("Kernel %s; the image on %s; the loop device in direct-I/O mode; mount options %q; dirty data bound: %d MiB (0: none).\n\n",
		kernel(), fsOf(*dir), opts, *maxDirty)
	fmt.Println("| measure | p50 | min | max |")
	fmt.Println("|---|---:|---:|---:|")
	row := func(what string, s lat.Samples) {
		slices.Sort(s)
		fmt.Printf("| %s | %s | %s | %s |\n", what, ms(s.P50()), ms(s[0]), ms(s[len(s)-1]))
	}
	for _, n := range []int{*small, *big} {
		up := filepath.Join(mnt, fmt.Sprintf("upper-%d", n))
		run("btrfs", "subvolume", "create", up)
		write(filepath.Join(up, "data"), n)
		unix.Sync()
		var cli, ioctl lat.Samples
		for i := range *runs {
			snap := filepath.Join(mnt, fmt.Sprintf("snap-%d-%d", n, i))
			t0 := time.Now()
			run("btrfs", "subvolume", "snapshot", "-r", up, snap)
			cli = append(cli, time.Since(t0))
			t0 = time.Now()
			snapshot(up, snap+"-i", true)
			ioctl = append(ioctl, time.Since(t0))
		}
		row(fmt.Sprintf("read-only snapshot, %d MiB written and on disk (btrfs process)", n), cli)
		row(fmt.Sprintf("read-only snapshot, %d MiB written and on disk (ioctl)", n), ioctl)
		var fresh, writes lat.Samples
		for i := range *runs {
			t0 := time.Now()
			write(filepath.Join(up, fmt.Sprintf("fresh-%d", i)), n)
			writes = append(writes, time.Since(t0))
			t0 = time.Now()
			snapshot(up, filepath.Join(mnt, fmt.Sprintf("fresh-%d-%d", n, i)), true)
			fresh = append(fresh, time.Since(t0))
			check(os.Remove(filepath.Join(up, fmt.Sprintf("fresh-%d", i))))
			unix.Sync()
		}
		row(fmt.Sprintf("writing %d MiB (not synced)", n), writes)
		row(fmt.Sprintf("read-only snapshot right after %d MiB were written (the flush included)", n), fresh)
		var forks lat.Samples
		for i := range *runs {
			t0 := time.Now()
			snapshot(filepath.Join(mnt, fmt.Sprintf("snap-%d-0", n)), filepath.Join(mnt, fmt.Sprintf("fork-%d-%d", n, i)), false)
			forks = append(forks, time.Since(t0))
		}
		row(fmt.Sprintf("writable snapshot of a snapshot (a fork), %d MiB", n), forks)
	}
	run("btrfs", "quota", "enable", mnt)
	up := filepath.Join(mnt, fmt.Sprintf("upper-%d", *big))
	run("btrfs", "qgroup", "limit", fmt.Sprintf("%dM", 2**big), up)
	var q lat.Samples
	for i := range *runs {
		t0 := time.Now()
		snapshot(up, filepath.Join(mnt, fmt.Sprintf("quota-%d", i)), true)
		q = append(q, time.Since(t0))
	}
	row(fmt.Sprintf("read-only snapshot with quota groups on, %d MiB", *big), q)
	fmt.Println()
}

// bdiOf is the sysfs folder of the backing-device info of the btrfs
// filesystem on the loop device (its dirty-data bounds).
func bdiOf(loop string) string {
	devs, _ := filepath.Glob("/sys/fs/btrfs/*/devices/" + filepath.Base(loop))
	if len(devs) != 1 {
		check(fmt.Errorf("no btrfs filesystem on %s in /sys/fs/btrfs", loop))
	}
	bdi, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(filepath.Dir(devs[0])), "bdi"))
	check(err)
	return bdi
}

// write writes n MiB of incompressible data to path, without syncing.
func write(path string, n int) {
	f, err := os.Create(path)
	check(err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range n {
		for j := range buf {
			buf[j] = byte(i*131 + j*7 + j>>9)
		}
		_, err := f.Write(buf)
		check(err)
	}
}

// snapshot makes a snapshot of the subvolume src at dst with the
// kernel's ioctl (BTRFS_IOC_SNAP_CREATE_V2), read-only or writable.
func snapshot(src, dst string, readOnly bool) {
	s, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	check(err)
	defer unix.Close(s)
	d, err := unix.Open(filepath.Dir(dst), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	check(err)
	defer unix.Close(d)
	// struct btrfs_ioctl_vol_args_v2: fd, transid, flags, unused[4], name[4040].
	var args struct {
		FD      int64
		TransID uint64
		Flags   uint64
		Unused  [4]uint64
		Name    [4040]byte
	}
	args.FD = int64(s)
	if readOnly {
		args.Flags = 1 << 1 // BTRFS_SUBVOL_RDONLY
	}
	copy(args.Name[:], filepath.Base(dst))
	const snapCreateV2 = 0x50009417 // _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d), snapCreateV2, uintptr(unsafe.Pointer(&args))); e != 0 {
		check(fmt.Errorf("snapshot %s: %w", dst, e))
	}
}

func kernel() string {
	var u unix.Utsname
	check(unix.Uname(&u))
	return unix.ByteSliceToString(u.Release[:])
}

// fsOf names the filesystem type holding dir.
func fsOf(dir string) string {
	var st unix.Statfs_t
	check(unix.Statfs(dir, &st))
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	}
	return fmt.Sprintf("filesystem 0x%x", st.Type)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
