package mcphost

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary be its own supervisor, as the a2c binary
// is: "<test binary> __supervise ..." runs Supervise.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SupervisorArg {
		os.Exit(Supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// marked returns the live (not zombie) processes whose environment holds
// TREE_MARK=mark.
func marked(t *testing.T, mark string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, []byte("TREE_MARK="+mark+"\x00")) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

func waitMarked(t *testing.T, mark, what string, cond func(n int) bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := len(marked(t, mark))
		if cond(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%d processes left)", what, n)
		}
	}
}

// TestCloseEndsProcessTree: a stdio "server" that is a shell with a
// grandchild (it never answers initialize, so Close meets it mid-connect)
// leaves no process behind after Close, with and without a supervisor.
func TestCloseEndsProcessTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, supervisor := range map[string]string{"supervised": exe, "own-group": ""} {
		t.Run(name, func(t *testing.T) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			mark := hex.EncodeToString(b)
			t.Cleanup(func() {
				for _, pid := range marked(t, mark) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			script, want := "sleep 1000 & exec sleep 1001", 2 // the shell's two sleeps
			if supervisor != "" {
				// Under a supervisor even a descendant that left the group
				// (setsid) must go; and the supervisor itself is marked.
				script, want = "setsid sleep 1002 & sleep 1000 & exec sleep 1001", 4
			}
			u := Start(Spec{BundleID: "tree", Type: "stdio", Command: "sh", Args: []string{"-c", script},
				Env: map[string]string{"TREE_MARK": mark}}, Options{Supervisor: supervisor})
			waitMarked(t, mark, "the tree to start", func(n int) bool { return n == want })
			u.Close()
			waitMarked(t, mark, "the tree to end", func(n int) bool { return n == 0 })
		})
	}
}

// TestSuperviseLifeline: when the lifeline's write end closes (what the
// kernel does when the Computer dies, however), the supervisor ends the
// server's tree and exits.
func TestSuperviseLifeline(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	mark := hex.EncodeToString(b)
	t.Cleanup(func() {
		for _, pid := range marked(t, mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, SupervisorArg, "--grace", "200ms", "--", "sh", "-c", "sleep 1000 & exec sleep 1001")
	cmd.Env = append(os.Environ(), "TREE_MARK="+mark)
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitMarked(t, mark, "the tree to start", func(n int) bool { return n == 3 })
	w.Close()
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("supervisor ended with %v, want exit status 1", err)
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("the supervisor did not end when its lifeline closed")
	}
	waitMarked(t, mark, "the tree to end", func(n int) bool { return n == 0 })
}
