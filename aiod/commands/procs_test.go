package commands

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// procsWithArgv lists the live (non-zombie) processes whose argv is
// exactly args.
func procsWithArgv(args ...string) []procInfo {
	want := strings.Join(args, "\x00") + "\x00"
	var out []procInfo
	t := scanProcs()
	for pid, p := range t.Procs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && string(b) == want && p.State != 'Z' {
			out = append(out, p)
		}
	}
	return out
}

// detached waits for the one live process running argv, checks it has
// left the daemon's session, and returns it.
func detached(t *testing.T, args ...string) procInfo {
	t.Helper()
	var p procInfo
	self, _ := child.ReadProc(selfPid)
	// Between its fork and its setsid() the child is still in the
	// daemon's session: wait until it has left.
	eventually(t, 5*time.Second, strings.Join(args, " ")+" to start detached", func() bool {
		ps := procsWithArgv(args...)
		if len(ps) == 1 {
			p = ps[0]
		}
		return len(ps) == 1 && p.SID != self.SID && p.PGID != selfPgid
	})
	return p
}

// gone waits until p has ended and its zombie, if it was the daemon's,
// has been reaped.
func gone(t *testing.T, p procInfo) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		q, ok := child.ReadProc(p.PID)
		if !ok || q.Start != p.Start {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("pid %d has not ended and been reaped: %+v (daemon %d, group %d)", p.PID, q, selfPid, selfPgid)
		}
	}
}

// noOrphanZombies waits until no zombie reparented to the test process
// is left unreaped, in several looks in a row (one look may fall between
// a death and its SIGCHLD).
func noOrphanZombies(t *testing.T) {
	t.Helper()
	clean := 0
	eventually(t, 5*time.Second, "orphaned zombies to be reaped", func() bool {
		for _, p := range scanProcs().Procs {
			if p.State == 'Z' && p.PPID == selfPid && p.PGID != selfPgid {
				clean = 0
				return false
			}
		}
		clean++
		return clean >= 5
	})
}

func TestDetachedChildKilled(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	h := newHarness(t, Config{}, func(e *Engine) { e.killGrace = 300 * time.Millisecond; e.drainGrace = 50 * time.Millisecond })

	t.Run("kill", func(t *testing.T) {
		d := h.run(map[string]any{"command": "setsid sleep 89.1 & sleep 88", "mode": "async"})
		p := detached(t, "sleep", "89.1")
		h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGTERM"}, nil)
		if o := h.waitDone(d.CommandID); code(o.Command.ExitCode) != "-1" {
			t.Fatalf("%+v", o.Command)
		}
		gone(t, p)
	})
	t.Run("hard_timeout", func(t *testing.T) {
		d := h.run(map[string]any{"command": "setsid sleep 89.2 & sleep 88", "mode": "async", "hard_timeout": 1})
		p := detached(t, "sleep", "89.2")
		if o := h.waitDone(d.CommandID); o.Command.Status != StatusTimedOut {
			t.Fatalf("%+v", o.Command)
		}
		gone(t, p)
	})
	t.Run("session close", func(t *testing.T) {
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "tree"}, nil)
		h.run(map[string]any{"command": "setsid sleep 89.3 & sleep 88", "mode": "async", "session": "tree"})
		p := detached(t, "sleep", "89.3")
		h.OK("DELETE", "/v2/commands/sessions/tree", nil, nil)
		gone(t, p)
	})
	t.Run("session close after the shell exited", func(t *testing.T) {
		// The tracker records the detached child while its shell runs; the
		// session close finds it after the shell has gone.
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "left"}, nil)
		d := h.run(map[string]any{"command": "setsid sleep 89.4 & sleep 2.5", "session": "left"})
		if d.Status != StatusCompleted {
			t.Fatalf("%+v", d)
		}
		p := detached(t, "sleep", "89.4")
		if p.PPID != selfPid {
			t.Fatalf("the orphan was not reparented to the daemon: %+v", p)
		}
		h.OK("DELETE", "/v2/commands/sessions/left", nil, nil)
		gone(t, p)
	})
	t.Run("session close after an at-once orphan", func(t *testing.T) {
		// The shell exits at once, before any tracker could see its
		// child: the child is found by the command id it carries.
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "quick"}, nil)
		d := h.run(map[string]any{"command": "setsid sleep 89.7 &", "session": "quick"})
		if d.Status != StatusCompleted {
			t.Fatalf("%+v", d)
		}
		p := detached(t, "sleep", "89.7")
		h.OK("DELETE", "/v2/commands/sessions/quick", nil, nil)
		gone(t, p)
	})
	t.Run("Close", func(t *testing.T) {
		h.run(map[string]any{"command": "setsid sleep 89.5 & sleep 88", "mode": "async"})
		h.run(map[string]any{"command": "setsid sleep 89.6 &"}) // an orphan at once
		p, q := detached(t, "sleep", "89.5"), detached(t, "sleep", "89.6")
		closePlane(t, h.p)
		gone(t, p)
		gone(t, q)
	})
	noOrphanZombies(t)
}

// TestOrphanZombiesReaped: processes a command detached (double fork,
// setsid) are reparented to the daemon, a subreaper; when they die the
// daemon reaps them. Each is seen alive first, then killed by the test,
// and must vanish from /proc: an unreaped zombie stays there.
func TestOrphanZombiesReaped(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	h := newHarness(t, Config{}, nil)
	t.Cleanup(func() { closePlane(t, h.p) })
	d := h.run(map[string]any{"command": "for i in 1 2 3; do (setsid sleep 1000.5$i &); (sleep 1000.6$i &); done"})
	if code(d.ExitCode) != "0" {
		t.Fatalf("%+v", d)
	}
	var orphans []procInfo
	for _, i := range []string{"1", "2", "3"} {
		for _, arg := range []string{"1000.5" + i, "1000.6" + i} {
			p := waitProc(t, "sleep", arg)
			eventually(t, 10*time.Second, "sleep "+arg+" to be reparented to the daemon", func() bool {
				q, ok := child.ReadProc(p.PID)
				return ok && q.Start == p.Start && q.PPID == selfPid
			})
			orphans = append(orphans, p)
		}
	}
	for _, p := range orphans {
		if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range orphans {
		gone(t, p)
	}
	noOrphanZombies(t)
}

func TestSignalLogHasValues(t *testing.T) {
	var buf bytes.Buffer
	h := newHarness(t, Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))}, nil)
	h.p.e.kill(os.Getpid(), syscall.Signal(1000)) // EINVAL, harmlessly
	line := buf.String()
	if !strings.Contains(line, "errno=22") || !strings.Contains(line, `error="invalid argument"`) || strings.Contains(line, "0x") {
		t.Fatalf("%s", line)
	}
}
