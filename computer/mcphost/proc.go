package mcphost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// Process-tree control for stdio servers.
//
// The invariant: no process a stdio server starts (the server, its
// children, their children) outlives the Upstream that started it, however
// the Computer ends — Close, a crash, or SIGKILL.
//
// Each stdio server runs as the leader of its own process group, so that
// one kill(-pgid) reaches every descendant that has not left the group on
// purpose. Ending the group on a normal Close is easy; surviving the
// Computer's own sudden death is not, since a dead process runs no code.
// On Linux the group is therefore held by a supervisor: the Computer's own
// binary re-executed as "<binary> __supervise" (see [Supervise] and
// [Options.Supervisor]). The supervisor starts the server as a group
// leader, reaps what it leaves behind (it is a child subreaper), and ends
// the group — SIGTERM, then SIGKILL after a grace — when the server exits,
// when it is told to stop (SIGTERM), and when the Computer dies; then it
// kills any descendant that had left the group (setsid), which as an
// orphan has become its own child. It learns
// of the Computer's death from a lifeline: the read end of a pipe whose
// write end only the Computer holds. The kernel closes that end when the
// Computer's process ends for any reason, so the supervisor reads EOF.
// (The parent-death signal, prctl PR_SET_PDEATHSIG, would fire when the
// forking OS thread ends rather than the process, so it is used only where
// the forking thread is pinned: in the supervisor, for the server itself.)
//
// Without a supervisor (non-Linux systems, or an Upstream whose Options
// name none), the server still gets its own group, which is ended when its
// session ends; on Linux it also gets the parent-death signal SIGKILL.
// That fallback cannot reach grandchildren after a SIGKILL of the
// Computer.

// SupervisorArg is the first argument that makes a binary run [Supervise].
// A binary that sets [Options.Supervisor] to its own path dispatches
// "<binary> __supervise ..." to Supervise before anything else.
const SupervisorArg = "__supervise"

// groupGrace is how long a process group has between SIGTERM and SIGKILL.
// It is shorter than the SDK transport's own wait (stdioTerminate), so
// that a supervisor told to stop has finished before the transport would
// kill it.
const groupGrace = time.Second

// stdioTerminate is how long the SDK's CommandTransport waits after
// closing stdin (and again after SIGTERM) before escalating.
const stdioTerminate = 2 * time.Second

// stdioCommand is the command that runs the stdio server of spec: its
// supervisor when supervisor is set (Linux), the server itself otherwise.
// cleanup ends what is left of the server's process group once the
// session is over; it is safe to call when the command never started.
func stdioCommand(spec Spec, supervisor string, stderr *logWriter) (cmd *exec.Cmd, cleanup func(), err error) {
	server := exec.Command(spec.Command, spec.Args...)
	if server.Err != nil {
		return nil, nil, server.Err // the command is not found: report it as exec does
	}
	// A command given as a path is not looked up; check it here, where the
	// error can still be reported, rather than in the supervisor.
	if strings.ContainsRune(spec.Command, filepath.Separator) {
		p := spec.Command
		if !filepath.IsAbs(p) && spec.Cwd != "" {
			p = filepath.Join(spec.Cwd, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("exec: %w", err)
		}
	}
	// No credential of ours reaches the server unless its own env gives
	// it (added after the filter).
	env := credenv.Environ()
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	cmd, cleanup = platformCommand(server, supervisor)
	cmd.Dir = spec.Cwd
	cmd.Env = env
	cmd.Stderr = stderr
	// A descendant that keeps stderr open must not hold up Wait forever.
	cmd.WaitDelay = stdioTerminate
	return cmd, cleanup, nil
}

// endGroup ends the process group pgid: SIGTERM, then SIGKILL once grace
// has passed with a member left, then a bounded wait for the group to be
// gone (its members reaped by whoever is their parent).
func endGroup(pgid int, grace time.Duration) {
	if pgid <= 1 {
		return // never signal our own group or every process
	}
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // the group is already gone
	}
	if waitGroupGone(pgid, grace) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupGone(pgid, 2*time.Second)
}

// waitGroupGone polls until no process is left in group pgid (kill(-pgid,
// 0) fails with ESRCH) or d passes, and reports whether it is gone.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
