package pool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// takeRoot locks the pool's root (Root/.lock, flock) so two pools never
// share one, and removes the workspaces a pool killed before it could
// clean up left under Root/live, with their images under Root/disks
// (sandboxes end with their pool). The lock is held until the returned
// file is closed.
func takeRoot(root string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("root %s is in use by another aiod pool; give this one --root of its own", root)
		}
		return nil, fmt.Errorf("root: lock: %w", err)
	}
	// Filesystems of workspaces with --disk are unmounted first (lazily:
	// their loop devices detach once released), so what is removed next
	// is their empty mount points, never their contents through a mount
	// still in use; their images go after.
	live := filepath.Join(root, "live")
	unmountStale(live)
	for _, sub := range []string{live, filepath.Join(root, "disks")} {
		entries, _ := os.ReadDir(sub)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(sub, e.Name()))
		}
	}
	return f, nil
}

// hostUIDs are the uids of the host's accounts (/etc/passwd): the pool
// never gives a sandbox one of them.
func hostUIDs() map[int]bool {
	out := map[int]bool{}
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 2 {
			if uid, err := strconv.Atoi(fields[2]); err == nil {
				out[uid] = true
			}
		}
	}
	return out
}

var templateName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// checkTemplate refuses a template whose name is not [a-z0-9_.-] or
// "base", or whose directory is not one.
func checkTemplate(name, dir string) error {
	if !templateName.MatchString(name) || name == BaseTemplate {
		return fmt.Errorf("template %q: a name is 1 to 64 of [a-z0-9_.-], and base is taken", name)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("template %s: %s is not a directory", name, dir)
	}
	return nil
}

// copyTree copies the contents of directory src into dst (an empty
// directory): regular files (cloned where the filesystem can, so a
// template costs no space until written), directories and symbolic
// links, with their permission bits; anything else (devices, sockets,
// fifos) is skipped. Links are copied as links, never followed: they
// resolve inside the sandbox's view. The files belong to the pool's
// account, or to owner when it is not -1; the sandbox sees them as its
// own through its idmapped workspace.
func copyTree(src, dst string, owner int) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case mode.IsDir():
			err = os.Mkdir(target, mode.Perm()|0o700)
		case mode&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(path); err == nil {
				err = os.Symlink(link, target)
			}
		case mode.IsRegular():
			// Set-ID bits are not copied: a template's file must not
			// become a set-ID program of the workspace's owner.
			err = copyFile(path, target, mode.Perm()&0o777)
		default:
			return nil
		}
		if err == nil && owner >= 0 {
			err = os.Lchown(target, owner, owner)
		}
		return err
	})
}

// copyFile clones src to dst (FICLONE), or copies its bytes.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	if cloneFile(out, in) != nil {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

// lockRange takes the lock file of the range of kind ("uids", "machine")
// from b, or fails with EWOULDBLOCK when another holder has it (another
// open of the file, in this process or another: flock is per open file).
func lockRange(kind string, b int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(uidLockDir, kind+"-"+strconv.Itoa(b)+".lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MachineIDBase is the first host id of the ranges whole machines take
// (--machine): 65536 ids each (root inside is the first), one per live
// sandbox of every pool of the host, all below 2^31.
const MachineIDBase = 2_000_000_000

// machineRanges is how many ranges there are from MachineIDBase.
const machineRanges = (1<<31 - MachineIDBase) / uidRange

// takeMachineRange takes the first range from MachineIDBase no live
// sandbox of this host holds, until the returned file closes.
func takeMachineRange() (int, *os.File, error) {
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return 0, nil, fmt.Errorf("id range: %w", err)
	}
	for k := range machineRanges {
		b := MachineIDBase + k*uidRange
		f, err := lockRange("machine", b)
		if err == nil {
			return b, f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return 0, nil, fmt.Errorf("id range: %w", err)
		}
	}
	return 0, nil, fmt.Errorf("every one of the host's %d id ranges for whole machines is in use", machineRanges)
}

// uidLockDir holds one lock file per uid range a live pool uses.
const uidLockDir = "/run/aiod-pool"

// uidRanges is how many ranges of uidRange uids above DefaultUIDBase a
// pool may take by default (32 × 65536 stays below 2^31).
const uidRanges = 32

// reserveUIDs takes a uid range for the pool's life: base, when given,
// else the first range above DefaultUIDBase no other live pool of this
// host holds (a2c up's and aiod pool's, say), so that no two sandboxes
// of two pools share an account and the kernel's per-user limits. A
// range is held by a lock file under /run/aiod-pool (flock), released
// when the returned file closes, however the pool ends.
func reserveUIDs(base int) (*os.File, int, error) {
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("uid range: %w", err)
	}
	try := func(b int) (*os.File, error) { return lockRange("uids", b) }
	if base != 0 {
		f, err := try(base)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, 0, fmt.Errorf("the uids from %d are in use by another pool on this host; give this one another --uid-base", base)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("uid range: %w", err)
		}
		return f, base, nil
	}
	for k := range uidRanges {
		b := DefaultUIDBase + k*uidRange
		f, err := try(b)
		if err == nil {
			return f, b, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, 0, fmt.Errorf("uid range: %w", err)
		}
	}
	return nil, 0, fmt.Errorf("every uid range of this host is in use by %d other pools", uidRanges)
}
