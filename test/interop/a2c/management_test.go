package a2c

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// mgmtFixture is the management plane's offline fixture: the
// marketplace acme (plugin audit: the skill audit-guide and the stdio
// server audit-mcp, bundle_id acme_audit_srv, run by toolsrv; plugin
// secret: its server takes the input api_token, a password, in its
// environment) as a bare repository served by file://, and a user whose
// folders (XDG_*, A2C_SKILL_HOME) and working directory are the test's.
type mgmtFixture struct {
	url string
	env []string
	cwd string
	dir string
}

func newMgmtFixture(t *testing.T) *mgmtFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		harness.MissingPeer(t, "Debian git")
	}
	toolsrv := harness.BinPkg(t, "./test/interop/a2c/testdata/toolsrv")
	dir := t.TempDir()
	src := filepath.Join(dir, "acme-marketplace")
	server := func(name, id, env string) string {
		return `{"name":"` + name + `","bundle_id":"` + id + `","type":"stdio","disabled":false,"forbidden_tools":[],"tool_meta":{},` +
			`"default_tool_meta":null,"vrl":null,"server_parameters":{"command":"` + toolsrv + `","args":[],"env":` + env + `,"cwd":null,` +
			`"encoding":"utf-8","encoding_error_handler":"strict"}}`
	}
	files := map[string]string{
		".tfrobot-plugin/marketplace.json": `{"name":"acme","owner":{"name":"Fixture Team"},"metadata":{"pluginRoot":"./plugins"},"plugins":[` +
			`{"name":"audit","source":"./plugins/audit","description":"Audit helpers","version":"1.0.0","strict":true},` +
			`{"name":"secret","source":"./plugins/secret","version":"2.0.0"}]}`,
		"plugins/audit/.tfrobot-plugin/plugin.json": `{"name":"audit","version":"1.0.0","description":"Audit helpers","author":{"name":"Fixture Team"},"license":"MIT"}`,
		"plugins/audit/skills/audit-guide/SKILL.md": "---\nname: audit-guide\ndescription: \"How to run the audit tools. Use when asked to audit a file.\"\nlicense: MIT\n---\n" +
			"# audit-guide\nCall the audit tool with a file path.\n",
		"plugins/audit/mcp-servers/audit-mcp.json":   server("audit-mcp", "acme_audit_srv", "null"),
		"plugins/secret/.tfrobot-plugin/plugin.json": `{"name":"secret"}`,
		"plugins/secret/skills/vault/SKILL.md":       "---\nname: vault\ndescription: Reads the vault.\n---\n# vault\n",
		"plugins/secret/mcp-servers/inputs.json":     `[{"id":"api_token","type":"promptString","description":"Audit token","password":true}]`,
		"plugins/secret/mcp-servers/vault.json":      server("vault", "acme_vault_srv", `{"TOKEN":"${input:api_token}"}`),
	}
	for f, body := range files {
		p := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(src, "init", "-q", "-b", "main")
	git(src, "add", "-A")
	git(src, "commit", "-q", "-m", "acme")
	git(dir, "clone", "-q", "--bare", src, filepath.Join(dir, "acme.git"))
	f := &mgmtFixture{url: "file://" + filepath.Join(dir, "acme.git"), cwd: filepath.Join(dir, "work"), dir: dir}
	if err := os.MkdirAll(f.cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	f.env = []string{"A2C_SKILL_HOME=" + filepath.Join(dir, "home"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "HOME=" + filepath.Join(dir, "userhome")}
	return f
}

// a2c runs a2c computer ARGS as the fixture's user, stdin not a
// terminal, and returns its exit code, stdout and stderr.
func (f *mgmtFixture) a2c(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, "a2c"), append([]string{"computer"}, args...)...)
	cmd.Dir = f.cwd
	cmd.Env = append(append(os.Environ(), f.env...), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, nil
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// compact is JSON text without its indentation, for exact comparison.
func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	return b.String()
}

// wantJSON runs a2c computer ARGS and checks its exit code and its
// stdout, compacted.
func (f *mgmtFixture) wantJSON(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	got, out, errOut := f.a2c(t, nil, args...)
	if got != code || compact(t, out) != want {
		t.Fatalf("a2c computer %s: exit %d, %s (stderr %s); want exit %d, %s", strings.Join(args, " "), got, out, errOut, code, want)
	}
}

// computer starts a managed Computer (no --config) as the fixture's user.
func (f *mgmtFixture) computer(t *testing.T, serverURL, office, name string, env []string, extra ...string) *harness.Proc {
	t.Helper()
	cmd := exec.Command(harness.Bin(t, "a2c"), append([]string{"computer", "--server", serverURL, "--office", office, "--name", name, "--skills", ""}, extra...)...)
	cmd.Dir = f.cwd
	cmd.Env = append(append(os.Environ(), f.env...), env...)
	return harness.Run(t, cmd, false)
}

// mgmtNotes collects an Agent's notify:update_* events.
type mgmtNotes struct {
	mu sync.Mutex
	ch chan string
}

func (n *mgmtNotes) wait(t *testing.T, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for _, w := range want {
		for !seen[w] {
			select {
			case ev := <-n.ch:
				seen[ev] = true
			case <-deadline:
				t.Fatalf("waiting for %v: saw %v", want, seen)
			}
		}
	}
}

// drain returns the events that arrived so far.
func (n *mgmtNotes) drain() []string {
	var out []string
	for {
		select {
		case ev := <-n.ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// pyAgent is the python-socketio Agent of management_agent.py.
type pyAgent struct {
	in    io.WriteCloser
	lines chan string
}

func startPyAgent(t *testing.T, serverURL, office, computer string) *pyAgent {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import socketio").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-socketio")
	}
	cmd := exec.Command("/usr/bin/python3", "test/interop/a2c/python/management_agent.py")
	cmd.Dir = harness.Root()
	cmd.Env = append(os.Environ(), "A2C_URL="+serverURL, "A2C_OFFICE="+office, "A2C_COMPUTER="+computer)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyAgent{in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(in, "quit\n")
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("python agent stderr:\n%s", errb.String())
		}
	})
	if l := p.line(t); l != "READY" {
		t.Fatalf("python agent: %q\n%s", l, errb.String())
	}
	return p
}

func (p *pyAgent) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("python agent ended")
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("python agent: no answer")
	}
	return ""
}

// wait asks the python Agent to wait for events and returns what it
// printed: EVENTS, SKILLS and TOOLS.
func (p *pyAgent) wait(t *testing.T, events ...string) (seen, skills, tools []string) {
	t.Helper()
	if _, err := io.WriteString(p.in, "wait "+strings.Join(events, ",")+"\n"); err != nil {
		t.Fatal(err)
	}
	l := p.line(t)
	if !strings.HasPrefix(l, "EVENTS ") {
		t.Fatalf("python agent: %s", l)
	}
	split := func(l, prefix string) []string {
		if !strings.HasPrefix(l, prefix) {
			t.Fatalf("python agent: %q, want %s...", l, prefix)
		}
		return strings.FieldsFunc(strings.TrimPrefix(l, prefix), func(r rune) bool { return r == ',' })
	}
	seen = split(l, "EVENTS ")
	skills = split(p.line(t), "SKILLS ")
	tools = split(p.line(t), "TOOLS ")
	return seen, skills, tools
}

func (p *pyAgent) seen(t *testing.T) []string {
	t.Helper()
	if _, err := io.WriteString(p.in, "seen\n"); err != nil {
		t.Fatal(err)
	}
	return strings.FieldsFunc(strings.TrimPrefix(p.line(t), "EVENTS "), func(r rune) bool { return r == ',' })
}

func skillNamesOf(refs []smcp.A2CSkillRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

func toolNamesOf(ts []smcp.SMCPTool) []string {
	var out []string
	for _, x := range ts {
		out = append(out, x.Name)
	}
	slices.Sort(out)
	return out
}

var auditTools = []string{"acme_audit_srv__cleared", "acme_audit_srv__malformed", "acme_audit_srv__overridden", "acme_audit_srv__plain", "acme_audit_srv__tagged"}

// TestManagementImperative is the fixture's imperative path against a
// running Computer (P14, P20, P24, P31, P41, P42, P43): marketplace add and
// plugin install print the Python SDK's JSON and change nothing an Agent
// sees (no server:update_*); plugin enable brings audit:audit-guide and
// the acme_audit_srv__* tools at once, with update_skills,
// update_tool_list and update_config to a Go and a python-socketio
// Agent; disable takes them away (a call is refused), uninstall too; a
// plugin's password input comes from its A2C_SMCP_ variable and is in no
// answer, notification, log or file.
func TestManagementImperative(t *testing.T) {
	f := newMgmtFixture(t)
	f.wantJSON(t, 0, `{"added":"acme","url":"`+f.url+`","skills":2}`, "marketplace", "add", f.url, "--name", "acme", "--trust", "--json")

	srv := startServer(t)
	office := agent.NewReqID()
	const secret = "s3cr3t-t0ken-value"
	secretEnv := []string{"A2C_SMCP_secret_acme_api_token=" + secret}
	comp := f.computer(t, srv.URL, office, "pc", secretEnv, "--log-level", "debug")
	n := &mgmtNotes{ch: make(chan string, 256)}
	var allNotes bytes.Buffer
	a := dialAgent(t, srv.URL, "go-agent", agent.Options{OnNotify: func(x agent.Notification) {
		n.mu.Lock()
		allNotes.Write(x.Raw)
		n.mu.Unlock()
		if strings.HasPrefix(x.Event, "notify:update_") {
			n.ch <- strings.TrimPrefix(x.Event, "notify:")
		}
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("computer logs:\n%s", comp.Logs())
		}
	})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitComputer(t, a, "pc")
	// An office has one Agent: the python Agent watches a second Computer
	// of the same user, in an office of its own.
	office2 := agent.NewReqID()
	comp2 := f.computer(t, srv.URL, office2, "pc2", secretEnv)
	py := startPyAgent(t, srv.URL, office2, "pc2")
	if skills, err := a.Skills(ctx10(t), "pc"); err != nil || len(skills) != 0 {
		t.Fatalf("skills before install: %v %v", skills, err)
	}

	// settle lets a step's last events arrive (the state an Agent sees
	// comes a moment before some of them), then forgets them: each step
	// waits for its own.
	settle := func() {
		time.Sleep(500 * time.Millisecond)
		n.drain()
		py.seen(t)
	}
	// Install is not activate: nothing an Agent sees changes.
	waitTools(t, a, "pc")
	settle()
	f.wantJSON(t, 0, `{"installed":"audit@acme","scope":"user","state":"installed_disabled","mcpServers":["acme_audit_srv"]}`,
		"plugin", "install", "audit@acme", "--json")
	time.Sleep(3 * time.Second) // ten of the Computer's looks at the files: an absence needs a bound
	if got := n.drain(); len(got) != 0 {
		t.Errorf("install sent %v", got)
	}
	if got := py.seen(t); len(got) != 0 {
		t.Errorf("install sent %v to the python agent", got)
	}

	f.wantJSON(t, 0, `{"enabled":"audit@acme","scopes":["user"]}`, "plugin", "enable", "audit@acme", "--json")
	n.wait(t, "update_skills", "update_tool_list", "update_config")
	seen, pySkills, pyTools := py.wait(t, "update_skills", "update_tool_list", "update_config")
	if !slices.Equal(pySkills, []string{"audit:audit-guide"}) || !slices.Equal(pyTools, auditTools) {
		t.Errorf("python agent after enable: %v %v %v", seen, pySkills, pyTools)
	}
	skills, err := a.Skills(ctx10(t), "pc")
	if err != nil || len(skills) != 1 || skills[0].Name != "audit:audit-guide" || skills[0].Source != "marketplace:acme" || skills[0].Version != "1.0.0" ||
		skills[0].Description != "How to run the audit tools. Use when asked to audit a file." {
		t.Fatalf("skills after enable: %+v %v", skills, err)
	}
	doc, err := a.Skill(ctx10(t), "pc", "audit:audit-guide", "")
	if err != nil || doc.Body == nil || *doc.Body != "# audit-guide\nCall the audit tool with a file path.\n" {
		t.Errorf("get_skill: %+v %v", doc, err)
	}
	cfg, err := a.Config(ctx10(t), "pc")
	if err != nil {
		t.Fatal(err)
	}
	var srvCfg struct {
		Name string `json:"name"`
	}
	if s, ok := cfg.Servers["acme_audit_srv"]; !ok || json.Unmarshal(s, &srvCfg) != nil || srvCfg.Name != "audit-mcp" {
		t.Errorf("get_config: %+v", cfg.Servers)
	}
	if got := toolNamesOf(waitTools(t, a, "pc", auditTools...)); !slices.Equal(got, auditTools) {
		t.Errorf("tools: %v", got)
	}
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "acme_audit_srv__plain", Params: map[string]any{"text": "audit me"}})
	if err != nil || res.IsError || text(res) != "audit me" {
		t.Fatalf("call: %+v %v", res, err)
	}

	// The secret plugin: its input from its variable, nowhere else.
	f.wantJSON(t, 0, `{"installed":"secret@acme","scope":"user","state":"installed_disabled","mcpServers":["acme_vault_srv"]}`,
		"plugin", "install", "secret@acme", "--json")
	code, out, _ := f.a2c(t, nil, "plugin", "enable", "secret@acme", "--json")
	if code != 1 || !strings.Contains(out, "A2C_SMCP_secret_acme_api_token") {
		t.Errorf("enable without the token: exit %d %s", code, out)
	}
	if code, out, _ := f.a2c(t, secretEnv, "plugin", "enable", "secret@acme", "--json"); code != 0 {
		t.Fatalf("enable with the token: %d %s", code, out)
	}
	waitTools(t, a, "pc", "acme_vault_srv__plain")
	settle()

	// Disable: the plugin's skills and tools go, and its tools cannot run.
	f.wantJSON(t, 0, `{"disabled":"audit@acme","scopes":["user"]}`, "plugin", "disable", "audit@acme", "--json")
	n.wait(t, "update_skills", "update_tool_list", "update_config")
	_, pySkills, pyTools = py.wait(t, "update_skills", "update_tool_list")
	if slices.Contains(pySkills, "audit:audit-guide") || slices.ContainsFunc(pyTools, func(s string) bool { return strings.HasPrefix(s, "acme_audit_srv__") }) {
		t.Errorf("python agent after disable: %v %v", pySkills, pyTools)
	}
	if skills, _ := a.Skills(ctx10(t), "pc"); slices.Contains(skillNamesOf(skills), "audit:audit-guide") {
		t.Errorf("skills after disable: %v", skillNamesOf(skills))
	}
	res, err = a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "acme_audit_srv__plain", Params: map[string]any{"text": "x"}})
	if err == nil && !res.IsError {
		t.Errorf("a disabled plugin's tool ran: %+v", res)
	}

	// Enable again, then uninstall: gone, and so is the intent.
	f.wantJSON(t, 0, `{"enabled":"audit@acme","scopes":["user"]}`, "plugin", "enable", "audit@acme", "--json")
	waitTools(t, a, "pc", "acme_audit_srv__plain")
	settle()
	f.wantJSON(t, 0, `{"uninstalled":"audit@acme","keptServers":false}`, "plugin", "uninstall", "audit@acme", "--json")
	n.wait(t, "update_tool_list")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tools, err := a.Tools(ctx10(t), "pc")
		if err == nil && !slices.ContainsFunc(toolNamesOf(tools), func(s string) bool { return strings.HasPrefix(s, "acme_audit_srv__") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools after uninstall: %v", toolNamesOf(tools))
		}
	}
	f.wantJSON(t, 0, `[{"id":"secret@acme","enabled":true,"scopes":["user"],"mcpServers":["acme_vault_srv"]}]`, "plugin", "list", "--json")

	// The secret is in no answer, notification, log or file.
	cfg, _ = a.Config(ctx10(t), "pc")
	b, _ := json.Marshal(cfg)
	n.mu.Lock()
	notified := allNotes.String()
	n.mu.Unlock()
	for what, s := range map[string]string{"get_config": string(b), "notifications": notified, "logs": comp.Logs() + comp2.Logs()} {
		if strings.Contains(s, secret) {
			t.Errorf("the secret is in the %s", what)
		}
	}
	_ = filepath.Walk(f.dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() < 1<<20 {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("the secret is in %s", p)
			}
		}
		return nil
	})
}

// waitComputer waits until computer is in the Agent's office.
func waitComputer(t *testing.T, a *agent.Client, computer string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := a.Tools(ctx10(t), computer); err == nil {
			return
		}
	}
	t.Fatalf("computer %s never joined", computer)
}

// TestManagementDeclarative is the fixture's declarative path (P31):
// user settings alone (the marketplace declared, the plugin installed and
// enabled) boot a Computer to the same skills and tools as the
// imperative path: the boot clones the marketplace and materializes the
// plugin.
func TestManagementDeclarative(t *testing.T) {
	f := newMgmtFixture(t)
	user := filepath.Join(f.dir, "config", "a2c", "settings.json")
	if err := os.MkdirAll(filepath.Dir(user), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"extraKnownMarketplaces":{"acme":{"source":{"type":"git","url":"` + f.url + `"},"autoUpdate":false}},` +
		`"installedPlugins":["audit@acme"],"enabledPlugins":{"audit@acme":true}}`
	if err := os.WriteFile(user, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t)
	office := agent.NewReqID()
	comp := f.computer(t, srv.URL, office, "pc", nil)
	a := dialAgent(t, srv.URL, "go-agent", agent.Options{})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	if got := toolNamesOf(waitTools(t, a, "pc", auditTools...)); !slices.Equal(got, auditTools) {
		t.Errorf("tools: %v\n%s", got, comp.Logs())
	}
	skills, err := a.Skills(ctx10(t), "pc")
	if err != nil || !slices.Equal(skillNamesOf(skills), []string{"audit:audit-guide"}) || skills[0].Source != "marketplace:acme" {
		t.Errorf("skills: %+v %v", skills, err)
	}
	f.wantJSON(t, 0, `[{"id":"audit@acme","enabled":true,"scopes":["user"],"mcpServers":["acme_audit_srv"]}]`, "plugin", "list", "--json")
}

// TestManagementCLI checks the verbs' exit codes and messages (P2, P6,
// P8, P44): a bad --mcp-config exits 2 before connecting; add without
// --trust and without a terminal exits 1 and clones nothing; a second add
// of a name exits 1; a clone that fails exits 2; settings set keeps the
// keys it does not know; set in the policy or flag scope exits 1;
// settings get of a missing key exits 1.
func TestManagementCLI(t *testing.T) {
	f := newMgmtFixture(t)
	bad := filepath.Join(f.dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"mcpServers":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, errOut := f.a2c(t, nil, "--server", "http://127.0.0.1:1", "--mcp-config", bad)
	if code != 2 || !strings.Contains(errOut, `holds neither "servers" nor "inputs"`) || time.Since(start) > 20*time.Second {
		t.Errorf("bad --mcp-config: exit %d, %s", code, errOut)
	}
	code, out, _ := f.a2c(t, nil, "marketplace", "add", f.url, "--name", "acme", "--json")
	if code != 1 || !strings.HasPrefix(compact(t, out), `{"error":"untrusted marketplace 'acme' (`) || !strings.HasSuffix(compact(t, out), `); pass --trust to confirm non-interactively"}`) {
		t.Errorf("untrusted add: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "home", "marketplace", "acme")); !os.IsNotExist(err) {
		t.Error("an untrusted marketplace was cloned")
	}
	f.wantJSON(t, 0, `{"added":"acme","url":"`+f.url+`","skills":2}`, "marketplace", "add", f.url, "--name", "acme", "--trust", "--json")
	f.wantJSON(t, 1, `{"error":"marketplace name conflict: 'acme' already exists"}`, "marketplace", "add", f.url, "--name", "acme", "--trust", "--json")
	f.wantJSON(t, 2, `{"error":"clone/refresh failed for 'file:///nonexistent/x.git' (see logs)"}`, "marketplace", "add", "file:///nonexistent/x.git", "--trust", "--json")
	f.wantJSON(t, 1, `{"error":"error","message":"invalid plugin id 'audit' (expected '<plugin>@<marketplace>')"}`, "plugin", "install", "audit", "--json")
	f.wantJSON(t, 1, `{"error":"error","message":"marketplace 'nope' not added (run 'marketplace add' first)"}`, "plugin", "install", "audit@nope", "--json")

	user := filepath.Join(f.dir, "config", "a2c", "settings.json")
	if err := os.WriteFile(user, []byte(`{"futureKey":{"x":1},"trustedMarketplaces":["`+f.url+`"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.wantJSON(t, 0, `{"key":"enabledMcpjsonServers","scope":"user","value":["fx"]}`, "settings", "set", "enabledMcpjsonServers", `["fx"]`, "--json")
	b, _ := os.ReadFile(user)
	var v map[string]any
	if json.Unmarshal(b, &v) != nil || v["futureKey"] == nil || v["enabledMcpjsonServers"] == nil {
		t.Errorf("settings after set: %s", b)
	}
	f.wantJSON(t, 0, `{"enabledMcpjsonServers":["fx"]}`, "settings", "get", "enabledMcpjsonServers", "--scope", "user", "--json")
	f.wantJSON(t, 1, `{"error":"key 'nothing' not set in scope 'merged'"}`, "settings", "get", "nothing", "--json")
	for _, s := range []string{"policy", "flag"} {
		f.wantJSON(t, 1, `{"error":"scope \"`+s+`\" is read-only (writable: user|project|local)"}`, "settings", "set", "x", "1", "--scope", s, "--json")
	}
	if code, _, errOut := f.a2c(t, nil, "settings", "set", "x", "1", "--scope", "policy"); code != 1 || !strings.Contains(errOut, `scope "policy" is read-only (writable: user|project|local)`) {
		t.Errorf("policy set: %d %s", code, errOut)
	}
}

// TestUpPlugins: a2c up takes the same settings (the issue's "a plugin
// enabled for the user is there beside the sandbox's tools"): the
// fixture declared in the user's settings gives the sandbox Computer the
// plugin's skill and tools next to its own; a plugin disabled while it
// runs leaves it.
func TestUpPlugins(t *testing.T) {
	f := newMgmtFixture(t)
	user := filepath.Join(f.dir, "config", "a2c", "settings.json")
	if err := os.MkdirAll(filepath.Dir(user), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"extraKnownMarketplaces":{"acme":{"source":{"type":"git","url":"` + f.url + `"}}},` +
		`"installedPlugins":["audit@acme"],"enabledPlugins":{"audit@acme":true}}`
	if err := os.WriteFile(user, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness.Bin(t, "a2c"), "up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0",
		"--workspace", filepath.Join(f.dir, "workspace"), "--skills", "")
	cmd.Dir = f.cwd
	cmd.Env = append(append(cmd.Environ(), harness.PinnedPorts(t)...), f.env...)
	u := harness.Run(t, cmd, true)
	a := dialAgent(t, u.URL, "go-agent", agent.Options{})
	if err := a.Join(ctx10(t), "default"); err != nil {
		t.Fatal(err)
	}
	tools := toolNamesOf(waitTools(t, a, "sandbox", append([]string{"sandbox__sandbox_execute_bash"}, auditTools...)...))
	if !slices.Contains(tools, "acme_audit_srv__plain") || !slices.Contains(tools, "sandbox__sandbox_execute_bash") {
		t.Fatalf("tools: %v\n%s", tools, u.Logs())
	}
	skills, err := a.Skills(ctx10(t), "sandbox")
	if err != nil || !slices.Contains(skillNamesOf(skills), "audit:audit-guide") {
		t.Errorf("skills: %v %v", skillNamesOf(skills), err)
	}
	f.wantJSON(t, 0, `{"disabled":"audit@acme","scopes":["user"]}`, "plugin", "disable", "audit@acme", "--json")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tools, err := a.Tools(ctx10(t), "sandbox")
		names := toolNamesOf(tools)
		if err == nil && !slices.Contains(names, "acme_audit_srv__plain") && slices.Contains(names, "sandbox__sandbox_execute_bash") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools after disable: %v", names)
		}
	}
}
