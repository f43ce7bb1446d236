package a2c

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// officeSandboxes lists the sandboxes of a2c up's in-process pool.
func officeSandboxes(t *testing.T, u *up) []map[string]any {
	t.Helper()
	resp, err := http.Get(u.SandboxURL + "/v2/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var l struct{ Sandboxes []map[string]any }
	if resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	return l.Sandboxes
}

// TestUpOfficeSandboxes: in a2c up every office but the default one gets
// a sandbox of its own when an Agent first joins it; the Agent's first
// call finds it; two offices see nothing of each other (files,
// processes, loopback ports, accounts); the default office keeps its
// own; an office left idle loses its sandbox; a python-socketio Agent is
// served the same way.
func TestUpOfficeSandboxes(t *testing.T) {
	requireLinux(t)
	if os.Geteuid() != 0 {
		t.Skip("per-office sandboxes need root") // CI runs as root, where a skip fails the run
	}
	u := startUp(t, "--office-idle", "2s")
	bash := func(t *testing.T, a *agent.Client, cmd string) bashResult {
		t.Helper()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "sandbox", Tool: "sandbox__sandbox_execute_bash",
			Params: map[string]any{"cmd": cmd}, Timeout: 20 * time.Second})
		if err != nil || res.IsError {
			t.Fatalf("%q: %+v, %v", cmd, res, err)
		}
		var r bashResult
		if err := json.Unmarshal([]byte(toolText(t, res)), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	join := func(t *testing.T, name, office string) *agent.Client {
		a := dialAgent(t, u.URL, name, agent.Options{})
		if err := a.Join(ctx10(t), office); err != nil {
			t.Fatal(err)
		}
		return a
	}
	arg := sleepArg(900)
	killSleeps(t, arg)
	a1 := join(t, "agent-1", "t1")
	r1 := bash(t, a1, "echo secret-t1 > f && (sleep "+arg+" &) && python3 -c 'import socket;s=socket.socket();s.bind((\"127.0.0.1\",3000));s.listen();print(\"bound\")' && id -u && pwd")
	lines := strings.Split(strings.TrimSpace(r1.Output), "\n")
	if len(lines) != 3 || lines[0] != "bound" {
		t.Fatalf("t1: %q", r1.Output)
	}
	uid1, ws1 := lines[1], lines[2]
	if ws1 == u.Workspace || r1.Cwd != ws1 {
		t.Errorf("t1 runs in %s (cwd %s), the default office's workspace is %s", ws1, r1.Cwd, u.Workspace)
	}

	a2 := join(t, "agent-2", "t2")
	r2 := bash(t, a2, "cat f 2>&1; ls "+ws1+" 2>&1; pgrep -x sleep || echo no-sleep; "+
		"python3 -c 'import socket;s=socket.socket();s.bind((\"127.0.0.1\",3000));s.listen();print(\"bound\")'; id -u")
	want := []string{"cat: f: No such file or directory", "ls: cannot access '" + ws1 + "': No such file or directory", "no-sleep", "bound"}
	got := strings.Split(strings.TrimSpace(r2.Output), "\n")
	if len(got) != 5 || strings.Join(got[:4], "\n") != strings.Join(want, "\n") {
		t.Errorf("t2 sees t1:\n%s\nwant\n%s\n<uid>", r2.Output, strings.Join(want, "\n"))
	} else if got[4] == uid1 {
		t.Errorf("t1 and t2 run as the same uid %s", uid1)
	}

	// The default office keeps a2c up's own sandbox and workspace.
	a0 := join(t, "agent-0", "default")
	if r := bash(t, a0, "pwd"); strings.TrimSpace(r.Output) != u.Workspace {
		t.Errorf("default office runs in %q, want %s", r.Output, u.Workspace)
	}

	boxes := officeSandboxes(t, u)
	offices := map[string]bool{}
	for _, b := range boxes {
		offices[b["office"].(string)] = true
	}
	if len(boxes) != 2 || !offices["t1"] || !offices["t2"] {
		t.Fatalf("sandboxes: %v", boxes)
	}

	// t1's last Agent leaves: its sandbox, and its sleep, end after the
	// idle time.
	if err := a1.Leave(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 15*time.Second, "sleep", arg)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := officeSandboxes(t, u)
		if len(left) == 1 && left[0]["office"] == "t2" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after t1 went idle: %v", left)
		}
	}

	t.Run("python", func(t *testing.T) {
		if err := exec.Command("/usr/bin/python3", "-c", "import socketio").Run(); err != nil {
			harness.MissingPeer(t, "Debian python3-socketio")
		}
		harness.RunScenarios(t, []string{"A2C_URL=" + u.URL, "A2C_OFFICE=py1"}, "/usr/bin/python3", "test/interop/a2c/python/office_agent.py")
	})
}
