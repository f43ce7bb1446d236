package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// FsStatQuery is a stat: GET /v2/fs/stat's query and /v1/file/stat's body.
type FsStatQuery struct {
	Path string `json:"path" serde:"required"`
	// FollowSymlinks (default true) describes a link's target; false
	// describes the link itself.
	FollowSymlinks *bool `json:"follow_symlinks"`
	Ownership      `json:"-"`
}

// FileStatResult is one path's metadata.
type FileStatResult struct {
	Path         string  `json:"path"`
	Size         int64   `json:"size"`
	Permissions  string  `json:"permissions"`
	IsDirectory  bool    `json:"is_directory"`
	IsSymlink    bool    `json:"is_symlink"`
	ModifiedTime *string `json:"modified_time"`
}

// Stat describes a path; is_symlink says whether the path itself is a
// link, whatever FollowSymlinks.
func (e *Engine) Stat(ctx context.Context, req FsStatQuery) (*FileStatResult, *fserr.Error) {
	const op = "stat"
	abs, _, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	return inView(e, op, req.Path, func() (*FileStatResult, *fserr.Error) {
		li, err := os.Lstat(abs)
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		fi := li
		if req.FollowSymlinks == nil || *req.FollowSymlinks {
			if fi, err = os.Stat(abs); err != nil {
				return nil, fserr.From(op, req.Path, err)
			}
		}
		return &FileStatResult{
			Path: req.Path, Size: fi.Size(), Permissions: permString(fi), IsDirectory: fi.IsDir(),
			IsSymlink: li.Mode()&fs.ModeSymlink != 0, ModifiedTime: timeString(fi),
		}, nil
	})
}

// FileMkdirRequest is a mkdir (both versions).
type FileMkdirRequest struct {
	Path string `json:"path" serde:"required"`
	// Parents creates missing parents and accepts an existing directory.
	Parents   bool `json:"parents"`
	Ownership `json:"-"`
}

// FileMkdirResult is a mkdir's answer; Created is false when Parents
// found the directory already there.
type FileMkdirResult struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
}

// Mkdir creates a directory: without Parents an existing path is
// already_exists and a missing parent not_found.
func (e *Engine) Mkdir(ctx context.Context, req FileMkdirRequest) (*FileMkdirResult, *fserr.Error) {
	const op = "mkdir"
	abs, own, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	return inView(e, op, req.Path, func() (*FileMkdirResult, *fserr.Error) {
		created := true
		var err error
		if req.Parents {
			created, err = mkdirAll(abs, own)
		} else if err = os.Mkdir(abs, 0o777); err == nil {
			err = own.chown(abs)
		}
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		return &FileMkdirResult{Path: req.Path, Created: created}, nil
	})
}

// FileDeleteRequest is a delete (both versions).
type FileDeleteRequest struct {
	Path string `json:"path" serde:"required"`
	// Recursive also removes non-empty directories.
	Recursive bool `json:"recursive"`
	Ownership `json:"-"`
}

// FileDeleteResult is a delete's answer.
type FileDeleteResult struct {
	Path        string `json:"path"`
	IsDirectory bool   `json:"is_directory"`
}

// Delete removes a file, link or empty directory; a non-empty directory
// needs Recursive (else ENOTEMPTY, invalid_target). A link is removed,
// never its target. The filesystem root is never deleted: "/" (or a path
// resolving to it) is invalid_target "refusing to delete /".
func (e *Engine) Delete(ctx context.Context, req FileDeleteRequest) (*FileDeleteResult, *fserr.Error) {
	const op = "delete"
	abs, _, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	return inView(e, op, req.Path, func() (*FileDeleteResult, *fserr.Error) {
		fi, err := os.Lstat(abs)
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		if isRoot(abs, fi) {
			return nil, fserr.New(op, req.Path, fserr.InvalidTarget, fserr.Phrase(op)+": refusing to delete /")
		}
		switch {
		case !fi.IsDir():
			err = syscall.Unlink(abs)
		case req.Recursive:
			err = os.RemoveAll(abs)
		default:
			err = syscall.Rmdir(abs)
		}
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		return &FileDeleteResult{Path: req.Path, IsDirectory: fi.IsDir()}, nil
	})
}

// isRoot reports whether abs, whose lstat is fi, names the filesystem
// root: "/" itself, a path that cleans to it ("/..", "a/../.."), or a
// directory path that resolves to it through links ("/link-to-root/").
func isRoot(abs string, fi fs.FileInfo) bool {
	if filepath.Clean(abs) == "/" {
		return true
	}
	if !fi.IsDir() {
		return false
	}
	real, err := filepath.EvalSymlinks(abs)
	return err == nil && real == "/"
}

// FileCopyRequest is a copy's body (both versions).
type FileCopyRequest struct {
	Source      string `json:"source" serde:"required"`
	Destination string `json:"destination" serde:"required"`
	// Overwrite replaces an existing destination; without it that is
	// already_exists.
	Overwrite bool `json:"overwrite"`
	Ownership `json:"-"`
}

// FileMoveRequest is a move's body (both versions).
type FileMoveRequest FileCopyRequest

// FileCopyResult is a copy's answer.
type FileCopyResult struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	FilesCopied uint64 `json:"files_copied"`
	BytesCopied uint64 `json:"bytes_copied"`
}

// FileMoveResult is a move's answer.
type FileMoveResult struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// transfer resolves both ends of a copy or move, checks the source exists
// (and, for a copy, is a file, link or directory) and the destination may be taken (removing it under overwrite when the
// operation cannot replace it by itself). It touches paths: call it in
// the engine's view (inView).
func (e *Engine) transfer(ctx context.Context, op string, req FileCopyRequest) (src, dst string, sfi fs.FileInfo, own *owner, ferr *fserr.Error) {
	if src, own, ferr = e.prepare(ctx, op, req.Source, req.Ownership); ferr != nil {
		return
	}
	if dst, ferr = e.Resolve(op, req.Destination); ferr != nil {
		return
	}
	sfi, err := os.Lstat(src)
	if err != nil {
		return "", "", nil, nil, fserr.From(op, req.Source, err)
	}
	if m := sfi.Mode(); op == "copy" && !m.IsRegular() && !m.IsDir() && m&fs.ModeSymlink == 0 {
		return "", "", nil, nil, fserr.From(op, req.Source, fserr.ErrNotRegular)
	}
	if sfi.IsDir() && within(dst, src) {
		return "", "", nil, nil, fserr.WithErrno(op, req.Destination,
			fserr.Phrase(op)+": cannot "+op+" a directory into itself", syscall.EINVAL)
	}
	dfi, err := os.Lstat(dst)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", "", nil, nil, fserr.From(op, req.Destination, err)
	case err == nil && os.SameFile(sfi, dfi):
		return "", "", nil, nil, fserr.WithErrno(op, req.Destination, fserr.Phrase(op)+": source and destination are the same file", syscall.EINVAL)
	case err == nil && !req.Overwrite:
		return "", "", nil, nil, fserr.Errno(op, req.Destination, syscall.EEXIST)
	case err == nil && (dfi.IsDir() || sfi.IsDir() || op == "copy"):
		if err := os.RemoveAll(dst); err != nil {
			return "", "", nil, nil, fserr.From(op, req.Destination, err)
		}
	}
	if _, err := mkdirAll(filepath.Dir(dst), own); err != nil {
		return "", "", nil, nil, fserr.From(op, req.Destination, err)
	}
	return src, dst, sfi, own, nil
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// Copy copies a file, link or directory tree (links copied as links,
// modes kept, new objects owned by the request's owner). Inside a tree,
// FIFOs, sockets and devices are skipped; a source that is one is
// invalid_target "not a regular file".
func (e *Engine) Copy(ctx context.Context, req FileCopyRequest) (*FileCopyResult, *fserr.Error) {
	const op = "copy"
	return inView(e, op, req.Source, func() (*FileCopyResult, *fserr.Error) {
		src, dst, _, own, ferr := e.transfer(ctx, op, req)
		if ferr != nil {
			return nil, ferr
		}
		res := &FileCopyResult{Source: req.Source, Destination: req.Destination}
		if err := copyTree(ctx, src, dst, own, res); err != nil {
			return nil, fserr.From(op, req.Destination, err)
		}
		return res, nil
	})
}

// Move renames source to destination, falling back to copy and delete
// across filesystems.
func (e *Engine) Move(ctx context.Context, req FileMoveRequest) (*FileMoveResult, *fserr.Error) {
	const op = "move"
	return inView(e, op, req.Source, func() (*FileMoveResult, *fserr.Error) {
		src, dst, _, own, ferr := e.transfer(ctx, op, FileCopyRequest(req))
		if ferr != nil {
			return nil, ferr
		}
		err := os.Rename(src, dst)
		if errors.Is(err, syscall.EXDEV) {
			if err = copyTree(ctx, src, dst, own, &FileCopyResult{}); err == nil {
				err = os.RemoveAll(src)
			}
		}
		if err != nil {
			return nil, fserr.From(op, req.Destination, err)
		}
		return &FileMoveResult{Source: req.Source, Destination: req.Destination}, nil
	})
}

// copyTree copies src to the free path dst, counting into res.
func copyTree(ctx context.Context, src, dst string, own *owner, res *FileCopyResult) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			err = os.Mkdir(to, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			var target string
			if target, err = os.Readlink(p); err == nil {
				err = os.Symlink(target, to)
			}
		case fi.Mode().IsRegular():
			var n int64
			n, err = copyFile(p, to, fi.Mode())
			res.FilesCopied++
			res.BytesCopied += uint64(n)
		default:
			return nil // sockets, devices, FIFOs are not copied
		}
		if err != nil {
			return err
		}
		return own.chown(to)
	})
}

// copyFile copies one regular file's bytes and mode.
func copyFile(src, dst string, mode fs.FileMode) (int64, error) {
	in, _, err := openContent(src, os.O_RDONLY, 0, false)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Chmod(mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
