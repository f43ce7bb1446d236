package a2c

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// everythingEntry is server-everything's entry point, installed by the
// project's test command into test/peers.
func everythingEntry(t *testing.T) string {
	t.Helper()
	p := filepath.Join(harness.Root(), "test/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(p); err != nil {
		harness.MissingPeer(t, "npm @modelcontextprotocol/server-everything (npm ci in test/peers)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		harness.MissingPeer(t, "node")
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startEverything runs server-everything over an HTTP transport ("sse" or
// "streamableHttp") and returns its endpoint URL once it answers.
func startEverything(t *testing.T, entry, transport string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command("node", entry, transport)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
	path := "/mcp"
	if transport == "sse" {
		path = "/sse"
	}
	url := fmt.Sprintf("http://127.0.0.1:%d%s", port, path)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return url
		}
	}
	t.Fatalf("server-everything (%s) did not start", transport)
	return ""
}

// startComputer runs "a2c computer" with the given config file contents.
func startComputer(t *testing.T, serverURL, office, name, cfgPath string, extra ...string) *harness.Proc {
	t.Helper()
	args := append([]string{"computer", "--server", serverURL, "--office", office, "--name", name, "--config", cfgPath}, extra...)
	return harness.Run(t, exec.Command(harness.Bin(t, "a2c"), args...), false)
}

// waitTools waits until the Computer lists every tool in want.
func waitTools(t *testing.T, a *agent.Client, computer string, want ...string) []smcp.SMCPTool {
	t.Helper()
	var tools []smcp.SMCPTool
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := a.Tools(ctx, computer)
		cancel()
		if err != nil {
			continue
		}
		tools = got
		names := make([]string, len(got))
		for i, x := range got {
			names[i] = x.Name
		}
		ok := true
		for _, w := range want {
			if !slices.Contains(names, w) {
				ok = false
			}
		}
		if ok {
			return tools
		}
	}
	var names []string
	for _, x := range tools {
		names = append(names, x.Name)
	}
	t.Fatalf("tools never included %v; the last list was %v", want, names)
	return nil
}

func text(r *smcp.CallToolResult) string { return r.Text() }

func TestComputerHostsEverything(t *testing.T) {
	entry := everythingEntry(t)
	sseURL := startEverything(t, entry, "sse")
	httpURL := startEverything(t, entry, "streamableHttp")
	srv := startServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.json")
	// The stdio server's processes carry this mark in their environment,
	// so the test finds (and kills) exactly them.
	mark := agent.NewReqID()
	killLeftovers(t, mark)
	write := func(extra string) {
		doc := fmt.Sprintf(`{"servers": {
  "ev-stdio": {"name": "ev-stdio", "type": "stdio", "server_parameters": {"command": "node", "args": [%q, "stdio"], "env": {%q: %q}},
               "forbidden_tools": ["get-env"], "tool_meta": {"echo": {"alias": "say"}}},
  "ev-sse": {"name": "ev-sse", "type": "sse", "server_parameters": {"url": %q}},
  "ev-http": {"name": "ev-http", "type": "streamable", "server_parameters": {"url": %q}}%s
}}`, entry, markEnv, mark, sseURL, httpURL, extra)
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	office := agent.NewReqID()
	comp := startComputer(t, srv.URL, office, "pc", cfg, "--log-level", "debug")

	var mu sync.Mutex
	var notes []agent.Notification
	a := dialAgent(t, srv.URL, "agent", agent.Options{OnNotify: func(n agent.Notification) {
		mu.Lock()
		notes = append(notes, n)
		mu.Unlock()
	}})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	tools := waitTools(t, a, "pc", "ev-stdio__say", "ev-sse__echo", "ev-http__echo", "ev-stdio__get-sum")
	t.Run("exposed-names", func(t *testing.T) {
		for _, tl := range tools {
			if !strings.HasPrefix(tl.Name, tl.BundleID+"__") {
				t.Errorf("%s does not start with its bundle_id %s", tl.Name, tl.BundleID)
			}
			if tl.Name == "ev-stdio__get-env" || tl.Name == "ev-stdio__echo" {
				t.Errorf("%s must not be listed (forbidden / aliased)", tl.Name)
			}
			// meta.a2c_tool_meta, where a tool has ToolMeta (ev-stdio__say
			// has its config alias), is a JSON string with all four keys.
			raw, present := tl.Meta[smcp.MetaKeyToolMeta]
			if !present {
				if tl.Name == "ev-stdio__say" {
					t.Errorf("%s: no meta.a2c_tool_meta", tl.Name)
				}
				continue
			}
			s, ok := raw.(string)
			var m map[string]any
			if !ok || json.Unmarshal([]byte(s), &m) != nil {
				t.Errorf("%s: meta.a2c_tool_meta is not a JSON object string: %#v", tl.Name, raw)
				continue
			}
			for _, k := range []string{"auto_apply", "alias", "tags", "ret_object_mapper"} {
				if _, ok := m[k]; !ok || len(m) != 4 {
					t.Errorf("%s: meta.a2c_tool_meta %s lacks %s or has other keys", tl.Name, s, k)
				}
			}
			if tl.Name == "ev-stdio__say" && m["alias"] != "say" {
				t.Errorf("%s: meta.a2c_tool_meta %s, want alias say", tl.Name, s)
			}
		}
	})
	for _, tool := range []string{"ev-stdio__say", "ev-sse__echo", "ev-http__echo"} {
		t.Run("call-"+tool, func(t *testing.T) {
			ctx := ctx10(t)
			res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: tool, Params: map[string]any{"message": "hi"}, Timeout: 20 * time.Second})
			if err != nil || res.IsError || text(res) != "Echo: hi" {
				t.Fatalf("result = %+v, %v", res, err)
			}
		})
	}
	t.Run("get-sum", func(t *testing.T) {
		ctx := ctx10(t)
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "ev-http__get-sum", Params: map[string]any{"a": 2, "b": 40}, Timeout: 20 * time.Second})
		if err != nil || res.IsError || !strings.Contains(text(res), "42") {
			t.Fatalf("result = %+v, %v", res, err)
		}
	})
	t.Run("unknown-and-forbidden-4001", func(t *testing.T) {
		ctx := ctx10(t)
		for _, tool := range []string{"ev-stdio__nope", "ev-stdio__get-env"} {
			res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: tool, Timeout: 5 * time.Second})
			if err != nil || !res.IsError || res.ErrorCode() != smcp.CodeToolNotFound {
				t.Errorf("%s: result = %+v, %v", tool, res, err)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		ctx := ctx10(t)
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "ev-stdio__trigger-long-running-operation",
			Params: map[string]any{"duration": 10, "steps": 10}, Timeout: time.Second})
		if err != nil || !res.IsError || !res.Timeout() {
			t.Fatalf("result = %+v, %v", res, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx := ctx10(t)
		done := make(chan *smcp.CallToolResult, 1)
		go func() {
			res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "ev-http__trigger-long-running-operation",
				Params: map[string]any{"duration": 10, "steps": 10}, Timeout: 30 * time.Second, ReqID: "cancel-me"})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		// Cancel once the Computer has the call upstream (its debug log
		// says so), not after a guessed delay.
		waitLog(t, comp, `msg="tool call dispatched" req_id=cancel-me`)
		if err := a.Cancel(ctx, "cancel-me"); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if res == nil || !res.IsError || !res.Cancelled() {
				t.Fatalf("result = %+v", res)
			}
		case <-time.After(8 * time.Second):
			t.Fatal("the cancelled call did not end")
		}
	})
	t.Run("resources", func(t *testing.T) {
		ctx := ctx10(t)
		page, err := a.Resources(ctx, "pc", "ev-http", nil)
		if err != nil || len(page.Resources) == 0 {
			t.Fatalf("page = %+v, %v", page, err)
		}
		if page.NextCursor != nil {
			next, err := a.Resources(ctx, "pc", "ev-http", page.NextCursor)
			if err != nil || len(next.Resources) == 0 {
				t.Fatalf("next page = %+v, %v", next, err)
			}
		}
		_, err = a.Resources(ctx, "pc", "nope", nil)
		var pe *smcp.Error
		if !errors.As(err, &pe) || pe.Code != smcp.CodeMCPServerNotFound || pe.MCPServer != "nope" {
			t.Fatalf("unknown server: %v", err)
		}
	})
	t.Run("config-redacted", func(t *testing.T) {
		ctx := ctx10(t)
		cfgRet, err := a.Config(ctx, "pc")
		if err != nil || len(cfgRet.Servers) != 3 || cfgRet.Servers["ev-sse"] == nil {
			t.Fatalf("config = %+v, %v", cfgRet, err)
		}
	})
	t.Run("hot-reload", func(t *testing.T) {
		mu.Lock()
		before := len(notes)
		mu.Unlock()
		write(fmt.Sprintf(`,
  "ev-two": {"name": "ev-two", "type": "streamable", "server_parameters": {"url": %q}}`, httpURL))
		waitTools(t, a, "pc", "ev-two__echo")
		waitFor(t, "notify:update_tool_list", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, n := range notes[before:] {
				if n.Event == smcp.NotifyUpdateToolList && n.Computer == "pc" {
					return true
				}
			}
			return false
		})
	})
	t.Run("upstream-killed", func(t *testing.T) {
		// Kill the stdio server's process; the kill must really end it, and
		// the Computer must start a new one whose tools answer.
		var old int
		for _, p := range waitProcs(t, mark, "the stdio server", 10*time.Second, func(ps []treeProc) bool { return hasProgram(ps, "node") }) {
			if p.program() == "node" {
				old = p.PID
			}
		}
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", old, err)
		}
		waitProcs(t, mark, "the killed server to be gone and a new one to run", 30*time.Second, func(ps []treeProc) bool {
			if alive(old) {
				return false
			}
			for _, p := range ps {
				if p.program() == "node" && p.PID != old {
					return true
				}
			}
			return false
		})
		waitTools(t, a, "pc", "ev-stdio__say")
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "ev-stdio__say", Params: map[string]any{"message": "back"}, Timeout: 15 * time.Second})
		if err != nil || res.IsError || text(res) != "Echo: back" {
			t.Fatalf("after restart: %+v, %v\n%s", res, err, comp.Logs())
		}
	})
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("server health: %v", err)
	} else {
		resp.Body.Close()
	}
}

// TestComputerPythonAgent drives a Go Computer hosting server-everything
// over stdio from a python-socketio Agent.
func TestComputerPythonAgent(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import socketio").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-socketio")
	}
	entry := everythingEntry(t)
	srv := startServer(t)
	cfg := filepath.Join(t.TempDir(), "servers.yaml")
	doc := fmt.Sprintf("- name: ev\n  type: stdio\n  forbidden_tools: [get-env]\n  server_parameters:\n    command: node\n    args: [%q, stdio]\n", entry)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	office := agent.NewReqID()
	startComputer(t, srv.URL, office, "py-pc", cfg)
	harness.RunScenarios(t, []string{"A2C_URL=" + srv.URL, "A2C_OFFICE=" + office, "A2C_COMPUTER=py-pc"},
		"/usr/bin/python3", "test/interop/a2c/python/computer_agent.py")
}

// TestComputerReconnectAndHistory restarts the signalling server under a
// running Computer, which must rejoin its office by itself, and reads the
// Computer's call history with "a2c computer history".
func TestComputerReconnectAndHistory(t *testing.T) {
	entry := everythingEntry(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := startServer(t, "--listen", addr)
	cfg := filepath.Join(t.TempDir(), "servers.json")
	doc := fmt.Sprintf(`{"name":"ev","type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]}}`, entry)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	office := agent.NewReqID()
	comp := startComputer(t, srv.URL, office, "pc", cfg, "--admin", admin)

	call := func(a *agent.Client, msg string) {
		t.Helper()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "ev__echo", Params: map[string]any{"message": msg}, Timeout: 10 * time.Second})
		if err != nil || res.IsError || text(res) != "Echo: "+msg {
			t.Fatalf("call = %+v, %v", res, err)
		}
	}
	a := dialAgent(t, srv.URL, "agent", agent.Options{})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "ev__echo")
	call(a, "one")
	call(a, "two")

	out, err := exec.Command(harness.Bin(t, "a2c"), "computer", "history", "--admin", admin, "--json").Output()
	var recs []struct {
		Tool, Outcome, Agent string
	}
	if err != nil || json.Unmarshal(out, &recs) != nil || len(recs) < 2 || recs[len(recs)-1].Tool != "ev__echo" ||
		recs[len(recs)-1].Outcome != "ok" || recs[len(recs)-1].Agent != "agent" {
		t.Fatalf("history: %v %s", err, out)
	}

	a.Close()
	srv.Stop(t)
	srv2 := startServer(t, "--listen", addr)
	b := dialAgent(t, srv2.URL, "agent-2", agent.Options{})
	if err := b.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, b, "pc", "ev__echo")
	call(b, "after restart")
	if !strings.Contains(comp.Logs(), "joined office") {
		t.Errorf("computer logs:\n%s", comp.Logs())
	}
}

// waitLog waits (up to 20 s) until the process's logs contain want.
func waitLog(t *testing.T, p *harness.Proc, want string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(p.Logs(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %q in the logs:\n%s", want, p.Logs())
		}
	}
}
