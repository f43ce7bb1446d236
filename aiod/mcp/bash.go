package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/commands"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// SharedSession is the id of the commands session that
// sandbox_execute_bash runs in unless new_session is set. It is an
// ordinary session of the commands engine (it shows in GET
// /v2/commands/sessions), created on first use and again after an idle
// reclaim.
const SharedSession = "mcp-shared"

// DefaultBashTimeout is sandbox_execute_bash's timeout when none is given.
const DefaultBashTimeout = 30 * time.Second

// maxBashTimeout bounds the timeout argument.
const maxBashTimeout = 24 * time.Hour

// bashState is what the shared session remembers between calls: the
// directory its last command ended in, the default of the next call.
type bashState struct {
	mu  sync.Mutex
	cwd string
}

func (b *bashState) get() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cwd
}

func (b *bashState) set(cwd string) {
	b.mu.Lock()
	b.cwd = cwd
	b.mu.Unlock()
}

type bashArgs struct {
	Cmd              *string  `json:"cmd"`
	Cwd              string   `json:"cwd"`
	NewSession       bool     `json:"new_session"`
	Timeout          *float64 `json:"timeout"`
	PreserveSymlinks bool     `json:"preserve_symlinks"`
	Truncate         *bool    `json:"truncate"`
}

// executeBash is sandbox_execute_bash over the commands engine: one
// process per call (the engine's Start), its whole tree killed at the
// timeout (the engine's hard timeout: status timed_out, exit code -1) or
// when the call is cancelled or its client goes away (Command.Kill, as the
// sync route does when its client leaves).
//
// The reported cwd is where the shell was when it exited: the command
// runs behind an EXIT trap that prints the shell's directory to stderr
// between a per-call marker, which is cut out of the output. A command
// that replaces the shell (exec), resets the trap, or is still running
// when it is killed reports the directory it started in. In the shared
// session the next call without a cwd starts there.
func (s *Server) executeBash(ctx context.Context, args []byte) result {
	var a bashArgs
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	if a.Cmd == nil || *a.Cmd == "" {
		return failure("cmd is required")
	}
	timeout := DefaultBashTimeout
	if a.Timeout != nil {
		if *a.Timeout <= 0 || *a.Timeout > maxBashTimeout.Seconds() {
			return failure("timeout must be more than 0 and at most 86400 seconds")
		}
		timeout = bashTimeout(*a.Timeout)
	}
	if s.cfg.Commands == nil {
		return failure("commands are not available on this daemon")
	}
	session, cwd, remembered := SharedSession, a.Cwd, false
	if a.NewSession {
		session = ""
	} else if cwd == "" {
		cwd = s.bash.get()
		remembered = cwd != ""
	}
	nonce := newNonce()
	req := commands.Request{Command: cwdTrap(nonce) + *a.Cmd, Cwd: cwd, Session: session,
		CreateSession: session != "", HardTimeout: timeout, Shown: *a.Cmd}
	c, err := s.cfg.Commands.Start(ctx, req)
	if err != nil && remembered {
		// The directory the last command ended in has gone: start over
		// from the session's own.
		s.bash.set("")
		req.Cwd = ""
		c, err = s.cfg.Commands.Start(ctx, req)
	}
	if err != nil {
		msg, _ := api.MessageOf(err)
		return failure(msg)
	}
	if !c.Wait(ctx, 0) {
		_ = c.Kill(syscall.SIGKILL) // the whole tree; it may have just exited
		return failure("cancelled: the command was killed with its children")
	}
	out := c.Read(0, 0)
	stderr, ended := cutCwd(string(out.Stderr), nonce)
	if ended == "" {
		ended = s.startDir(c.SessionID, req.Cwd)
	} else {
		if !a.PreserveSymlinks {
			if p, err := filepath.EvalSymlinks(ended); err == nil {
				ended = p
			}
		}
		if !a.NewSession {
			s.bash.set(ended)
		}
	}
	limit := commands.DefaultMaxOutputLength
	if a.Truncate != nil && !*a.Truncate {
		limit = 0
	}
	output := commands.TruncateOutput(string(out.Stdout), limit) + commands.TruncateOutput(stderr, limit)
	return jsonResult(map[string]any{"status": out.Status, "output": output, "exit_code": out.ExitCode, "cwd": ended}, false)
}

// bashTimeout converts a timeout in seconds (more than 0) to a duration,
// rounded up to whole milliseconds: any positive timeout bounds the
// command, since the engine reads a zero HardTimeout as "no limit" and a
// timeout under a nanosecond would otherwise truncate to zero.
func bashTimeout(seconds float64) time.Duration {
	return time.Duration(math.Ceil(seconds*1e3)) * time.Millisecond
}

// cwdMark opens the marker the EXIT trap prints; the nonce makes it one
// no command output can forge by accident.
func cwdMark(nonce string) string { return "\x1eaiod-cwd-" + nonce + ":" }

// cwdTrap is the line put before the command (on the same line, so the
// shell's "line N" in error messages stays the command's own). The trap
// prints the shell's logical $PWD in one write; the physical directory
// is resolved by the caller with [filepath.EvalSymlinks]. Doing it in
// the shell costs every call: "$(pwd -P)" forks a subshell (4-9 ms
// here) and even "cd -P ." measured a few hundred microseconds.
func cwdTrap(nonce string) string {
	return `trap 'printf "\036aiod-cwd-%s:%s\036" ` + nonce + ` "$PWD" >&2' EXIT; `
}

// cutCwd takes the trap's marker out of stderr and returns the directory
// it names ("" when there is none).
func cutCwd(stderr, nonce string) (rest, cwd string) {
	mark := cwdMark(nonce)
	i := strings.LastIndex(stderr, mark)
	if i < 0 {
		return stderr, ""
	}
	n := strings.IndexByte(stderr[i+len(mark):], 0x1e)
	if n < 0 {
		return stderr, ""
	}
	cwd = stderr[i+len(mark) : i+len(mark)+n]
	return stderr[:i] + stderr[i+len(mark)+n+1:], cwd
}

// startDir is the directory a command started in: its cwd, resolved
// against its session's directory.
func (s *Server) startDir(sessionID, cwd string) string {
	if filepath.IsAbs(cwd) {
		return filepath.Clean(cwd)
	}
	base := ""
	if info, err := s.cfg.Commands.Session(sessionID); err == nil {
		base = info.WorkingDir
	}
	return filepath.Join(base, cwd)
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
