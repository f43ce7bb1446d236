package transfer

import (
	"archive/tar"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// ErrTooLarge is the kind of an error from a transfer past one of the
// engine's limits (tar body, extracted bytes, entries): an *fserr.Error
// (bad_request, EFBIG) whose kind is this sub-kind of api.ErrTooLarge,
// so HTTP answers it 413, on v1 too.
var ErrTooLarge = api.NewKind("transfer limit exceeded", api.ErrTooLarge)

func limitf(path, format string, args ...any) error {
	return fserr.WithErrno("tree", path, fserr.Phrase("tree")+": "+fmt.Sprintf(format, args...), syscall.EFBIG).WithKind(ErrTooLarge)
}

// classify is err as an *fserr.Error, keeping an error that already
// carries one (and with it any ErrTooLarge mark).
func classify(op, path string, err error) error {
	var fe *fserr.Error
	if errors.As(err, &fe) {
		return err
	}
	return fserr.From(op, path, err)
}

func badf(path, format string, args ...any) error {
	return fserr.New("tree", path, fserr.BadRequest, fserr.Phrase("tree")+": "+fmt.Sprintf(format, args...))
}

// TreeResult is the data of a successful tar import.
type TreeResult struct {
	// Path is the absolute destination directory.
	Path string `json:"path"`
	// Entries counts the members written (skipped device and FIFO
	// members are not counted).
	Entries int64 `json:"entries"`
	// Mode is "rename" when the destination did not exist and the staged
	// tree took its place whole, "merge" when it existed and the members
	// were overlaid one by one.
	Mode string `json:"mode"`
}

// ExportTree writes the directory at path to w as a tar stream: regular
// files, directories and symlinks (as links), named relative to the
// directory; devices, FIFOs and sockets are left out. Errors before the
// first byte are *fserr.Error with operation "tree".
func (e *Engine) ExportTree(ctx context.Context, path string, w io.Writer) error {
	root, err := e.openTree(path)
	if err != nil {
		return err
	}
	defer root.Close()
	return e.writeTree(ctx, root, w)
}

func (e *Engine) openTree(path string) (*os.Root, error) {
	abs, err := e.resolve("tree", path)
	if err != nil {
		return nil, err
	}
	var root *os.Root
	err = e.inView(func() error {
		if fi, err := os.Stat(abs); err != nil {
			return err
		} else if !fi.IsDir() {
			return fserr.Errno("tree", path, syscall.ENOTDIR)
		}
		root, err = os.OpenRoot(abs)
		return err
	})
	if err != nil {
		return nil, fserr.From("tree", path, err)
	}
	return root, nil
}

// writeTree writes the tree under root to w as a tar stream. Under a
// sandbox every lookup (stat, directory read, open, readlink) runs in
// the view as the sandbox account, so the export holds what the account
// may read; the contents are copied outside it.
func (e *Engine) writeTree(ctx context.Context, root *os.Root, w io.Writer) error {
	tw := tar.NewWriter(w)
	fsys := root.FS()
	if e.cfg.Sandbox != nil {
		fsys = viewFS{fsys: fsys, e: e}
	}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var (
			link string
			f    *os.File
		)
		switch {
		case fi.Mode().IsRegular():
			// Opened before the header, non-blocking and checked: a file
			// swapped for a FIFO since the walk saw it is skipped, not
			// waited on.
			if err = e.inView(func() error {
				f, err = root.OpenFile(name, os.O_RDONLY|openFlags, 0)
				return err
			}); err != nil {
				return err
			}
			defer f.Close()
			if fi, err = f.Stat(); err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
		case fi.IsDir():
		case fi.Mode()&fs.ModeSymlink != 0:
			if err = e.inView(func() error {
				link, err = root.Readlink(name)
				return err
			}); err != nil {
				return err
			}
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil || f == nil {
			return err
		}
		_, err = io.CopyN(tw, f, hdr.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("transfer: tar stream: %w", err)
	}
	return tw.Close()
}

// viewFS is a tree's fs.FS whose lookups run in the engine's view: the
// walk of an export under a sandbox. A directory's entries are read with
// their metadata in one go, so DirEntry.Info makes no lookup of its own
// outside the view.
type viewFS struct {
	fsys fs.FS
	e    *Engine
}

func (v viewFS) Open(name string) (f fs.File, err error) {
	verr := v.e.inView(func() error { f, err = v.fsys.Open(name); return nil })
	return f, cmp.Or(verr, err)
}

func (v viewFS) Stat(name string) (fi fs.FileInfo, err error) {
	verr := v.e.inView(func() error { fi, err = fs.Stat(v.fsys, name); return nil })
	return fi, cmp.Or(verr, err)
}

func (v viewFS) ReadDir(name string) (ents []fs.DirEntry, err error) {
	verr := v.e.inView(func() error {
		ents, err = fs.ReadDir(v.fsys, name)
		for i, d := range ents {
			fi, ierr := d.Info()
			ents[i] = statedEntry{DirEntry: d, fi: fi, err: ierr}
		}
		return nil
	})
	return ents, cmp.Or(verr, err)
}

// statedEntry is a directory entry with its metadata already read.
type statedEntry struct {
	fs.DirEntry
	fi  fs.FileInfo
	err error
}

func (d statedEntry) Info() (fs.FileInfo, error) { return d.fi, d.err }

// ImportTree extracts the tar stream body into the directory at path,
// owned by user (or the default user). When the directory does not exist
// the archive is extracted into a staged sibling that is then renamed
// into place, so a failure leaves nothing behind ("rename"); when it
// exists the members are overlaid one by one, each file through a
// temporary name and a rename ("merge"). Members with an absolute name or
// a ".." component, symlinks or hard links reaching outside the
// destination, and members that would be written through a symlink are
// rejected; device and FIFO members are skipped. Files get mode 0644, or
// 0755 when the archive sets an execute bit; directories 0755. Errors are
// *fserr.Error with operation "tree"; a bad archive is bad_request, and
// one past a limit also matches [ErrTooLarge].
func (e *Engine) ImportTree(ctx context.Context, path, user string, body io.Reader) (*TreeResult, error) {
	o, err := e.owner("tree", path, user)
	if err != nil {
		return nil, err
	}
	dest, err := e.resolve("tree", path)
	if err != nil {
		return nil, err
	}
	res := &TreeResult{Path: dest, Mode: "merge"}
	var fi fs.FileInfo
	if verr := e.inView(func() error { fi, err = os.Stat(dest); return nil }); verr != nil {
		return nil, fserr.From("tree", path, verr)
	}
	switch {
	case err == nil && !fi.IsDir():
		return nil, fserr.Errno("tree", path, syscall.ENOTDIR)
	case err == nil:
		if res.Entries, err = e.extract(ctx, dest, path, o, body); err != nil {
			return nil, err
		}
		return res, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fserr.From("tree", path, err)
	}
	res.Mode = "rename"
	parent := filepath.Dir(dest)
	stage := filepath.Join(parent, stageName(".aiod-tree-"))
	err = e.inView(func() error {
		if err := mkdirAll(parent, o); err != nil {
			return err
		}
		if err := os.Mkdir(stage, 0o755); err != nil {
			return err
		}
		e.track(stage)
		return errors.Join(os.Chmod(stage, 0o755), o.lchown(stage))
	})
	defer e.discard(stage)
	if err != nil {
		return nil, fserr.From("tree", path, err)
	}
	if res.Entries, err = e.extract(ctx, stage, path, o, body); err != nil {
		return nil, err
	}
	if err := e.inView(func() error { return os.Rename(stage, dest) }); err != nil {
		return nil, fserr.From("tree", path, err)
	}
	return res, nil
}

// capped reads at most max bytes and notes whether the stream held more.
type capped struct {
	r    io.Reader
	n    int64
	max  int64
	over bool
}

func (c *capped) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if c.n += int64(n); c.n > c.max {
		c.over = true
		return 0, ErrTooLarge
	}
	return n, err
}

// extractor writes archive members under root, never outside it. Every
// lookup and creation under root runs in the engine's view (inView);
// only the copy of a member's content into its open file runs outside.
type extractor struct {
	ctx   context.Context
	p     *Engine
	root  *os.Root
	dir   string // root's absolute path
	path  string // the destination as the client wrote it
	o     *owner
	dirs  map[string]bool // member directories checked to be real directories
	bytes int64
}

func (e *Engine) extract(ctx context.Context, dir, path string, o *owner, body io.Reader) (int64, error) {
	var root *os.Root
	err := e.inView(func() error {
		var err error
		root, err = os.OpenRoot(dir)
		return err
	})
	if err != nil {
		return 0, fserr.From("tree", path, err)
	}
	defer root.Close()
	x := &extractor{ctx: ctx, p: e, root: root, dir: dir, path: path, o: o, dirs: map[string]bool{}}
	in := &capped{r: io.LimitReader(body, e.cfg.MaxTreeBody+1), max: e.cfg.MaxTreeBody}
	tr := tar.NewReader(in)
	var seen, written int64
	for {
		hdr, err := tr.Next()
		switch {
		case err == io.EOF:
			return written, nil
		case in.over:
			return written, limitf(path, "archive is larger than %d bytes", e.cfg.MaxTreeBody)
		case err != nil:
			return written, badf(path, "invalid tar archive: %v", err)
		}
		if seen++; seen > e.cfg.MaxTreeEntries {
			return written, limitf(path, "archive has more than %d entries", e.cfg.MaxTreeEntries)
		}
		ok, err := x.member(hdr, tr)
		if in.over {
			return written, limitf(path, "archive is larger than %d bytes", e.cfg.MaxTreeBody)
		}
		if err != nil {
			return written, classify("tree", path, err)
		}
		if ok {
			written++
		}
	}
}

// member writes one archive member; ok is false when it was skipped.
func (x *extractor) member(hdr *tar.Header, r io.Reader) (ok bool, err error) {
	if err := x.ctx.Err(); err != nil {
		return false, err
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo, tar.TypeXGlobalHeader:
		return false, nil
	}
	name, err := x.name(hdr.Name)
	if err != nil {
		return false, err
	}
	if name == "." {
		if hdr.Typeflag == tar.TypeDir {
			return false, nil
		}
		return false, badf(x.path, "member %q is not a file name", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return true, x.p.inView(func() error {
			if err := x.parents(name); err != nil {
				return err
			}
			return x.ensureDir(name, name)
		})
	case tar.TypeReg:
		return true, x.file(name, hdr, r)
	case tar.TypeSymlink:
		if !symlinkInside(name, hdr.Linkname) {
			return false, badf(x.path, "symlink %q -> %q escapes the destination", hdr.Name, hdr.Linkname)
		}
		return true, x.replace(name, func(tmp string) (*os.File, error) {
			return nil, errors.Join(x.root.Symlink(hdr.Linkname, tmp), x.lchown(tmp))
		}, nil)
	case tar.TypeLink:
		old, err := x.name(hdr.Linkname)
		if err != nil {
			return false, err
		}
		var fi fs.FileInfo
		if verr := x.p.inView(func() error { fi, err = x.root.Lstat(old); return nil }); verr != nil {
			return false, verr
		}
		if err != nil || !fi.Mode().IsRegular() {
			return false, badf(x.path, "hard link %q -> %q does not name a regular file in the archive", hdr.Name, hdr.Linkname)
		}
		return true, x.replace(name, func(tmp string) (*os.File, error) { return nil, x.root.Link(old, tmp) }, nil)
	}
	return false, badf(x.path, "member %q has unsupported type %q", hdr.Name, hdr.Typeflag)
}

// name validates a member name and returns it cleaned, relative to the
// destination.
func (x *extractor) name(n string) (string, error) {
	switch {
	case n == "" || strings.IndexByte(n, 0) >= 0:
		return "", badf(x.path, "member name %q is invalid", n)
	case strings.HasPrefix(n, "/"):
		return "", badf(x.path, "member %q has an absolute name", n)
	}
	for _, c := range strings.Split(n, "/") {
		if c == ".." {
			return "", badf(x.path, "member %q uses a .. component", n)
		}
	}
	return path.Clean(n), nil
}

// symlinkInside reports whether a symlink named name with this target
// resolves inside the destination however the archive's other links
// point: the target is relative, and its ".." components all lead, no
// more of them than name has parent directories. (Member parents are
// real directories, so leading ".." climbs real directories only.)
func symlinkInside(name, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.IndexByte(target, 0) >= 0 {
		return false
	}
	depth := 0
	if dir := path.Dir(name); dir != "." {
		depth = strings.Count(dir, "/") + 1
	}
	up, down := 0, false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if down {
				return false
			}
			up++
		default:
			down = true
		}
	}
	return up <= depth
}

// parents makes sure each parent of name is a real directory (not a
// symlink), creating the missing ones. Call it in the engine's view.
func (x *extractor) parents(name string) error {
	dir := path.Dir(name)
	if dir == "." || x.dirs[dir] {
		return nil
	}
	if err := x.parents(dir); err != nil {
		return err
	}
	return x.ensureDir(dir, name)
}

// ensureDir makes sure dir is a real directory, creating it if missing.
// Call it in the engine's view.
func (x *extractor) ensureDir(dir, member string) error {
	fi, err := x.root.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		return badf(x.path, "member %q: %q is not a directory", member, dir)
	case errors.Is(err, fs.ErrNotExist):
		if err := x.root.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if err := errors.Join(x.root.Chmod(dir, 0o755), x.lchown(dir)); err != nil {
			return err
		}
	default:
		return err
	}
	x.dirs[dir] = true
	return nil
}

func (x *extractor) lchown(name string) error {
	if x.o == nil {
		return nil
	}
	return x.root.Lchown(name, x.o.uid, x.o.gid)
}

// file writes a regular file member.
func (x *extractor) file(name string, hdr *tar.Header, r io.Reader) error {
	if x.bytes+hdr.Size > x.p.cfg.MaxTreeBytes {
		return limitf(x.path, "archive extracts to more than %d bytes", x.p.cfg.MaxTreeBytes)
	}
	perm := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		perm = 0o755
	}
	create := func(tmp string) (*os.File, error) {
		return x.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	return x.replace(name, create, func(f *os.File) error {
		n, err := copyFull(x.ctx, struct{ io.Writer }{f}, r)
		x.bytes += n
		if err == nil {
			err = f.Chmod(perm)
		}
		if err == nil && x.o != nil {
			err = f.Chown(x.o.uid, x.o.gid)
		}
		return errors.Join(err, f.Close())
	})
}

// replace creates name through create at a temporary sibling name, then
// renames it over name; a directory in the way is an error. On failure
// the temporary is removed. create runs in the engine's view; the file
// it may open is then written by fill outside it (streaming the archive
// holds no sandbox thread), and fill closes it.
func (x *extractor) replace(name string, create func(tmp string) (*os.File, error), fill func(*os.File) error) error {
	var (
		tmp, abs string
		f        *os.File
	)
	err := x.p.inView(func() error {
		if err := x.parents(name); err != nil {
			return err
		}
		if fi, err := x.root.Lstat(name); err == nil && fi.IsDir() {
			return badf(x.path, "member %q: a directory is in the way", name)
		}
		tmp = path.Join(path.Dir(name), stageName(".aiod-tree-"))
		abs = filepath.Join(x.dir, filepath.FromSlash(tmp))
		x.p.track(abs)
		var err error
		f, err = create(tmp)
		return err
	})
	if abs == "" {
		return err
	}
	if err == nil && f != nil {
		err = fill(f)
	}
	verr := x.p.inView(func() error {
		if err == nil {
			err = x.root.Rename(tmp, name)
		}
		if err != nil {
			_ = x.root.Remove(tmp)
		}
		return nil
	})
	x.p.forget(abs)
	return cmp.Or(verr, err)
}
