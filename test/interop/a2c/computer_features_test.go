package a2c

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// writeConfig writes doc to a fresh servers.json and returns its path.
func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runA2C runs the a2c binary to its end (60 s at most) and returns its
// exit code and output.
func runA2C(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, "a2c"), args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	}
	if err != nil {
		t.Fatalf("a2c %v: %v", args, err)
	}
	return 0, o.String(), e.String()
}

// TestComputerCheck runs "a2c computer check" on a good configuration
// (it lists the exposed names, aliases applied, forbidden tools left out)
// and on bad ones (non-zero exit, one line of reason on stderr).
func TestComputerCheck(t *testing.T) {
	entry := everythingEntry(t)
	good := writeConfig(t, fmt.Sprintf(`{"name":"ev","type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]},
  "forbidden_tools":["get-env"],"tool_meta":{"echo":{"alias":"say"}}}`, entry))
	t.Run("lists-exposed-names", func(t *testing.T) {
		code, out, errOut := runA2C(t, "computer", "check", "--config", good)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		lines := strings.Split(out, "\n")
		if !strings.HasPrefix(lines[0], "BUNDLE_ID") || !strings.Contains(lines[1], "ready") {
			t.Fatalf("table:\n%s", out)
		}
		for _, want := range []string{"  ev__say", "  ev__get-sum"} {
			if !slices.Contains(lines, want) {
				t.Errorf("%q not listed:\n%s", want, out)
			}
		}
		for _, not := range []string{"  ev__echo", "  ev__get-env"} {
			if slices.Contains(lines, not) {
				t.Errorf("%q listed (aliased or forbidden):\n%s", not, out)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		code, out, _ := runA2C(t, "computer", "check", "--config", good, "--json")
		var rep struct {
			Servers []struct {
				BundleID, State string
				Tools           []string
			}
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Servers) != 1 || rep.Servers[0].State != "ready" ||
			!slices.Contains(rep.Servers[0].Tools, "ev__say") || slices.Contains(rep.Servers[0].Tools, "ev__get-env") {
			t.Fatalf("exit %d: %s", code, out)
		}
	})
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"malformed", `{"servers": [`, "invalid JSON"},
		{"no-command", `{"name":"x","type":"stdio","server_parameters":{}}`, `server "x": server_parameters.command: required`},
		{"does-not-start", `{"name":"x","type":"stdio","server_parameters":{"command":"/nonexistent/mcp"}}`, "server x is backoff"},
	} {
		t.Run("bad-"+tc.name, func(t *testing.T) {
			code, out, errOut := runA2C(t, "computer", "check", "--config", writeConfig(t, tc.doc), "--wait", "3s")
			if code == 0 || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "a2c computer: ") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q (want one line with %q); stdout:\n%s", code, errOut, tc.want, out)
			}
		})
	}
}

// notes records an Agent's notifications.
type notes struct {
	mu   sync.Mutex
	seen []agent.Notification
}

func (n *notes) add(x agent.Notification) {
	n.mu.Lock()
	n.seen = append(n.seen, x)
	n.mu.Unlock()
}

func (n *notes) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.seen)
}

// waitNote waits for a notification named event about computer, among
// those received after the first `after`.
func (n *notes) waitNote(t *testing.T, after int, event, computer string) {
	t.Helper()
	waitFor(t, event, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, x := range n.seen[after:] {
			if x.Event == event && x.Computer == computer {
				return true
			}
		}
		return false
	})
}

// TestComputerReloadOnSIGHUP changes the config file without changing its
// modification time (so only the signal can trigger the reload), sends
// SIGHUP, and checks that the Agent is told (notify:update_tool_list,
// notify:update_config) and sees the new server's tools and config.
func TestComputerReloadOnSIGHUP(t *testing.T) {
	entry := everythingEntry(t)
	server := func(id string) string {
		return fmt.Sprintf(`%q: {"name":%q,"type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]}}`, id, id, entry)
	}
	cfg := writeConfig(t, `{"servers":{`+server("ev")+`}}`)
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t)
	office := agent.NewReqID()
	comp := startComputer(t, srv.URL, office, "pc", cfg)
	var ns notes
	a := dialAgent(t, srv.URL, "agent", agent.Options{OnNotify: ns.add})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "ev__echo")

	if err := os.WriteFile(cfg, []byte(`{"servers":{`+server("ev")+`,`+server("ev2")+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(cfg, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	before := ns.count()
	if err := comp.Cmd().Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	ns.waitNote(t, before, smcp.NotifyUpdateConfig, "pc")
	waitTools(t, a, "pc", "ev2__echo", "ev__echo")
	ns.waitNote(t, before, smcp.NotifyUpdateToolList, "pc")
	got, err := a.Config(ctx10(t), "pc")
	if err != nil || len(got.Servers) != 2 || got.Servers["ev2"] == nil {
		t.Fatalf("config after reload = %+v, %v", got, err)
	}
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "ev2__echo", Params: map[string]any{"message": "new"}, Timeout: 15 * time.Second})
	if err != nil || res.IsError || text(res) != "Echo: new" {
		t.Fatalf("call on the new server = %+v, %v", res, err)
	}
	if !strings.Contains(comp.Logs(), "config reloaded") {
		t.Errorf("no reload in the logs:\n%s", comp.Logs())
	}
}

// TestComputerApproveNone: with --approve none a tool whose ToolMeta does
// not set auto_apply is refused with meta.error_code 4005, and one with
// auto_apply runs.
func TestComputerApproveNone(t *testing.T) {
	entry := everythingEntry(t)
	cfg := writeConfig(t, fmt.Sprintf(`{"name":"ev","type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]},
  "tool_meta":{"get-sum":{"auto_apply":true}}}`, entry))
	srv := startServer(t)
	office := agent.NewReqID()
	startComputer(t, srv.URL, office, "pc", cfg, "--approve", "none")
	a := dialAgent(t, srv.URL, "agent", agent.Options{})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "ev__echo", "ev__get-sum")
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "ev__echo", Params: map[string]any{"message": "x"}, Timeout: 15 * time.Second})
	if err != nil || !res.IsError || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
		t.Fatalf("echo without auto_apply = %+v, %v", res, err)
	}
	res, err = a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "ev__get-sum", Params: map[string]any{"a": 1, "b": 2}, Timeout: 15 * time.Second})
	if err != nil || res.IsError || !strings.Contains(text(res), "3") {
		t.Fatalf("get-sum with auto_apply = %+v, %v", res, err)
	}
}

// TestComputerAdminStatus reads GET /status from the management plane
// (--admin) and holds it to its exact JSON shape.
func TestComputerAdminStatus(t *testing.T) {
	entry := everythingEntry(t)
	cfg := writeConfig(t, fmt.Sprintf(`{"servers":{
  "ev":{"name":"ev","type":"stdio","server_parameters":{"command":"node","args":[%q,"stdio"]}},
  "off":{"name":"off","type":"streamable","disabled":true,"server_parameters":{"url":"http://127.0.0.1:1/mcp"}}}}`, entry))
	srv := startServer(t)
	admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	office := agent.NewReqID()
	startComputer(t, srv.URL, office, "pc", cfg, "--admin", admin)

	get := func() (map[string]any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/status", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			return nil, fmt.Errorf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var v map[string]any
		return v, json.Unmarshal(body, &v)
	}
	// Wait until the Computer has joined and its server is ready.
	var st map[string]any
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		st, err = get()
		if err == nil && st["joined"] == true {
			if ss, _ := st["servers"].([]any); len(ss) == 2 {
				if first, _ := ss[0].(map[string]any); first["state"] == "ready" {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never joined and ready: %v %v", st, err)
		}
	}
	keys := func(m map[string]any) []string {
		var k []string
		for x := range m {
			k = append(k, x)
		}
		slices.Sort(k)
		return k
	}
	if k := keys(st); !slices.Equal(k, []string{"joined", "name", "office", "servers"}) {
		t.Fatalf("top-level keys %v", k)
	}
	if st["name"] != "pc" || st["office"] != office {
		t.Fatalf("status %v", st)
	}
	ss := st["servers"].([]any)
	ev, off := ss[0].(map[string]any), ss[1].(map[string]any)
	serverKeys := []string{"bundle_id", "disabled", "name", "state", "tools", "type"}
	for _, s := range []map[string]any{ev, off} {
		if k := keys(s); !slices.Equal(k, serverKeys) {
			t.Fatalf("server keys %v", k)
		}
	}
	if ev["bundle_id"] != "ev" || ev["name"] != "ev" || ev["type"] != "stdio" || ev["disabled"] != false {
		t.Errorf("ev = %v", ev)
	}
	if n, ok := ev["tools"].(float64); !ok || n < 1 || n != float64(int(n)) {
		t.Errorf("ev tools = %v", ev["tools"])
	}
	want := map[string]any{"bundle_id": "off", "name": "off", "type": "streamable", "disabled": true, "state": "disabled", "tools": float64(0)}
	for k, v := range want {
		if off[k] != v {
			t.Errorf("off[%s] = %v, want %v", k, off[k], v)
		}
	}
}

// TestCLIComputerAdminLoopbackOnly: the unauthenticated management plane
// refuses a non-loopback address with a usage error.
func TestCLIComputerAdminLoopbackOnly(t *testing.T) {
	code, _, errOut := runA2C(t, "computer", "--server", "http://127.0.0.1:1", "--admin", "0.0.0.0:0")
	if code != 2 || errOut != "a2c computer: --admin must be a loopback address\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
