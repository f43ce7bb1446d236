package aiod

import (
	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/internal/proctree"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// poolProc is a running "aiod pool" binary.
type poolProc struct {
	*harness.Proc
	t     *testing.T
	token string
	root  string
}

// startPool runs the real "aiod pool" on a random loopback port with a
// root of its own; token "" runs it open.
func startPool(t *testing.T, token string, args ...string) *poolProc {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("aiod pool needs root here") // CI runs as root, where a skip fails the run
	}
	root := t.TempDir()
	cmd := exec.Command(harness.Bin(t, "aiod"), append([]string{"pool", "--listen", "127.0.0.1:0", "--root", root}, args...)...)
	cmd.Env = append(append(cmd.Environ(), harness.PinnedPorts(t)...), "A2C_TOKEN="+token)
	return &poolProc{Proc: harness.Run(t, cmd, true), t: t, token: token, root: root}
}

// client is an aio client for the pool itself (its own routes are not
// aiod's, so nothing is held to the aiod contract here).
func (p *poolProc) client() *aio { return &aio{t: p.t, base: p.URL, key: p.token} }

// create makes a sandbox and returns its decoded object.
func (p *poolProc) create(body any) map[string]any {
	p.t.Helper()
	resp, out := p.client().raw("POST", "/v2/sandboxes", body)
	if resp.StatusCode != 201 {
		p.t.Fatalf("create: %d %s", resp.StatusCode, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		p.t.Fatal(err)
	}
	return m
}

// sandbox is an aio client of one sandbox's own API, base api_url: every
// answer is held to the published OpenAPI, as a lone daemon's.
func (p *poolProc) sandbox(s map[string]any) *aio {
	return &aio{t: p.t, base: s["api_url"].(string), key: p.token}
}

// quietTB drops the errors of a check that does not apply (the exit
// status of a process the test killed).
type quietTB struct{ testing.TB }

func (quietTB) Errorf(string, ...any) {}

// alive reports which of pids still run (zombies count as gone).
func alive(pids []int) []int {
	var out []int
	for _, p := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			out = append(out, p)
		}
	}
	return out
}

// TestPoolContract: a pool sandbox's own API, reached at its api_url,
// answers as a lone aiod: the same routes held to the published OpenAPI
// (the coverage gate counts them), commands, files, code, the terminal
// URL with the prefix.
func TestPoolContract(t *testing.T) {
	p := startPool(t, "pool-contract-token", "--warm", "0")
	s := p.create(nil)
	a := p.sandbox(s)
	ws := filepath.Join(p.root, "live", s["id"].(string))

	code, e := a.call("GET", "/v2/sandbox", "/v2/sandbox", nil)
	if code != 200 || e.obj()["workspace_dir"] != ws {
		t.Errorf("sandbox: %d %s", code, e.raw)
	}
	code, e = a.call("POST", "/v1/shell/exec", "/v1/shell/exec", map[string]any{"command": "echo hi; id -u"})
	if out, _ := e.obj()["output"].(string); code != 200 || !strings.HasPrefix(out, "hi\n") {
		t.Errorf("exec: %d %s", code, e.raw)
	}
	code, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "printf v2"})
	if code != 200 || !strings.Contains(string(e.raw), `"stdout":"v2"`) {
		t.Errorf("v2 commands: %d %s", code, e.raw)
	}
	code, e = a.call("POST", "/v1/file/write", "/v1/file/write", map[string]any{"file": ws + "/a.txt", "content": "alpha\n"})
	if code != 200 || !e.Success {
		t.Errorf("write: %d %s", code, e.raw)
	}
	code, e = a.call("POST", "/v1/file/read", "/v1/file/read", map[string]any{"file": ws + "/a.txt"})
	if code != 200 || e.obj()["content"] != "alpha\n" {
		t.Errorf("read: %d %s", code, e.raw)
	}
	code, e = a.call("GET", "/v1/shell/terminal-url", "/v1/shell/terminal-url", nil)
	var u string
	_ = json.Unmarshal(e.Data, &u)
	if code != 200 || !strings.HasPrefix(u, s["api_url"].(string)+"/terminal?session_id=") {
		t.Errorf("terminal-url: %d %s", code, e.raw)
	}
	code, e = a.call("POST", "/v1/jupyter/execute", "/v1/jupyter/execute", map[string]any{"code": "print(6*7)"})
	if code != 200 || !strings.Contains(string(e.raw), `42`) {
		t.Errorf("jupyter: %d %s", code, e.raw)
	}
	// The pool's token is the sandbox's key: without it, a lone aiod's 401.
	noKey := &aio{t: t, base: a.base}
	resp, out := noKey.raw("GET", "/v2/sandbox", nil)
	if resp.StatusCode != 401 || strings.TrimSpace(string(out)) != `{"success":false,"message":"Unauthorized","data":null,"hint":null}` {
		t.Errorf("no key: %d %s", resp.StatusCode, out)
	}
}

// TestPoolReplay replays the documented request examples against a pool
// sandbox's api_url, as TestAiodReplay does against a lone daemon.
func TestPoolReplay(t *testing.T) {
	p := startPool(t, "", "--warm", "0")
	s := p.create(nil)
	ws := filepath.Join(p.root, "live", s["id"].(string))
	for _, plane := range []string{"commands", "files"} {
		t.Run(plane, func(t *testing.T) {
			harness.RunScenarios(t, nil, "/usr/bin/python3", "test/interop/aiod/python/aiod_replay.py", s["api_url"].(string), ws, plane)
		})
	}
}

// TestPoolStops: SIGTERM ends every sandbox's processes within 10 s and
// the pool exits 0; SIGKILL leaves no process behind either (each
// sandbox's init dies with the pool: parent-death signal).
func TestPoolStops(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startPool(t, "tok", "--warm", "1")
			for range 2 {
				s := p.create(nil)
				a := p.sandbox(s)
				if code, e := a.call("POST", "/v1/shell/exec", "/v1/shell/exec", map[string]any{"command": "(sleep 1000 &); echo started"}); code != 200 {
					t.Fatalf("exec: %d %s", code, e.raw)
				}
			}
			pid := p.Cmd().Process.Pid
			kids := proctree.Descendants(pid)
			if len(kids) < 5 { // two inits and their sleeps, the warm init
				t.Fatalf("the pool runs %d processes, want at least 5", len(kids))
			}
			sent := time.Now()
			_ = p.Cmd().Process.Signal(sig)
			select {
			case <-p.Exited():
			case <-time.After(15 * time.Second):
				t.Fatalf("the pool did not exit within 15 s of %v", sig)
			}
			if sig == syscall.SIGKILL {
				p.Stop(quietTB{t}) // its exit status is the kill's
			}
			if sig == syscall.SIGTERM {
				if took := time.Since(sent); took > 10*time.Second {
					t.Errorf("SIGTERM took %v", took)
				}
				if !p.Cmd().ProcessState.Success() {
					t.Errorf("exit after SIGTERM: %v\n%s", p.Cmd().ProcessState, p.Logs())
				}
			}
			for end := time.Now().Add(5 * time.Second); len(alive(kids)) > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("processes left after %v: %v", sig, alive(kids))
				}
			}
		})
	}
}

// TestPoolPortsInBrowser: Playwright (over CDP to Debian's Chromium)
// opens a dev server the agent started in a sandbox through the port
// proxy's host form: the token given once in the URL becomes a cookie of
// that host, and the page's absolute paths (/app.js) load with it.
func TestPoolPortsInBrowser(t *testing.T) {
	p := startPool(t, "pool-browser-token", "--warm", "0")
	s := p.create(nil)
	a := p.sandbox(s)
	start := `mkdir site && cd site && printf '<title>raw</title><script src="/app.js"></script>' > index.html && ` +
		`echo 'document.title = "dev server " + location.hostname.split("-")[0];' > app.js && ` +
		`(python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 &) && ` +
		`for i in $(seq 100); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 3000))' 2>/dev/null && break; sleep 0.05; done`
	if code, e := a.call("POST", "/v1/shell/exec", "/v1/shell/exec", map[string]any{"command": start}); code != 200 {
		t.Fatalf("start the dev server: %d %s", code, e.raw)
	}
	port := strings.TrimPrefix(p.Addr, "127.0.0.1:")
	page := fmt.Sprintf("http://3000-%s.localhost:%s/?token=%s", s["id"], port, p.token)
	chrome := harness.Chromium(t, harness.ChromiumOptions{})
	res, err := harness.Playwright(t, chrome.URL(), page)
	if err != nil || res["title"] != "dev server 3000" {
		t.Fatalf("the page through the port proxy: %v, %v", res, err)
	}
	// Without the token, the same host is refused.
	req, _ := http.NewRequest("GET", p.URL+"/app.js", nil)
	req.Host = fmt.Sprintf("3000-%s.localhost:%s", s["id"], port)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(out), `"code":401`) {
		t.Errorf("no token: %d %s", resp.StatusCode, out)
	}
	req.Header.Set("X-API-Key", p.token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("with the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestPoolOffice: a sandbox created with an office joins it as a
// Computer (its tools NAME__sandbox_*) before the create answers; an
// Agent there calls it; a paused sandbox is resumed by the tool call;
// the delete makes the Computer leave the office. Then `a2c server
// --sandbox-pool` against the same pool gives a fresh office its own
// sandbox on an Agent's first join.
func TestPoolOffice(t *testing.T) {
	hub := harness.Run(t, exec.Command(harness.Bin(t, "a2c"), "server", "--listen", "127.0.0.1:0", "--token", "shared-token"), true)
	p := startPool(t, "shared-token", "--warm", "1", "--server", hub.URL)
	office := "o-" + agent.NewReqID()[:8]
	s := p.create(map[string]any{"office": office, "name": "box"})
	if s["office"] != office || s["computer"] != "box" {
		t.Fatalf("create: %v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, hub.URL, agent.Options{Name: "agent", Auth: map[string]any{"x-api-key": "shared-token"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Join(ctx, office); err != nil {
		t.Fatal(err)
	}
	room, err := a.ListRoom(ctx)
	if err != nil || !slices.ContainsFunc(room, func(si smcp.SessionInfo) bool { return si.Name == "box" && si.Role == smcp.RoleComputer }) {
		t.Fatalf("room at once after the create: %+v, %v", room, err)
	}
	if resp, out := p.client().raw("POST", "/v2/sandboxes/"+s["id"].(string)+"/pause", nil); resp.StatusCode != 200 {
		t.Fatalf("pause: %d %s", resp.StatusCode, out)
	}
	res, err := a.CallTool(ctx, agent.Call{Computer: "box", Tool: "box__sandbox_execute_bash",
		Params: map[string]any{"cmd": "echo office-$((40+2))"}, Timeout: 30 * time.Second})
	if err != nil || res.IsError || !strings.Contains(res.Text(), "office-42") {
		t.Fatalf("call to the paused sandbox: %v %+v", err, res)
	}
	if resp, out := p.client().raw("GET", "/v2/sandboxes/"+s["id"].(string), nil); !strings.Contains(string(out), `"state":"running"`) {
		t.Errorf("after the tool call: %d %s", resp.StatusCode, out)
	}
	if resp, out := p.client().raw("DELETE", "/v2/sandboxes/"+s["id"].(string), nil); resp.StatusCode != 204 {
		t.Fatalf("delete: %d %s", resp.StatusCode, out)
	}
	room, err = a.ListRoom(ctx)
	if err != nil || slices.ContainsFunc(room, func(si smcp.SessionInfo) bool { return si.Name == "box" }) {
		t.Errorf("room after the delete: %+v, %v", room, err)
	}

}

// TestPoolServerProvision: `a2c server --sandbox-pool` gives a fresh
// office its own sandbox from a real `aiod pool`: the Agent's first join
// is answered once that sandbox's Computer is in, so its first call
// finds it; after --office-idle with no Agent the sandbox is deleted.
func TestPoolServerProvision(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("aiod pool needs root here") // CI runs as root, where a skip fails the run
	}
	// The pool's address is chosen first: the hub names it, and the pool
	// names the hub.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	poolAddr := ln.Addr().String()
	ln.Close()
	hub := harness.Run(t, exec.Command(harness.Bin(t, "a2c"), "server", "--listen", "127.0.0.1:0", "--token", "shared-token",
		"--sandbox-pool", "http://"+poolAddr, "--office-idle", "1s"), true)
	root := t.TempDir()
	cmd := exec.Command(harness.Bin(t, "aiod"), "pool", "--listen", poolAddr, "--root", root, "--warm", "1", "--server", hub.URL, "--token", "shared-token")
	cmd.Env = append(cmd.Environ(), harness.PinnedPorts(t)...)
	p := &poolProc{Proc: harness.Run(t, cmd, true), t: t, token: "shared-token", root: root}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, hub.URL, agent.Options{Name: "agent", Auth: map[string]any{"x-api-key": "shared-token"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	office := "fresh-" + agent.NewReqID()[:8]
	if err := a.Join(ctx, office); err != nil {
		t.Fatal(err)
	}
	res, err := a.CallTool(ctx, agent.Call{Computer: "sandbox", Tool: "sandbox__sandbox_execute_bash",
		Params: map[string]any{"cmd": "whoami"}, Timeout: 30 * time.Second})
	if err != nil || res.IsError || !strings.Contains(res.Text(), `"output":"sandbox\n"`) {
		t.Fatalf("first call in a fresh office: %v %+v", err, res)
	}
	list := func() string {
		_, out := p.client().raw("GET", "/v2/sandboxes?office="+office, nil)
		return string(out)
	}
	if l := list(); !strings.Contains(l, `"a2c.office_sandbox":"true"`) {
		t.Fatalf("the office's sandbox: %s", l)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(15 * time.Second); list() != "{\"sandboxes\":[]}\n"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the office's sandbox outlived --office-idle: %s", list())
		}
	}
}

// TestPoolTerminal: a terminal's WebSocket through the sandbox's prefix
// works as on a lone aiod, and a keystroke on a socket opened before a
// pause resumes the sandbox and is answered.
func TestPoolTerminal(t *testing.T) {
	p := startPool(t, "pool-ws-token", "--warm", "0")
	s := p.create(nil)
	a := p.sandbox(s)
	code, e := a.call("POST", "/v2/pty/sessions", "/v2/pty/sessions", map[string]any{"id": "t1"})
	if code != 200 {
		t.Fatalf("create: %d %s", code, e.raw)
	}
	hdr := http.Header{"X-API-Key": {p.token}}
	c, resp, err := websocket.DefaultDialer.Dial(wsURL(a.base, "/v2/pty/sessions/t1/ws"), hdr)
	if err != nil {
		t.Fatalf("dial: %v %v", err, resp)
	}
	defer c.Close()
	readUntil(t, c, 5*time.Second, func(f map[string]any) bool { return f["type"] == "ready" })
	out := ""
	collect := func(want string) {
		t.Helper()
		readUntil(t, c, 10*time.Second, func(f map[string]any) bool {
			if f["type"] == "output" {
				out += fmt.Sprint(f["data"])
			}
			return strings.Contains(out, want)
		})
	}
	_ = c.WriteJSON(map[string]any{"type": "input", "data": "echo hello-$((6*7))\n"})
	collect("hello-42")
	if resp, out := p.client().raw("POST", "/v2/sandboxes/"+s["id"].(string)+"/pause", nil); resp.StatusCode != 200 {
		t.Fatalf("pause: %d %s", resp.StatusCode, out)
	}
	_ = c.WriteJSON(map[string]any{"type": "input", "data": "echo after-$((7*7))\n"})
	collect("after-49")
	if _, out := p.client().raw("GET", "/v2/sandboxes/"+s["id"].(string), nil); !strings.Contains(string(out), `"state":"running"`) {
		t.Errorf("after a keystroke: %s", out)
	}
	// Without the pool's token, no upgrade.
	_, resp, err = websocket.DefaultDialer.Dial(wsURL(a.base, "/v2/pty/sessions/t1/ws"), nil)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("no token: %v %v", err, resp)
	}
}
