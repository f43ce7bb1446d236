package pty

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
)

// session is one terminal: a shell on a PTY, its retained output and its
// exec state.
type session struct {
	id        string
	e         *Engine
	kind      shellKind
	shell     string
	nonce     string
	user      string // as requested; "" the default account
	cwd       string
	retention string
	throwaway bool
	created   time.Time
	cmd       *exec.Cmd
	pid       int
	master    *os.File
	wmu       sync.Mutex    // serializes writes to the PTY
	readDone  chan struct{} // the reader has stopped
	done      chan struct{} // shell reaped, reader stopped, PTY closed

	mu         sync.Mutex
	used       time.Time
	noChange   time.Duration
	out        ring
	filt       filter
	atPrompt   bool   // the shell has reached its prompt
	promptAt   int64  // output offset of the last end marker
	cur        *run   // the running or last exec'd command
	execs      uint64 // exec ids handed out
	console    []ConsoleRecord
	notify     chan struct{} // closed and replaced on every change
	sock       *socket       // the attached WebSocket
	hadSocket  bool
	detachedAt int64 // output offset when the last socket left
	started    bool  // the shell runs: cmd, pid and master are set
	open       bool  // created (first prompt seen or waited for): lookups, listings, eviction and reclaim see it
	reaped     bool  // the shell has been waited for
	killed     bool  // ending: closed, signalled, evicted or reclaimed
	ended      bool
	exitCode   *int
}

// promptCommand reports $? as an end marker at each prompt; the first
// time it also stops history expansion (so "!" types as itself), keeps
// the markers' variables out of child shells, defines __aio_exec and
// reports the shell's own exit status from the EXIT trap.
//
// Exec ids. Every marker of a line that exec typed carries that exec's
// id, so an exec never takes another line's output or end for its own
// (a line typed over the WebSocket or /input just before it, or the
// late end of an exec that timed out). Exec types two lines: first
// "__aio_exec ID", which only records ID as the id of the next line (and
// leaves $? as it was), then its command. The end marker of the
// "__aio_exec" line still carries the previous id (__aio_cur); then
// __aio_cur becomes ID, so PS0 (the start marker) and the end marker of
// the command's line carry ID, and the end marker after it clears it.
// A line whose parse fails prints no start marker but still its end
// marker, with its id. The ids are printed by the shell as it runs the
// lines, never echoed from what was typed, so timing cannot mix them up.
func promptCommand(nonce string) string {
	mark := `printf '\033]6973;` + nonce + `;%s;%d;%s\007'`
	return `__aio_rc=$?; if [ -z "$__aio_init" ]; then __aio_init=1; set +H; export -n PS0 PS1 PROMPT_COMMAND; ` +
		`__aio_exec() { __aio_next=$1; return "$__aio_rc"; }; ` +
		`trap '__aio_rc=$?; ` + strings.ReplaceAll(mark, `'`, `'\''`) + ` X "$__aio_rc" ""' EXIT; fi; ` +
		mark + ` E "$__aio_rc" "$__aio_cur"; __aio_cur=$__aio_next; __aio_next=`
}

// newSession builds a terminal's session, not started yet (the
// registry holds its id and slot meanwhile; see Engine.open).
func (e *Engine) newSession(o Options, shell string, kind shellKind, cwd string) *session {
	now := time.Now()
	s := &session{id: o.ID, e: e, kind: kind, shell: shell, nonce: newID()[:8], user: o.User, cwd: cwd,
		retention: o.Retention, throwaway: o.throwaway, created: now, used: now, noChange: o.NoChangeTimeout,
		out: ring{max: MaxReplayBytes}, notify: make(chan struct{}), readDone: make(chan struct{}), done: make(chan struct{}),
		atPrompt: kind != kindBash}
	switch {
	case s.noChange == 0:
		s.noChange = DefaultNoChangeTimeout
	case s.noChange < 0:
		s.noChange = 0 // never, as 0 means on exec and PATCH
	}
	s.filt.prefix = []byte(markerOSC + s.nonce + ";")
	return s
}

// start spawns the shell in a session of its own, with the PTY as its
// controlling terminal and a cols×rows size, as who (nil: the daemon's
// account), and the goroutines that read and reap it; it returns once
// the shell shows its first prompt (or readyWait passes). On success the
// reaper owns the session's count in e.live.
func (s *session) start(cols, rows int, who *sessions.Identity) error {
	e, shell := s.e, s.shell
	// The daemon's environment without its secrets, the account's HOME,
	// USER and LOGNAME, then the terminal's own variables.
	env := e.exec.Env(who, "TERM=xterm-256color", tagVar+"="+s.nonce)
	if !hasLocale(env) {
		env = append(env, "LC_CTYPE=C.UTF-8")
	}
	args := []string{shell}
	switch s.kind {
	case kindBash:
		args = append(args, "--noprofile", "--norc", "-i")
		env = append(env, `PS1=\w $ `, `PS0=\e]6973;`+s.nonce+`;S;${__aio_cur}\a`, "PROMPT_COMMAND="+promptCommand(s.nonce))
	case kindSh:
		args = append(args, "-i")
		env = append(env, "PS1=$ ")
	}
	attrs := &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if who != nil {
		attrs.Credential = who.Cred
	}
	s.cmd = &exec.Cmd{Path: shell, Args: args, Dir: s.cwd, Env: env, SysProcAttr: attrs}
	var m *os.File
	// The attributes are read inside the start function: a sandbox's
	// Wrap adds its own (account, cgroup) to cmd.SysProcAttr first.
	size := &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}
	err := child.Start(s.cmd, s.e.exec.Wrap(s.cmd, func() (err error) {
		if !s.e.exec.OwnsTerminals() {
			m, err = pty.StartWithAttrs(s.cmd, size, s.cmd.SysProcAttr)
			return err
		}
		// A whole machine's terminal is its own devpts's, opened
		// inside; the shell is started on it as StartWithAttrs does.
		master, tty, err := s.e.exec.OpenPTY()
		if err != nil {
			return err
		}
		defer tty.Close()
		if err := pty.Setsize(master, size); err != nil {
			master.Close()
			return err
		}
		s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = tty, tty, tty
		s.cmd.SysProcAttr.Setsid, s.cmd.SysProcAttr.Setctty, s.cmd.SysProcAttr.Ctty = true, true, 0
		if err := s.cmd.Start(); err != nil {
			master.Close()
			return err
		}
		m = master
		return nil
	}))
	if err != nil {
		return newErr(ErrUnavailable, "cannot start the terminal's shell "+shell+": "+fserr.Text(err), "")
	}
	s.pid = s.cmd.Process.Pid
	if s.master, err = pollable(m); err != nil {
		killSession(s.pid, s.nonce)
		_ = s.cmd.Wait()
		child.Forget(s.pid)
		return newErr(ErrUnavailable, "cannot start a terminal: "+fserr.Text(err), "")
	}
	// cmd, pid and master are written before started is set under s.mu:
	// whoever sees started (kill, Expire, visible) may read them.
	s.mu.Lock()
	s.started = true
	killed := s.killed
	s.mu.Unlock()
	if killed { // Close took it before it ran: do not wait for its prompt
		killSession(s.pid, s.nonce)
	}
	go s.read()
	go s.reap()
	s.waitFor(context.Background(), readyWait, s.readyLocked) // the first prompt
	return nil
}

// readyLocked: the shell reads a command line. Bash is once readline
// has begun drawing the prompt that follows the end marker (typeahead
// sent earlier may be flushed). Guarded by s.mu.
func (s *session) readyLocked() bool {
	return s.atPrompt && (s.kind != kindBash || s.out.end > s.promptAt)
}

func hasLocale(env []string) bool {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); v != "" && (k == "LANG" || k == "LC_ALL" || k == "LC_CTYPE") {
			return true
		}
	}
	return false
}

// pollable turns creack/pty's master (left in blocking mode by its
// ioctls) into a non-blocking, poller-backed file: reads and writes take
// deadlines, and Close interrupts a pending Read.
func pollable(m *os.File) (*os.File, error) {
	defer m.Close()
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pty master nonblocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// flushAfter is how long a byte held back by the filter waits for the
// rest of its marker or character.
const flushAfter = 20 * time.Millisecond

// read copies the PTY's output into the ring, the exec capture and the
// attached socket until the PTY closes.
func (s *session) read() {
	defer close(s.readDone)
	buf := make([]byte, 32<<10)
	for {
		var deadline time.Time
		if len(s.filt.hold) > 0 {
			deadline = time.Now().Add(flushAfter)
		}
		_ = s.master.SetReadDeadline(deadline)
		n, err := s.master.Read(buf)
		s.mu.Lock()
		if n > 0 {
			s.filt.feed(buf[:n], s.onData, s.onMark)
		}
		if err != nil {
			s.filt.flush(s.onData)
		}
		s.mu.Unlock()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
	}
}

// onData takes plain output. Guarded by s.mu.
func (s *session) onData(b []byte) {
	s.out.write(b)
	if r := s.cur; r != nil && r.status == StatusRunning && r.written {
		r.lastOutput = time.Now()
		r.capture(b)
	}
	if s.sock != nil && !s.sock.send(b) {
		s.e.log.Debug("pty: socket fell behind; closing it", "session_id", s.id)
		s.detachLocked(s.sock, int64(len(b)))
	}
	s.bumpLocked()
}

// onMark takes a marker, of the line exec typed for exec id (see
// promptCommand). Only the markers carrying the running exec's id start
// and end it (a foreign run, typed into a program that held the
// terminal, ends at the shell's next end marker, whatever its id); an end marker of an earlier line before it starts also
// discards what was captured so far (that line's echo and output). The
// exit marker ends whatever runs: the shell is going away. Guarded by
// s.mu.
func (s *session) onMark(kind byte, code int, exec string) {
	r := s.cur
	live := r != nil && r.status == StatusRunning && r.written
	mine := live && (exec == r.id || r.foreign)
	switch kind {
	case markStart:
		s.atPrompt = false
		if mine {
			r.started = true
		}
	case markEnd:
		s.atPrompt, s.promptAt = true, s.out.end
		switch {
		case mine:
			s.finishLocked(r, StatusCompleted, &code)
		case live && !r.started:
			r.pre = r.pre[:0]
		}
	case markExit:
		s.exitCode = &code
		if live {
			s.finishLocked(r, StatusCompleted, &code)
		}
	}
	s.bumpLocked()
}

func (s *session) bumpLocked() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// reap waits for the shell, ends what it left in its terminal session,
// drains the PTY and retires the session.
func (s *session) reap() {
	defer s.e.live.Done()
	err := s.cmd.Wait()
	child.Forget(s.pid)
	var code *int
	if st := s.cmd.ProcessState; st != nil {
		c := st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c = -int(ws.Signal())
		}
		code = &c
	} else if err != nil {
		s.e.log.Debug("pty: shell already reaped elsewhere", "session_id", s.id)
	}
	s.mu.Lock()
	s.reaped = true
	s.mu.Unlock()
	killSession(s.pid, s.nonce)
	select {
	case <-s.readDone:
	case <-time.After(2 * time.Second): // something outside the session holds the terminal
	}
	_ = s.master.Close()
	<-s.readDone
	s.mu.Lock()
	s.ended = true
	if s.exitCode == nil || s.killed {
		s.exitCode = code
	}
	if r := s.cur; r != nil && r.status == StatusRunning {
		st := StatusCompleted
		if s.killed {
			st = StatusTerminated
		}
		s.finishLocked(r, st, s.exitCode)
	}
	if s.sock != nil {
		s.sock.kick(frameError("Session closed"))
		s.sock = nil
	}
	s.bumpLocked()
	s.mu.Unlock()
	s.e.forget(s)
	close(s.done)
}

// kill SIGKILLs the terminal's whole session (once its shell is reaped,
// the reaper has done so). A session not started yet only remembers it
// (see Engine.create, which ends it once started).
func (s *session) kill() {
	s.mu.Lock()
	s.killed = true
	signal := s.started && !s.reaped
	s.mu.Unlock()
	if signal {
		killSession(s.pid, s.nonce)
	}
}

// visible: created and not being closed; lookups and listings see only
// these.
func (s *session) visible() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open && !s.killed
}

// gone: created and then killed, or its shell ended; it holds its id
// only until it is forgotten.
func (s *session) gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open && (s.killed || s.ended)
}

// Expire ends the session if it is reclaimable (created, expiring,
// nothing running, no socket attached, not already ending) and idle at
// least idle (0: eviction at the cap), for the registry
// (sessions.Session). The check and the kill mark happen under s.mu, and
// Exec and attach take s.mu to start work, so a command or a socket that
// comes first keeps the session and one that comes after finds it
// ending (Exec: not found).
func (s *session) Expire(idle time.Duration) bool {
	s.mu.Lock()
	ok := s.open && !s.killed && s.reclaimableLocked() && time.Since(s.used) >= idle
	if ok {
		s.killed = true
	}
	signal := ok && !s.reaped
	s.mu.Unlock()
	if signal {
		killSession(s.pid, s.nonce)
	}
	if ok && idle == 0 {
		s.e.log.Debug("pty: evicted idle session", "session_id", s.id)
	}
	return ok
}

// wait waits, bounded by ctx, for the session to end.
func (s *session) wait(ctx context.Context) error {
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pty: session %s still ending: %w", s.id, ctx.Err())
	}
}

// waitFor waits until cond (checked under s.mu) holds, the session ends,
// d passes or ctx ends; it reports cond.
func (s *session) waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, ended, ch := cond(), s.ended, s.notify
		s.mu.Unlock()
		if ok || ended {
			return ok
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// write types p into the terminal.
func (s *session) write(p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.master.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.master.Write(p); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return newErr(ErrUnavailable, "the terminal is not reading its input", "")
		}
		return notFound(s.id)
	}
	s.touch()
	if s.e.onInput != nil {
		s.e.onInput()
	}
	return nil
}

// resize sets the terminal's size; the kernel tells the foreground job.
func (s *session) resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 0xffff || rows > 0xffff {
		return invalid("cols and rows must be between 1 and 65535")
	}
	rc, err := s.master.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
		})
		err = errors.Join(cerr, err)
	}
	if err != nil {
		return notFound(s.id)
	}
	s.touch()
	return nil
}

func (s *session) touch() {
	s.mu.Lock()
	s.used = time.Now()
	s.mu.Unlock()
}

// LastUsed is when the terminal was last used: input, a resize, a read
// of its screen, an exec starting or ending, a socket attaching or
// leaving (sessions.Session: eviction picks the oldest).
func (s *session) LastUsed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

func (s *session) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil && s.cur.status == StatusRunning
}

// reclaimableLocked: expiring, with nothing running and no socket
// attached. Guarded by s.mu.
func (s *session) reclaimableLocked() bool {
	return s.retention == RetentionExpiring && s.sock == nil && (s.cur == nil || s.cur.status != StatusRunning)
}

func (s *session) userName() string {
	if s.user == "" {
		return "the default account"
	}
	return s.user
}

func (s *session) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := Info{WorkingDir: s.cwd, CreatedAt: stamp(s.created), LastUsedAt: stamp(s.used),
		AgeSeconds: int64(time.Since(s.created).Seconds()), Status: "idle"}
	if r := s.cur; r != nil && r.status == StatusRunning {
		in.Status, in.CurrentCommand = "active", &r.command
	}
	return in
}
