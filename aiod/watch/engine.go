package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
)

// Limits and defaults of the published API.
const (
	DefaultMaxWatchers = 128
	DefaultRetention   = 10000
	DefaultDebounce    = 300 * time.Millisecond
	MinDebounceMS      = 50
	MaxDebounceMS      = 5000
	DefaultPollLimit   = 100
	MaxPollLimit       = 1000
	MaxPollTimeout     = 60 * time.Second
	DefaultWaitTimeout = 30 * time.Second
	// DefaultMaxWatchDirs caps the directories one watcher watches.
	DefaultMaxWatchDirs = 10000
	// waitDebounce is the window of the private watcher behind a wait.
	waitDebounce = MinDebounceMS * time.Millisecond
	// maxWaitTimeout bounds a wait whatever its timeout says.
	maxWaitTimeout = 24 * time.Hour
)

// Config configures an [Engine] (and its [Plane]).
type Config struct {
	// Sandbox is the isolation in force: watched paths resolve in its view as its account (nil: the host's view).
	Sandbox *sandbox.Sandbox
	// Workspace is where relative paths resolve (default: the current
	// directory).
	Workspace string
	// Logger receives what an operator should know (default: discard).
	Logger *slog.Logger
	// MaxWatchers caps the running watchers (default 128); one more
	// create answers 429.
	MaxWatchers int
	// Retention is how many events each watcher keeps (default 10,000).
	Retention int
	// KeepAlive is the interval of an event stream's keep-alive comment
	// (default 15 s).
	KeepAlive time.Duration
	// WriteTimeout bounds each write to an event stream, so a client that
	// stops reading ends its stream (default 30 s).
	WriteTimeout time.Duration
	// MaxWatchDirs caps the directories one watcher watches (default
	// 10,000). A tree with more is watched up to the cap: the watcher
	// runs, deeper directories go unwatched, and the operator log and the
	// create's envelope message say so.
	MaxWatchDirs int
}

// Error is the engine's refusal (see [api.Error]): ErrInvalid (a value
// out of range, 400), ErrNotFound (unknown watcher), ErrLimit (watcher
// cap), ErrNotImplemented (no inotify), ErrUnavailable (a wait that
// timed out, or the engine closed). Path problems are *fserr.Error
// instead.
type Error = api.Error

// errClosed is the notifier's answer once closed.
var errClosed = errors.New("watch: closed")

// errUnsupported is the notifier's answer on a system without inotify.
var errUnsupported = errors.New("watch: file watching needs Linux inotify")

// errDirLimit is the notifier's answer to a watcher at its
// [Config.MaxWatchDirs].
var errDirLimit = errors.New("watch: directory limit reached")

// errNoWatches is the notifier's answer when the kernel's
// fs.inotify.max_user_watches is used up.
var errNoWatches = errors.New("watch: no inotify watches left (fs.inotify.max_user_watches)")

// errNoSandbox answers a watch the sandbox could not serve (it was
// closed, or could not be started again).
var errNoSandbox = &Error{Kind: api.ErrUnavailable, Message: "file watching is unavailable: the sandbox is not running"}

// errShutdown answers what comes after Close.
var errShutdown = &Error{Kind: api.ErrUnavailable, Message: "file watching is shutting down"}

// ErrTimeout is the answer of a [Engine.Wait] that saw no matching event.
var ErrTimeout = &Error{Kind: api.ErrUnavailable, Message: "timed out waiting for file event"}

func notFound(id string) error {
	return &Error{Kind: api.ErrNotFound, Message: "Watcher not found: " + id}
}

// Engine runs the watchers. Every method is safe for concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger

	// reg holds the running watchers by id under MaxWatchers; a create
	// reserves its slot before it walks the tree. Waits' watchers are
	// not in it (private).
	reg *sessions.Registry[*watcher]

	mu      sync.Mutex
	ino     *notifier
	byKey   map[string]*watcher   // the running watchers by configuration
	private map[*watcher]struct{} // the watchers behind waits
	closed  bool

	mounts mountTable // which devices are pseudo filesystems

	// waiting counts the long polls and waits blocked on their watcher
	// now: what a test waits on before it makes the event they wait for.
	waiting atomic.Int64
}

// NewEngine returns an engine with cfg's defaults filled in. The inotify
// instance is opened by the first watch.
func NewEngine(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxWatchers <= 0 {
		cfg.MaxWatchers = DefaultMaxWatchers
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.MaxWatchDirs <= 0 {
		cfg.MaxWatchDirs = DefaultMaxWatchDirs
	}
	full := &Error{Kind: api.ErrLimit, Message: fmt.Sprintf("Too many watchers: the limit is %d", cfg.MaxWatchers),
		Hint: "stop a watcher you no longer need (DELETE /v2/watch/{watcher_id})"}
	e := &Engine{cfg: cfg, log: cfg.Logger, byKey: map[string]*watcher{}, private: map[*watcher]struct{}{},
		reg: sessions.NewRegistry[*watcher](map[string]sessions.Tier{"": {Max: cfg.MaxWatchers, Full: full}})}
	if cfg.Sandbox != nil {
		e.mounts.sandboxed()
	}
	return e
}

// inView runs f, the part of the plane's work that touches paths
// (resolving, walking, inotify_add_watch, stat), where the watched paths
// live: on a thread of the sandbox's view, as the sandbox account, so
// that paths and symbolic links resolve inside the view (a path outside
// it is ENOENT) and only what the account may read is watched; without
// a sandbox, in place. The watches it adds keep watching the same inodes
// from any thread: the shared inotify descriptor is read outside.
func (e *Engine) inView(f func() error) error {
	var ferr error
	if err := e.cfg.Sandbox.Do(func() error { ferr = f(); return nil }); err != nil {
		if errors.Is(err, sandbox.ErrBusy) {
			return err // fserr.From answers it as busy
		}
		e.log.Warn("watch: the sandbox is unavailable", "error", err.Error())
		return errNoSandbox
	}
	return ferr
}

// notifierLocked opens the shared inotify instance once; e.mu is held.
func (e *Engine) notifierLocked() (*notifier, error) {
	if e.closed {
		return nil, errShutdown
	}
	if e.ino == nil {
		// Opened in the view, as the sandbox's account: the instance and
		// its watches count against that account's inotify limits, not
		// the daemon's (a pool's sandboxes each have their own account,
		// and one must not use up the watches of the others or the host).
		var ino *notifier
		err := e.inView(func() error {
			var err error
			ino, err = newNotifier(e.log)
			return err
		})
		if err != nil {
			e.log.Error("watch: cannot open inotify", "error", err.Error())
			if errors.Is(err, errUnsupported) {
				return nil, &Error{Kind: api.ErrNotImplemented, Message: "file watching is not implemented on this system"}
			}
			return nil, &Error{Kind: api.ErrUnavailable, Message: "file watching is unavailable",
				Hint: "raise fs.inotify.max_user_instances or stop other inotify users"}
		}
		e.ino = ino
	}
	return e.ino, nil
}

// Create starts a watcher, or shares the running one with the identical
// configuration (Reused, one more subscriber, InitialCursor its latest
// seq). A missing path is an *fserr.Error; a debounce outside 50–5000 or
// a malformed glob a 400; the cap a 429.
func (e *Engine) Create(ctx context.Context, req CreateWatchRequest) (*WatcherCreatedResult, error) {
	s, err := e.spec(req)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if w := e.byKey[s.key]; w != nil {
		defer e.mu.Unlock()
		return w.share(), nil
	}
	slot, err := e.reg.Reserve("") // the cap's 429, counting creates under way
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	defer slot.Release() // unless filled
	ino, err := e.notifierLocked()
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	e.mu.Unlock()

	w := newWatcher(e, ino, s, newID())
	err = w.start() // walks the tree: outside the lock
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case errors.Is(err, errClosed):
		return nil, errShutdown
	case errors.Is(err, errNoSandbox):
		return nil, err
	case err != nil:
		return nil, fserr.From("watch", req.Path, err)
	case e.closed:
		w.halt()
		return nil, errShutdown
	case e.byKey[s.key] != nil: // an identical create won the race
		w.halt()
		return e.byKey[s.key].share(), nil
	}
	slot.Fill(w.id, w) // ids are random: never taken
	e.byKey[s.key] = w
	return &WatcherCreatedResult{WatcherID: w.id, Path: w.path(), Status: StatusActive, CreatedAt: unixSeconds(w.created),
		warning: w.warning()}, nil
}

// share adds a subscriber and answers the reuse.
func (w *watcher) share() *WatcherCreatedResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs++
	return &WatcherCreatedResult{WatcherID: w.id, Path: w.path(), Status: StatusActive, CreatedAt: unixSeconds(w.created),
		Reused: true, InitialCursor: w.hist.latest, warning: w.warning()}
}

// spec validates a create request.
func (e *Engine) spec(req CreateWatchRequest) (spec, error) {
	debounce := DefaultDebounce
	if req.Debounce != nil {
		if *req.Debounce < MinDebounceMS || *req.Debounce > MaxDebounceMS {
			return spec{}, &Error{Kind: api.ErrInvalid,
				Message: fmt.Sprintf("debounce must be between %d and %d ms", MinDebounceMS, MaxDebounceMS)}
		}
		debounce = time.Duration(*req.Debounce) * time.Millisecond
	}
	exclude := DefaultExclude
	if req.Exclude != nil {
		exclude = *req.Exclude
	}
	s := spec{recursive: req.Recursive == nil || *req.Recursive, debounce: debounce}
	var err error
	if s.exclude, err = compileGlobs("exclude", exclude); err != nil {
		return spec{}, &Error{Kind: api.ErrInvalid, Message: err.Error()}
	}
	if s.include, err = compileGlobs("include_patterns", req.IncludePatterns); err != nil {
		return spec{}, &Error{Kind: api.ErrInvalid, Message: err.Error()}
	}
	if err := e.locate(&s, req.Path, false); err != nil {
		return spec{}, err
	}
	if s.file != "" { // a file watch reports its one file, whatever its name
		s.exclude, s.recursive = &globs{}, false
	}
	s.key = strings.Join([]string{s.path(), fmt.Sprint(s.recursive, s.debounce), strings.Join(exclude, "\x00"),
		strings.Join(req.IncludePatterns, "\x00")}, "\x01")
	return s, nil
}

// path is the watched path of a spec.
func (s *spec) path() string {
	if s.file != "" {
		return joinPath(s.root, s.file)
	}
	return s.root
}

// locate resolves p (relative to the workspace, symbolic links
// followed, in the engine's view) into s.root and s.file: a directory is
// the root, a file its parent with the file's name. With missingOK a
// path that does not exist is a file to come, in a directory that must
// exist.
func (e *Engine) locate(s *spec, p string, missingOK bool) error {
	abs, ferr := fserr.Resolve("watch", e.workspace(), p)
	if ferr != nil {
		return ferr
	}
	abs = filepath.Clean(abs)
	return e.inView(func() error { return locateIn(s, p, abs, missingOK) })
}

// locateIn is locate's lookup of abs (p as the client wrote it).
func locateIn(s *spec, p, abs string, missingOK bool) error {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil && missingOK && errors.Is(err, os.ErrNotExist) {
		dir, derr := filepath.EvalSymlinks(filepath.Dir(abs))
		if derr != nil {
			return fserr.From("watch", p, derr)
		}
		s.root, s.file = dir, filepath.Base(abs)
		return nil
	}
	if err != nil {
		return fserr.From("watch", p, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fserr.From("watch", p, err)
	}
	if fi.IsDir() {
		s.root = real
		return nil
	}
	s.root, s.file = filepath.Dir(real), filepath.Base(real)
	return nil
}

func (e *Engine) workspace() string {
	if e.cfg.Workspace != "" {
		return e.cfg.Workspace
	}
	wd, _ := os.Getwd()
	return wd
}

// List answers every running watcher, oldest first.
func (e *Engine) List() []WatcherInfo {
	ws := e.reg.List("")
	slices.SortFunc(ws, func(a, b *watcher) int { return a.created.Compare(b.created) })
	out := make([]WatcherInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.info())
	}
	return out
}

func (e *Engine) get(id string) *watcher {
	w, _ := e.reg.Get("", id)
	return w
}

// Poll answers the events after req.Cursor (a cursor past the latest
// seq counts as the latest, so the events that follow are answered).
// With a timeout (0–60 s) and nothing to answer it waits until the first
// event, the timeout, the watcher's end or ctx's end, whichever comes
// first. A limit outside 1–1000 or a timeout over 60 is a 400.
func (e *Engine) Poll(ctx context.Context, id string, req PollWatchRequest) (*PollWatchResult, error) {
	limit := uint64(DefaultPollLimit)
	if req.Limit != nil {
		limit = *req.Limit
	}
	if limit < 1 || limit > MaxPollLimit {
		return nil, &Error{Kind: api.ErrInvalid, Message: fmt.Sprintf("limit must be between 1 and %d", MaxPollLimit)}
	}
	var timeout time.Duration
	if req.Timeout != nil {
		if *req.Timeout > uint64(MaxPollTimeout/time.Second) {
			return nil, &Error{Kind: api.ErrInvalid,
				Message: fmt.Sprintf("timeout must be between 0 and %d seconds", MaxPollTimeout/time.Second)}
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	w := e.get(id)
	if w == nil {
		return nil, notFound(id)
	}
	var cursor uint64
	if req.Cursor != nil {
		cursor = *req.Cursor
	}
	cursor = w.clamp(cursor) // once: a stale high cursor must not skip what comes next
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	if timeout > 0 {
		e.waiting.Add(1)
		defer e.waiting.Add(-1)
	}
	for {
		evs, next, overflow, changed, stopped := w.since(cursor, int(limit))
		if len(evs) > 0 || overflow || stopped || timeout == 0 {
			return &PollWatchResult{Events: evs, Cursor: next, Overflow: overflow}, nil
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		return &PollWatchResult{Events: evs, Cursor: next, Overflow: overflow}, nil
	}
}

// Stop releases one subscriber of the watcher; the last one stops it.
func (e *Engine) Stop(id string) (*WatcherStoppedResult, error) {
	e.mu.Lock()
	w, ok := e.reg.Get("", id)
	if !ok {
		e.mu.Unlock()
		return nil, notFound(id)
	}
	w.mu.Lock()
	w.subs--
	left := w.subs
	w.mu.Unlock()
	if left > 0 {
		e.mu.Unlock()
		return &WatcherStoppedResult{WatcherID: id, Status: StatusReleased}, nil
	}
	e.reg.Remove("", id, w)
	delete(e.byKey, w.key)
	e.mu.Unlock()
	w.halt()
	return &WatcherStoppedResult{WatcherID: id, Status: StatusStopped}, nil
}

// Wait blocks until one event of req.EventTypes (any when empty) on
// req.Path, or ErrTimeout after req.Timeout seconds (30). A directory
// path matches events on the directory and its direct entries; a file
// path (which need not exist yet) events on that file.
func (e *Engine) Wait(ctx context.Context, req WaitWatchRequest) (*WaitWatchResult, error) {
	for _, t := range req.EventTypes {
		if !slices.Contains(eventTypes, t) {
			return nil, &Error{Kind: api.ErrInvalid, Message: fmt.Sprintf("unknown event type %q", t)}
		}
	}
	timeout := DefaultWaitTimeout
	if req.Timeout != nil {
		timeout = min(time.Duration(min(*req.Timeout, uint64(maxWaitTimeout/time.Second)))*time.Second, maxWaitTimeout)
	}
	s := spec{debounce: waitDebounce, exclude: &globs{}, include: &globs{}}
	if err := e.locate(&s, req.Path, true); err != nil {
		return nil, err
	}
	e.mu.Lock()
	ino, err := e.notifierLocked()
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	w := newWatcher(e, ino, s, "wait-"+newID())
	e.private[w] = struct{}{}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.private, w)
		e.mu.Unlock()
		w.halt()
	}()
	if err := w.start(); errors.Is(err, errClosed) {
		return nil, errShutdown
	} else if errors.Is(err, errNoSandbox) {
		return nil, err
	} else if err != nil {
		return nil, fserr.From("watch", req.Path, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	e.waiting.Add(1)
	defer e.waiting.Add(-1)
	var cursor uint64
	for {
		evs, next, _, changed, stopped := w.since(cursor, MaxPollLimit)
		for _, ev := range evs {
			if len(req.EventTypes) == 0 || slices.Contains(req.EventTypes, ev.Type) {
				return &WaitWatchResult{Event: ev}, nil
			}
		}
		cursor = next
		if stopped {
			return nil, errShutdown
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, ErrTimeout
		case <-ctx.Done():
			return nil, fmt.Errorf("watch: wait: %w", ctx.Err())
		}
	}
}

// Close stops every watcher (ending their streams and long polls), waits
// for their goroutines until ctx ends, and closes the inotify instance.
// Creates after Close answer 503.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	ws := e.reg.Take("", nil)
	for w := range e.private {
		ws = append(ws, w)
	}
	clear(e.byKey)
	ino := e.ino
	e.mu.Unlock()
	for _, w := range ws {
		w.halt()
	}
	for _, w := range ws {
		select {
		case <-w.exited:
		case <-ctx.Done():
			return fmt.Errorf("watch: close: %w", ctx.Err())
		}
	}
	if ino != nil {
		ino.Close()
	}
	return nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
