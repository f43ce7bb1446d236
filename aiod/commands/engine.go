package commands

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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Command statuses. Pending and killed are in the published enum but, as
// in the published daemon, no request produces them: a killed command
// (a route's kill, or its client leaving a sync or streamed run) reads
// completed with exit code -1.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusTimedOut  = "timed_out"
)

// Defaults of [Config] and of the engine's limits.
const (
	DefaultMaxSessions       = 50
	DefaultSessionIdle       = 3600 * time.Second
	DefaultMaxOutputLength   = 50000
	maxCommandsPerSession    = 100
	defaultDrainGrace        = 200 * time.Millisecond
	defaultKillGrace         = 2 * time.Second
	maxKillGrace             = 10 * time.Second
	defaultStdinWriteTimeout = 10 * time.Second
	trackEvery               = time.Second // how often the janitor records process trees
)

// Config configures a [Plane] and its [Engine].
type Config struct {
	// Sandbox is the isolation in force: every command starts inside it (nil: on the host).
	Sandbox *sandbox.Sandbox
	// Workspace is where sessions start when no cwd is given. Default
	// the current directory.
	Workspace string
	// Logger receives the plane's logs. Default: discarded.
	Logger *slog.Logger
	// MaxSessions bounds live sessions (AIO_BASH_MAX_SESSIONS, read by
	// the caller). Default 50.
	MaxSessions int
	// SessionIdle is how long an idle session lives
	// (AIO_BASH_SESSION_TIMEOUT_SECS). Default 3600 s.
	SessionIdle time.Duration
	// DefaultUser is the account commands run as when neither the
	// request nor its session names one (AIO_DEFAULT_USER). A default
	// that cannot be used answers 503. Default: the daemon's account.
	DefaultUser string
	// BashBin is tried first for the bash and auto shells (AIO_BASH_BIN).
	BashBin string
	// HideEnv names variables of the daemon's environment that commands
	// must not inherit (its secrets and configuration), on top of
	// AIO_API_KEY and SANDBOX_API_KEY, which are always removed. A
	// request's or a session's env may still set them.
	HideEnv []string
	// KillGrace is how long a kill with SIGTERM or SIGINT (and a session
	// close, and Close) gives a process tree before SIGKILL ends what is
	// left of it. Default 2 s, at most 10 s.
	KillGrace time.Duration
	// Registerer, when set, gets the plane's metrics:
	// command_exec_total{status} (the final status, or "error" for a
	// command that could not be started), command_exec_duration_seconds
	// and command_sessions (live sessions).
	Registerer prometheus.Registerer
}

// Engine runs commands in sessions. It is safe for concurrent use; the
// HTTP routes, the MCP tool and the Computer share one.
type Engine struct {
	// contained: commands run in a sandbox (Config.Sandbox), whose init
	// takes their orphans; the engine then neither signals nor reaps the
	// daemon's other children, and scans processes only while it has
	// commands to follow.
	contained   bool
	exec        *sessions.Exec // workspace, accounts, environment without secrets
	log         *slog.Logger
	idle        time.Duration
	defaultUser string
	bashBin     string
	metrics     *metrics

	// Limits, lowered by tests.
	retainMax, retainTrim int
	maxCommands           int
	drainGrace, killGrace time.Duration
	pingEvery             time.Duration
	stdinTimeout          time.Duration
	startHook             func(*exec.Cmd) // tests: rewrite what is spawned

	shellCache ttlCache[string]
	userCache  ttlCache[*sessions.Identity]

	// reg holds the sessions (one tier, capped at Config.MaxSessions,
	// evicting the least recently used idle one, reclaiming those idle
	// past Config.SessionIdle). Lock order: mu before reg's own lock;
	// reg calls a session's methods (which take mu) outside its lock,
	// so nothing may call reg.Open or reg.Reclaim with mu held.
	reg *sessions.Registry[*session]

	mu       sync.Mutex
	commands map[string]*Command
	running  map[*Command]struct{}
	// lingering holds the ended commands whose background children
	// live on (for CloseSession and Close to end them).
	lingering map[*Command]struct{}
	closed    bool
	shutdown  chan struct{}  // closed by Close: streams end with an error frame
	live      sync.WaitGroup // one per running command's supervisor
	// background counts the goroutines that end process trees off the
	// request path (kill escalations, evicted sessions' leftovers). They
	// are added only under mu while !closed, and end at once when
	// shutdown is closed, so Close can wait for them.
	background sync.WaitGroup
}

// NewEngine returns an engine configured by cfg (zero fields take their
// defaults). [New] wraps it in a [Plane] whose janitor reclaims idle
// sessions, records process trees and reaps orphans; an engine used
// alone does none of that.
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
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = defaultKillGrace
	}
	e := &Engine{
		contained: cfg.Sandbox != nil,
		exec:      sessions.NewExec(cfg.Workspace, cfg.DefaultUser, os.Environ(), cfg.HideEnv).Sandboxed(cfg.Sandbox),
		log:       cfg.Logger, idle: cfg.SessionIdle,
		defaultUser: cfg.DefaultUser, bashBin: cfg.BashBin,
		metrics:   newMetrics(cfg.Registerer, cfg.Logger),
		retainMax: defaultRetainMax, retainTrim: defaultRetainTrim, maxCommands: maxCommandsPerSession,
		drainGrace: defaultDrainGrace, killGrace: min(cfg.KillGrace, maxKillGrace), pingEvery: 30 * time.Second,
		stdinTimeout: defaultStdinWriteTimeout,
		commands:     map[string]*Command{}, running: map[*Command]struct{}{},
		lingering: map[*Command]struct{}{}, shutdown: make(chan struct{}),
	}
	e.reg = sessions.NewRegistry[*session](map[string]sessions.Tier{tier: {
		Max: cfg.MaxSessions, Idle: cfg.SessionIdle, Evict: true, Full: allBusy(cfg.MaxSessions),
	}})
	return e
}

// Request is one command to run.
type Request struct {
	// Command is the script, or with Shell "none" the program.
	Command string
	// Args is the argv after the program; only with Shell "none".
	Args []string
	// Shell is auto (""), bash, sh, powershell, cmd or none.
	Shell string
	// Cwd is the directory, relative to the session's; "" is the session's.
	Cwd string
	// Env overrides the session's environment for this command.
	Env map[string]string
	// User is the account to run as; fixed on the session once given.
	User string
	// Session names the session; "" runs in a new anonymous one.
	Session string
	// CreateSession creates an unknown Session instead of failing with
	// ErrNotFound (the v1 routes' semantics).
	CreateSession bool
	// Timeout bounds how long Run waits (0: until exit); the command
	// keeps running past it.
	Timeout time.Duration
	// HardTimeout kills the command's process tree (0: never); the
	// command ends timed_out with exit code -1.
	HardTimeout time.Duration
	// Async makes Run return as soon as the command has started.
	Async bool
	// Shown, if set, is the command line a trace describes instead of
	// Command (aiod.command records its program's name and its length,
	// never the line itself): a caller that wraps the user's command in
	// its own lines shows the user's.
	Shown string
}

// Command is one started process and its tree: its process group and
// every process forked below it.
type Command struct {
	// ID is the command's id; SessionID its session's; Text the command
	// as requested.
	ID, SessionID, Text string

	e     *Engine
	sess  *session
	pgid  int
	stdin *os.File
	inMu  sync.Mutex // serializes stdin writes

	mu       sync.Mutex
	stdout   stream
	stderr   stream
	notify   chan struct{} // closed and replaced on every change
	exitCode *int
	status   string
	killed   bool
	timedOut bool
	done     chan struct{}
	started  time.Time
	// oomMark is the sandbox's count of memory-limit kills when the
	// command started (see sessions.Exec.OOMNote).
	oomMark uint64
	// reaped is set once the leader has been waited for; seen maps the
	// pids of the tree last found to their start times.
	reaped bool
	// groupLeft: at the reap, the process group still had members, so
	// the group is still c's (until it empties).
	groupLeft bool
	seen      map[int]uint64
	// span is the command's aiod.command span, nil unless Start's ctx
	// carried a recording span (see trace.go); supervise ends it.
	span trace.Span
}

// Output is a read of a command's streams from given offsets, with its
// state at the time of the read.
type Output struct {
	// Stdout and Stderr hold the retained bytes from the offsets on.
	Stdout, Stderr []byte
	// StdoutOffset and StderrOffset are each stream's end: every byte the
	// command produced, whatever retention dropped.
	StdoutOffset, StderrOffset int64
	// StdoutStart and StderrStart are the earliest retained positions.
	StdoutStart, StderrStart int64
	// StdoutGap and StderrGap report an offset before the retained start.
	StdoutGap, StderrGap bool
	// Status is running, completed or timed_out (a killed command is
	// completed with exit code -1); ExitCode is nil
	// while running and -1 after a kill or a hard timeout.
	Status   string
	ExitCode *int
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Run starts req and, unless req.Async, waits for it to exit, for
// req.Timeout, or for ctx to end, whichever is first. The command keeps
// running past the wait (ctx ending included); read its state with
// [Command.Read], end it with [Command.Kill].
func (e *Engine) Run(ctx context.Context, req Request) (*Command, error) {
	c, err := e.Start(ctx, req)
	if err == nil && !req.Async {
		c.Wait(ctx, req.Timeout)
	}
	return c, err
}

// Start validates req, resolves its shell, account and session, and
// spawns the process in its own process group. Refusals are [*Error]s
// whose Kind says why.
//
// When ctx carries a recording span, the command gets an aiod.command
// span below it, ended when the command ends (see trace.go).
func (e *Engine) Start(ctx context.Context, req Request) (*Command, error) {
	sel := req.Shell
	if sel == "" {
		sel = ShellAuto
	}
	if req.Args != nil && sel != ShellNone {
		return nil, invalid(`args is only accepted with "shell": "none"`, `put the arguments in the command, or use "shell": "none"`)
	}
	if req.Timeout < 0 || req.HardTimeout < 0 {
		return nil, invalid("timeout and hard_timeout must not be negative", "")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, invalid(fmt.Sprintf("invalid environment variable %q", k), "")
		}
	}
	path, args := req.Command, append([]string{req.Command}, req.Args...)
	if sel != ShellNone {
		p, err := e.shellPath(sel)
		if err != nil {
			return nil, err
		}
		path, args = p, argv(sel, p, req.Command)
	} else if req.Command == "" {
		return nil, invalid(`command must name a program with "shell": "none"`, "")
	}

	s, id, err := e.reserve(req)
	if err != nil {
		return nil, err
	}
	cwd, err := e.dir(s.cwd, req.Cwd)
	if err != nil {
		e.release(s)
		e.live.Done()
		e.metrics.failed()
		return nil, err
	}
	if sel == ShellNone && !strings.Contains(path, "/") {
		if p, err := e.shellCache.get("program:"+path, func(string) (string, error) { return exec.LookPath(path) }); err == nil {
			path = p
		}
	} else if sel == ShellNone && !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	// Later entries win: the daemon's, the account's, the session's, the
	// request's.
	env := e.exec.Env(id, s.env...)
	if s.bashEnv != "" && sel != ShellSh && sel != ShellPowerShell && sel != ShellNone {
		env = append(env, "BASH_ENV="+s.bashEnv)
	}
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	cmd := &exec.Cmd{Path: path, Args: args, Dir: cwd, Env: env, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if id != nil {
		cmd.SysProcAttr.Credential = id.Cred
	}
	if e.startHook != nil {
		e.startHook(cmd)
	}
	c := &Command{ID: newID(), SessionID: s.id, Text: req.Command, e: e, sess: s,
		status: StatusRunning, notify: make(chan struct{}), done: make(chan struct{})}
	// Every process of the command inherits its id: one that left the
	// group and lost its parent before the tracker saw it is still found
	// when the command or its session is ended (unless it cleared its
	// environment).
	cmd.Env = append(cmd.Env, tagVar+"="+c.ID)
	if parent := trace.SpanFromContext(ctx); parent.IsRecording() {
		c.span = startSpan(ctx, parent, req, s.id)
	}
	outR, errR, err := c.spawn(cmd)
	if err != nil {
		endSpanFailed(c.span, err)
		e.release(s)
		e.live.Done()
		e.metrics.failed()
		return nil, err
	}
	e.register(c)
	go c.supervise(cmd, outR, errR, req.HardTimeout)
	return c, nil
}

// spawn starts cmd with three pipes and returns the read ends of stdout
// and stderr; the write end of stdin stays on c.
func (c *Command) spawn(cmd *exec.Cmd) (outR, errR *os.File, err error) {
	var files [6]*os.File // inR, inW, outR, outW, errR, errW
	for i := 0; i < 6; i += 2 {
		if files[i], files[i+1], err = os.Pipe(); err != nil {
			for _, f := range files {
				if f != nil {
					f.Close()
				}
			}
			return nil, nil, unavailable("cannot start a command: no pipe for its output: "+fserr.Text(err), "")
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[3], files[5]
	// Registered before the reaper may look: a command that exits at
	// once is still its supervisor's to wait for.
	c.oomMark = c.e.exec.OOMKills()
	err = child.Start(cmd, c.e.exec.Wrap(cmd, cmd.Start))
	files[0].Close()
	files[3].Close()
	files[5].Close()
	if err != nil {
		files[1].Close()
		files[2].Close()
		files[4].Close()
		return nil, nil, spawnError(cmd.Path, err)
	}
	c.pgid, c.stdin, c.started = cmd.Process.Pid, files[1], time.Now()
	if p, ok := child.ReadProc(c.pgid); ok {
		c.seen = map[int]uint64{p.PID: p.Start}
	}
	return files[2], files[4], nil
}

// dir resolves dir against base (the workspace when base is empty)
// through the shared execution context, which refuses a directory that
// is missing or not one before anything is spawned in it. Unlike
// [sessions.Exec.Dir], an empty dir (base itself) is checked too: a
// session's directory may have gone since the session was made. The
// refusal keeps the plane's wording.
func (e *Engine) dir(base, dir string) (string, error) {
	if dir == "" {
		if _, err := e.exec.Dir(base, "."); err != nil {
			return "", cwdRefused(base, err)
		}
		return base, nil
	}
	d, err := e.exec.Dir(base, dir)
	if err != nil {
		path := dir
		var de *sessions.DirError
		if errors.As(err, &de) {
			path = de.Path
		}
		return "", cwdRefused(path, err)
	}
	return d, nil
}

// cwdRefused words an unusable working directory.
func cwdRefused(path string, err error) error {
	return invalid(fmt.Sprintf("cannot use cwd %s: %s", path, fserr.Text(err)), "")
}

// spawnError words a failed spawn in the daemon's (Rust io) terms.
func spawnError(path string, err error) error {
	return invalid(fmt.Sprintf("failed to start %s: %s", path, fserr.Text(err)), "")
}

// supervise owns the process: it pumps both pipes, arms the hard
// timeout, reaps the process, drains what the pipes still hold, and
// publishes the exit.
func (c *Command) supervise(cmd *exec.Cmd, outR, errR *os.File, hard time.Duration) {
	defer c.e.live.Done()
	eof := make(chan struct{}, 2)
	go c.pump(outR, &c.stdout, eof)
	go c.pump(errR, &c.stderr, eof)
	var timer *time.Timer
	if hard > 0 {
		timer = time.AfterFunc(hard, func() { c.signal(syscall.SIGKILL, true) })
	}
	werr := cmd.Wait()
	child.Forget(cmd.Process.Pid)
	if timer != nil {
		timer.Stop()
	}
	// No /proc scan here, on every command's path: one signal-0 to the
	// group says whether the shell left anything in it (a group number
	// stays unused by others while a member lives), and whatever left
	// the group was seen by the tracker or is an orphan of the daemon.
	// The janitor's next track prunes a lingering command whose tree is
	// gone.
	groupLeft := syscall.Kill(-c.pgid, 0) == nil
	c.mu.Lock()
	c.reaped, c.groupLeft = true, groupLeft
	lingers := groupLeft || len(c.seen) > 1
	c.mu.Unlock()
	c.stdin.Close()
	// Background children may hold the pipes open: wait for them only
	// briefly, then close the read ends, which ends the pumps.
	grace := time.NewTimer(c.e.drainGrace)
	for n := 0; n < 2; {
		select {
		case <-eof:
			n++
		case <-grace.C:
			outR.Close()
			errR.Close()
		}
	}
	grace.Stop()
	outR.Close()
	errR.Close()
	code := exitCode(cmd.ProcessState, werr)
	c.e.finished(c, lingers)
	c.mu.Lock()
	switch {
	case c.timedOut:
		code, c.status = -1, StatusTimedOut
	case c.killed:
		code, c.status = -1, StatusCompleted
	default:
		c.status = StatusCompleted
		// A SIGKILL nobody asked for, under a sandbox at its memory
		// limit: the result says so (bash reports a killed child as 137
		// too).
		if code == 128+int(syscall.SIGKILL) {
			if note := c.e.exec.OOMNote(c.oomMark); note != "" {
				c.stderr.write([]byte("aiod: killed: "+note+"\n"), c.e.retainMax, c.e.retainTrim)
			}
		}
	}
	c.exitCode = &code
	if c.span != nil {
		endSpan(c.span, c.status, code, c.killed)
	}
	// Counted before anyone can see the exit: a client that has read it
	// finds it in the metrics too.
	c.e.metrics.ended(c.status, time.Since(c.started))
	close(c.done)
	c.changedLocked()
	c.mu.Unlock()
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// pump copies one pipe into its stream until EOF or close.
func (c *Command) pump(r *os.File, s *stream, eof chan<- struct{}) {
	defer func() { eof <- struct{}{} }()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.mu.Lock()
			s.write(buf[:n], c.e.retainMax, c.e.retainTrim)
			c.changedLocked()
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (c *Command) changedLocked() {
	close(c.notify)
	c.notify = make(chan struct{})
}

// Done is closed when the command has exited and its output is final.
func (c *Command) Done() <-chan struct{} { return c.done }

// Wait blocks until the command exits, d elapses (d <= 0: no bound) or
// ctx ends, and reports whether it exited.
func (c *Command) Wait(ctx context.Context, d time.Duration) bool {
	return c.waitFor(ctx, d, -1, -1) == waitExited
}

// WaitOutput blocks until either stream has bytes past its offset, the
// command exits, d elapses or ctx ends.
func (c *Command) WaitOutput(ctx context.Context, stdoutFrom, stderrFrom int64, d time.Duration) {
	c.waitFor(ctx, d, stdoutFrom, stderrFrom)
}

type waitResult int

const (
	waitExited waitResult = iota
	waitOutput
	waitTimeout  // the total bound
	waitCanceled // ctx ended
)

// waitFor is every wait: until exit; or output past the offsets (when
// non-negative); or d (d <= 0: none); or ctx. No polling: it sleeps on
// the notify channel.
func (c *Command) waitFor(ctx context.Context, d time.Duration, outFrom, errFrom int64) waitResult {
	var total <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		total = t.C
	}
	for {
		c.mu.Lock()
		ch, exited := c.notify, c.exitCode != nil
		more := (outFrom >= 0 && c.stdout.end() > outFrom) || (errFrom >= 0 && c.stderr.end() > errFrom)
		c.mu.Unlock()
		switch {
		case exited:
			return waitExited
		case more:
			return waitOutput
		}
		select {
		case <-ch:
		case <-total:
			return waitTimeout
		case <-ctx.Done():
			return waitCanceled
		}
	}
}

// Read returns both streams from the given offsets and the state.
func (c *Command) Read(stdoutFrom, stderrFrom int64) Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	var o Output
	o.Stdout, o.StdoutGap = c.stdout.read(stdoutFrom)
	o.Stderr, o.StderrGap = c.stderr.read(stderrFrom)
	o.StdoutOffset, o.StderrOffset = c.stdout.end(), c.stderr.end()
	o.StdoutStart, o.StderrStart = c.stdout.start, c.stderr.start
	o.Status, o.ExitCode = c.status, c.exitCode
	return o
}

// State returns the status and the exit code (nil while running).
func (c *Command) State() (status string, exitCode *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.exitCode
}

// WriteStdin writes p to the command's stdin as is. ErrNotRunning when
// it has ended; a reader that does not drain its stdin makes the write
// fail (ErrInvalid, saying how much was written) at ctx's deadline, at
// most 10 s.
func (c *Command) WriteStdin(ctx context.Context, p []byte) error {
	if st, _ := c.State(); st != StatusRunning {
		return notRunning(c.ID)
	}
	c.inMu.Lock()
	defer c.inMu.Unlock()
	dl := time.Now().Add(c.e.stdinTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.stdin.SetWriteDeadline(dl)
	if n, err := c.stdin.Write(p); err != nil {
		switch {
		case errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE):
			return notRunning(c.ID)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return invalid(fmt.Sprintf("stdin of command %s is not accepting input (wrote %d of %d bytes)", c.ID, n, len(p)),
				"the command is not reading its stdin; read its output, or kill it")
		}
		return invalid(fmt.Sprintf("cannot write to the stdin of command %s (wrote %d of %d bytes): %s", c.ID, n, len(p), fserr.Text(err)), "")
	}
	c.e.touch(c.sess)
	return nil
}

// Kill sends sig to the command's whole process tree. The command ends
// completed with exit code -1, as the published API says. A SIGTERM or SIGINT that leaves anything of
// the tree alive is followed by SIGKILL after the kill grace period, so a
// child that ignores the signal does not outlive the kill. A command
// that has ended but left processes behind (background children, or
// what a first kill did not end) is still signalled; ErrNotRunning when
// nothing of it is left.
func (c *Command) Kill(sig syscall.Signal) error {
	if !c.mark(false) && !c.e.treeLive(c) {
		return notRunning(c.ID)
	}
	c.e.signalTrees([]*Command{c}, sig, false)
	if sig != syscall.SIGKILL {
		c.e.escalate(c)
	}
	c.e.touch(c.sess)
	return nil
}

// treeLive reports whether any process of c's tree (or carrying its id)
// still runs.
func (e *Engine) treeLive(c *Command) bool {
	t := scanProcs()
	return liveIn(c.track(t)) || liveIn(taggedTrees(t, []*Command{c}))
}

// escalate sends SIGKILL to what is left of c's tree once the kill grace
// period has passed. The goroutine is the engine's: Close ends it (and
// ends every tree itself).
func (e *Engine) escalate(c *Command) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		t := time.NewTimer(e.killGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-e.shutdown:
			return
		}
		if e.treeLive(c) {
			e.log.Debug("commands: escalating a kill to SIGKILL", "command_id", c.ID)
			e.signalTrees([]*Command{c}, syscall.SIGKILL, false)
		}
	}()
}

// endInBackground ends the trees of an evicted or reclaimed session's
// commands (see terminate) off the request path. Called with e.mu held.
func (e *Engine) endInBackgroundLocked(live, ended []*Command) {
	if e.closed || (len(live) == 0 && len(ended) == 0) {
		return
	}
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 3*e.killGrace)
		defer cancel()
		go func() {
			select {
			case <-e.shutdown:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := e.terminate(ctx, live, ended, false); err != nil {
			e.log.Warn("commands: processes of a dropped session outlived it", "error", err.Error())
		}
	}()
}

// signal marks the command killed (or timed out) and signals its tree;
// false when it has already exited.
func (c *Command) signal(sig syscall.Signal, hard bool) bool {
	if !c.mark(hard) {
		return false
	}
	c.e.signalTrees([]*Command{c}, sig, false)
	return true
}

// mark marks the command killed (or timed out); false when it has
// already exited.
func (c *Command) mark(hard bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitCode != nil {
		return false
	}
	if hard {
		c.timedOut = true
	} else {
		c.killed = true
	}
	return true
}

// Command returns the command with this id, or ErrNotFound.
func (e *Engine) Command(id string) (*Command, error) {
	e.mu.Lock()
	c, ok := e.commands[id]
	e.mu.Unlock()
	if !ok {
		return nil, commandNotFound(id)
	}
	e.touch(c.sess)
	return c, nil
}

// register indexes a started command under its session, dropping the
// session's oldest ids past its last maxCommands.
func (e *Engine) register(c *Command) {
	e.mu.Lock()
	closed := e.closed || c.sess.closed // closed while this one was spawning
	e.running[c] = struct{}{}
	s := c.sess
	s.count++
	s.cmds = append(s.cmds, c)
	if len(s.cmds) > e.maxCommands {
		for _, old := range s.cmds[:len(s.cmds)-e.maxCommands] {
			delete(e.commands, old.ID)
		}
		s.cmds = append([]*Command(nil), s.cmds[len(s.cmds)-e.maxCommands:]...)
	}
	if !s.closed {
		e.commands[c.ID] = c
	}
	e.mu.Unlock()
	if closed {
		c.signal(syscall.SIGKILL, false)
	}
}

// finished records a command's exit on its session, and remembers the
// command when background children outlive it (for CloseSession and
// Close to end them).
func (e *Engine) finished(c *Command, lingers bool) {
	e.mu.Lock()
	delete(e.running, c)
	if lingers {
		e.lingering[c] = struct{}{}
	}
	e.mu.Unlock()
	e.release(c.sess)
}

// lingeringLocked takes the ended commands of s (of every session when
// s is nil) that left processes behind.
func (e *Engine) lingeringLocked(s *session) []*Command {
	var out []*Command
	for c := range e.lingering {
		if s == nil || c.sess == s {
			delete(e.lingering, c)
			out = append(out, c)
		}
	}
	return out
}

// terminate ends the trees of cmds (running) and of lingering (ended,
// with processes left behind), and with orphans every orphan reparented
// to the daemon: SIGTERM, then SIGKILL to whatever still runs after the
// grace period (bounded by ctx); then it waits for cmds to be reaped
// until ctx ends.
func (e *Engine) terminate(ctx context.Context, cmds, lingering []*Command, orphans bool) error {
	for _, c := range cmds {
		c.mark(false)
	}
	all := append(append([]*Command(nil), cmds...), lingering...)
	if len(all) == 0 && !orphans {
		return nil
	}
	e.signalTrees(all, syscall.SIGTERM, orphans)
	grace, cancel := context.WithTimeout(ctx, e.killGrace)
	defer cancel()
	if !e.waitTrees(grace, cmds, all, orphans) {
		e.signalTrees(all, syscall.SIGKILL, orphans)
		// SIGKILL cannot be ignored: what it hit is gone at once, and its
		// zombies can be reaped.
		after, cancel := context.WithTimeout(ctx, e.killGrace)
		e.waitTrees(after, cmds, all, orphans)
		cancel()
	}
	if !waitAll(ctx, cmds) {
		return unavailable("processes are still running after SIGKILL", "")
	}
	return nil
}

// waitTrees waits until cmds have been reaped and the trees of all (and
// with orphans, every orphan) have ended, then reaps the zombies they
// left; false when ctx ends first.
func (e *Engine) waitTrees(ctx context.Context, cmds, all []*Command, orphans bool) bool {
	if !waitAll(ctx, cmds) {
		return false
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		t := scanProcs()
		live := orphans && liveIn(orphanTrees(t)) || liveIn(taggedTrees(t, all))
		for _, c := range all {
			live = live || liveIn(c.track(t))
		}
		if !live {
			reapZombies(t)
			return true
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
}

func waitAll(ctx context.Context, cmds []*Command) bool {
	for _, c := range cmds {
		select {
		case <-c.done:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Close refuses new commands, ends every process tree the engine
// started, running commands and the background children ended ones left
// behind (SIGTERM, then SIGKILL after a grace period bounded by ctx), and
// returns once every supervisor has reaped its process, or with ctx's
// error. It may be called more than once.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.shutdown)
	}
	var cmds []*Command
	for c := range e.running {
		cmds = append(cmds, c)
	}
	lingering := e.lingeringLocked(nil)
	e.mu.Unlock()
	// Without a sandbox, what a command left behind is reparented to the
	// daemon (a subreaper) and ends here. In one, it is reparented to the
	// sandbox's init and ends with the sandbox; the daemon's other
	// children are not this engine's (a pool holds many sandboxes).
	err := e.terminate(ctx, cmds, lingering, !e.contained)
	reaped := make(chan struct{})
	go func() { e.live.Wait(); e.background.Wait(); close(reaped) }()
	select {
	case <-reaped:
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("commands: close: %w", ctx.Err()))
	}
	if !e.contained {
		reapZombies(scanProcs())
	}
	return err
}
