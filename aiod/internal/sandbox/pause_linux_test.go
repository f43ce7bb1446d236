package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newPausable starts a sandbox that can pause, or skips.
func newPausable(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	s, _ := newSandbox(t, cfg)
	if !s.cg.canFreeze() {
		t.Skip("no cgroup freezer here")
	}
	return s
}

// counter reads the sandbox's /tmp/c, which the loop of startCounter
// writes (0 while it has not yet, or is between its truncate and write).
func counter(t *testing.T, s *Sandbox) int {
	t.Helper()
	var n int
	if err := s.Do(func() error {
		b, err := os.ReadFile("/tmp/c")
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// startCounter starts a loop that counts into /tmp/c as fast as it can,
// and waits until it has counted.
func startCounter(t *testing.T, s *Sandbox) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/c; done")
	if err := s.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	advances(t, s, 0)
	return cmd
}

// advances waits (up to 10 s) for the counter to pass from.
func advances(t *testing.T, s *Sandbox, from int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n := counter(t, s); n > from {
			return n
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the counter did not pass %d", from)
	return 0
}

// daemonInFreezer lists the daemon's threads in the sandbox's frozen
// group (there must be none).
func daemonInFreezer(t *testing.T, s *Sandbox) []string {
	t.Helper()
	dir, file := s.cg.v2, "cgroup.threads"
	if dir == "" {
		dir, file = s.cg.v1["freezer"], "tasks"
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, tid := range strings.Fields(string(b)) {
		if _, err := os.Stat("/proc/self/task/" + tid); err == nil {
			in = append(in, tid)
		}
	}
	return in
}

// TestPause: a paused sandbox's counter does not advance and its CPU
// time does not grow; a start is refused with ErrPaused, Do still
// works; after Resume the counter goes on.
func TestPause(t *testing.T) {
	s := newPausable(t, Config{})
	startCounter(t, s)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if !s.Paused() {
		t.Error("Paused() is false after Pause")
	}
	if in := daemonInFreezer(t, s); len(in) > 0 {
		t.Fatalf("threads of the daemon are frozen: %v", in)
	}
	c1 := counter(t, s)
	u1, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	// Whether something happens in an interval needs the interval.
	time.Sleep(300 * time.Millisecond)
	c2 := counter(t, s)
	u2, _ := s.Usage()
	if c2 != c1 || u2.CPUUsageNs != u1.CPUUsageNs {
		t.Errorf("paused: counter %d -> %d, CPU %d -> %d ns", c1, c2, u1.CPUUsageNs, u2.CPUUsageNs)
	}
	cmd := exec.Command("/bin/true")
	if err := s.Wrap(cmd, cmd.Start)(); !errors.Is(err, ErrPaused) {
		t.Errorf("a start while paused: %v", err)
	}
	if err := s.Pause(); err != nil { // again: nothing to do
		t.Error(err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if s.Paused() {
		t.Error("Paused() is true after Resume")
	}
	advances(t, s, c2)
	if u3, _ := s.Usage(); u3.CPUUsageNs <= u2.CPUUsageNs {
		t.Errorf("resumed: CPU %d -> %d ns", u2.CPUUsageNs, u3.CPUUsageNs)
	}
	if out, err := run(t, s, "echo started"); out != "started\n" || err != nil {
		t.Errorf("a start after Resume: %q %v", out, err)
	}
}

// TestPauseWithStarts: pauses and resumes while starts and Do calls are
// in flight. A start is either refused with ErrPaused or completes (its
// process placed in the groups before the freeze), no thread of the
// daemon is ever frozen, and every process started ends once resumed.
func TestPauseWithStarts(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run("hold="+strconv.FormatBool(hold), func(t *testing.T) {
			s := newPausable(t, Config{})
			s.hold = hold
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var started, refused int
			var cmds []*exec.Cmd
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						cmd := exec.Command("/bin/sh", "-c", "true")
						err := s.Wrap(cmd, cmd.Start)()
						mu.Lock()
						switch {
						case err == nil:
							started++
							cmds = append(cmds, cmd)
						case errors.Is(err, ErrPaused):
							refused++
						default:
							t.Error(err)
						}
						mu.Unlock()
						_ = s.Do(func() error { _, err := os.Stat("/tmp"); return err })
					}
				}()
			}
			for range 20 {
				if err := s.Pause(); err != nil {
					t.Fatal(err)
				}
				if in := daemonInFreezer(t, s); len(in) > 0 {
					t.Fatalf("threads of the daemon are frozen: %v", in)
				}
				if err := s.Resume(); err != nil {
					t.Fatal(err)
				}
			}
			close(stop)
			wg.Wait()
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Errorf("a process started: %v", err)
				}
			}
			t.Logf("%d started, %d refused while paused", started, refused)
		})
	}
}

// TestClosePaused: closing a paused sandbox ends every process in it
// (frozen processes are killed, then thawed) and removes its groups.
func TestClosePaused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	s, err := New(Config{Workspace: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.cg.canFreeze() {
		s.Close()
		t.Skip("no cgroup freezer here")
	}
	cmd := exec.Command("/bin/sleep", "600")
	if err := s.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	dirs := []string{s.cg.v2}
	for _, d := range s.cg.v1 {
		dirs = append(dirs, d)
	}
	s.Close()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the paused process ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a paused process outlived Close")
	}
	if err := syscall.Kill(s.cur.init.Process.Pid, 0); err == nil {
		t.Error("init alive after Close")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); d != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("group %s left: %v", d, err)
		}
	}
	if err := s.Resume(); err == nil {
		t.Error("Resume after Close succeeded")
	}
}
