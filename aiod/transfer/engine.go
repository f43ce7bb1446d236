package transfer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/account"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// Default limits of a tar import, as aiod documents them.
const (
	DefaultMaxTreeBody    = 4 << 30
	DefaultMaxTreeBytes   = 4 << 30
	DefaultMaxTreeEntries = 100_000
)

// Config configures a [Plane] and its [Engine]. The zero value is usable.
type Config struct {
	// Sandbox is the isolation in force: uploads, downloads and tree imports resolve in its view as its account (nil: the host's view).
	Sandbox *sandbox.Sandbox
	// Workspace is the directory relative paths resolve against.
	// Default: the current directory.
	Workspace string
	// DefaultUser owns what a request creates when it names no user
	// (aiod's AIO_DEFAULT_USER). Empty: the daemon's own account, and
	// nothing is chowned.
	DefaultUser string
	// Logger receives the plane's diagnostics. Default: discarded.
	Logger *slog.Logger
	// MaxTreeBody caps the bytes of a tar body. Default 4 GiB.
	MaxTreeBody int64
	// MaxTreeBytes caps the file bytes one archive extracts. Default 4 GiB.
	MaxTreeBytes int64
	// MaxTreeEntries caps the members of one archive. Default 100,000.
	MaxTreeEntries int64
}

// Engine moves files and trees in and out of the sandbox: uploads,
// downloads, tar exports and imports. It is safe for concurrent use.
// Staged files of transfers in flight are tracked so that [Engine.Close]
// can remove them.
type Engine struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	staged map[string]struct{}
}

// NewEngine returns an engine with cfg's zero fields set to their
// defaults.
func NewEngine(cfg Config) *Engine {
	if cfg.Workspace == "" {
		cfg.Workspace, _ = os.Getwd()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTreeBody <= 0 {
		cfg.MaxTreeBody = DefaultMaxTreeBody
	}
	if cfg.MaxTreeBytes <= 0 {
		cfg.MaxTreeBytes = DefaultMaxTreeBytes
	}
	if cfg.MaxTreeEntries <= 0 {
		cfg.MaxTreeEntries = DefaultMaxTreeEntries
	}
	return &Engine{cfg: cfg, log: cfg.Logger, staged: map[string]struct{}{}}
}

// Close removes the staged files and directories of transfers still in
// flight; those transfers then fail. It does not wait for them.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	names := make([]string, 0, len(e.staged))
	for n := range e.staged {
		names = append(names, n)
	}
	clear(e.staged)
	e.mu.Unlock()
	var errs []error
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("transfer: close: %w", err)
		}
		if err := e.inView(func() error { return os.RemoveAll(n) }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errUnavailable is the failure of an operation the sandbox could not
// run (it was closed, or could not be started again).
var errUnavailable = errors.New("the sandbox is unavailable")

// inView runs f, the part of an operation that touches paths, where the
// engine's paths live: on a thread of the sandbox's view, as the
// sandbox account, so that paths and symbolic links resolve inside the
// view (a path outside it is ENOENT), permissions are the account's and
// what f creates is the account's; without a sandbox, in place. f opens
// and renames, it does not stream: a body is copied through the opened
// file outside it, so no sandbox thread waits on the network.
func (e *Engine) inView(f func() error) error {
	var ferr error
	if err := e.cfg.Sandbox.Do(func() error { ferr = f(); return nil }); err != nil {
		if errors.Is(err, sandbox.ErrBusy) {
			return err // fserr.From answers it as busy
		}
		e.log.Warn("transfer: the sandbox is unavailable", "err", err)
		return errUnavailable
	}
	return ferr
}

// track records a staged path for Close.
func (e *Engine) track(name string) {
	e.mu.Lock()
	e.staged[name] = struct{}{}
	e.mu.Unlock()
}

// discard removes a staged path (if still there) and forgets it.
func (e *Engine) discard(name string) {
	e.mu.Lock()
	delete(e.staged, name)
	e.mu.Unlock()
	if err := e.inView(func() error { return os.RemoveAll(name) }); err != nil {
		e.log.Warn("transfer: removing a staged file", "path", name, "err", err)
	}
}

// forget stops tracking a staged path that has been renamed into place.
func (e *Engine) forget(name string) {
	e.mu.Lock()
	delete(e.staged, name)
	e.mu.Unlock()
}

// resolve turns a client path into an absolute one: absolute paths as
// given, relative ones against the workspace. Empty and NUL-containing
// paths are invalid_path.
func (e *Engine) resolve(op, path string) (string, error) {
	abs, ferr := fserr.Resolve(op, e.cfg.Workspace, path)
	if ferr != nil {
		return "", ferr
	}
	return filepath.Clean(abs), nil
}

// pathQuery is the query of the download and tree routes; each reads the
// fields it takes.
type pathQuery struct {
	Path         string  `json:"path" serde:"required"`
	User         *string `json:"user"`
	ChangePolicy *string `json:"change_policy" serde:"enum=ignore|abort"`
}

// owner is the account that owns what a request creates; nil means the
// daemon's own (under a sandbox, the sandbox account's), and nothing is
// chowned.
type owner struct{ uid, gid int }

// owner resolves a request's user (or the default one). Unknown accounts
// and, for a daemon not running as root, other accounts are bad_request.
// Under a sandbox the user is validated and then not applied: what a
// transfer creates belongs to the sandbox account, which may not give
// files away.
func (e *Engine) owner(op, path, name string) (*owner, error) {
	if name == "" {
		name = e.cfg.DefaultUser
	}
	if name == "" {
		return nil, nil
	}
	a, err := account.Lookup(name)
	switch {
	case err != nil:
		return nil, fserr.New(op, path, fserr.BadRequest, err.Error())
	case a.Self, e.cfg.Sandbox != nil:
		return nil, nil
	}
	return &owner{uid: int(a.UID), gid: int(a.GID)}, nil
}

// lchown gives name to the owner; a nil owner does nothing.
func (o *owner) lchown(name string) error {
	if o == nil {
		return nil
	}
	return os.Lchown(name, o.uid, o.gid)
}

// mkdirAll creates dir and its missing parents (0755), each owned by o.
// A parent that is not a directory fails with ENOTDIR. Call it in the
// engine's view.
func mkdirAll(dir string, o *owner) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent, o); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return o.lchown(dir)
}

// stageName is a staging name: prefix, a random UUID, ".part".
func stageName(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s%x-%x-%x-%x-%x.part", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// bufSize is the copy buffer of uploads and extraction: large writes keep
// the syscall count low.
const bufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// copyFull copies src to dst in writes of up to bufSize bytes, checking
// ctx between writes. It returns the bytes written.
func copyFull(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var total int64
	for {
		n, rerr := 0, error(nil)
		for n < len(buf) && rerr == nil {
			var k int
			k, rerr = src.Read(buf[n:])
			n += k
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return total, err
			}
			total += int64(n)
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
