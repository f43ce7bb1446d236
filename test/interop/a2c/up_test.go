package a2c

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/proctree"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// sandboxTools are the sandbox's ten built-in tools as an office sees
// them (bundle "sandbox"), in name order.
var sandboxTools = func() []string {
	names := []string{"browser_get_info", "browser_gui_execute_action", "browser_gui_screenshot", "sandbox_execute_bash",
		"sandbox_execute_code", "sandbox_file_operations", "sandbox_get_context", "sandbox_get_packages", "sandbox_load_skill",
		"sandbox_str_replace_editor"}
	for i, n := range names {
		names[i] = "sandbox__" + n
	}
	slices.Sort(names)
	return names
}()

// up is a running "a2c up".
type up struct {
	*harness.Proc
	Workspace  string
	SandboxURL string
	Try        string // the command of the "try:" line
}

var (
	sandboxAddrRE = regexp.MustCompile(`sandbox_addr=(127\.0\.0\.1:\d+)`)
	tryRE         = regexp.MustCompile(`(?m)^a2c up: try: (.*)$`)
)

// startUp runs "a2c up" on random loopback ports in a fresh workspace and
// waits until its Computer has joined the office. The process is stopped
// with SIGTERM at cleanup and must exit cleanly.
func startUp(t *testing.T, args ...string) *up {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "workspace")
	cmd := exec.Command(harness.Bin(t, "a2c"), append([]string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0",
		"--workspace", ws}, args...)...)
	cmd.Env = append(cmd.Environ(), harness.PinnedPorts(t)...)
	p := harness.Run(t, cmd, true)
	u := &up{Proc: p, Workspace: ws}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		logs := p.Logs()
		if strings.Contains(logs, "a2c up: ready") {
			u.SandboxURL = "http://" + sandboxAddrRE.FindStringSubmatch(logs)[1]
			u.Try = tryRE.FindStringSubmatch(logs)[1]
			return u
		}
		select {
		case <-p.Exited():
			t.Fatalf("a2c up exited before it was ready; logs:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("a2c up not ready after 20 s; logs:\n%s", logs)
		}
	}
}

// sleepArg is a duration no other process uses, so that a sleep started
// by a test can be found by its command line.
func sleepArg(secs int) string {
	return fmt.Sprintf("%d.%06d", secs, rand.IntN(1_000_000))
}

// procsWith returns the live processes whose command line holds all of
// words, as separate arguments.
func procsWith(t *testing.T, words ...string) []int {
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
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !alive(pid) {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		all := true
		for _, w := range words {
			all = all && slices.Contains(args, w)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// waitGone waits up to d for every process of procsWith(words) to end.
func waitGone(t *testing.T, d time.Duration, words ...string) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		left := procsWith(t, words...)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v still running %s later (pids %v)", words, d, left)
		}
	}
}

// waitRunning waits until a process of procsWith(words) runs.
func waitRunning(t *testing.T, words ...string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); len(procsWith(t, words...)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v never started", words)
		}
	}
}

// killSleeps ends, at cleanup, any sleep a failing test left behind.
func killSleeps(t *testing.T, arg string) {
	t.Cleanup(func() {
		for _, pid := range procsWith(t, "sleep", arg) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// descendants returns every live process under pid.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	for _, p := range proctree.Descendants(pid) {
		if alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// toolText is the text of a result's first content item.
func toolText(t *testing.T, res *smcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("no content: %+v", res)
	}
	var item struct{ Type, Text string }
	_ = json.Unmarshal(res.Content[0], &item)
	return item.Text
}

// bashResult is sandbox_execute_bash's answer text.
type bashResult struct {
	Status   string `json:"status"`
	Output   string `json:"output"`
	ExitCode *int   `json:"exit_code"`
	Cwd      string `json:"cwd"`
}

// upAgent joins an Agent to a2c up's default office.
func upAgent(t *testing.T, u *up, o agent.Options) *agent.Client {
	t.Helper()
	a := dialAgent(t, u.URL, "go-agent", o)
	if err := a.Join(ctx10(t), "default"); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestUpGoAgent drives a2c up's sandbox with the Go Agent SDK: the tool
// list, a command, a file written and read back, a python cell, a
// cancelled and a timed-out command whose processes end within a second.
func TestUpGoAgent(t *testing.T) {
	requireLinux(t)
	u := startUp(t)
	a := upAgent(t, u, agent.Options{})
	call := func(t *testing.T, tool string, params any, timeout time.Duration) *smcp.CallToolResult {
		t.Helper()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "sandbox", Tool: tool, Params: params, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("tools", func(t *testing.T) {
		tools, err := a.Tools(ctx10(t), "sandbox")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools {
			if tl.BundleID != "sandbox" {
				t.Errorf("%s has bundle_id %q", tl.Name, tl.BundleID)
			}
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, sandboxTools) {
			t.Fatalf("tools = %v, want %v", names, sandboxTools)
		}
	})
	t.Run("bash", func(t *testing.T) {
		res := call(t, "sandbox__sandbox_execute_bash", map[string]any{"cmd": "echo hi; pwd"}, 10*time.Second)
		var out bashResult
		if err := json.Unmarshal([]byte(toolText(t, res)), &out); err != nil || res.IsError {
			t.Fatalf("result = %+v (%v)", res, err)
		}
		if out.Output != "hi\n"+u.Workspace+"\n" || out.ExitCode == nil || *out.ExitCode != 0 || out.Cwd != u.Workspace {
			t.Fatalf("bash = %+v, want hi and the workspace %s", out, u.Workspace)
		}
	})
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(u.Workspace, "notes", "a.txt")
		res := call(t, "sandbox__sandbox_file_operations", map[string]any{"action": "write", "path": path, "content": "héllo\n"}, 10*time.Second)
		if res.IsError || !strings.Contains(toolText(t, res), `"success":true`) {
			t.Fatalf("write = %s", toolText(t, res))
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "héllo\n" {
			t.Fatalf("on disk: %q, %v", b, err)
		}
		res = call(t, "sandbox__sandbox_file_operations", map[string]any{"action": "read", "path": path}, 10*time.Second)
		if res.IsError || !strings.Contains(toolText(t, res), `héllo`) {
			t.Fatalf("read = %s", toolText(t, res))
		}
	})
	t.Run("python", func(t *testing.T) {
		res := call(t, "sandbox__sandbox_execute_code", map[string]any{"code": "print(6 * 7)", "language": "python"}, 60*time.Second)
		if res.IsError || !strings.Contains(toolText(t, res), "42") {
			t.Fatalf("code = %+v: %s", res, toolText(t, res))
		}
	})
	t.Run("cancel", func(t *testing.T) {
		arg := sleepArg(30)
		killSleeps(t, arg)
		id := agent.NewReqID()
		done := make(chan *smcp.CallToolResult, 1)
		go func() {
			res, err := a.CallTool(context.Background(), agent.Call{Computer: "sandbox", Tool: "sandbox__sandbox_execute_bash",
				Params: map[string]any{"cmd": "sleep " + arg}, Timeout: 60 * time.Second, ReqID: id})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		waitRunning(t, "sleep", arg)
		if err := a.Cancel(ctx10(t), id); err != nil {
			t.Fatal(err)
		}
		cancelled := time.Now()
		var res *smcp.CallToolResult
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("no answer to the cancelled call")
		}
		if res == nil || !res.IsError || !res.Cancelled() {
			t.Fatalf("cancelled call = %+v", res)
		}
		if reason, _ := res.Marker(smcp.MetaCancelReason); reason != "agent_requested" {
			t.Errorf("a2c_cancel_reason = %v", reason)
		}
		waitGone(t, time.Second-time.Since(cancelled), "sleep", arg)
	})
	t.Run("timeout", func(t *testing.T) {
		arg := sleepArg(30)
		killSleeps(t, arg)
		start := time.Now()
		res := call(t, "sandbox__sandbox_execute_bash", map[string]any{"cmd": "sleep " + arg}, time.Second)
		answered := time.Now()
		if !res.IsError || !res.Timeout() || res.Cancelled() {
			t.Fatalf("timed-out call = %+v", res)
		}
		if d := answered.Sub(start); d > 3*time.Second {
			t.Errorf("the timeout came after %v, want about 1 s", d)
		}
		waitGone(t, time.Second, "sleep", arg)
	})
}

// TestUpCLI runs the command a2c up prints, as printed, through a shell
// with the built a2c first on PATH; with --token, the hub and the sandbox
// API both want it and the printed command carries it.
func TestUpCLI(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		token string
	}{
		{"plain", nil, ""},
		{"token", []string{"--token", "s3cret"}, "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startUp(t, tc.args...)
			if !strings.HasPrefix(u.Try, `a2c call sandbox__sandbox_execute_bash --args '{"cmd":"echo hi"}' --server `+u.URL) {
				t.Fatalf("try line = %q", u.Try)
			}
			if tc.token != "" && !strings.HasSuffix(u.Try, " --token "+tc.token) {
				t.Fatalf("try line without the token: %q", u.Try)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sh := exec.CommandContext(ctx, "sh", "-c", u.Try)
			sh.Env = append(os.Environ(), "PATH="+filepath.Dir(harness.Bin(t, "a2c"))+":"+os.Getenv("PATH"), "A2C_TOKEN=")
			out, err := sh.Output()
			if err != nil || !strings.Contains(string(out), `"output":"hi\n"`) {
				t.Fatalf("%s: %v\n%s", u.Try, err, out)
			}
			// The sandbox API of the same process, with and without the key.
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.SandboxURL+"/v2/sandbox", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusOK
			if tc.token != "" {
				want = http.StatusUnauthorized
				req.Header.Set("Authorization", "Bearer "+tc.token)
				if r2, err := http.DefaultClient.Do(req); err != nil || r2.StatusCode != http.StatusOK {
					t.Fatalf("with the key: %v %v", r2, err)
				} else {
					r2.Body.Close()
				}
				// The hub refuses an Agent without the token.
				a, err := agent.Dial(ctx, u.URL, agent.Options{Name: "nobody"})
				if err == nil {
					a.Close()
					t.Fatal("the hub let an Agent in without the token")
				}
			}
			if resp.StatusCode != want {
				t.Fatalf("GET /v2/sandbox without a key = %d, want %d", resp.StatusCode, want)
			}
		})
	}
}

// TestUpSignalStopsEverything: SIGINT ends a2c up cleanly while a command
// runs, and leaves none of the processes the sandbox started (the
// command's shell and sleep, a python kernel, a terminal) behind.
func TestUpSignalStopsEverything(t *testing.T) {
	requireLinux(t)
	u := startUp(t)
	a := upAgent(t, u, agent.Options{})
	// A python kernel session and a terminal, through the sandbox API of
	// the same process: both live on until the daemon ends them.
	for _, r := range []struct{ path, body string }{
		{"/v2/code/execute", `{"language":"python","code":"x = 1","session_id":"kept"}`},
		{"/v2/pty/sessions", `{}`},
	} {
		resp, err := http.Post(u.SandboxURL+r.path, "application/json", strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s = %d", r.path, resp.StatusCode)
		}
	}
	arg := sleepArg(40)
	killSleeps(t, arg)
	go func() {
		_, _ = a.CallTool(context.Background(), agent.Call{Computer: "sandbox", Tool: "sandbox__sandbox_execute_bash",
			Params: map[string]any{"cmd": "sleep " + arg}, Timeout: 60 * time.Second})
	}()
	waitRunning(t, "sleep", arg)
	pid := u.Cmd().Process.Pid
	tree := descendants(t, pid)
	if len(tree) < 3 {
		t.Fatalf("a2c up has %d child processes (%v), want a kernel, a terminal's shell and a command at least", len(tree), tree)
	}
	t.Cleanup(func() { // what a failing run left behind
		for _, p := range tree {
			if alive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	if err := u.Cmd().Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-u.Exited():
	case <-time.After(15 * time.Second):
		t.Fatalf("a2c up still running 15 s after SIGINT; logs:\n%s", u.Logs())
	}
	if code := u.Cmd().ProcessState.ExitCode(); code != 0 {
		t.Fatalf("a2c up exited with %d after SIGINT; logs:\n%s", code, u.Logs())
	}
	waitGone(t, time.Second, "sleep", arg)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left []string
		for _, p := range tree {
			if alive(p) {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				left = append(left, fmt.Sprintf("%d %s", p, strings.ReplaceAll(string(cmd), "\x00", " ")))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of a2c up left after it exited: %v", left)
		}
	}
}

// TestUpPythonAgent drives a2c up's sandbox with a python-socketio Agent
// (test/interop/a2c/python/up_agent.py).
func TestUpPythonAgent(t *testing.T) {
	requireLinux(t)
	if err := exec.Command("/usr/bin/python3", "-c", "import socketio").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-socketio")
	}
	u := startUp(t)
	harness.RunScenarios(t, []string{"A2C_URL=" + u.URL, "A2C_OFFICE=default", "A2C_COMPUTER=sandbox", "A2C_WORKSPACE=" + u.Workspace},
		"/usr/bin/python3", "test/interop/a2c/python/up_agent.py")
}

// TestUpConfig: a2c up --config serves the file's MCP servers beside the
// sandbox (server-everything over stdio here); a file server that names
// itself "sandbox" does not displace the sandbox's tools.
func TestUpConfig(t *testing.T) {
	entry := everythingEntry(t)
	cfg := filepath.Join(t.TempDir(), "servers.json")
	doc := fmt.Sprintf(`[{"name":"ev","type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]}},
		{"name":"sandbox","type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]}}]`, entry, entry)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, "--config", cfg)
	if !strings.Contains(u.Logs(), "config="+cfg) {
		t.Errorf("the banner does not name the config:\n%s", u.Logs())
	}
	a := upAgent(t, u, agent.Options{})
	tools := waitTools(t, a, "sandbox", "ev__echo")
	var sandbox []string
	for _, tl := range tools {
		if tl.BundleID == "sandbox" {
			sandbox = append(sandbox, tl.Name)
		}
	}
	slices.Sort(sandbox)
	if !slices.Equal(sandbox, sandboxTools) {
		t.Fatalf("sandbox tools = %v", sandbox)
	}
	ret, err := a.Config(ctx10(t), "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	var box struct{ Type string }
	_ = json.Unmarshal(ret.Servers["sandbox"], &box)
	if len(ret.Servers) != 2 || ret.Servers["ev"] == nil || box.Type != "memory" {
		t.Fatalf("get_config servers = %v", ret.Servers)
	}
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "sandbox", Tool: "ev__echo", Params: map[string]any{"message": "hi"}, Timeout: 10 * time.Second})
	if err != nil || res.IsError || toolText(t, res) != "Echo: hi" {
		t.Fatalf("ev__echo = %+v, %v", res, err)
	}
}

// TestUpPutThenUse: a file uploaded with "a2c put" to a2c up lands in the
// sandbox's workspace (uploads/), where the sandbox's own command reads
// it; the skills folder given with --skills is served on the SKILL
// channel; and a 0.3.0 "a2c up" speaks 0.3.0 on both ends.
func TestUpPutThenUse(t *testing.T) {
	requireLinux(t)
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skills, "hello", "SKILL.md"), []byte("---\nname: hello\ndescription: Says hello.\n---\nSay hello.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, "--skills", skills)
	src := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(src, []byte("uploaded through the hub\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(harness.Bin(t, "a2c"), "put", src, "--server", u.URL, "--json").Output()
	if err != nil {
		t.Fatalf("a2c put: %v %s", err, out)
	}
	var ret struct {
		Computer    string `json:"computer"`
		LandingPath string `json:"landing_path"`
		TotalSize   int64  `json:"total_size"`
	}
	if err := json.Unmarshal(out, &ret); err != nil || ret.Computer != "sandbox" || ret.TotalSize != 25 ||
		filepath.Dir(ret.LandingPath) != mustReal(t, filepath.Join(u.Workspace, "uploads")) || !strings.HasSuffix(ret.LandingPath, "_notes.txt") {
		t.Fatalf("a2c put answered %s (%v)", out, err)
	}
	a := upAgent(t, u, agent.Options{})
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "sandbox", Tool: "sandbox__sandbox_execute_bash",
		Params: map[string]any{"cmd": "cat uploads/" + filepath.Base(ret.LandingPath)}, Timeout: 10 * time.Second})
	if err != nil || res.IsError || !strings.Contains(toolText(t, res), `"output":"uploaded through the hub\n"`) {
		t.Fatalf("the sandbox reads the upload: %v %+v", err, res)
	}
	refs, err := a.Skills(ctx10(t), "sandbox")
	if err != nil || len(refs) != 1 || refs[0].Name != "hello" || refs[0].Source != "user" {
		t.Fatalf("skills: %+v %v", refs, err)
	}
	doc, err := a.Skill(ctx10(t), "sandbox", "hello", "")
	if err != nil || doc.Body == nil || *doc.Body != "Say hello.\n" {
		t.Fatalf("skill: %+v %v", doc, err)
	}
	a.Close()

	old := startUp(t, "--protocol-version", "0.3.0")
	b := dialAgent(t, old.URL, "old-agent", agent.Options{ProtocolVersion: "0.3.0"})
	if err := b.Join(ctx10(t), "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tools(ctx10(t), "sandbox"); err != nil {
		t.Fatalf("0.3.0 tools: %v", err)
	}
	if _, err := b.PutFile(ctx10(t), "sandbox", src, agent.PutOptions{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("put_blob from a 0.3.0 Agent: %v", err)
	}
}

// mustReal is path with every symbolic link resolved.
func mustReal(t *testing.T, path string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
