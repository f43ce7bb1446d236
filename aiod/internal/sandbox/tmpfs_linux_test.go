package sandbox

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTmpfsFilled: under --memory 512MiB, filling /tmp (400 MiB) and
// then /dev/shm (300 MiB) ends in ENOSPC for the writer; the sandbox's
// init and a session started before go on (the scenario: each
// was sized to the whole limit, together they were over it, and the
// sandbox started again with every session lost).
func TestTmpfsFilled(t *testing.T) {
	s, _ := newSandbox(t, Config{Memory: 512 << 20})
	if s.cg == nil {
		t.Skip("no cgroups here:", s.warnings)
	}
	inst := s.cur
	// A session: a shell that answers each line it reads.
	sess := exec.Command("/bin/sh", "-c", `while read l; do echo "got $l"; done`)
	in, _ := sess.StdinPipe()
	outp, _ := sess.StdoutPipe()
	sess.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.Wrap(sess, sess.Start)(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = sess.Wait() }()
	lines := bufio.NewReader(outp)
	ask := func(q string) string {
		if _, err := io.WriteString(in, q+"\n"); err != nil {
			return err.Error()
		}
		l, err := lines.ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return l
	}
	if got := ask("one"); got != "got one\n" {
		t.Fatalf("session: %q", got)
	}
	out, err := run(t, s, "dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>&1 | head -1; dd if=/dev/zero of=/dev/shm/fill bs=1M count=300 2>&1 | head -1; echo done")
	t.Logf("writer: %q %v", out, err)
	if strings.Count(out, "No space left on device") != 2 || !strings.HasSuffix(out, "done\n") {
		t.Errorf("the writer: %q %v; want ENOSPC from both", out, err)
	}
	select {
	case <-inst.done:
		t.Fatal("init exited")
	default:
	}
	if s.cur != inst {
		t.Error("the sandbox started again")
	}
	if got := ask("two"); got != "got two\n" {
		t.Errorf("the session after the writer: %q", got)
	}
	if out, err := run(t, s, "ls /tmp /dev/shm && rm /tmp/fill /dev/shm/fill && echo x > /tmp/y && cat /tmp/y"); err != nil || !strings.HasSuffix(out, "x\n") {
		t.Errorf("after removing the files: %q %v", out, err)
	}
}

// TestOOMScores: init is spared by the OOM killer (-1000) where the
// daemon may set that (CAP_SYS_RESOURCE), and a sandboxed process is at
// 0 or above, also when the daemon itself runs protected (as under a
// supervisor's OOMScoreAdjust), which it may only where it can lower
// its own score.
func TestOOMScores(t *testing.T) {
	requireRootT(t)
	var capEff uint64
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "CapEff:\t"); ok {
				capEff, _ = strconv.ParseUint(v, 16, 64)
			}
		}
	}
	canLower := capEff&(1<<unix.CAP_SYS_RESOURCE) != 0
	if canLower {
		own, _ := os.ReadFile("/proc/self/oom_score_adj")
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-500"), 0); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.WriteFile("/proc/self/oom_score_adj", own, 0) }()
	}
	s, _ := newSandbox(t, Config{})
	initScore, _ := os.ReadFile("/proc/" + strconv.Itoa(s.cur.init.Process.Pid) + "/oom_score_adj")
	// The score is raised just after the start, so the shell reads its
	// own until it changes (bounded), as a process running a moment
	// later would see it.
	out, err := run(t, s, `i=0; while read -r v < /proc/$$/oom_score_adj && [ "$v" = 0 ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; echo "$v"`)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever init could get, every other process ranks above it (a red
	// team saw init, left at 0 without CAP_SYS_RESOURCE, killed first).
	in, _ := strconv.Atoi(strings.TrimSpace(string(initScore)))
	got, _ := strconv.Atoi(strings.TrimSpace(out))
	if canLower && in != -1000 || got <= in || got < sandboxOOMScore {
		t.Errorf("init %q, a process %q; want -1000 (where the daemon may lower it) and a process at %d or above init", initScore, out, sandboxOOMScore)
	}
	t.Logf("CAP_SYS_RESOURCE %v: init %q, a process %q", canLower, initScore, out)
}

// TestNoControllingTerminal: a sandboxed process has no controlling
// terminal even when the daemon has one (a user started it in a
// terminal): /dev/tty does not open, so no command can read the user's
// keys, write to the screen or push input with TIOCSTI.
func TestNoControllingTerminal(t *testing.T) {
	requireRootT(t)
	// Without the daemon's own terminal (CI has none), the session is
	// what shows it: a process in a session of its own cannot have the
	// daemon's terminal; one left in the daemon's session would.
	s, _ := newSandbox(t, Config{})
	for _, tc := range []struct {
		name string
		attr *syscall.SysProcAttr
	}{{"plain", nil}, {"own group", &syscall.SysProcAttr{Setpgid: true}}} {
		cmd := exec.Command("/bin/sh", "-c", `read -r _ _ _ _ pgrp sid tty _ < /proc/self/stat; echo "$pgrp $sid $tty $$"; exec 3</dev/tty && echo opened`)
		cmd.SysProcAttr = tc.attr
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := s.Wrap(cmd, cmd.Start)(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		f := strings.Fields(out.String())
		if len(f) < 4 || f[1] != f[3] || f[0] != f[3] || f[2] != "0" || strings.Contains(out.String(), "opened") {
			t.Errorf("%s: %q; want its own session and group (pgrp = sid = pid), tty_nr 0, and /dev/tty refused", tc.name, out.String())
		}
	}
}
