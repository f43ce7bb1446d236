package pty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
)

// Defaults of [Config] and the engine's fixed limits.
const (
	DefaultMaxSessions     = 20
	DefaultSessionIdle     = 3600 * time.Second
	DefaultNoChangeTimeout = 120 * time.Second
	DefaultCols            = 120
	DefaultRows            = 24
	// MaxReplayBytes is the output a terminal retains (and the largest
	// restore); MinReplayBytes the smallest restore a client can ask for.
	MaxReplayBytes = 10 << 20
	MinReplayBytes = 256 << 10
	maxConsole     = 100 // console records kept per session
	readyWait      = 5 * time.Second
)

// Retention values: persistent sessions live until closed; expiring ones
// are also reclaimed when idle, and evicted at the cap.
const (
	RetentionPersistent = "persistent"
	RetentionExpiring   = "expiring"
)

// Config configures a [Plane] and its [Engine].
type Config struct {
	// OnInput, if set, is called after each input a terminal takes (a
	// keystroke over its socket, an input or exec request): a pool counts
	// it as the sandbox's activity.
	OnInput func()
	// PathPrefix is where the daemon's routes are mounted on its URL
	// (a pool's /sandboxes/{id}); the terminal page's URL carries it.
	PathPrefix string
	// Sandbox is the isolation in force: every terminal's shell starts inside it (nil: on the host).
	Sandbox *sandbox.Sandbox
	// Workspace is where shells start when no cwd is given, and what a
	// relative cwd resolves against. Default the current directory.
	Workspace string
	// Logger receives the plane's logs. Default: discarded.
	Logger *slog.Logger
	// MaxSessions bounds live terminals (AIO_SHELL_MAX_SESSIONS).
	// Default 20.
	MaxSessions int
	// SessionIdle is how long an idle expiring terminal lives
	// (AIO_SHELL_SESSION_TIMEOUT_SECS). Default 3600 s.
	SessionIdle time.Duration
	// DefaultUser is the account shells run as when the request names
	// none (AIO_DEFAULT_USER). Default the daemon's account.
	DefaultUser string
	// Shell is the shell to start (AIO_BASH_BIN). Default bash, else sh.
	Shell string
	// HideEnv names variables of the daemon's environment that shells
	// must not inherit, on top of AIO_API_KEY and SANDBOX_API_KEY.
	HideEnv []string
}

// hiddenEnv are the daemon's variables a shell must not inherit on top
// of sessions.Secrets and Config.HideEnv: the prompt and startup
// variables the exec markers are built on (see promptCommand), and TERM,
// which every terminal sets itself.
var hiddenEnv = []string{"PS0", "PS1", "PROMPT_COMMAND", "BASH_ENV", "ENV", "TERM"}

// Engine owns the terminal sessions. It is safe for concurrent use.
type Engine struct {
	log         *slog.Logger
	onInput     func() // Config.OnInput
	maxSessions int
	idle        time.Duration
	shell       string
	// exec resolves accounts, working directories and the environment
	// shells inherit, as every plane does.
	exec *sessions.Exec

	// Limits, lowered by tests.
	interruptWait time.Duration // how long a timed-out call waits for the prompt
	wsQueue       int           // output chunks a socket may fall behind by

	// reg holds every terminal (those of anonymous sockets and those
	// still starting included) in one tier: the cap, the id held while
	// a shell starts, eviction of the least recently used reclaimable
	// terminal at the cap, and idle reclaim.
	reg *sessions.Registry[*session]

	mu     sync.Mutex
	closed bool           // guarded by mu
	live   sync.WaitGroup // one per admitted session not yet fully ended
}

// tier is the registry tier of every terminal.
const tier = "terminals"

// NewEngine returns an engine with cfg's zero fields set to their
// defaults. Reclaiming idle terminals is the owner's (the [Plane] runs
// it on a janitor).
func NewEngine(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	full := newErr(ErrLimit, fmt.Sprintf("Maximum number of terminal sessions (%d) reached", cfg.MaxSessions),
		"close a terminal (DELETE /v2/pty/sessions/{id}) or create expiring ones")
	return &Engine{log: cfg.Logger, onInput: cfg.OnInput, maxSessions: cfg.MaxSessions, idle: cfg.SessionIdle, shell: cfg.Shell,
		exec: sessions.NewExec(cfg.Workspace, cfg.DefaultUser, os.Environ(), append(slices.Clone(hiddenEnv), cfg.HideEnv...)).Sandboxed(cfg.Sandbox),
		reg: sessions.NewRegistry[*session](map[string]sessions.Tier{
			tier: {Max: cfg.MaxSessions, Idle: cfg.SessionIdle, Evict: true, Full: full}}),
		interruptWait: 3 * time.Second, wsQueue: 1024}
}

// Options creates a terminal. All fields are optional.
type Options struct {
	// ID names the session; "" generates one. An existing id is returned
	// as it is (a different User is ErrInvalid).
	ID string
	// Cwd is where the shell starts, relative to the workspace.
	Cwd string
	// Cols and Rows size the terminal (both or neither; default 120×24).
	Cols, Rows int
	// Retention is RetentionPersistent ("" too) or RetentionExpiring.
	Retention string
	// User is the account the shell runs as, for the session's life.
	User string
	// NoChangeTimeout is the session's default for sync exec (0: 120 s;
	// negative: never, what a client's 0 asks for).
	NoChangeTimeout time.Duration
	// PreserveSymlinks reports the cwd as given instead of resolved.
	PreserveSymlinks bool
	// Env is not implemented: a non-nil map is ErrInvalid.
	Env map[string]string

	throwaway bool // the /v2/pty/ws shell: never listed, dies with its socket
}

// Info describes a terminal; its JSON is the published ShellSessionInfo.
type Info struct {
	WorkingDir     string  `json:"working_dir"`
	CreatedAt      string  `json:"created_at"`
	LastUsedAt     string  `json:"last_used_at"`
	AgeSeconds     int64   `json:"age_seconds"`
	Status         string  `json:"status"`
	CurrentCommand *string `json:"current_command"`
}

// Stats is the published ShellSessionStats.
type Stats struct {
	TotalSessions  int     `json:"total_sessions"`
	ActiveSessions int     `json:"active_sessions"`
	IdleSessions   int     `json:"idle_sessions"`
	MaxSessions    int     `json:"max_sessions"`
	SessionTimeout int64   `json:"session_timeout"`
	UsageRatio     float64 `json:"usage_ratio"`
}

// Created is the published ShellCreateSessionResponse.
type Created struct {
	SessionID  string `json:"session_id"`
	WorkingDir string `json:"working_dir"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Create starts a terminal, or returns the live one with that id.
func (e *Engine) Create(o Options) (Created, error) {
	s, err := e.create(o)
	if err != nil {
		return Created{}, err
	}
	return Created{SessionID: s.id, WorkingDir: s.cwd}, nil
}

func (e *Engine) create(o Options) (*session, error) {
	if o.Env != nil {
		return nil, newErr(ErrInvalid, "env is not implemented for terminals", "set variables with export in the terminal")
	}
	if (o.Cols == 0) != (o.Rows == 0) {
		return nil, invalid("cols and rows must be given together")
	}
	if o.Cols == 0 {
		o.Cols, o.Rows = DefaultCols, DefaultRows
	}
	switch o.Retention {
	case "":
		o.Retention = RetentionPersistent
	case RetentionPersistent, RetentionExpiring:
	default:
		return nil, invalid(fmt.Sprintf("unknown retention %q: expected persistent or expiring", o.Retention))
	}
	cwd, err := e.resolveCwd(o.Cwd, o.PreserveSymlinks)
	if err != nil {
		return nil, err
	}
	if o.ID != "" {
		if s, err := e.existing(o.ID, o.User); !isNotFound(err) {
			return s, err
		}
	}
	who, err := e.exec.Account(o.User)
	if err != nil {
		if o.User == "" { // the daemon's AIO_DEFAULT_USER
			return nil, newErr(ErrUnavailable, "AIO_DEFAULT_USER cannot be used: "+err.Error(), "fix the daemon's AIO_DEFAULT_USER, or pass user")
		}
		return nil, invalid(err.Error())
	}
	shell, kind, err := e.shellPath()
	if err != nil {
		return nil, err
	}
	if o.ID == "" {
		o.ID = newID()
	}
	s, err := e.open(o, shell, kind, cwd)
	if err != nil {
		return nil, err
	}
	if err := s.start(o.Cols, o.Rows, who); err != nil {
		e.forget(s)
		e.live.Done()
		return nil, err
	}
	// From here s's reaper owns its live count. Close may have run while
	// the shell started: it did not see s (or saw it starting); end it.
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		e.drop(s)
		return nil, newErr(ErrUnavailable, "aiod is shutting down", "")
	}
	s.mu.Lock()
	s.open = true // from now on lookups find it (as when it entered the table)
	s.mu.Unlock()
	return s, nil
}

// open admits a new session and holds its id and slot in the registry
// (evicting the least recently used reclaimable terminal at the cap)
// while its shell is not started yet. The session counts in e.live from
// here; the caller starts it or, on failure, forgets it and calls
// e.live.Done.
//
// Invariant: a session is in the registry from open until it is
// forgotten; until create has started it and seen its first prompt it
// is invisible to lookups, listings, eviction and reclaim (session.open:
// visible, Expire), as the id's reservation was before the registry.
func (e *Engine) open(o Options, shell string, kind shellKind, cwd string) (*session, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, newErr(ErrUnavailable, "aiod is shutting down", "")
	}
	e.live.Add(1) // before Close can Wait: it sets closed under e.mu first
	e.mu.Unlock()
	for {
		s, created, err := e.reg.Open(tier, o.ID, func() *session { return e.newSession(o, shell, kind, cwd) })
		switch {
		case err != nil:
			e.live.Done()
			return nil, err
		case created:
			return s, nil
		case s.gone():
			// ending (closed, evicted, reclaimed) but not forgotten yet:
			// it no longer holds the id, as it would not have before
			e.forget(s)
			continue
		}
		e.live.Done()
		return nil, invalid("Session " + o.ID + " is being created")
	}
}

// lookup finds a live session: created, and not being closed.
func (e *Engine) lookup(id string) (*session, error) {
	s, ok := e.reg.Get(tier, id)
	if !ok || !s.visible() {
		return nil, notFound(id)
	}
	return s, nil
}

// existing finds a live session for a request naming user (which must
// be the session's when given).
func (e *Engine) existing(id, user string) (*session, error) {
	s, err := e.lookup(id)
	if err != nil {
		return nil, err
	}
	if user != "" && user != s.user {
		return nil, newErr(ErrInvalid, fmt.Sprintf("session %s runs as %s; it cannot switch to %s", s.id, s.userName(), user),
			"use a new session for a different user")
	}
	s.touch()
	return s, nil
}

// forget removes s from the registry if it is still there (a later
// session under its id stays); ending it is the caller's.
func (e *Engine) forget(s *session) { e.reg.Remove(tier, s.id, s) }

// drop forgets s, then kills its terminal session (outside any lock; the
// reaper retires it). Lookups fail from the moment it is forgotten.
func (e *Engine) drop(s *session) {
	e.forget(s)
	s.kill()
}

// list returns the live, listed sessions (not those of anonymous
// sockets), oldest first.
func (e *Engine) list() []*session {
	var out []*session
	for _, s := range e.reg.List(tier) {
		if !s.throwaway && s.visible() {
			out = append(out, s)
		}
	}
	return out
}

// Session describes one terminal, or ErrNotFound.
func (e *Engine) Session(id string) (Info, error) {
	s, err := e.lookup(id)
	if err != nil {
		return Info{}, err
	}
	return s.info(), nil
}

// Sessions describes every listed terminal, by id.
func (e *Engine) Sessions() map[string]Info {
	out := map[string]Info{}
	for _, s := range e.list() {
		out[s.id] = s.info()
	}
	return out
}

// Stats describes the pool.
func (e *Engine) Stats() Stats {
	ss := e.list()
	st := Stats{TotalSessions: len(ss), MaxSessions: e.maxSessions, SessionTimeout: int64(e.idle.Seconds()),
		UsageRatio: float64(len(ss)) / float64(e.maxSessions)}
	for _, s := range ss {
		if s.running() {
			st.ActiveSessions++
		}
	}
	st.IdleSessions = st.TotalSessions - st.ActiveSessions
	return st
}

// CloseSession kills a terminal's session and waits (bounded by ctx)
// for it to end. ErrNotFound for an unknown id.
func (e *Engine) CloseSession(ctx context.Context, id string) error {
	s, err := e.lookup(id)
	if err != nil {
		return err
	}
	e.drop(s)
	return s.wait(ctx)
}

// CloseSessions closes every listed terminal (not the shells of
// anonymous /v2/pty/ws sockets, which die with their socket) and waits,
// bounded by ctx, for them to end.
func (e *Engine) CloseSessions(ctx context.Context) error {
	var errs []error
	for _, s := range e.list() {
		e.drop(s)
		errs = append(errs, s.wait(ctx))
	}
	return errors.Join(errs...)
}

// Close refuses new terminals, kills every one and waits (bounded by
// ctx) for their shells and readers to end.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	// A session still starting is taken too: its kill is remembered, and
	// create ends it once started (it sees closed).
	for _, s := range e.reg.Take(tier, nil) {
		s.kill()
	}
	done := make(chan struct{})
	go func() { e.live.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pty: sessions still ending: %w", ctx.Err())
	}
}

// reclaim closes the expiring terminals idle past the limit (each
// decides under its own lock, see session.Expire).
func (e *Engine) reclaim(time.Time) {
	for _, s := range e.reg.Reclaim() {
		e.log.Debug("pty: reclaimed idle session", "session_id", s.id)
	}
}

// resolveCwd makes a requested directory absolute (relative to the
// workspace) and checks it; "" is the workspace, checked too.
func (e *Engine) resolveCwd(cwd string, preserve bool) (string, error) {
	if cwd == "" {
		cwd = e.exec.Workspace()
	}
	dir, err := e.exec.Dir("", cwd)
	if err != nil {
		var de *sessions.DirError
		if errors.As(err, &de) {
			return "", invalid(fmt.Sprintf("cannot use cwd %s: %s", de.Path, fserr.Text(de.Err)))
		}
		return "", err
	}
	if !preserve {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
	}
	return dir, nil
}

// Shell kinds: how exec finds a command's output and exit status.
type shellKind int

const (
	kindOther shellKind = iota // no exec (501)
	kindBash                   // PS0 and PROMPT_COMMAND markers
	kindSh                     // markers printed by the typed line
)

func kindOf(path string) shellKind {
	switch filepath.Base(path) {
	case "bash":
		return kindBash
	case "sh", "dash", "ash":
		return kindSh
	}
	return kindOther
}

func (e *Engine) shellPath() (string, shellKind, error) {
	cands := []string{"/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"}
	if e.shell != "" {
		cands = []string{e.shell}
	}
	for _, p := range cands {
		if !strings.Contains(p, "/") {
			if lp, err := exec.LookPath(p); err == nil {
				p = lp
			}
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, kindOf(p), nil
		}
	}
	return "", 0, newErr(ErrUnavailable, "no shell for terminals: none of "+strings.Join(cands, ", ")+" was found", "install bash, or set AIO_BASH_BIN")
}

// noChangeOption is a client's no_change_timeout as an Options value: 0
// means never there, as on exec and PATCH.
func noChangeOption(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
