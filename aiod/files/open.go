package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// openContent opens path to read or write its content (flag is the
// access mode and O_APPEND, O_CREATE, O_TRUNC as wanted) without ever
// blocking: the open is O_NONBLOCK, so a FIFO with no peer cannot hang it,
// and what was opened is checked by fstat. Regular files go through (for
// them the kernel ignores O_NONBLOCK, and the runtime, which cannot poll
// them, puts them back in blocking mode). A directory is EISDIR. A FIFO,
// a socket or a device is fserr.ErrNotRegular, except a character device
// when dev is set: writing to /dev/null or /dev/full is legitimate and
// never blocks on open.
func openContent(path string, flag int, perm fs.FileMode, dev bool) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if err != nil {
		// ENXIO: a socket, or a FIFO opened to write with no reader.
		if errors.Is(err, syscall.ENXIO) {
			if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
				return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fserr.ErrNotRegular}
			}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		switch m := fi.Mode(); {
		case m.IsRegular():
			return f, fi, nil
		case m.IsDir():
			err = &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
		case dev && m&fs.ModeCharDevice != 0:
			return f, fi, nil
		default:
			err = &fs.PathError{Op: "open", Path: path, Err: fserr.ErrNotRegular}
		}
	}
	f.Close()
	return nil, nil, err
}

// maxLinks is how many symbolic links one path may chain, as the
// kernel's MAXSYMLINKS.
const maxLinks = 40

// linkTarget follows path while it is a symbolic link and returns where
// the chain ends, which need not exist (a dangling link ends at the path
// it names). A relative link target resolves against the link's own
// directory (physically, as the kernel does). More than maxLinks links is
// ELOOP.
func linkTarget(path string) (string, error) {
	for hops := 0; ; hops++ {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		if hops == maxLinks {
			return "", &fs.PathError{Op: "open", Path: path, Err: syscall.ELOOP}
		}
		t, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			dir := filepath.Dir(path)
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
			t = filepath.Join(dir, t)
		}
		path = t
	}
}

// writeTarget prepares a write to abs: it creates abs's missing parent
// directories (owned by o), follows abs through any chain of symbolic
// links, and creates the parents of where the chain ends too, so that a
// write through a dangling link creates its target as a write to the
// target itself would. It returns the path to write.
func writeTarget(abs string, o *owner) (string, error) {
	if _, err := mkdirAll(filepath.Dir(abs), o); err != nil {
		return "", err
	}
	target, err := linkTarget(abs)
	if err != nil {
		return "", err
	}
	if target != abs {
		if _, err := mkdirAll(filepath.Dir(target), o); err != nil {
			return "", err
		}
	}
	return target, nil
}
