package pty

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Command statuses (the published BashCommandStatus values a terminal
// uses). Only terminated ends the session.
const (
	StatusRunning    = "running"
	StatusCompleted  = "completed"
	StatusNoChange   = "no_change_timeout"
	StatusHard       = "hard_timeout"
	StatusTerminated = "terminated"
)

// Output shaping.
const (
	truncateAt   = 30000
	truncateKeep = 15000
	// TruncationMarker replaces the middle of an output over 30,000 bytes.
	TruncationMarker = "\n[... Observation truncated due to length ...]\n"
	consolePS1       = "$ "
	captureHalf      = 1 << 20 // a command's output kept: its first and last MiB
	preMax           = 64 << 10
	asyncStartWait   = time.Second // how long async exec waits for the shell to start the command
)

// ConsoleRecord is one finished command of a session's transcript.
type ConsoleRecord struct {
	PS1     string `json:"ps1"`
	Command string `json:"command"`
	Output  string `json:"output"`
}

// Result is a command's state as exec and screen answer it (the
// published ShellCommandResult and ShellViewResult). Command is nil on a
// screen read between commands.
type Result struct {
	SessionID string          `json:"session_id"`
	Command   *string         `json:"command"`
	Status    string          `json:"status"`
	Output    string          `json:"output"`
	Console   []ConsoleRecord `json:"console"`
	ExitCode  *int            `json:"exit_code"`
}

// KillResult is the published ShellKillResult.
type KillResult struct {
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	ReturnCode *int   `json:"returncode"`
}

// run is one exec'd command. Guarded by its session's mu.
type run struct {
	id      string // unique in its session: its markers carry it
	command string
	status  string
	written bool // typed into the terminal
	// foreign: typed while a program other than the shell held the
	// terminal (a REPL left in the foreground by an earlier exec), so no
	// id line was typed (it would reach that program, not the shell) and
	// the shell's next end marker, whatever its id, ends the run.
	foreign    bool
	started    bool // the shell began to run it (start marker seen)
	pre        []byte
	head, tail []byte
	dropped    bool
	exitCode   *int
	lastOutput time.Time
	hard       *time.Timer
}

// capture keeps output: before the start marker (the echoed line, or a
// syntax error's message) apart, then the first and last captureHalf.
func (r *run) capture(b []byte) {
	if !r.started {
		if len(r.pre) < preMax {
			r.pre = append(r.pre, b[:min(len(b), preMax-len(r.pre))]...)
		}
		return
	}
	if n := min(captureHalf-len(r.head), len(b)); n > 0 {
		r.head, b = append(r.head, b[:n]...), b[n:]
	}
	r.tail = append(r.tail, b...)
	if len(r.tail) > 2*captureHalf {
		r.tail, r.dropped = append([]byte(nil), r.tail[len(r.tail)-captureHalf:]...), true
	}
}

// output is the command's output as clients read it: CRLF as LF, no
// trailing newline, and with truncate the middle of a long one elided.
func (r *run) output(truncate bool) string {
	var raw string
	switch {
	case r.started && r.dropped:
		raw = string(r.head) + TruncationMarker + string(r.tail)
	case r.started:
		raw = string(r.head) + string(r.tail)
	default: // never started: what followed the echoed line
		if _, after, ok := strings.Cut(string(r.pre), "\n"); ok {
			raw = strings.TrimPrefix(after, "\x1b[?2004l\r")
		}
	}
	return shape(raw, truncate)
}

func shape(raw string, truncate bool) string {
	s := strings.TrimRight(strings.ReplaceAll(raw, "\r\n", "\n"), "\n")
	if truncate && len(s) > truncateAt {
		s = s[:truncateKeep] + TruncationMarker + s[len(s)-truncateKeep:]
	}
	return s
}

// finishLocked ends r with a final status. Guarded by s.mu.
func (s *session) finishLocked(r *run, status string, code *int) {
	if r.status != StatusRunning {
		return
	}
	r.status, r.exitCode = status, nil
	if status == StatusCompleted || status == StatusTerminated {
		r.exitCode = code
	}
	if r.hard != nil {
		r.hard.Stop()
	}
	s.console = append(s.console, ConsoleRecord{PS1: consolePS1, Command: r.command, Output: r.output(true)})
	if len(s.console) > maxConsole {
		s.console = append(s.console[:0:0], s.console[len(s.console)-maxConsole:]...)
	}
	s.used = time.Now()
	s.bumpLocked()
}

// ExecRequest is one command to type into a terminal.
type ExecRequest struct {
	Command string
	// Async returns at once with status running.
	Async bool
	// Timeout bounds the wait (0: until the command ends); the command
	// runs on past it.
	Timeout time.Duration
	// HardTimeout interrupts the command (0: never).
	HardTimeout time.Duration
	// NoChangeTimeout interrupts a sync command quiet this long (nil: the
	// session's; 0: never).
	NoChangeTimeout *time.Duration
	// Cwd, when set, moves the shell there before the command.
	Cwd string
	// Full disables the truncation of a long output.
	Full bool
}

// Exec types a command at the terminal's prompt and, unless async,
// waits for it to end, for the timeout, for no_change_timeout without
// output (which interrupts it), or for ctx.
func (e *Engine) Exec(ctx context.Context, id string, req ExecRequest) (Result, error) {
	s, err := e.lookup(id)
	if err != nil {
		return Result{}, err
	}
	if s.kind == kindOther {
		return Result{}, newErr(ErrNotImplemented, "exec needs a bash or sh terminal; this one runs "+s.shell,
			"type the command with input, or attach a WebSocket")
	}
	if req.Timeout < 0 || req.HardTimeout < 0 {
		return Result{}, invalid("timeout and hard_timeout must not be negative")
	}
	s.mu.Lock()
	switch {
	case s.ended || s.killed: // killed: closed or expired since the lookup (see session.Expire)
		s.mu.Unlock()
		return Result{}, notFound(id)
	case s.cur != nil && s.cur.status == StatusRunning:
		s.mu.Unlock()
		return Result{}, errBusy
	}
	s.execs++
	r := &run{id: strconv.FormatUint(s.execs, 10), command: req.Command, status: StatusRunning, lastOutput: time.Now()}
	s.cur, s.used = r, time.Now()
	quiet := s.noChange
	s.mu.Unlock()
	if req.NoChangeTimeout != nil {
		quiet = *req.NoChangeTimeout
	}
	// A command interrupted a moment ago may still be unwinding.
	s.waitFor(ctx, e.interruptWait, s.readyLocked)
	s.mu.Lock()
	r.written = true
	r.foreign = s.kind == kindBash && !s.readyLocked()
	s.mu.Unlock()
	if err := s.write(s.typed(r, req.Command, req.Cwd)); err != nil {
		s.mu.Lock()
		s.finishLocked(r, StatusTerminated, nil)
		s.mu.Unlock()
		return Result{}, err
	}
	if req.HardTimeout > 0 {
		s.mu.Lock()
		if r.status == StatusRunning {
			r.hard = time.AfterFunc(req.HardTimeout, func() { s.interrupt(r, StatusHard) })
		}
		s.mu.Unlock()
	}
	if req.Async { // input sent next reaches the command, not the prompt
		s.waitFor(ctx, asyncStartWait, func() bool { return r.started || r.status != StatusRunning })
	} else {
		s.await(ctx, r, req.Timeout, quiet)
	}
	return s.result(r, true, !req.Full), nil
}

// await waits for r to end, for d (0: no bound), or for ctx; quiet
// without output interrupts r (0: never).
func (s *session) await(ctx context.Context, r *run, d, quiet time.Duration) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var idle <-chan time.Time
	var it *time.Timer
	if quiet > 0 {
		it = time.NewTimer(quiet)
		defer it.Stop()
		idle = it.C
	}
	for {
		s.mu.Lock()
		st, last, ch := r.status, r.lastOutput, s.notify
		s.mu.Unlock()
		if st != StatusRunning {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		case <-idle:
			if left := quiet - time.Since(last); left > 0 {
				it.Reset(left)
				continue
			}
			s.interrupt(r, StatusNoChange)
			s.waitFor(ctx, s.e.interruptWait, s.readyLocked)
			return
		}
	}
}

// interrupt ends r with a timeout status and types ^C, as a user would.
func (s *session) interrupt(r *run, status string) {
	s.mu.Lock()
	if r.status != StatusRunning {
		s.mu.Unlock()
		return
	}
	s.finishLocked(r, status, nil)
	s.mu.Unlock()
	if err := s.write([]byte{3}); err != nil {
		s.e.log.Debug("pty: cannot interrupt", "session_id", s.id)
	}
}

// result describes r (nil: nothing run yet) in its session; withCommand
// names the command even when it has ended (exec answers do).
func (s *session) result(r *run, withCommand, truncate bool) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := Result{SessionID: s.id, Status: StatusCompleted, Console: append([]ConsoleRecord{}, s.console...)}
	if r == nil {
		res.Output = shape(string(s.out.since(0, truncateAt)), truncate)
		return res
	}
	res.Status, res.ExitCode, res.Output = r.status, r.exitCode, r.output(truncate)
	if withCommand || r.status == StatusRunning {
		res.Command = &r.command
	}
	return res
}

// Screen reads the terminal: the running or last command's output so
// far, or the recent output when nothing has been exec'd.
func (e *Engine) Screen(id string) (Result, error) {
	s, err := e.lookup(id)
	if err != nil {
		return Result{}, err
	}
	s.touch()
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	return s.result(r, false, true), nil
}

// Wait waits up to d (bounded by ctx) for the running command to end and
// reports its status.
func (e *Engine) Wait(ctx context.Context, id string, d time.Duration) (string, error) {
	s, err := e.lookup(id)
	if err != nil {
		return "", err
	}
	s.waitFor(ctx, d, func() bool { return s.cur == nil || s.cur.status != StatusRunning })
	return s.status(), nil
}

// status is the current command's status ("completed" when none ran).
func (s *session) status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return StatusCompleted
	}
	return s.cur.status
}

// Input types data into the terminal as it is (\u0003 is Ctrl-C); with
// enter it adds the carriage return the Enter key sends.
func (e *Engine) Input(id string, data string, enter bool) (string, error) {
	s, err := e.lookup(id)
	if err != nil {
		return "", err
	}
	if enter {
		data += "\r"
	}
	if err := s.clientWrite([]byte(data)); err != nil {
		return "", err
	}
	return s.status(), nil
}

// clientWrite types a client's input (REST /input or an attached
// socket). A Ctrl-C typed while an exec's lines may still wait in the
// shell's typeahead (written, not started) makes readline discard them,
// so no marker with the exec's id would ever come: the run turns
// foreign, and the shell's next end marker ends it.
func (s *session) clientWrite(b []byte) error {
	if bytes.IndexByte(b, 3) >= 0 {
		s.mu.Lock()
		if r := s.cur; r != nil && r.status == StatusRunning && r.written && !r.started {
			r.foreign = true
		}
		s.mu.Unlock()
	}
	return s.write(b)
}

// Signal SIGKILLs the terminal's session and closes it; a second call is
// ErrNotFound.
func (e *Engine) Signal(ctx context.Context, id string) (KillResult, error) {
	s, err := e.lookup(id)
	if err != nil {
		return KillResult{}, err
	}
	e.drop(s)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = s.wait(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return KillResult{Status: StatusTerminated, ExitCode: s.exitCode, ReturnCode: s.exitCode}, err
}

// Resize sets a terminal's size.
func (e *Engine) Resize(id string, cols, rows int) error {
	s, err := e.lookup(id)
	if err != nil {
		return err
	}
	return s.resize(cols, rows)
}

// SetNoChangeTimeout sets a terminal's default no_change_timeout.
func (e *Engine) SetNoChangeTimeout(id string, d time.Duration) error {
	s, err := e.lookup(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.noChange, s.used = d, time.Now()
	s.mu.Unlock()
	return nil
}

// typed is what exec types to run command as run r (after cd to cwd
// when set): the command as it is when it types cleanly, else through
// eval of a quoted copy. For bash at its prompt it is preceded by the
// line that makes the shell's own markers of the command's line carry
// r's id (see promptCommand); a foreign run (another program holds the
// terminal) is typed as it is, for that program to read; for sh the command's line prints the markers, with id,
// around the command. Either way the markers come from the shell running
// the line, never from the terminal's echo of it (which shows
// "\033", not ESC).
func (s *session) typed(r *run, command, cwd string) []byte {
	id := r.id
	var b strings.Builder
	switch {
	case s.kind == kindBash && r.foreign:
		return []byte(command + "\r") // for the program that reads the terminal; cwd means nothing to it
	case s.kind == kindBash:
		b.WriteString("__aio_exec " + id + "\r")
	case s.kind == kindSh:
		fmt.Fprintf(&b, `printf '\033]6973;%s;S;%s\007'; `, s.nonce, id)
	}
	if cwd != "" {
		b.WriteString("cd -- " + s.quote(cwd) + " && ")
	}
	switch {
	case cwd == "" && s.kind == kindBash && plain(command):
		b.WriteString(command)
	default:
		b.WriteString("eval " + s.quote(command))
	}
	if s.kind == kindSh {
		fmt.Fprintf(&b, `; printf '\033]6973;%s;E;%%d;%s\007' $?`, s.nonce, id)
	}
	b.WriteByte('\r')
	return []byte(b.String())
}

// plain: a line readline takes as typed (printable ASCII, not continued).
func plain(cmd string) bool {
	for i := 0; i < len(cmd); i++ {
		if c := cmd[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return cmd != "" && !strings.HasSuffix(cmd, `\`)
}

// quote makes one printable shell word of v: $'...' for bash, a printf
// %b decoding for sh.
func (s *session) quote(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' || c == '\'':
			if s.kind == kindSh {
				fmt.Fprintf(&b, `\0%03o`, c)
			} else {
				b.WriteByte('\\')
				b.WriteByte(c)
			}
		case c < 0x20 || c >= 0x7f:
			if s.kind == kindSh {
				fmt.Fprintf(&b, `\0%03o`, c)
			} else {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		default:
			b.WriteByte(c)
		}
	}
	if s.kind == kindSh {
		return `"$(printf '%b' '` + b.String() + `')"`
	}
	return "$'" + b.String() + "'"
}
