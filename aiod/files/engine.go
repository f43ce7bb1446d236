package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/account"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// Engine runs the file operations. It is safe for concurrent use; the
// zero value is not usable, make one with [NewEngine].
type Engine struct {
	workspace   string
	defaultUser string
	hist        *history
	// sb is the isolation in force: every path the engine touches is
	// resolved in its view, as its account (nil: the host's, as the
	// daemon). See inView.
	sb *sandbox.Sandbox
}

// NewEngine returns an engine that resolves relative paths against
// cfg.Workspace (made absolute; the current directory when empty) and,
// when a request names no owner, makes cfg.DefaultUser (may be empty: the
// daemon's own account) the owner of what it creates.
func NewEngine(cfg Config) *Engine {
	workspace := cfg.Workspace
	if abs, err := filepath.Abs(workspace); err == nil {
		workspace = abs
	}
	return &Engine{workspace: workspace, defaultUser: cfg.DefaultUser, hist: newHistory(), sb: cfg.Sandbox}
}

// inView runs f, the part of an operation that touches paths, where the
// engine's paths live: on a thread of the sandbox's view, as the
// sandbox account, so that absolute paths and symbolic links resolve
// inside the view (a path outside it is ENOENT) and permissions are the
// account's; without a sandbox, in place. f must not start goroutines
// that touch paths (they would run outside the view). When the sandbox
// cannot be reached the operation fails as an io_error that says so.
func inView[R any](e *Engine, op, shown string, f func() (R, *fserr.Error)) (R, *fserr.Error) {
	var (
		res  R
		ferr *fserr.Error
	)
	if err := e.sb.Do(func() error { res, ferr = f(); return nil }); err != nil {
		var zero R
		return zero, unavailable(op, shown, err)
	}
	return res, ferr
}

// unavailable is the error of an operation the sandbox could not run:
// busy (every thread of its view in use, retryable), or closed, or not
// able to start again.
func unavailable(op, shown string, err error) *fserr.Error {
	if errors.Is(err, sandbox.ErrBusy) {
		return fserr.From(op, shown, err)
	}
	return fserr.New(op, shown, fserr.IOError, fserr.Phrase(op)+": the sandbox is unavailable")
}

// keepOwner reports whether a replace gives the new file the old one's
// owner: only a root daemon outside a sandbox can (the sandbox account
// may not give a file away).
func (e *Engine) keepOwner() bool { return e.sb == nil && os.Geteuid() == 0 }

// Ownership names the account that owns the files and directories an
// operation creates (the v2 ?user=, v1 sudo:true is "root"). Empty means
// the engine's default owner. It is validated on every operation; the
// operation itself always runs with the daemon's privileges. Under a
// sandbox it is validated and then not applied: every operation runs as
// the sandbox account, what it creates belongs to that account, and a
// replace does not carry the old file's owner over (the account may not
// give files away).
type Ownership struct {
	User string
}

func (o *Ownership) setUser(u string) { o.User = u }

// owner is a resolved ownership identity that differs from the daemon's:
// created objects are chowned to it. nil means "leave them as created".
type owner struct{ uid, gid int }

// chown gives path to the owner; a nil owner does nothing.
func (o *owner) chown(path string) error {
	if o == nil {
		return nil
	}
	if err := os.Lchown(path, o.uid, o.gid); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	return nil
}

// Resolve maps a client path to the one the engine operates on: absolute
// paths as given, relative ones joined to the workspace. An empty path or
// one holding NUL is an invalid_path error for op, echoing p.
func (e *Engine) Resolve(op, p string) (string, *fserr.Error) {
	return fserr.Resolve(op, e.workspace, p)
}

// prepare resolves the path and the ownership identity of a request.
func (e *Engine) prepare(ctx context.Context, op, p string, o Ownership) (string, *owner, *fserr.Error) {
	if err := ctx.Err(); err != nil {
		return "", nil, fserr.New(op, p, fserr.IOError, fmt.Sprintf("%s: %v", fserr.Phrase(op), err))
	}
	abs, ferr := e.Resolve(op, p)
	if ferr != nil {
		return "", nil, ferr
	}
	own, ferr := e.owner(op, p, o.User)
	return abs, own, ferr
}

// owner resolves the account name; unknown accounts and a non-root daemon
// asked for another account are bad_request.
func (e *Engine) owner(op, p, name string) (*owner, *fserr.Error) {
	if name == "" {
		name = e.defaultUser
	}
	if name == "" {
		return nil, nil
	}
	a, err := account.Lookup(name)
	switch {
	case err != nil:
		return nil, fserr.New(op, p, fserr.BadRequest, err.Error())
	case a.Self, e.sb != nil:
		return nil, nil
	}
	return &owner{uid: int(a.UID), gid: int(a.GID)}, nil
}

// mkdirAll creates dir and its missing parents, each owned by o. It
// reports whether dir itself was created. An existing non-directory on
// the way is EEXIST for dir itself and ENOTDIR for a parent.
func mkdirAll(dir string, o *owner) (bool, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				no := syscall.ENOTDIR
				if d == dir {
					no = syscall.EEXIST
				}
				return false, &fs.PathError{Op: "mkdir", Path: d, Err: no}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], 0o777)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if err := o.chown(missing[i]); err != nil {
			return false, err
		}
	}
	return len(missing) > 0, nil
}

// newID is a random hex id for staging names.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// timeString is modified_time: RFC 3339 in UTC.
func timeString(fi fs.FileInfo) *string {
	s := fi.ModTime().UTC().Format(time.RFC3339)
	return &s
}

// permString is permissions: the octal mode bits ("644").
func permString(fi fs.FileInfo) string {
	return strconv.FormatUint(uint64(fi.Mode().Perm()), 8)
}

// extension is Rust's Path::extension: the text after the last dot, none
// for a name without a dot or a dot-file such as ".bashrc".
func extension(name string) *string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return nil
	}
	ext := name[i+1:]
	return &ext
}

// hidden reports whether a name is hidden by the Unix convention.
func hidden(name string) bool { return strings.HasPrefix(name, ".") }

func ptr[T any](v T) *T { return &v }
