package a2c

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// markEnv is the environment variable that marks every process of one
// test's stdio server tree (the supervisor, the server, its children):
// the config puts it in the server's env, and children inherit it.
const markEnv = "A2C_TEST_TREE"

// treeProc is one live process of a marked tree.
type treeProc struct {
	PID     int
	Cmdline string
}

// markedProcs scans /proc for live (not zombie) processes whose
// environment holds markEnv=mark.
func markedProcs(t *testing.T, mark string) []treeProc {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(markEnv + "=" + mark + "\x00")
	var out []treeProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if !alive(pid) {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, treeProc{PID: pid, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

// alive reports whether pid exists and is not a zombie (a zombie has
// ended; only its exit status waits to be collected).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// waitProcs waits (up to d) until cond holds for the marked tree, and
// fails with the tree as last seen.
func waitProcs(t *testing.T, mark, what string, d time.Duration, cond func([]treeProc) bool) []treeProc {
	t.Helper()
	var last []treeProc
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		last = markedProcs(t, mark)
		if cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; the tree is %+v", d, what, last)
		}
	}
}

// killLeftovers ends, at cleanup, any process of the marked tree that a
// failing test left behind (they were started by this test).
func killLeftovers(t *testing.T, mark string) {
	t.Cleanup(func() {
		for _, p := range markedProcs(t, mark) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
}

// treeConfig writes a config whose one stdio server is a shell that
// starts a grandchild (sleep) and then becomes server-everything, the
// whole tree marked with mark.
func treeConfig(t *testing.T, entry, mark string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "servers.json")
	doc := fmt.Sprintf(`{"name":"tree","type":"stdio","server_parameters":{"command":"sh",
  "args":["-c","sleep 1000 & exec node \"$0\" stdio", %q], "env":{%q:%q}}}`, entry, markEnv, mark)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// program is the base name of the process's executable as its argv[0]
// names it ("node", "sleep", "a2c").
func (p treeProc) program() string {
	f := strings.Fields(p.Cmdline)
	if len(f) == 0 {
		return ""
	}
	return filepath.Base(f[0])
}

// hasProgram reports whether one of ps runs program.
func hasProgram(ps []treeProc, program string) bool {
	for _, p := range ps {
		if p.program() == program {
			return true
		}
	}
	return false
}

func requireLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process-tree supervision is Linux-only")
	}
}

// TestComputerCheckLeavesNoProcess: "a2c computer check" starts a stdio
// server whose process has a child of its own; once check has exited, no
// process of that tree may remain.
func TestComputerCheckLeavesNoProcess(t *testing.T) {
	requireLinux(t)
	entry := everythingEntry(t)
	mark := agent.NewReqID()
	killLeftovers(t, mark)
	cfg := treeConfig(t, entry, mark)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, harness.Bin(t, "a2c"), "computer", "check", "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tree__echo") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	waitProcs(t, mark, "the server tree to be gone after check exited", 10*time.Second, func(ps []treeProc) bool { return len(ps) == 0 })
}

// TestComputerKilledLeavesNoProcess: a Computer killed with SIGKILL runs
// no cleanup code of its own, yet its stdio server's tree (server and
// grandchild) must be gone within a few seconds.
func TestComputerKilledLeavesNoProcess(t *testing.T) {
	requireLinux(t)
	entry := everythingEntry(t)
	mark := agent.NewReqID()
	killLeftovers(t, mark)
	cfg := treeConfig(t, entry, mark)
	srv := startServer(t)
	// Not harness.Run: its cleanup requires a clean exit, and this process
	// is meant to die by SIGKILL.
	cmd := exec.Command(harness.Bin(t, "a2c"), "computer", "--server", srv.URL, "--office", agent.NewReqID(), "--name", "pc", "--config", cfg)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	waitProcs(t, mark, "the server and its grandchild to run", 30*time.Second, func(ps []treeProc) bool {
		return hasProgram(ps, "node") && hasProgram(ps, "sleep")
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the Computer ended with %v, want killed", err)
	}
	waited <- nil // for the cleanup
	waitProcs(t, mark, "the server tree to be gone after the Computer was killed", 5*time.Second, func(ps []treeProc) bool { return len(ps) == 0 })
}
