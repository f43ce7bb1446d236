package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Dispatch(os.Args)
	os.Exit(m.Run())
}

const testToken = "pool-test-token"

// testPool is a pool served on 127.0.0.1 (a random port) for one test.
type testPool struct {
	*Pool
	t    *testing.T
	url  string
	root string
}

// needRoot skips where sandboxes cannot be made (the pool needs root, or
// an unprivileged user namespace).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the pool needs root here")
	}
}

// startPool runs a pool with cfg (Warm 0 unless set, the test token, a
// root of its own) until the test ends.
func startPool(t *testing.T, cfg Config) *testPool {
	t.Helper()
	needRoot(t)
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	ts := httptest.NewUnstartedServer(nil)
	cfg.Listen = ts.Listener.Addr().String()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = p.Handler()
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &testPool{Pool: p, t: t, url: ts.URL, root: cfg.Root}
}

// do sends a request to the pool with the token; body is JSON-encoded
// unless it is a string.
func (tp *testPool) do(method, path string, body any, hdr ...string) (int, []byte) {
	tp.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, tp.url+path, rd)
	if err != nil {
		tp.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", testToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		tp.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// create makes a sandbox with req and returns it.
func (tp *testPool) create(req map[string]any) Sandbox {
	tp.t.Helper()
	code, body := tp.do("POST", "/v2/sandboxes", req)
	if code != 201 {
		tp.t.Fatalf("create: %d %s", code, body)
	}
	var s Sandbox
	if err := json.Unmarshal(body, &s); err != nil {
		tp.t.Fatal(err)
	}
	return s
}

// exec runs a command in sandbox id through its own v1 API and returns
// its output.
func (tp *testPool) exec(id, cmd string) string {
	tp.t.Helper()
	code, body := tp.do("POST", "/sandboxes/"+id+"/v1/shell/exec", map[string]any{"command": cmd})
	if code != 200 {
		tp.t.Fatalf("exec %q: %d %s", cmd, code, body)
	}
	var env struct {
		Success bool
		Data    struct{ Output string }
	}
	if err := json.Unmarshal(body, &env); err != nil || !env.Success {
		tp.t.Fatalf("exec %q: %s", cmd, body)
	}
	return env.Data.Output
}

// TestCreateShape: the sandbox object of a create with no body, exactly,
// and the same object from get and list.
func TestCreateShape(t *testing.T) {
	tp := startPool(t, Config{})
	before := time.Now()
	code, body := tp.do("POST", "/v2/sandboxes", nil)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	id, _ := m["id"].(string)
	if !regexp.MustCompile(`^[a-z2-7]{20}$`).MatchString(id) {
		t.Fatalf("id %q", id)
	}
	exp, err := time.Parse(time.RFC3339Nano, m["expires_at"].(string))
	if err != nil || exp.Before(before.Add(299*time.Second)) || exp.After(time.Now().Add(301*time.Second)) {
		t.Errorf("expires_at %v, want about now + 300 s", m["expires_at"])
	}
	created, err := time.Parse(time.RFC3339Nano, m["created_at"].(string))
	if err != nil || created.Before(before.Add(-time.Second)) || created.After(time.Now()) {
		t.Errorf("created_at %v", m["created_at"])
	}
	for _, k := range []string{"id", "expires_at", "created_at"} {
		delete(m, k)
	}
	want := map[string]any{"state": "running", "template": "base", "office": nil, "computer": nil, "on_timeout": "kill",
		"idle_timeout_s": 0.0, "limits": map[string]any{"memory": "1GiB", "pids": 512.0, "cpus": 1.0}, "network": "none",
		"metadata": map[string]any{}, "api_url": tp.url + "/sandboxes/" + id, "mcp_url": tp.url + "/sandboxes/" + id + "/mcp"}
	if g, w := jsonText(m), jsonText(want); g != w {
		t.Errorf("object\n got %s\nwant %s", g, w)
	}
	code, got := tp.do("GET", "/v2/sandboxes/"+id, nil)
	if code != 200 || string(got) != string(body) {
		t.Errorf("get: %d %s\nwant %s", code, got, body)
	}
	code, list := tp.do("GET", "/v2/sandboxes", nil)
	if code != 200 || string(list) != `{"sandboxes":[`+strings.TrimSpace(string(body))+"]}\n" {
		t.Errorf("list: %d %s", code, list)
	}
	if out := tp.exec(id, "echo hi"); out != "hi" {
		t.Errorf("echo = %q", out)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestCreateBadInput: every field is checked, the answer 400 naming it;
// nothing is created.
func TestCreateBadInput(t *testing.T) {
	tp := startPool(t, Config{Templates: map[string]string{"py": t.TempDir()}})
	for _, c := range []struct {
		body, want string
	}{
		{`{"bogus":1}`, `unknown field "bogus"`},
		{`{"template":"nope"}`, `template: no template "nope" (this pool has: base, py)`},
		{`{"template":5}`, `template: must be a string, not number`},
		{`{"timeout_s":-1}`, `timeout_s: must be a whole number of seconds from 0 to 2592000`},
		{`{"timeout_s":1.5}`, `timeout_s: must be a whole number of seconds from 0 to 2592000`},
		{`{"timeout_s":"10"}`, `timeout_s: must be a number, not string`},
		{`{"timeout_s":99999999999999999999}`, `timeout_s: must be a whole number of seconds from 0 to 2592000`},
		{`{"idle_timeout_s":-5}`, `idle_timeout_s: must be a whole number of seconds from 0 to 2592000`},
		{`{"on_timeout":"explode"}`, `on_timeout: must be kill or pause, not "explode"`},
		{`{"network":"host"}`, `network: host is allowed only where the pool was started with --allow-host-network`},
		{`{"network":"egress"}`, `network: egress is offered only where the pool was started with --egress`},
		{`{"network":"wifi"}`, `network: must be none, host or egress, not "wifi"`},
		{`{"egress":{"deny":["10.0.0.0/8"]}}`, `egress: applies to network "egress" only`},
		{`{"office":"o"}`, `office: this pool was started without --server, so its sandboxes cannot join an office`},
		{`{"name":"a__b","office":"o"}`, `name: must be 1 to 128 of [A-Za-z0-9_-] without "__" (it prefixes the tools: NAME__sandbox_*)`},
		{`{"env":{"1X":"y"}}`, `env: "1X" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)`},
		{`{"env":{"X":"a\u0000b"}}`, `env.X: must be at most 32768 bytes with no NUL`},
		{`{"env":{"X":1}}`, `env: must be a string, not number`},
		{`{"limits":{"memory":"3"}}`, `limits.memory: 3 is below the 16MiB a shell needs`},
		{`{"limits":{"memory":"lots"}}`, `limits.memory: size "lots": unknown unit (use KiB, MiB or GiB)`},
		{`{"limits":{"pids":2}}`, `limits.pids: must be a whole number from 8 to 4194304`},
		{`{"limits":{"cpus":-1}}`, `limits.cpus: must be a number of CPUs from 0.01 to 4096`},
		{`{"limits":{"cpus":0.001}}`, `limits.cpus: must be a number of CPUs from 0.01 to 4096`},
		{`{"limits":{"gpus":1}}`, `unknown field "gpus"`},
		{`{"metadata":{"":"x"}}`, `metadata: key "" must be 1 to 128 printable characters`},
		{`{"metadata":{"k":5}}`, `metadata: must be a string, not number`},
		{`{"limits":{"pids":"9"}}`, `limits.pids: must be a whole number from 8 to 4194304`},
		{`{"limits":{"cpus":"1"}}`, `limits.cpus: must be a number of CPUs from 0.01 to 4096`},
		{`[1]`, `the body must be a JSON object`},
		{`{"a":`, `the body is not valid JSON (it ends early)`},
		{`{} {}`, `the body holds more than one JSON value`},
	} {
		code, body := tp.do("POST", "/v2/sandboxes", c.body)
		want := jsonText(ErrorBody{Error: ErrorDetail{Code: 400, Message: c.want}}) + "\n"
		if code != 400 || string(body) != want {
			t.Errorf("%s: %d %s\nwant %s", c.body, code, body, want)
		}
	}
	code, body := tp.do("POST", "/v2/sandboxes", "{}", "Content-Type", "text/plain")
	if code != 415 || !strings.Contains(string(body), "Content-Type: application/json") {
		t.Errorf("text/plain: %d %s", code, body)
	}
	if code, body := tp.do("GET", "/v2/sandboxes", nil); string(body) != "{\"sandboxes\":[]}\n" {
		t.Errorf("after bad creates: %d %s", code, body)
	}
}

// TestAuth: without the right token every route is 401, an unknown id
// too; with it an unknown id is 404.
func TestAuth(t *testing.T) {
	tp := startPool(t, Config{})
	s := tp.create(nil)
	unauth := jsonText(ErrorBody{Error: ErrorDetail{Code: 401, Message: "Unauthorized"}}) + "\n"
	for _, r := range [][2]string{
		{"POST", "/v2/sandboxes"}, {"GET", "/v2/sandboxes"}, {"GET", "/v2/sandboxes/" + s.ID}, {"DELETE", "/v2/sandboxes/" + s.ID},
		{"POST", "/v2/sandboxes/" + s.ID + "/pause"}, {"POST", "/v2/sandboxes/" + s.ID + "/resume"},
		{"POST", "/v2/sandboxes/" + s.ID + "/timeout"}, {"GET", "/v2/sandboxes/" + s.ID + "/metrics"},
		{"GET", "/sandboxes/aaaaaaaaaaaaaaaaaaaa/v2/sandbox"}, {"GET", "/nope"},
	} {
		for _, hdr := range [][]string{{"X-API-Key", ""}, {"X-API-Key", "wrong"}, {"X-API-Key", "", "Authorization", "Bearer wrong"}} {
			code, body := tp.do(r[0], r[1], nil, hdr...)
			if code != 401 || string(body) != unauth {
				t.Errorf("%s %s %v: %d %s", r[0], r[1], hdr, code, body)
			}
		}
	}
	// The pool's token is taken from headers only, never from the URL.
	if code, body := tp.do("GET", "/v2/sandboxes?api_key="+testToken, nil, "X-API-Key", ""); code != 401 {
		t.Errorf("?api_key= on the pool's routes: %d %s", code, body)
	}
	// The sandbox's own API answers a lone aiod's 401.
	code, body := tp.do("GET", "/sandboxes/"+s.ID+"/v2/sandbox", nil, "X-API-Key", "")
	if code != 401 || strings.TrimSpace(string(body)) != `{"success":false,"message":"Unauthorized","data":null,"hint":null}` {
		t.Errorf("sandbox API without the token: %d %s", code, body)
	}
	if code, body := tp.do("GET", "/sandboxes/"+s.ID+"/health", nil, "X-API-Key", ""); code != 200 || !strings.Contains(string(body), `"server":"aiod"`) {
		t.Errorf("sandbox health: %d %s", code, body)
	}
	for _, p := range []string{"/v2/sandboxes/aaaaaaaaaaaaaaaaaaaa", "/v2/sandboxes/x", "/sandboxes/aaaaaaaaaaaaaaaaaaaa/v2/sandbox"} {
		code, body := tp.do("GET", p, nil)
		if code != 404 || !strings.Contains(string(body), `"code":404`) {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	// The state of the sandbox was not changed by any refused request.
	if code, body := tp.do("GET", "/v2/sandboxes/"+s.ID, nil); code != 200 || !strings.Contains(string(body), `"state":"running"`) {
		t.Errorf("after the refusals: %d %s", code, body)
	}
	if code, body := tp.do("GET", "/v2/sandboxes", nil, "Host", "evil.example"); code != 421 {
		t.Errorf("foreign Host: %d %s", code, body)
	}
}

// TestMax: at --max a create answers 429; a delete makes room.
func TestMax(t *testing.T) {
	tp := startPool(t, Config{Max: 1})
	s := tp.create(nil)
	code, body := tp.do("POST", "/v2/sandboxes", nil)
	want := jsonText(ErrorBody{Error: ErrorDetail{Code: 429, Message: "the pool holds its maximum of 1 sandboxes; delete one or start the pool with a larger --max"}}) + "\n"
	if code != 429 || string(body) != want {
		t.Fatalf("second create: %d %s", code, body)
	}
	if code, body := tp.do("DELETE", "/v2/sandboxes/"+s.ID, nil); code != 204 || len(body) != 0 {
		t.Fatalf("delete: %d %s", code, body)
	}
	tp.create(nil)
}

// TestSandboxAPI: a sandbox's own API under its prefix answers as a lone
// aiod: commands, the v2 plane, /mcp, the terminal URL carrying the
// prefix.
func TestSandboxAPI(t *testing.T) {
	tp := startPool(t, Config{})
	s := tp.create(nil)
	if out := tp.exec(s.ID, "pwd; hostname"); out != filepath.Join(tp.root, "live", s.ID)+"\nsandbox" {
		t.Errorf("pwd; hostname = %q", out)
	}
	code, body := tp.do("POST", "/sandboxes/"+s.ID+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_execute_bash","arguments":{"cmd":"echo mcp"}}}`)
	if code != 200 || !strings.Contains(string(body), `mcp\\n`) {
		t.Errorf("mcp: %d %s", code, body)
	}
	code, body = tp.do("GET", "/sandboxes/"+s.ID+"/v1/shell/terminal-url", nil)
	if code != 200 || !strings.Contains(string(body), `"data":"`+tp.url+`/sandboxes/`+s.ID+`/terminal?session_id=`) {
		t.Errorf("terminal-url: %d %s", code, body)
	}
	code, body = tp.do("POST", "/sandboxes/"+s.ID+"/v2/commands", map[string]any{"command": "echo v2"})
	if code != 200 || !strings.Contains(string(body), `v2\n`) {
		t.Errorf("v2 commands: %d %s", code, body)
	}
}

// TestDelete: a delete ends every process of the sandbox and removes its
// workspace; keep_workspace moves it under Root/kept instead.
func TestDelete(t *testing.T) {
	tp := startPool(t, Config{})
	for _, keep := range []bool{false, true} {
		s := tp.create(nil)
		tp.exec(s.ID, "echo data > f; (sleep 1000 &) ; true")
		initPid := initOf(t, s.ID)
		q := ""
		if keep {
			q = "?keep_workspace=true"
		}
		if code, body := tp.do("DELETE", "/v2/sandboxes/"+s.ID+q, nil); code != 204 {
			t.Fatalf("delete: %d %s", code, body)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", initPid)); err == nil {
			t.Errorf("the sandbox's init %d still runs after the delete", initPid)
		}
		if _, err := os.Stat(filepath.Join(tp.root, "live", s.ID)); !os.IsNotExist(err) {
			t.Errorf("workspace after delete: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(tp.root, "kept", s.ID, "f"))
		if keep != (err == nil && string(b) == "data\n") {
			t.Errorf("keep=%v: kept file %q, %v", keep, b, err)
		}
		if code, _ := tp.do("GET", "/v2/sandboxes/"+s.ID, nil); code != 404 {
			t.Errorf("get after delete: %d", code)
		}
	}
}

// initOf finds the host pid of sandbox id's init: the sandbox-init
// process whose cgroup names the sandbox.
func initOf(t *testing.T, id string) int {
	t.Helper()
	pid, ok := findInit(id)
	if !ok {
		t.Fatalf("no init of sandbox %s", id)
	}
	return pid
}

// findInit is the host pid of sandbox id's init, if it runs.
func findInit(id string) (int, bool) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if strings.TrimSpace(string(comm)) == "sandbox-init" && strings.Contains(string(cg), id) {
			return pid, true
		}
	}
	return 0, false
}

// TestDeleteWhileStarting: a sandbox deleted while its create is still
// starting it ends with the delete's create, not at the pool's Close:
// no init, cgroup or workspace is left behind, and the create fails.
// (Once, the start went on after the delete and its sandbox ran on,
// outside the pool's books and --max, with its uid handed out again.)
func TestDeleteWhileStarting(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	p, err := New(Config{Root: root, Listen: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var id string
	afterStartHook = func(b *box) {
		id = b.id
		if err := p.Delete(context.Background(), b.id, false); err != nil {
			t.Errorf("delete while starting: %v", err)
		}
	}
	defer func() { afterStartHook = nil }()
	if s, err := p.Create(context.Background(), CreateRequest{}, ""); err == nil {
		t.Errorf("the create of a sandbox deleted while it started answered %+v", s)
	}
	if id == "" {
		t.Fatal("the hook did not run")
	}
	if pid, ok := findInit(id); ok {
		t.Errorf("sandbox %s, deleted while it started, still runs (init %d)", id, pid)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "live")); len(ents) != 0 {
		t.Errorf("workspaces left: %v", ents)
	}
}

// TestTimeouts: a deadline kills or pauses; POST timeout moves it; 0
// removes it.
func TestTimeouts(t *testing.T) {
	tp := startPool(t, Config{})
	killed := tp.create(map[string]any{"timeout_s": 1})
	paused := tp.create(map[string]any{"timeout_s": 1, "on_timeout": "pause"})
	extended := tp.create(map[string]any{"timeout_s": 1})
	code, body := tp.do("POST", "/v2/sandboxes/"+extended.ID+"/timeout", map[string]any{"timeout_s": 600})
	var ext Sandbox
	_ = json.Unmarshal(body, &ext)
	if code != 200 || ext.ExpiresAt == nil || time.Until(*ext.ExpiresAt) < 590*time.Second {
		t.Fatalf("timeout: %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "the 1 s sandbox killed", func() bool {
		code, _ := tp.do("GET", "/v2/sandboxes/"+killed.ID, nil)
		return code == 404
	})
	waitFor(t, 5*time.Second, "the 1 s pause sandbox paused", func() bool {
		_, body := tp.do("GET", "/v2/sandboxes/"+paused.ID, nil)
		return strings.Contains(string(body), `"state":"paused"`) && strings.Contains(string(body), `"expires_at":null`)
	})
	if code, body := tp.do("GET", "/v2/sandboxes/"+extended.ID, nil); code != 200 || !strings.Contains(string(body), `"state":"running"`) {
		t.Errorf("extended: %d %s", code, body)
	}
	code, body = tp.do("POST", "/v2/sandboxes/"+extended.ID+"/timeout", map[string]any{"timeout_s": 0})
	if code != 200 || !strings.Contains(string(body), `"expires_at":null`) {
		t.Errorf("timeout 0: %d %s", code, body)
	}
	for _, b := range []string{`{}`, `{"timeout_s":-1}`, `{"timeout_s":"x"}`} {
		if code, body := tp.do("POST", "/v2/sandboxes/"+extended.ID+"/timeout", b); code != 400 {
			t.Errorf("timeout %s: %d %s", b, code, body)
		}
	}
}

// waitFor polls cond (a cheap read) until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// TestTemplate: a template's workspace starts as a copy of its
// directory; changes stay in that sandbox.
func TestTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "app.py"), []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/app.py", filepath.Join(dir, "main.py")); err != nil {
		t.Fatal(err)
	}
	tp := startPool(t, Config{Templates: map[string]string{"py": dir}})
	a := tp.create(map[string]any{"template": "py"})
	b := tp.create(map[string]any{"template": "py"})
	if out := tp.exec(a.ID, "cat main.py && echo changed > src/app.py && cat src/app.py"); out != "print('hi')\nchanged" {
		t.Errorf("a: %q", out)
	}
	if out := tp.exec(b.ID, "cat main.py"); out != "print('hi')" {
		t.Errorf("b after a's change: %q", out)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "src", "app.py")); string(got) != "print('hi')\n" {
		t.Errorf("the template changed: %q", got)
	}
}

// TestWarm: a create that fits takes a warm sandbox, and the pool starts
// another in its place.
func TestWarm(t *testing.T) {
	tp := startPool(t, Config{Warm: 1})
	waitFor(t, 20*time.Second, "a warm sandbox", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.warm) == 1
	})
	s := tp.create(map[string]any{"env": map[string]string{"GREETING": "hello"}, "metadata": map[string]string{"user": "u1"}})
	if !s.CreatedAt.After(time.Now().Add(-5 * time.Second)) {
		t.Errorf("created_at %v is the warm start's, not the claim's", s.CreatedAt)
	}
	if out := tp.exec(s.ID, "echo $GREETING"); out != "hello" {
		t.Errorf("env of a warm sandbox: %q", out)
	}
	waitFor(t, 20*time.Second, "the warm pool refilled", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.warm) == 1
	})
	cold := tp.create(map[string]any{"limits": map[string]any{"memory": "512MiB"}})
	if cold.Limits.Memory != 512<<20 {
		t.Errorf("limits %+v", cold.Limits)
	}
	_, body := tp.do("GET", "/v2/sandboxes?metadata.user=u1", nil)
	var l List
	if err := json.Unmarshal(body, &l); err != nil || len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != s.ID {
		t.Errorf("list by metadata: %s", body)
	}
	if code, body := tp.do("GET", "/v2/sandboxes?color=red", nil); code != 400 {
		t.Errorf("unknown filter: %d %s", code, body)
	}
}

// TestClose: closing the pool ends every sandbox's init.
func TestClose(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	p, err := New(Config{Root: root, Warm: 1, Listen: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	var inits []int
	for range 2 {
		s, err := p.Create(context.Background(), CreateRequest{}, "")
		if err != nil {
			t.Fatal(err)
		}
		inits = append(inits, initOf(t, s.ID))
	}
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > ShutdownBound {
		t.Errorf("close took %v", took)
	}
	for _, pid := range inits {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("init %d still runs after Close", pid)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "live")); len(ents) != 0 {
		t.Errorf("workspaces left: %v", ents)
	}
}

// metrics reads sandbox id's metrics through the route.
func (tp *testPool) metrics(id string) Metrics {
	tp.t.Helper()
	code, body := tp.do("GET", "/v2/sandboxes/"+id+"/metrics", nil)
	var m Metrics
	if code != 200 || json.Unmarshal(body, &m) != nil {
		tp.t.Fatalf("metrics: %d %s", code, body)
	}
	return m
}

// state reads sandbox id's state through the pool's own route (which
// never resumes it).
func (tp *testPool) state(id string) State {
	tp.t.Helper()
	_, body := tp.do("GET", "/v2/sandboxes/"+id, nil)
	var s Sandbox
	_ = json.Unmarshal(body, &s)
	return s.State
}

// TestPauseResume: a paused sandbox's processes use no CPU time at all
// (its cgroup's counter stands still), the pool's own routes do not wake
// it, a request to its API does (auto-resume) and is answered, and the
// counter loop goes on where it stopped.
func TestPauseResume(t *testing.T) {
	tp := startPool(t, Config{})
	s := tp.create(nil)
	// The counter is written to a new file renamed over the old one, so a
	// pause between the write and the rename never leaves it empty.
	tp.exec(s.ID, "(i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; done &) ; sleep 0.3")
	code, body := tp.do("POST", "/v2/sandboxes/"+s.ID+"/pause", nil)
	if code != 200 || !strings.Contains(string(body), `"state":"paused"`) {
		t.Fatalf("pause: %d %s", code, body)
	}
	before := tp.metrics(s.ID)
	time.Sleep(500 * time.Millisecond)
	after := tp.metrics(s.ID)
	if after.CPUUsageNs != before.CPUUsageNs {
		t.Errorf("CPU time moved while paused: %d -> %d ns", before.CPUUsageNs, after.CPUUsageNs)
	}
	if before.Pids < 3 || before.MemoryBytes == 0 || before.MemoryLimitBytes != 1<<30 || before.PidsLimit != 512 {
		t.Errorf("metrics %+v", before)
	}
	if st := tp.state(s.ID); st != Paused {
		t.Errorf("state after get and metrics: %s", st)
	}
	// A request to its API resumes it, and sees the loop going on.
	first := tp.exec(s.ID, "cat /tmp/count")
	second := tp.exec(s.ID, "sleep 0.2; cat /tmp/count")
	var a, b int
	fmt.Sscan(first, &a)
	fmt.Sscan(second, &b)
	if a == 0 || b <= a {
		t.Errorf("counter %q then %q", first, second)
	}
	if st := tp.state(s.ID); st != Running {
		t.Errorf("state after a request: %s", st)
	}
	if m := tp.metrics(s.ID); m.CPUUsageNs <= after.CPUUsageNs {
		t.Errorf("CPU time did not move after resume: %d", m.CPUUsageNs)
	}
	// An explicit resume of a running sandbox is harmless; pause twice too.
	for _, op := range []string{"resume", "pause", "pause", "resume"} {
		if code, body := tp.do("POST", "/v2/sandboxes/"+s.ID+"/"+op, nil); code != 200 {
			t.Errorf("%s: %d %s", op, code, body)
		}
	}
}

// TestIsolationBetweenSandboxes: two sandboxes share nothing: each has
// its own account, files, processes and loopback (both serve port 3000,
// each proxied port reaches its own), and a delete of one leaves the
// other running.
func TestIsolationBetweenSandboxes(t *testing.T) {
	tp := startPool(t, Config{})
	a, b := tp.create(nil), tp.create(nil)
	serve := func(id, text string) {
		tp.exec(id, "echo "+text+" > index.html; (python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 &); "+
			"for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 3000))' 2>/dev/null && break; sleep 0.05; done")
	}
	serve(a.ID, "from-a")
	serve(b.ID, "from-b")
	for _, c := range []struct{ id, want string }{{a.ID, "from-a\n"}, {b.ID, "from-b\n"}} {
		code, body := tp.do("GET", "/sandboxes/"+c.id+"/ports/3000/index.html", nil)
		if code != 200 || string(body) != c.want {
			t.Errorf("port 3000 of %s: %d %q", c.id, code, body)
		}
	}
	idA, idB := tp.exec(a.ID, "id -u; whoami"), tp.exec(b.ID, "id -u; whoami")
	if idA == idB || !strings.HasSuffix(idA, "\nsandbox") {
		t.Errorf("accounts: %q and %q", idA, idB)
	}
	// A's python kernel session: its sockets are in A's /tmp, which B does
	// not see, and B's API does not list it.
	code, body := tp.do("POST", "/sandboxes/"+a.ID+"/v1/jupyter/sessions/create", map[string]any{"session_id": "ka"})
	if code != 200 {
		t.Fatalf("kernel in a: %d %s", code, body)
	}
	if out := tp.exec(a.ID, "ls /tmp | grep -c aiod-k-"); out != "1" {
		t.Errorf("a's kernel directory: %q", out)
	}
	if out := tp.exec(b.ID, "ls /tmp | grep -c aiod-k- || true"); out != "0" {
		t.Errorf("b sees a's kernel: %q", out)
	}
	if code, body := tp.do("GET", "/sandboxes/"+b.ID+"/v1/jupyter/sessions/ka", nil); code == 200 {
		t.Errorf("b's API has a's kernel session: %s", body)
	}
	wsA := filepath.Join(tp.root, "live", a.ID)
	if out := tp.exec(b.ID, "ls "+wsA+" 2>&1; ps -e -o comm= | grep -c python3; cat /proc/1/comm"); out != "ls: cannot access '"+wsA+"': No such file or directory\n1\nsandbox-init" {
		t.Errorf("b sees a: %q", out)
	}
	// The host's loopback is not the sandbox's either.
	hostLn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("a sandbox reached the host's loopback") }))
	defer hostLn.Close()
	port := hostLn.Listener.Addr().(*net.TCPAddr).Port
	if out := tp.exec(a.ID, fmt.Sprintf("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), 2)' 2>&1 | tail -1", port)); !strings.Contains(out, "Connection refused") {
		t.Errorf("reaching the host's loopback: %q", out)
	}
	if code, _ := tp.do("DELETE", "/v2/sandboxes/"+a.ID, nil); code != 204 {
		t.Fatal("delete a")
	}
	if code, body := tp.do("GET", "/sandboxes/"+b.ID+"/ports/3000/index.html", nil); code != 200 || string(body) != "from-b\n" {
		t.Errorf("b after a's delete: %d %q", code, body)
	}
}

// TestIdleTimeout: no request for idle_timeout_s applies on_timeout
// (pause here); a request resumes it, and requests keep it running.
func TestIdleTimeout(t *testing.T) {
	tp := startPool(t, Config{})
	s := tp.create(map[string]any{"idle_timeout_s": 1, "on_timeout": "pause", "timeout_s": 0})
	waitFor(t, 5*time.Second, "paused when idle", func() bool { return tp.state(s.ID) == Paused })
	if out := tp.exec(s.ID, "echo back"); out != "back" {
		t.Errorf("after an idle pause: %q", out)
	}
	for range 6 { // 1.5 s of requests every 250 ms: never idle for 1 s
		tp.exec(s.ID, "true")
		time.Sleep(250 * time.Millisecond)
	}
	if st := tp.state(s.ID); st != Running {
		t.Errorf("state while used: %s", st)
	}
}

// TestPrometheus: the pool's /metrics has its counters and a series per
// sandbox, labelled by id and office, and reading it resumes nothing.
func TestPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	tp := startPool(t, Config{Registerer: reg, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	s := tp.create(nil)
	tp.exec(s.ID, "true")
	if code, _ := tp.do("POST", "/v2/sandboxes/"+s.ID+"/pause", nil); code != 200 {
		t.Fatal("pause")
	}
	code, body := tp.do("GET", "/metrics", nil)
	text := string(body)
	for _, want := range []string{
		`aiod_pool_creates_total{source="cold"} 1`,
		`aiod_pool_sandboxes{state="paused"} 1`,
		`aiod_pool_sandbox_memory_limit_bytes{id="` + s.ID + `",office=""} 1.073741824e+09`,
		`aiod_pool_sandbox_pids{id="` + s.ID + `",office=""}`,
		`aiod_pool_sandbox_cpu_seconds_total{id="` + s.ID + `",office=""}`,
	} {
		if code != 200 || !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s (%d)", want, code)
		}
	}
	if st := tp.state(s.ID); st != Paused {
		t.Errorf("a scrape resumed the sandbox: %s", st)
	}
	if code, _ := tp.do("GET", "/metrics", nil, "X-API-Key", ""); code != 401 {
		t.Errorf("/metrics without the token: %d", code)
	}
}
