package a2c

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// startAiodOffice runs "aiod --port 0 --office OFFICE --server URL args..."
// in a fresh workspace and returns it with its workspace.
func startAiodOffice(t *testing.T, serverURL, office string, args ...string) (*harness.Proc, string) {
	t.Helper()
	ws := t.TempDir()
	cmd := exec.Command(harness.Bin(t, "aiod"), append([]string{"--port", "0", "--workspace", ws, "--office", office, "--server", serverURL}, args...)...)
	cmd.Env = append(cmd.Environ(), harness.PinnedPorts(t)...)
	return harness.Run(t, cmd, true), ws
}

// waitOfficeTools waits until computer lists a tool named want, and returns
// its tool names.
func waitOfficeTools(t *testing.T, a *agent.Client, computer, want string) []string {
	t.Helper()
	var names []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		tools, err := a.Tools(ctx10(t), computer)
		if err != nil {
			continue
		}
		names = names[:0]
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		if slices.Contains(names, want) {
			slices.Sort(names)
			return names
		}
	}
	t.Fatalf("%s never listed %s (last: %v)", computer, want, names)
	return nil
}

// TestAiodOffice: "aiod --office ID --server URL" joins a separate
// "a2c server" (with a token) as a Computer; an Agent there lists the
// sandbox's tools, runs a command in the daemon's workspace, and cancels
// and times out commands whose processes end within a second; the
// daemon's HTTP API serves meanwhile, and its exit leaves the office.
func TestAiodOffice(t *testing.T) {
	requireLinux(t)
	srv := startServer(t, "--token", "tok")
	office := agent.NewReqID()
	box, ws := startAiodOffice(t, srv.URL, office, "--name", "box", "--token", "tok")
	left := make(chan agent.Notification, 4)
	a := dialAgent(t, srv.URL, "agent", agent.Options{Auth: map[string]any{"x-api-key": "tok"}, OnNotify: func(n agent.Notification) {
		if n.Event == smcp.NotifyLeaveOffice {
			left <- n
		}
	}})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	if names := waitOfficeTools(t, a, "box", "sandbox__sandbox_execute_bash"); !slices.Equal(names, sandboxTools) {
		t.Fatalf("tools = %v, want %v", names, sandboxTools)
	}

	t.Run("bash", func(t *testing.T) {
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "box", Tool: "sandbox__sandbox_execute_bash", Params: map[string]any{"cmd": "echo hi"}, Timeout: 10 * time.Second})
		if err != nil || res.IsError {
			t.Fatalf("result = %+v, %v", res, err)
		}
		var out bashResult
		if err := json.Unmarshal([]byte(toolText(t, res)), &out); err != nil || out.Output != "hi\n" || out.Cwd != ws {
			t.Fatalf("bash = %s, want hi in %s", toolText(t, res), ws)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		arg := sleepArg(30)
		killSleeps(t, arg)
		id := agent.NewReqID()
		done := make(chan *smcp.CallToolResult, 1)
		go func() {
			res, _ := a.CallTool(context.Background(), agent.Call{Computer: "box", Tool: "sandbox__sandbox_execute_bash",
				Params: map[string]any{"cmd": "sleep " + arg}, Timeout: 60 * time.Second, ReqID: id})
			done <- res
		}()
		waitRunning(t, "sleep", arg)
		if err := a.Cancel(ctx10(t), id); err != nil {
			t.Fatal(err)
		}
		cancelled := time.Now()
		select {
		case res := <-done:
			if res == nil || !res.IsError || !res.Cancelled() {
				t.Fatalf("cancelled call = %+v", res)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer to the cancelled call")
		}
		waitGone(t, time.Second-time.Since(cancelled), "sleep", arg)
	})
	t.Run("timeout", func(t *testing.T) {
		arg := sleepArg(30)
		killSleeps(t, arg)
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "box", Tool: "sandbox__sandbox_execute_bash",
			Params: map[string]any{"cmd": "sleep " + arg}, Timeout: time.Second})
		if err != nil || !res.IsError || !res.Timeout() {
			t.Fatalf("timed-out call = %+v, %v", res, err)
		}
		waitGone(t, time.Second, "sleep", arg)
	})
	t.Run("http-api", func(t *testing.T) {
		resp, err := http.Get(box.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /health = %d", resp.StatusCode)
		}
	})
	t.Run("exit-leaves-office", func(t *testing.T) {
		box.Stop(t)
		select {
		case n := <-left:
			if n.Computer != "box" || n.OfficeID != office {
				t.Fatalf("notify:leave_office = %+v", n)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no notify:leave_office after aiod stopped")
		}
	})
}

// TestAiodOfficeOptions: --bundle-id names the tools, --approve none
// refuses them (4005), and a bad --approve stops aiod with a one-line
// reason and exit status 2.
func TestAiodOfficeOptions(t *testing.T) {
	srv := startServer(t)
	office := agent.NewReqID()
	startAiodOffice(t, srv.URL, office, "--name", "box", "--bundle-id", "box1", "--approve", "none")
	a := dialAgent(t, srv.URL, "agent", agent.Options{})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	names := waitOfficeTools(t, a, "box", "box1__sandbox_execute_bash")
	for _, n := range names {
		if !strings.HasPrefix(n, "box1__") {
			t.Errorf("tool %s outside bundle box1", n)
		}
	}
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "box", Tool: "box1__sandbox_execute_bash", Params: map[string]any{"cmd": "echo hi"}, Timeout: 10 * time.Second})
	if err != nil || !res.IsError || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
		t.Fatalf("result = %+v, %v", res, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, "aiod"), "--port", "0", "--workspace", t.TempDir(), "--office", "o", "--server", srv.URL, "--approve", "ask")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 ||
		!strings.Contains(string(out), "--approve must be all or none") {
		t.Fatalf("aiod --approve ask: %v\n%s", err, out)
	}
}
