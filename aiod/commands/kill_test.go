package commands

import (
	"os"
	"testing"
	"time"
)

// killHarness is a plane whose kills escalate after grace.
func killHarness(t *testing.T, grace time.Duration, cfg Config) *harness {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	cfg.KillGrace = grace
	h := newHarness(t, cfg, func(e *Engine) { e.drainGrace = 50 * time.Millisecond })
	t.Cleanup(func() { closePlane(t, h.p) })
	return h
}

// TestKillEscalates: a SIGTERM kill of a tree that ignores SIGTERM ends
// it with SIGKILL after the grace period, wherever the ignoring process
// sits (the shell itself, a subshell, a child that left with setsid),
// and the command reads completed with exit code -1.
func TestKillEscalates(t *testing.T) {
	h := killHarness(t, 500*time.Millisecond, Config{})
	for _, tc := range []struct {
		name, command string
		procs         [][]string
	}{
		{"shell", "trap '' TERM; sleep 1000.11", [][]string{{"sleep", "1000.11"}}},
		{"subshell", "(trap '' TERM; sleep 1000.12) & sleep 1000.13", [][]string{{"sleep", "1000.12"}, {"sleep", "1000.13"}}},
		{"setsid", "setsid bash -c \"trap '' TERM; sleep 1000.14\" & sleep 1000.15", [][]string{{"sleep", "1000.14"}, {"sleep", "1000.15"}}},
		{"setsid, the shell ignoring too", "trap '' TERM; setsid bash -c \"trap '' TERM; sleep 1000.16\" & sleep 1000.17",
			[][]string{{"sleep", "1000.16"}, {"sleep", "1000.17"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := h.run(map[string]any{"command": tc.command, "mode": "async"})
			for _, p := range tc.procs {
				waitProc(t, p...)
			}
			h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGTERM"}, nil)
			if o := h.waitDone(d.CommandID); o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "-1" {
				t.Fatalf("%+v", o.Command)
			}
			for _, p := range tc.procs {
				noneRunning(t, p...)
			}
			h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/kill", nil)
		})
	}
}

// TestSecondKillReachesLeftovers: a first kill that ends the command but
// not a child ignoring it leaves the child killable: the second kill is
// accepted and ends it (well before the escalation, which is set far
// off here); once nothing is left a kill is refused.
func TestSecondKillReachesLeftovers(t *testing.T) {
	h := killHarness(t, 10*time.Second, Config{})
	d := h.run(map[string]any{"command": "(trap '' TERM; sleep 1000.21) & sleep 1000.22", "mode": "async"})
	left := waitProc(t, "sleep", "1000.21")
	waitProc(t, "sleep", "1000.22")
	h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGTERM"}, nil)
	if o := h.waitDone(d.CommandID); o.Command.Status != StatusCompleted {
		t.Fatalf("%+v", o.Command)
	}
	if ps := procsWithArgv("sleep", "1000.21"); len(ps) != 1 || ps[0].PID != left.PID {
		t.Fatalf("the TERM-ignoring child should be left after the first kill: %+v", ps)
	}
	start := time.Now()
	h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGKILL"}, nil)
	noneRunning(t, "sleep", "1000.21")
	if time.Since(start) >= 10*time.Second {
		t.Fatal("the leftover ended only with the escalation, not with the second kill")
	}
	h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/kill", nil)
}

// TestEvictedAnonymousSessionEndsItsProcesses: what an anonymous
// session's command left behind (in the background, detached, ignoring
// SIGTERM) ends when the session is evicted at the limit; a named
// session's background children are left for its owner.
func TestEvictedAnonymousSessionEndsItsProcesses(t *testing.T) {
	h := killHarness(t, 500*time.Millisecond, Config{MaxSessions: 1})
	d := h.run(map[string]any{"command": "(trap '' TERM; exec sleep 1000.31) & setsid sleep 1000.32 &"})
	if d.Status != StatusCompleted {
		t.Fatalf("%+v", d)
	}
	waitProc(t, "sleep", "1000.31")
	waitProc(t, "sleep", "1000.32")
	// The next anonymous command evicts the first session.
	if e := h.run(map[string]any{"command": "true"}); e.SessionID == d.SessionID || str(e.Stdout) != "" {
		t.Fatalf("%+v", e)
	}
	h.Fails(404, "GET", "/v2/commands/"+d.CommandID, nil)
	noneRunning(t, "sleep", "1000.31")
	noneRunning(t, "sleep", "1000.32")

	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "named"}, nil)
	h.run(map[string]any{"command": "sleep 1000.33 &", "session": "named"})
	keep := waitProc(t, "sleep", "1000.33")
	h.run(map[string]any{"command": "true"}) // evicts "named"
	h.disconnectedAfter()
	if p := waitProc(t, "sleep", "1000.33"); p.PID != keep.PID {
		t.Fatalf("%+v", p)
	}
}
