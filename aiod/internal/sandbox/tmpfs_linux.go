package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// tmpfsSize is what /tmp and /dev/shm may hold together under a memory
// limit of memory bytes (0: no bound of their own): half of it.
//
// Their files are memory charged to the sandbox's group that no
// reclaim can free (there is no swap to write them to). Each used to be
// sized to the whole limit, so filling both took more than the limit:
// the kernel then killed process after process of the sandbox, and its
// init with them, which ended every session. With one bound for both,
// well under the limit, a writer that fills them gets ENOSPC, and the
// other half stays for the processes.
func tmpfsSize(memory int64) int64 {
	if memory <= 0 {
		return 0
	}
	return memory / 2
}

// mountTmp, in init, gives the view at r its /tmp and /dev/shm (r/dev
// must be mounted): two directories of one tmpfs of size bytes (0: the
// kernel's default), bound in place, so that one bound holds for both.
// The tmpfs is mounted at a scratch directory of r first and detached
// from it once both are bound; the binds keep it alive.
func mountTmp(r string, size int64) error {
	opts := "mode=0755"
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	scratch := r + "/.tmpfs"
	if err := mkdirMount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return err
	}
	for _, d := range []struct{ src, dst string }{{"tmp", r + "/tmp"}, {"shm", r + "/dev/shm"}} {
		src := scratch + "/" + d.src
		if err := os.Mkdir(src, 0o777); err != nil {
			return fmt.Errorf("sandbox: %s: %w", src, err)
		}
		if err := os.Chmod(src, 0o777|os.ModeSticky); err != nil { // 1777, past the umask
			return fmt.Errorf("sandbox: %s: %w", src, err)
		}
		if err := os.MkdirAll(d.dst, 0o755); err != nil {
			return fmt.Errorf("sandbox: %s: %w", d.dst, err)
		}
		if err := unix.Mount(src, d.dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("sandbox: bind %s: %w", d.dst, err)
		}
	}
	if err := unix.Unmount(scratch, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("sandbox: %s: %w", scratch, err)
	}
	if err := os.Remove(scratch); err != nil {
		return fmt.Errorf("sandbox: %s: %w", scratch, err)
	}
	return nil
}
