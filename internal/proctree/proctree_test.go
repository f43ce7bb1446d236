package proctree

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestDescendants finds a shell's child below the shell, and both below
// init, and nothing below the child.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The shell and its sleep end together: the whole process group.
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	var got []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = Descendants(cmd.Process.Pid); len(got) == 1 {
			break
		}
	}
	if len(got) != 1 {
		t.Fatalf("descendants of the shell: %v, want its sleep", got)
	}
	if all := Descendants(1); !slices.Contains(all, got[0]) || !slices.Contains(all, cmd.Process.Pid) {
		t.Errorf("init's descendants miss the shell %d or its sleep %d", cmd.Process.Pid, got[0])
	}
	if d := Descendants(got[0]); len(d) != 0 {
		t.Errorf("the sleep has descendants: %v", d)
	}
}

func TestParseParent(t *testing.T) {
	for _, c := range []struct {
		stat string
		ppid int
		ok   bool
	}{
		{"42 (sleep) S 7 42 42 0", 7, true},
		{"42 (a b) (c)) R 9 1 1", 9, true}, // a name with spaces and parentheses
		{"42 (x) Z 1", 1, true},
		{"42 (x) S", 0, false},
		{"42 x S 7", 0, false},
		{"", 0, false},
	} {
		if pp, ok := parseParent(c.stat); pp != c.ppid || ok != c.ok {
			t.Errorf("parseParent(%q) = %d, %v; want %d, %v", c.stat, pp, ok, c.ppid, c.ok)
		}
	}
}
