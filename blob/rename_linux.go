package blob

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// noFollow makes opening a .part fail rather than follow a symbolic link.
const noFollow = syscall.O_NOFOLLOW

// renameNoReplace renames src to dst unless dst exists (then an error
// matching fs.ErrExist): renameat2(RENAME_NOREPLACE), or, on a file system
// without it, a hard link and an unlink.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return linkNoReplace(src, dst)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}
