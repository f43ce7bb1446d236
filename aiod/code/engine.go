package code

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/aiod/internal/interp"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
)

// Languages, as results name them.
const (
	Python     = "python"
	JavaScript = "javascript"
)

// Statuses of a run.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// KernelName is the one kernel this daemon serves.
const KernelName = "python3"

// Defaults of [Config] and the limits of a run.
const (
	DefaultTimeout        = 30 * time.Second
	MaxTimeout            = 900 * time.Second
	DefaultMaxKernels     = 5
	DefaultMaxSessions    = 20
	DefaultKernelIdle     = 300 * time.Second
	DefaultSessionIdle    = 1800 * time.Second
	defaultKernelStart    = 60 * time.Second
	defaultInterruptGrace = 2 * time.Second
	defaultNodeGrace      = 5 * time.Second
	// MaxQueued is how many runs may wait for one session's previous
	// run; more are refused (429).
	MaxQueued = 16
)

// ParseLanguage resolves a language or one of its aliases (python3;
// js, node, nodejs) to [Python] or [JavaScript].
func ParseLanguage(s string) (string, bool) {
	switch s {
	case "python", "python3":
		return Python, true
	case "javascript", "js", "node", "nodejs":
		return JavaScript, true
	}
	return "", false
}

// UnsupportedLanguage is the message refusing a language.
func UnsupportedLanguage(s string) string {
	return fmt.Sprintf("Unsupported language '%s'. Supported: python, javascript", s)
}

// Config configures a [Plane] and its [Engine]. Zero values take the
// defaults named on each field.
type Config struct {
	// Sandbox is the isolation in force: kernels and node sessions start inside it and their connection files live in its view (nil: on the host).
	Sandbox *sandbox.Sandbox
	// Workspace is where runs start when no cwd is given, and what a
	// relative cwd is resolved against. Default the current directory.
	Workspace string
	// Logger receives the plane's logs. Default: discarded.
	Logger *slog.Logger
	// DefaultUser is the account runs use when a request names none
	// (AIO_DEFAULT_USER). Default: the daemon's own.
	DefaultUser string
	// Python is the interpreter kernels run on. Default: the first of
	// /usr/bin/python3, python3 and python on PATH that imports ipykernel
	// (aiod/internal/interp, which /v1/capabilities asks too).
	Python string
	// Node is the node binary. Default node (else nodejs) on PATH.
	Node string
	// MaxKernelSessions caps python (kernel) sessions
	// (AIO_KERNEL_MAX_SESSIONS). Default 5.
	MaxKernelSessions int
	// MaxSessions caps javascript (native REPL) sessions
	// (AIO_CODE_MAX_SESSIONS). Default 20.
	MaxSessions int
	// KernelIdle closes kernel sessions idle this long
	// (AIO_KERNEL_SESSION_TIMEOUT_SECS). Default 300 s.
	KernelIdle time.Duration
	// SessionIdle closes native sessions idle this long
	// (AIO_CODE_SESSION_TIMEOUT_SECS). Default 1800 s.
	SessionIdle time.Duration
	// KernelStartTimeout bounds a kernel's start. Default 60 s.
	KernelStartTimeout time.Duration
	// InterruptGrace is how long an interrupted cell may take to stop
	// before its kernel is restarted. Default 2 s.
	InterruptGrace time.Duration
	// NodeGrace is how long past its timeout a javascript run may still
	// answer before its process is killed. Default 5 s.
	NodeGrace time.Duration
	// MaxOutputChars caps the output of one run. Default 2,000,000.
	MaxOutputChars int
	// HideEnv names variables of the daemon's environment runs must not
	// inherit, on top of AIO_API_KEY and SANDBOX_API_KEY.
	HideEnv []string
}

func (c *Config) defaults() {
	if c.Workspace == "" {
		c.Workspace, _ = os.Getwd()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.KernelIdle, DefaultKernelIdle)
	set(&c.SessionIdle, DefaultSessionIdle)
	set(&c.KernelStartTimeout, defaultKernelStart)
	set(&c.InterruptGrace, defaultInterruptGrace)
	set(&c.NodeGrace, defaultNodeGrace)
	if c.MaxKernelSessions <= 0 {
		c.MaxKernelSessions = DefaultMaxKernels
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxOutputChars <= 0 {
		c.MaxOutputChars = DefaultMaxOutputChars
	}
}

// Request is one run.
type Request struct {
	// Language is python or javascript, or an alias ([ParseLanguage]).
	Language string
	// Code is the source; empty runs an empty cell.
	Code string
	// SessionID names the session; unknown ids are created. Empty with
	// Stateful false is a one-off in a throwaway process.
	SessionID string
	// Stateful without a SessionID opens a session with a generated id.
	Stateful bool
	// Timeout bounds the run, 1 s to 900 s; 0 is 30 s. Time spent
	// waiting for the session's previous run counts against it.
	Timeout time.Duration
	// Cwd is the working directory (relative to the workspace); it must
	// be a directory and is fixed when the session's process starts.
	Cwd string
	// User is the account to run as; fixed on a session once it starts.
	User string
}

// Result is a run's outcome, the data of POST /v2/code/execute. Status
// is ok, error or timeout; ExitCode is 0 for ok, else 1.
type Result struct {
	Code           string   `json:"code"`
	Language       string   `json:"language"`
	Status         string   `json:"status"`
	ExecutionCount *int     `json:"execution_count"`
	ExitCode       int      `json:"exit_code"`
	Outputs        []Output `json:"outputs"`
	Stdout         string   `json:"stdout"`
	Stderr         string   `json:"stderr"`
	SessionID      *string  `json:"session_id"`
	// MsgID is the Jupyter msg_id of a kernel run (/v1/jupyter reports it).
	MsgID string `json:"-"`
}

// outcome is what a runtime reports for one run.
type outcome struct {
	Status  string
	Outputs []Output
	Count   *int   // the kernel's execution count
	Stderr  string // text for the stderr field only
	Reset   bool   // the runtime must be discarded (state lost)
	MsgID   string // the kernel request's msg_id
}

// runtime is a kernel or a node harness.
type runtime interface {
	execute(ctx context.Context, code string, timeout time.Duration, maxChars int) outcome
	kill()
	exitedNow() bool
}

// session is a named, persistent runtime.
type session struct {
	id, lang, cwd string
	who           *sessions.Identity
	maxIdle       time.Duration // the session's own idle limit (v1 max_idle_time); 0: its tier's
	created       time.Time
	// run is a one-slot semaphore: one run at a time, held while the
	// runtime starts. Waiting for it honours the request's context and
	// deadline ([session.lock]).
	run chan struct{}

	mu        sync.Mutex
	rt        runtime
	lastUsed  time.Time
	executing bool
	count     int
	waiting   int   // requests queued for run
	gone      bool  // deleted, reclaimed or failed to start
	startErr  error // why it was dropped, when its runtime failed to start
}

// errQueueDeadline is a run whose deadline passed while it waited for
// the session.
var errQueueDeadline = errors.New("deadline passed while queued")

// lock takes the session's run slot. It waits until ctx ends or the
// deadline (zero: none) passes, and at most [MaxQueued] requests wait
// at once (more: ErrBusy). A request whose context ended (an
// ErrUnavailable wrapping ctx's error) or whose deadline passed
// (errQueueDeadline) by the time the slot is free does not take it.
// queued reports whether it had to wait.
func (s *session) lock(ctx context.Context, deadline time.Time) (queued bool, err error) {
	ended := func() error {
		if err := ctx.Err(); err != nil {
			return &Error{Kind: errors.Join(ErrUnavailable, err),
				Message: "The request ended while waiting for the session's previous execution; the code was not run"}
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return errQueueDeadline
		}
		return nil
	}
	if err := ended(); err != nil {
		return false, err
	}
	select {
	case s.run <- struct{}{}:
		return false, nil
	default:
	}
	s.mu.Lock()
	if s.waiting >= MaxQueued {
		s.mu.Unlock()
		return false, &Error{Kind: ErrBusy, Message: "Session busy: too many queued executions"}
	}
	s.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	var expire <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expire = t.C
	}
	got := false
	select {
	case s.run <- struct{}{}:
		got = true
	case <-ctx.Done():
	case <-expire:
	}
	err = ended() // select picks at random among ready cases
	if err == nil && !got {
		err = errQueueDeadline
	}
	if err != nil && got {
		s.unlock()
	}
	return true, err
}

// tryLock takes the run slot when it is free.
func (s *session) tryLock() bool {
	select {
	case s.run <- struct{}{}:
		return true
	default:
		return false
	}
}

// unlock frees the run slot.
func (s *session) unlock() { <-s.run }

// LastUsed is when the session's last run ended (its creation before).
func (s *session) LastUsed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUsed
}

// Expire ends the session when no run holds or is starting it and it
// has been idle at least idle (sessions.Session): the run slot is held
// while it looks and ends, so a run that takes the slot first wins.
func (s *session) Expire(idle time.Duration) bool {
	if !s.tryLock() {
		return false // running or starting
	}
	defer s.unlock()
	if s.maxIdle > 0 {
		idle = s.maxIdle // the session's own limit replaces its tier's
	}
	if time.Since(s.LastUsed()) < idle {
		return false
	}
	s.end()
	return true
}

// end marks the session gone and kills its runtime (a running cell
// ends with it); forgetting it is the registry's.
func (s *session) end() {
	s.mu.Lock()
	rt := s.rt
	s.rt, s.gone = nil, true
	s.mu.Unlock()
	if rt != nil {
		rt.kill()
	}
}

// Engine runs code in kernels and node harnesses, one-off or in
// sessions. It is safe for concurrent use.
type Engine struct {
	cfg  Config
	log  *slog.Logger
	exec *sessions.Exec // cwd, account and environment of runs

	interp *interp.Finder
	// viewed caches, under a sandbox, whether an interpreter's path
	// exists in the sandbox's view: path -> *Error (nil: it does).
	viewed sync.Map

	// reg holds the sessions in two tiers, [Python] (kernels) and
	// [JavaScript] (native), each with its cap and idle limit.
	reg *sessions.Registry[*session]

	mu      sync.Mutex
	oneOffs map[runtime]struct{}
	closed  bool
	bg      sync.WaitGroup // one-off runtimes being killed
}

// NewEngine returns an engine with cfg's zero fields set to their
// defaults. Interpreters are probed on first need; reclaiming idle
// sessions is the owner's (the [Plane] runs it on a janitor).
func NewEngine(cfg Config) *Engine {
	cfg.defaults()
	return &Engine{cfg: cfg, log: cfg.Logger,
		exec: sessions.NewExec(cfg.Workspace, cfg.DefaultUser, os.Environ(), cfg.HideEnv).Sandboxed(cfg.Sandbox),
		reg: sessions.NewRegistry[*session](map[string]sessions.Tier{
			Python: {Max: cfg.MaxKernelSessions, Idle: cfg.KernelIdle,
				Full: &Error{Kind: ErrLimit, Message: fmt.Sprintf("Maximum number of kernel sessions (%d) reached", cfg.MaxKernelSessions)}},
			JavaScript: {Max: cfg.MaxSessions, Idle: cfg.SessionIdle,
				Full: &Error{Kind: ErrLimit, Message: fmt.Sprintf("Maximum number of sessions (%d) reached", cfg.MaxSessions)}},
		}),
		oneOffs: map[runtime]struct{}{},
		interp:  interp.Shared(interp.Pins{Python: cfg.Python, Node: cfg.Node})}
}

// cwd resolves and checks a working directory (relative to the
// workspace; "" is the workspace).
func (e *Engine) cwd(dir string) (string, error) {
	d, err := e.exec.Dir("", dir)
	var de *sessions.DirError
	if errors.As(err, &de) {
		return "", invalid("cwd", "cwd is not a directory: "+de.Path)
	}
	return d, err
}

// checkTimeout validates a timeout; 0 is the default.
func checkTimeout(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return DefaultTimeout, nil
	}
	if d < time.Second || d > MaxTimeout {
		return 0, invalid("timeout", "timeout must be between 1 and 900 seconds")
	}
	return d, nil
}

// Execute runs req. A run that fails in the code, times out, or cannot
// become its user is a Result (status error or timeout), not an error;
// errors are ErrInvalid, ErrLimit or ErrUnavailable.
//
// When ctx carries a recording span, the run gets an aiod.cell span
// below it (see trace.go).
func (e *Engine) Execute(ctx context.Context, req Request) (*Result, error) {
	if parent := trace.SpanFromContext(ctx); parent.IsRecording() {
		return e.executeTraced(ctx, parent, req)
	}
	return e.execute(ctx, req)
}

func (e *Engine) execute(ctx context.Context, req Request) (*Result, error) {
	lang, ok := ParseLanguage(req.Language)
	if !ok {
		return nil, invalid("language", UnsupportedLanguage(req.Language))
	}
	timeout, err := checkTimeout(req.Timeout)
	if err != nil {
		return nil, err
	}
	dir, err := e.cwd(req.Cwd)
	if err != nil {
		return nil, err
	}
	if err := e.available(ctx, lang); err != nil {
		return nil, err
	}
	id := req.SessionID
	if id == "" && req.Stateful {
		id = newID()
	}
	res := &Result{Code: req.Code, Language: lang, Outputs: []Output{}}
	if id != "" {
		res.SessionID = &id
	}
	if req.Code == "" { // an empty cell runs nowhere and answers ok
		return e.finish(res, outcome{Status: StatusOK}, nil), nil
	}
	who, err := e.exec.Account(req.User)
	if err != nil {
		return e.finish(res, outcome{Status: StatusError, Outputs: []Output{errorOutput("ProcessError", err.Error())}}, nil), nil
	}
	if id == "" {
		return e.oneOff(ctx, res, lang, dir, who, timeout)
	}
	s, err := e.session(lang, id, dir, who, 0)
	if err != nil {
		return nil, err
	}
	return e.runIn(ctx, s, res, timeout)
}

// oneOff runs in a throwaway runtime, killed in the background after.
func (e *Engine) oneOff(ctx context.Context, res *Result, lang, dir string, who *sessions.Identity, timeout time.Duration) (*Result, error) {
	rt, err := e.start(ctx, lang, dir, who)
	if err != nil {
		return e.startFailed(res, lang), nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		rt.kill()
		return nil, unavailable("The code plane is shutting down", "")
	}
	e.oneOffs[rt] = struct{}{}
	e.bg.Add(1)
	e.mu.Unlock()
	out := rt.execute(ctx, res.Code, timeout, e.cfg.MaxOutputChars)
	go func() {
		defer e.bg.Done()
		rt.kill()
		e.mu.Lock()
		delete(e.oneOffs, rt)
		e.mu.Unlock()
	}()
	one := 1
	return e.finish(res, out, &one), nil
}

func (e *Engine) startFailed(res *Result, lang string) *Result {
	what := "the python kernel"
	if lang == JavaScript {
		what = "the node process"
	}
	return e.finish(res, outcome{Status: StatusError, Outputs: []Output{errorOutput("ProcessError", what+" could not be started")}}, nil)
}

// finish fills res from out. count is the session's cell counter (nil:
// take the kernel's).
func (e *Engine) finish(res *Result, out outcome, count *int) *Result {
	res.Status = out.Status
	res.Outputs = out.Outputs
	if res.Outputs == nil {
		res.Outputs = []Output{}
	}
	res.ExecutionCount, res.MsgID = out.Count, out.MsgID
	if count != nil {
		res.ExecutionCount = count
	}
	for i := range res.Outputs {
		if res.Outputs[i].OutputType == OutputExecuteResult && res.Outputs[i].ExecutionCount == nil {
			res.Outputs[i].ExecutionCount = res.ExecutionCount
		}
	}
	res.Stdout, res.Stderr = streams(res.Outputs)
	res.Stderr += out.Stderr
	if res.Status != StatusOK {
		res.ExitCode = 1
	}
	return res
}

// session returns the session (lang, id), creating it under the
// tier's cap. A new session's runtime starts on its first run. e.mu is
// held across the registry's Open so that Close, which sets closed
// under it, never misses a session created as it runs.
func (e *Engine) session(lang, id, dir string, who *sessions.Identity, maxIdle time.Duration) (*session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, unavailable("The code plane is shutting down", "")
	}
	s, _, err := e.reg.Open(lang, id, func() *session {
		now := time.Now()
		return &session{id: id, lang: lang, cwd: dir, who: who, maxIdle: maxIdle, created: now, lastUsed: now, run: make(chan struct{}, 1)}
	})
	return s, err
}

// ensure starts the session's runtime when it has none (or it died);
// the caller holds s.run. A session whose runtime cannot start is
// dropped, freeing its slot under the cap (it holds no state): runs
// queued behind it get the same start error, and the next request
// naming its id creates it afresh.
func (e *Engine) ensure(ctx context.Context, s *session) (runtime, error) {
	s.mu.Lock()
	rt, gone, startErr := s.rt, s.gone, s.startErr
	s.mu.Unlock()
	if gone && startErr != nil {
		return nil, startErr
	}
	if gone {
		return nil, &Error{Kind: ErrNotFound, Message: "Session not found: " + s.id}
	}
	if rt != nil && !rt.exitedNow() {
		return rt, nil
	}
	if rt != nil {
		rt.kill()
	}
	rt, err := e.start(ctx, s.lang, s.cwd, s.who)
	s.mu.Lock()
	gone = s.gone
	if err == nil && !gone {
		s.rt = rt
	} else {
		s.rt, s.count = nil, 0
	}
	if err != nil && !gone {
		s.startErr = err
	}
	s.mu.Unlock()
	if err == nil && gone { // deleted while it started
		rt.kill()
		return nil, &Error{Kind: ErrNotFound, Message: "Session not found: " + s.id}
	}
	if err != nil {
		e.drop(s)
		return nil, err
	}
	return rt, nil
}

// runIn runs in a session, one run at a time. Waiting for the session
// counts against the run's timeout: a run whose deadline passes while
// it waits answers timeout without running, and one whose ctx ends
// while it waits never runs.
func (e *Engine) runIn(ctx context.Context, s *session, res *Result, timeout time.Duration) (*Result, error) {
	start := time.Now()
	queued, err := s.lock(ctx, start.Add(timeout))
	if err != nil {
		if errors.Is(err, errQueueDeadline) {
			msg := fmt.Sprintf("execution timed out after %dms while waiting for the session's previous execution to finish; the code was not run",
				timeout.Milliseconds())
			return e.finish(res, outcome{Status: StatusTimeout, Outputs: []Output{errorOutput("TimeoutError", msg)}, Stderr: msg + "\n"}, nil), nil
		}
		return nil, err
	}
	defer s.unlock()
	var waited time.Duration
	if queued {
		waited = min(time.Since(start), timeout-time.Millisecond)
	}
	rt, err := e.ensure(ctx, s)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return e.startFailed(res, s.lang), nil
	}
	s.mu.Lock()
	s.executing = true
	s.mu.Unlock()
	out := rt.execute(ctx, res.Code, timeout-waited, e.cfg.MaxOutputChars)
	if out.Status == StatusTimeout && queued {
		out.Stderr += fmt.Sprintf("%dms of the %dms timeout were spent waiting for the session's previous execution\n",
			waited.Milliseconds(), timeout.Milliseconds())
	}
	s.mu.Lock()
	s.executing, s.lastUsed = false, time.Now()
	s.count++
	count := s.count
	if s.lang == Python && out.Count != nil {
		count = *out.Count
	}
	if out.Reset && s.rt == rt {
		s.rt, s.count = nil, 0
	}
	s.mu.Unlock()
	if out.Reset {
		rt.kill()
	}
	return e.finish(res, out, &count), nil
}

// start starts a runtime for lang.
func (e *Engine) start(ctx context.Context, lang, dir string, who *sessions.Identity) (runtime, error) {
	var cred *syscall.Credential
	if who != nil {
		cred = who.Cred
	}
	if err := e.available(ctx, lang); err != nil {
		return nil, err // gone since the request's check, or outside the sandbox
	}
	if lang == JavaScript {
		p, err := startNode(nodeSpec{node: e.nodeProbe().path, cwd: dir, cred: cred, env: e.exec.Env(who), grace: e.cfg.NodeGrace, log: e.log,
			sb: e.cfg.Sandbox})
		if err != nil {
			e.log.Warn("code: node did not start", "error", err.Error())
			return nil, err
		}
		return p, nil
	}
	env := e.exec.Env(who, "PYDEVD_DISABLE_FILE_VALIDATION=1")
	k, err := startKernel(ctx, kernelSpec{python: e.pythonProbe().path, cwd: dir, cred: cred, env: env,
		startTimeout: e.cfg.KernelStartTimeout, grace: e.cfg.InterruptGrace, log: e.log, sb: e.cfg.Sandbox})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// SessionInfo describes a session. Kernel sessions carry KernelName,
// native ones MaxIdleTime (ms).
type SessionInfo struct {
	SessionID   string `json:"session_id"`
	Language    string `json:"language"`
	Cwd         string `json:"cwd"`
	CreatedAt   int64  `json:"created_at"`
	LastUsed    int64  `json:"last_used"`
	AgeSeconds  int64  `json:"age_seconds"`
	MaxIdleTime *int64 `json:"max_idle_time,omitempty"`
	KernelName  string `json:"kernel_name,omitempty"`
	State       string `json:"state"`
}

func (e *Engine) info(s *session) SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := SessionInfo{SessionID: s.id, Language: s.lang, Cwd: s.cwd, CreatedAt: s.created.UnixMilli(),
		LastUsed: s.lastUsed.UnixMilli(), AgeSeconds: int64(time.Since(s.created).Seconds()), State: "idle"}
	if s.executing {
		i.State = "executing"
	}
	if s.lang == Python {
		i.KernelName = KernelName
	} else {
		ms := e.cfg.SessionIdle.Milliseconds()
		if s.maxIdle > 0 {
			ms = s.maxIdle.Milliseconds()
		}
		i.MaxIdleTime = &ms
	}
	return i
}

// SessionOptions opens a session up front.
type SessionOptions struct {
	Language  string // python or javascript (or an alias); "" is python
	SessionID string // "" generates one
	Cwd, User string
	// MaxIdle replaces the tier's idle limit for this session (v1
	// max_idle_time); 0 keeps the tier's. It applies to a session this
	// call creates; reclaim runs on the plane's janitor period.
	MaxIdle time.Duration
}

// CreateSession opens a session and starts its runtime; an existing id
// is returned as it is (created false). Errors: ErrInvalid, ErrLimit,
// ErrUnavailable (also when the runtime cannot start).
func (e *Engine) CreateSession(ctx context.Context, o SessionOptions) (SessionInfo, bool, error) {
	if o.Language == "" {
		o.Language = Python
	}
	lang, ok := ParseLanguage(o.Language)
	if !ok {
		return SessionInfo{}, false, invalid("language", UnsupportedLanguage(o.Language))
	}
	dir, err := e.cwd(o.Cwd)
	if err != nil {
		return SessionInfo{}, false, err
	}
	if err := e.available(ctx, lang); err != nil {
		return SessionInfo{}, false, err
	}
	who, err := e.exec.Account(o.User)
	if err != nil {
		return SessionInfo{}, false, &Error{Kind: ErrInvalid, Field: "user", Message: err.Error()}
	}
	if o.SessionID == "" {
		o.SessionID = newID()
	}
	e.mu.Lock()
	existing, ok := e.reg.Get(lang, o.SessionID)
	e.mu.Unlock()
	if ok {
		return e.info(existing), false, nil
	}
	s, err := e.session(lang, o.SessionID, dir, who, o.MaxIdle)
	if err != nil {
		return SessionInfo{}, false, err
	}
	if _, err := s.lock(ctx, time.Time{}); err != nil {
		return SessionInfo{}, false, err
	}
	_, err = e.ensure(ctx, s)
	s.unlock()
	if errors.Is(err, ErrNotFound) { // deleted while it started
		return SessionInfo{}, false, err
	}
	if err != nil {
		return SessionInfo{}, false, unavailable("The session's runtime could not be started", "check the daemon's log")
	}
	return e.info(s), true, nil
}

// Sessions lists the sessions of lang ("" for all), oldest first.
func (e *Engine) Sessions(lang string) []SessionInfo {
	ss := e.reg.List(lang)
	out := make([]SessionInfo, len(ss))
	for i, s := range ss {
		out[i] = e.info(s)
	}
	return out
}

// Session describes session id of lang ("" looks in python first);
// unknown is ErrNotFound.
func (e *Engine) Session(lang, id string) (SessionInfo, error) {
	for _, l := range []string{Python, JavaScript} {
		if lang == "" || lang == l {
			if s, ok := e.reg.Get(l, id); ok {
				return e.info(s), nil
			}
		}
	}
	return SessionInfo{}, &Error{Kind: ErrNotFound, Message: "Session not found: " + id}
}

// CloseSession ends session id of lang ("" for every language) and
// reports whether there was one.
func (e *Engine) CloseSession(lang, id string) bool {
	return e.closeAll(e.reg.Take(lang, func(x string) bool { return x == id })) > 0
}

// CloseSessions ends every session of lang ("" for all) and returns
// how many there were.
func (e *Engine) CloseSessions(lang string) int { return e.closeAll(e.reg.Take(lang, nil)) }

func (e *Engine) closeAll(ss []*session) int {
	for _, s := range ss {
		s.end()
	}
	return len(ss)
}

// drop forgets s and ends it.
func (e *Engine) drop(s *session) {
	e.reg.Remove(s.lang, s.id, s)
	s.end()
}

// reclaim ends sessions idle past their tier's limit (the registry asks
// each, holding its run slot) and restarts kernels that fail a
// heartbeat (their session restarts on its next run).
func (e *Engine) reclaim() {
	for _, s := range e.reg.Reclaim() {
		e.log.Info("code: closed an idle session", "session_id", s.id, "language", s.lang)
	}
	for _, s := range e.reg.List(Python) {
		if !s.tryLock() {
			continue // running or starting
		}
		s.mu.Lock()
		k, _ := s.rt.(*kernel)
		s.mu.Unlock()
		if k != nil && !k.alive(2*time.Second) {
			e.log.Warn("code: kernel failed its heartbeat; it restarts on the next run", "session_id", s.id)
			s.mu.Lock()
			s.rt, s.count = nil, 0
			s.mu.Unlock()
			k.kill()
		}
		s.unlock()
	}
}

// Close refuses new runs and kills every kernel and node process (and
// their process groups). It returns when they are gone or ctx ends.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	var rts []runtime
	for rt := range e.oneOffs {
		rts = append(rts, rt)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.CloseSessions("")
		for _, rt := range rts {
			rt.kill()
		}
		e.bg.Wait()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("code: close: %w", ctx.Err())
	}
}
