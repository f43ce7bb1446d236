package transfer

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// UploadResult is the data of a successful upload.
type UploadResult struct {
	// FilePath is the absolute path the file was written to.
	FilePath string `json:"file_path"`
	// FileSize is the number of bytes written.
	FileSize int64 `json:"file_size"`
	// Success is always true: a failed upload is an error instead.
	Success bool `json:"success"`
}

// Upload writes src to path (relative paths resolve against the
// workspace), owned by user (or the default user). The destination
// directory must exist: unlike a write, an upload creates no parents, and
// a missing one is not_found "Failed to upload file: Destination directory
// not found" (404 on /v2, as the OpenAPI declares). It streams into a
// .aiod-upload-<id>.part file next to the target, syncs it, and renames it
// over the target, which keeps its mode (and, under root with no user, its
// owner). On any failure the .part file is removed and an existing target
// is left untouched. Errors are *fserr.Error with operation "upload".
func (e *Engine) Upload(ctx context.Context, path, user string, src io.Reader) (*UploadResult, error) {
	o, err := e.owner("upload", path, user)
	if err != nil {
		return nil, err
	}
	target, err := e.target(path, "")
	if err != nil {
		return nil, err
	}
	return e.store(ctx, path, target, o, src)
}

// spool is a file staged under a .part name.
type spool struct {
	name string
	size int64
}

// spoolIn writes src to a new .part file in dir and syncs it. On failure
// nothing is left behind.
func (e *Engine) spoolIn(ctx context.Context, dir string, src io.Reader) (*spool, error) {
	name := filepath.Join(dir, stageName(".aiod-upload-"))
	var f *os.File
	err := e.inView(func() error {
		var err error
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.track(name)
	// The anonymous struct hides File.ReadFrom, whose generic fallback
	// would write in the reader's small chunks.
	n, err := copyFull(ctx, struct{ io.Writer }{f}, src)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		e.discard(name)
		return nil, err
	}
	return &spool{name: name, size: n}, nil
}

// commit renames a spool over target, carrying over the mode (and under
// root the owner) of the file it replaces. A spool staged on another
// filesystem is first copied next to the target. On failure the spool is
// removed.
func (e *Engine) commit(ctx context.Context, sp *spool, target string, o *owner) error {
	err := e.inView(func() error { return e.place(sp, target, o) })
	if errors.Is(err, syscall.EXDEV) {
		var moved *spool
		if moved, err = e.respool(ctx, sp, filepath.Dir(target)); err == nil {
			sp = moved
			err = e.inView(func() error { return e.place(sp, target, o) })
		}
	}
	if err != nil {
		e.discard(sp.name)
		return err
	}
	e.forget(sp.name)
	return nil
}

// place gives the spool the replaced file's mode and the owner it should
// have (o; with none, a root daemon outside a sandbox keeps the replaced
// file's owner) and renames it over target. Call it in the engine's
// view.
func (e *Engine) place(sp *spool, target string, o *owner) error {
	if fi, err := os.Stat(target); err == nil {
		if fi.IsDir() {
			return &fs.PathError{Op: "rename", Path: target, Err: syscall.EISDIR}
		}
		if err := os.Chmod(sp.name, fi.Mode().Perm()); err != nil {
			return err
		}
		if o == nil && os.Geteuid() == 0 && e.cfg.Sandbox == nil {
			o = ownerOf(fi)
		}
	}
	if err := o.lchown(sp.name); err != nil {
		return err
	}
	return os.Rename(sp.name, target)
}

// respool copies a spool into dir and removes the original.
func (e *Engine) respool(ctx context.Context, sp *spool, dir string) (*spool, error) {
	var f *os.File
	err := e.inView(func() error {
		var err error
		f, err = os.Open(sp.name)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer e.discard(sp.name)
	defer f.Close()
	return e.spoolIn(ctx, dir, f)
}

// store spools src next to target and commits it.
func (e *Engine) store(ctx context.Context, path, target string, o *owner, src io.Reader) (*UploadResult, error) {
	sp, err := e.spoolIn(ctx, filepath.Dir(target), src)
	if err == nil {
		err = e.commit(ctx, sp, target, o)
	}
	if err != nil {
		return nil, fserr.From("upload", path, err)
	}
	return &UploadResult{FilePath: target, FileSize: sp.size, Success: true}, nil
}

// target resolves where an upload lands: path, or the file's own name in
// the directory path names (with a trailing slash, or an existing
// directory), or in the workspace when path is empty. The directory it
// lands in must exist (see destDir); none is created.
func (e *Engine) target(path, filename string) (string, error) {
	name := path
	if name == "" {
		name = filename
	}
	abs, err := e.resolve("upload", name)
	if err != nil {
		return "", err
	}
	err = e.inView(func() error {
		if fi, err := os.Stat(abs); strings.HasSuffix(path, "/") || (err == nil && fi.IsDir()) {
			base := filepath.Base(filename)
			if filename == "" || base == "." || base == ".." || base == string(filepath.Separator) {
				return fserr.Errno("upload", path, syscall.EISDIR)
			}
			abs = filepath.Join(abs, base)
		}
		return destDir(path, filepath.Dir(abs))
	})
	if err != nil {
		return "", fserr.From("upload", path, err)
	}
	return abs, nil
}

// destDir checks that an upload's destination directory exists: missing
// is not_found "Destination directory not found", a non-directory on the
// way ENOTDIR (invalid_target).
func destDir(path, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fserr.WithErrno("upload", path, fserr.Phrase("upload")+": Destination directory not found", syscall.ENOENT)
	case err != nil:
		return fserr.From("upload", path, err)
	case !fi.IsDir():
		return fserr.Errno("upload", path, syscall.ENOTDIR)
	}
	return nil
}

type uploadQuery struct {
	Path *string `json:"path"`
	User *string `json:"user"`
}

// errNoFile is a multipart body without a file part.
var errNoFile = errors.New("no file part")

// maxPathField caps the path form field.
const maxPathField = 4096

// receive reads the form. A file part that comes after the path (or with
// ?path=) streams straight next to its target; one that comes first is
// staged in the workspace until the path is known, and the destination
// directory is checked then, with the same rule (it must exist).
func (e *Engine) receive(ctx context.Context, mr *multipart.Reader, path, user string) (*UploadResult, error) {
	o, err := e.owner("upload", path, user)
	if err != nil {
		return nil, err
	}
	var early *spool
	var filename string
	defer func() {
		if early != nil {
			e.discard(early.name)
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fserr.New("upload", path, fserr.BadRequest, fserr.Phrase("upload")+": "+err.Error())
		}
		switch part.FormName() {
		case "path":
			b, err := io.ReadAll(io.LimitReader(part, maxPathField+1))
			if err != nil {
				return nil, fserr.From("upload", path, err)
			}
			if len(b) > maxPathField {
				return nil, fserr.Errno("upload", path, syscall.ENAMETOOLONG)
			}
			path = string(b)
		case "file":
			if early != nil {
				continue
			}
			filename = part.FileName()
			if path != "" {
				target, err := e.target(path, filename)
				if err != nil {
					return nil, err
				}
				return e.store(ctx, path, target, o, part)
			}
			if early, err = e.spoolIn(ctx, e.cfg.Workspace, part); err != nil {
				return nil, fserr.From("upload", path, err)
			}
		}
	}
	if early == nil {
		return nil, errNoFile
	}
	target, err := e.target(path, filename)
	if err != nil {
		return nil, err
	}
	sp := early
	early = nil
	if err := e.commit(ctx, sp, target, o); err != nil {
		return nil, fserr.From("upload", path, err)
	}
	return &UploadResult{FilePath: target, FileSize: sp.size, Success: true}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
