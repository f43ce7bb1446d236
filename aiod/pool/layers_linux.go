package pool

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The layer store of a pool of whole machines (--machine): where each
// sandbox's upper layer lives (Root/layers/{id}, its workspace inside at
// workspace/), and its snapshots (Root/layers/snap-{id}).
//
// The store is btrfs, so that a snapshot of a running sandbox costs the
// same whatever it wrote: an upper layer is a subvolume, a snapshot a
// read-only snapshot of it (copy-on-write: nothing is copied), a fork a
// writable snapshot of a snapshot. An overlay's upper layer cannot be cut
// from under its processes, but a btrfs snapshot of it can: the sandbox
// is frozen for the cut and goes on in the same subvolume, the snapshot
// holds what it was. There is no chain of layers to squash: every upper
// layer is whole (its blocks shared with its ancestors on disk).
//
// Where Root is on btrfs the store is a directory of it. Elsewhere it is
// a btrfs filesystem of its own in a sparse image (Root/layers.img, made
// anew at each start: snapshots do not outlive the pool) on a loop
// device, mounted with commit=1 and its dirty data bounded to 8 MiB, so
// that a snapshot right after a large write waits for little (measured:
// bench/layers). Without btrfs-progs (mkfs.btrfs) on a filesystem that
// is not btrfs, the layers are plain directories and snapshots are not
// offered.

// layerStoreSize is the size of a store image: sparse, so the host
// gives it only what is written.
const layerStoreSize = 1 << 40

// dirtyBound bounds the store's dirty data (see above).
const dirtyBound = 8 << 20

// openLayers makes the store at dir (Root/layers), empty. It reports
// whether the store is btrfs. With quota, the store's quota groups are
// turned on (btrfs quota enable), for limitLayer.
func openLayers(root, dir string, quota bool) (btrfs bool, err error) {
	btrfs, err = openStore(root, dir)
	if err != nil || !btrfs || !quota {
		return btrfs, err
	}
	if out, err := exec.Command("btrfs", "quota", "enable", dir).CombinedOutput(); err != nil {
		return false, fmt.Errorf("layer store: btrfs quota enable: %w: %s", err, out)
	}
	return true, nil
}

// limitLayer bounds what the subvolume at path may hold of its own
// (its exclusive bytes, so a fork's or a template's shared blocks do not
// count) to size: past it, a write fails with EDQUOT ("Disk quota
// exceeded") in that sandbox only.
func limitLayer(path string, size int64) error {
	if out, err := exec.Command("btrfs", "qgroup", "limit", "-e", strconv.FormatInt(size, 10), path).CombinedOutput(); err != nil {
		return fmt.Errorf("layer %s: btrfs qgroup limit: %w: %s", filepath.Base(path), err, out)
	}
	return nil
}

// openStore makes the store at dir (see openLayers).
func openStore(root, dir string) (btrfs bool, err error) {
	if err := removeLayers(dir); err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, err
	}
	if st.Type == unix.BTRFS_SUPER_MAGIC {
		return true, nil
	}
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		return false, nil // plain directories: no snapshots
	}
	if _, err := exec.LookPath("btrfs"); err != nil {
		return false, nil
	}
	image := filepath.Join(root, "layers.img")
	_ = os.Remove(image)
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false, fmt.Errorf("layer store: %w", err)
	}
	// Sparse, but never more than the host's filesystem has free: a
	// store the host cannot hold fails its writes with I/O errors and
	// turns read-only for every machine; within it, a full store is a
	// plain ENOSPC (and --disk's quotas bound each machine).
	size := int64(layerStoreSize)
	var hst unix.Statfs_t
	if unix.Statfs(root, &hst) == nil {
		size = min(size, int64(hst.Bavail)*hst.Bsize*9/10)
	}
	if size < 1<<30 {
		f.Close()
		_ = os.Remove(image)
		return false, fmt.Errorf("layer store: %s has less than 1 GiB free", root)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("layer store: %w", err)
	}
	if out, err := exec.Command(mkfs, "-q", "-f", image).CombinedOutput(); err != nil {
		return false, fmt.Errorf("layer store: mkfs.btrfs: %w: %s", err, out)
	}
	loop, err := attachLoop(image)
	if err != nil {
		return false, fmt.Errorf("layer store: %w", err)
	}
	err = unix.Mount(loop.Name(), dir, "btrfs", unix.MS_NOSUID|unix.MS_NODEV, "commit=1")
	if err == nil {
		boundDirty(loop)
	}
	loop.Close()
	if err != nil {
		return false, fmt.Errorf("layer store: mounting %s: %w", image, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return false, err
	}
	return true, nil
}

// boundDirty bounds the dirty data of the btrfs filesystem on the loop
// device: btrfs writes back through a backing-device info of its own
// (/sys/fs/btrfs/{uuid}/bdi), whose strict_limit and max_bytes it sets
// (a kernel without them keeps its defaults).
func boundDirty(loop *os.File) {
	devs, _ := filepath.Glob("/sys/fs/btrfs/*/devices/" + filepath.Base(loop.Name()))
	if len(devs) != 1 {
		return
	}
	bdi := filepath.Join(filepath.Dir(filepath.Dir(devs[0])), "bdi")
	_ = os.WriteFile(bdi+"/strict_limit", []byte("1"), 0o644)
	_ = os.WriteFile(bdi+"/max_bytes", []byte(strconv.Itoa(dirtyBound)), 0o644)
}

// removeLayers removes a store a pool left: its subvolumes, its mount.
func removeLayers(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = deleteLayer(filepath.Join(dir, e.Name()))
	}
	if err := unmountDisk(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(filepath.Dir(dir), "layers.img"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// btrfs ioctls (linux/btrfs.h).
const (
	btrfsSubvolCreate = 0x5000940e // _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	btrfsSnapDestroy  = 0x5000940f // _IOW(0x94, 15, struct btrfs_ioctl_vol_args)
	btrfsSnapCreateV2 = 0x50009417 // _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2)
	btrfsSubvolRdonly = 1 << 1
)

// volArgs is struct btrfs_ioctl_vol_args.
type volArgs struct {
	FD   int64
	Name [4088]byte
}

// volArgsV2 is struct btrfs_ioctl_vol_args_v2.
type volArgsV2 struct {
	FD      int64
	TransID uint64
	Flags   uint64
	Unused  [4]uint64
	Name    [4040]byte
}

// layerIoctl runs a btrfs ioctl on the directory holding path.
func layerIoctl(path string, req uintptr, arg unsafe.Pointer) error {
	d, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// createLayer makes path an empty subvolume (btrfs) or directory.
func createLayer(path string, btrfs bool) error {
	if !btrfs {
		return os.Mkdir(path, 0o700)
	}
	var a volArgs
	copy(a.Name[:len(a.Name)-1], filepath.Base(path))
	if err := layerIoctl(path, btrfsSubvolCreate, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("layer %s: %w", filepath.Base(path), err)
	}
	return os.Chmod(path, 0o700)
}

// snapshotLayer makes dst a snapshot of the subvolume src, read-only or
// writable: the kernel's one ioctl, whatever src holds.
func snapshotLayer(src, dst string, readOnly bool) error {
	s, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	var a volArgsV2
	a.FD = int64(s)
	if readOnly {
		a.Flags = btrfsSubvolRdonly
	}
	copy(a.Name[:len(a.Name)-1], filepath.Base(dst))
	if err := layerIoctl(dst, btrfsSnapCreateV2, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("snapshot %s: %w", filepath.Base(dst), err)
	}
	return nil
}

// deleteLayer deletes a subvolume (what it holds with it), or a
// directory; one that is not there is no error.
func deleteLayer(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var a volArgs
	copy(a.Name[:len(a.Name)-1], filepath.Base(path))
	err := layerIoctl(path, btrfsSnapDestroy, unsafe.Pointer(&a))
	if err == nil {
		return nil
	}
	return os.RemoveAll(path) // a plain directory (or not btrfs)
}

// layerSize is the bytes the files of a layer hold (their apparent
// sizes, and 4 KiB a directory): what the layer's own writes amount to.
func layerSize(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, e os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() {
			n += 4096
			return nil
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
