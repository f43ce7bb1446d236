package pool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// A workspace with --disk is a filesystem of its own, so a sandbox that
// fills it fills only itself: the kernel here has no project quotas
// (CONFIG_QUOTA), and a directory tree has no size limit without them.
//
//   - Root/disks/{id}.img is a sparse file of the --disk size, formatted
//     ext4 by mkfs.ext4 (e2fsprogs). It takes host space only as the
//     sandbox writes, up to the size.
//   - A loop device, attached here through /dev/loop-control, serves
//     the image as a block device (direct I/O: the image is not cached
//     a second time in the host's page cache), and the filesystem is
//     mounted on Root/live/{id} (nosuid, nodev), owned by the pool's
//     base uid as a plain workspace directory is, so the sandbox's
//     idmapped mount is made the same way.
//   - The loop device is attached with autoclear: the kernel detaches
//     it when its last user goes. The pool closes its own descriptor
//     right after the mount, so the mount is that last user, and an
//     unmount (or a mount that failed, or a pool killed halfway) leaves
//     no device behind. Nothing here ever detaches a device by number,
//     so a device another process took is never touched.
//
// The filesystem has no journal: a workspace lives no longer than its
// pool, and a pool restarted after a crash removes every image it
// finds, so nothing ever needs replaying. A journal would be written in
// full at format time, in host space (4 MiB of a 32 MiB image, 33 MiB
// of 1 GiB, 530 MiB of 100 GiB), and run a kernel thread per mounted
// workspace. An image kept by a delete with keep_workspace is unmounted
// cleanly before it is moved.

// mkfsBound bounds one run of mkfs.ext4: it takes 18 ms at 1 GiB, 25
// ms at 10 GiB, under 100 ms on a loaded host (the image is sparse and
// nothing is zeroed), so 30 s means the host is wedged, not busy.
const mkfsBound = 30 * time.Second

// diskTool checks that this pool can give workspaces a disk of their
// own and returns mkfs.ext4's path: it needs real root (loop devices
// and an ext4 mount), /dev/loop-control, and e2fsprogs.
func diskTool(single bool) (string, error) {
	if single {
		return "", errors.New("--disk needs aiod pool to run as root outside a user namespace (each workspace is a filesystem mounted through a loop device)")
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("--disk needs loop devices (%w): load the loop module, or give a container /dev/loop-control", err)
	}
	ctl.Close()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return "", errors.New("--disk formats each workspace as ext4, but mkfs.ext4 is not on PATH: install e2fsprogs (apt-get install e2fsprogs)")
	}
	return mkfs, nil
}

// diskRoom says, for the log, whether n images of size each (--max
// plus --warm) could outgrow the free space of the filesystem under dir
// ("" when they cannot). Images are sparse, so this is a warning, not
// a refusal; but a host whose disk fills fails every workspace, not
// the one that wrote: writes are accepted, then lost (tried: fsync
// answers ENOSPC and the kernel logs "potential data loss").
func diskRoom(dir string, size int64, n int) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return ""
	}
	free := st.Bavail * uint64(st.Bsize)
	if uint64(size)*uint64(n) <= free {
		return ""
	}
	return fmt.Sprintf("%d workspaces (--max and --warm) of --disk %s could take %s, but %s has %s free: a full host disk fails every workspace's writes",
		n, sandbox.FormatSize(size), sandbox.FormatSize(size*int64(n)), dir, sandbox.FormatSize(int64(free)))
}

// makeDisk makes image (size bytes, ext4, its root owned by owner) and
// mounts it on dir, an empty directory. On error nothing is left: no
// image, no mount, no loop device.
func makeDisk(ctx context.Context, mkfs, image, dir string, size int64, owner int) (err error) {
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(image)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	if err := format(ctx, mkfs, image, owner); err != nil {
		return err
	}
	loop, err := attachLoop(image)
	if err != nil {
		return err
	}
	// The mount opens the device for itself; closing ours after it leaves
	// the mount the device's only user (autoclear detaches it with the
	// unmount), or, when the mount failed, detaches it here and now.
	err = unix.Mount(loop.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "")
	loop.Close()
	if err != nil {
		return fmt.Errorf("disk: mounting %s: %w", image, err)
	}
	defer func() {
		if err != nil {
			_ = unmountDisk(dir)
		}
	}()
	// mkfs makes lost+found (root's, 0700: the sandbox would see an
	// unreadable directory of nobody's); e2fsck makes it again if it
	// ever needs one. The root gets the mode of a plain workspace.
	if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disk: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	return nil
}

// format runs mkfs.ext4 on image, bounded by ctx and mkfsBound, and
// waits for it. Its options, measured (e2fsprogs 1.47, 32 MiB to 100
// GiB): no journal (see above); -m 0, no blocks kept for root, whom
// the sandbox never is; the default discard on a sparse file punches
// nothing and lets mkfs mark the inode tables zeroed, so no
// lazy-init thread writes them after the mount and the image stays
// sparse (a 1 GiB image takes 656 KiB of host space once formatted).
func format(ctx context.Context, mkfs, image string, owner int) error {
	ctx, cancel := context.WithTimeout(ctx, mkfsBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", fmt.Sprintf("root_owner=%d:%d", owner, owner), image)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.WaitDelay = time.Second // a child holding its output open does not outlive the bound
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(bytes.ToValidUTF8(out, nil)))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		if ctx.Err() != nil {
			return fmt.Errorf("disk: mkfs.ext4 did not finish within %v", mkfsBound)
		}
		return fmt.Errorf("disk: mkfs.ext4: %w: %s", err, msg)
	}
	return nil
}

// attachLoop attaches image to a free loop device with autoclear and
// returns the device open: the caller must close it (which detaches it
// unless a mount holds it by then).
//
// Another process (losetup, a second pool) may take the device
// LOOP_CTL_GET_FREE named before this one configures it: the kernel
// then answers EBUSY, and the next free one is asked for.
func attachLoop(image string) (*os.File, error) {
	backing, err := os.OpenFile(image, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	defer backing.Close() // the device holds its own reference
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("disk: loop devices: %w", err)
	}
	defer ctl.Close()
	var last error
	for range 32 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("disk: no free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("disk: loop device: %w", err)
		}
		err = configureLoop(dev, backing, image)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("disk: attaching %s to %s: %w", image, dev.Name(), err)
		}
		last = err
	}
	return nil, fmt.Errorf("disk: every free loop device was taken by another process first: %w", last)
}

// configureLoop binds backing to dev with autoclear and direct I/O:
// LOOP_CONFIGURE (Linux 5.8) in one step, else LOOP_SET_FD then
// LOOP_SET_STATUS64, undone if the second fails.
//
// Direct I/O keeps the image's blocks out of the host's page cache,
// where they would sit a second time under the workspace's own cached
// files (measured, 300 MiB written and synced in a workspace: the page
// cache grew 600 MiB without it, 300 MiB with it, and the write took
// 0.24 s instead of 0.34 s). A backing filesystem that cannot (EINVAL)
// gets buffered I/O.
func configureLoop(dev, backing *os.File, image string) error {
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO}
	copy(info.File_name[:len(info.File_name)-1], image) // for losetup -l; cut to 63 bytes
	err := unix.IoctlLoopConfigure(int(dev.Fd()), &unix.LoopConfig{Fd: uint32(backing.Fd()), Info: info})
	if errors.Is(err, unix.EINVAL) {
		info.Flags &^= unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &unix.LoopConfig{Fd: uint32(backing.Fd()), Info: info})
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	// No LOOP_CONFIGURE: LOOP_SET_STATUS64 sets autoclear (it ignores
	// the direct I/O flag, which has an ioctl of its own).
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(backing.Fd())); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(int(dev.Fd()), &info); err != nil {
		_ = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
		return err
	}
	_ = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_DIRECT_IO, 1)
	return nil
}

// unmountDisk unmounts the filesystem on dir: at once when nothing uses
// it, else detached (MNT_DETACH: gone from every path now, released
// when its last user goes, then the loop device detaches itself).
// Nothing mounted there is no error.
func unmountDisk(dir string) error {
	err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
	}
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("disk: unmounting %s: %w", dir, err)
}

// diskUsed is the space the files on dir's filesystem take, as df's
// Used: its blocks less the free ones (ext4 leaves its own metadata out
// of both).
func diskUsed(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize), nil
}

// unmountStale detaches every mount under dir (a pool killed before it
// could unmount its workspaces left them), deepest first, so removing
// dir's entries afterwards removes empty directories, never a
// filesystem's contents or a mount in use.
func unmountStale(dir string) {
	for _, m := range mountsUnder(dir) {
		_ = unix.Unmount(m, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
	}
}

// mountsUnder lists the mount points strictly under dir in this
// process's mount namespace, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	prefix := filepath.Clean(dir) + "/"
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := unescapeMount(fields[4]); strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
