package aiod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// runAiod runs the aiod binary to its end (a subcommand, or a start that
// must fail) and returns its exit code and output.
func runAiod(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, "aiod"), args...)
	cmd.Env = append(append(os.Environ(), harness.PinnedPorts(t)...), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	default:
		t.Fatalf("aiod %v: %v\n%s", args, err, e.String())
	}
	return code, o.String(), e.String()
}

// TestAiodVersion: `aiod version` prints aiod's published form, and the
// revision is the one /health reports.
func TestAiodVersion(t *testing.T) {
	code, out, errs := runAiod(t, nil, "version")
	m := regexp.MustCompile(`^aio-daemon 0\.9\.2\+(\S+)\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil || errs != "" {
		t.Fatalf("version: exit %d %q %q", code, out, errs)
	}
	d := startAiod(t, nil)
	var health struct{ Version, Revision string }
	_, body := get(t, d.URL+"/health")
	if err := json.Unmarshal([]byte(body), &health); err != nil || health.Version != "0.9.2" || health.Revision != m[1] {
		t.Errorf("health %s, version line %q", body, out)
	}
}

// TestAiodPrintOpenAPI: both documents, byte for byte the ones in the
// tree and the ones the daemon serves.
func TestAiodPrintOpenAPI(t *testing.T) {
	d := startAiod(t, nil)
	for _, c := range []struct {
		args []string
		file string
	}{
		{[]string{"print-openapi"}, "v2-openapi.json"},
		{[]string{"print-openapi", "v2"}, "v2-openapi.json"},
		{[]string{"print-openapi", "v1"}, "v1-openapi.json"},
	} {
		code, out, errs := runAiod(t, nil, c.args...)
		want, err := os.ReadFile(filepath.Join(harness.Root(), "aiod", "openapi", c.file))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			OpenAPI string `json:"openapi"`
			Paths   map[string]json.RawMessage
		}
		if code != 0 || errs != "" || out != string(want) || json.Unmarshal([]byte(out), &doc) != nil || doc.OpenAPI == "" || len(doc.Paths) == 0 {
			t.Errorf("%v: exit %d, %d bytes (want %d), stderr %q", c.args, code, len(out), len(want), errs)
		}
		served := "/" + strings.TrimSuffix(c.file, "-openapi.json") + "/openapi.json"
		if _, body := get(t, d.URL+served); body != strings.TrimSpace(out) {
			t.Errorf("%s differs from %v", served, c.args)
		}
	}
}

// TestAiodDoctor: one line per plane, exit 0 while the required planes
// work (optional ones missing included: PATH emptied loses node), exit 1
// when one does not.
func TestAiodDoctor(t *testing.T) {
	ws := t.TempDir()
	code, out, errs := runAiod(t, nil, "doctor", "--workspace", ws)
	if code != 0 || errs != "" {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errs)
	}
	for _, p := range []string{"commands", "files", "terminals", "watch"} {
		if !regexp.MustCompile(`(?m)^ok +` + p + ` +required +needs `).MatchString(out) {
			t.Errorf("no ok line for the required plane %s:\n%s", p, out)
		}
	}
	for _, p := range []string{"code python", "code javascript", "jupyter kernel", "browser", "computer-use", "mcp"} {
		if !regexp.MustCompile(`(?m)^(ok|missing) +` + p + ` +optional +needs `).MatchString(out) {
			t.Errorf("no line for the optional plane %s:\n%s", p, out)
		}
	}
	if !strings.Contains(out, "required planes: commands, files, terminals, watch") || !strings.Contains(out, "\nresult: ok") {
		t.Errorf("doctor:\n%s", out)
	}

	// An empty PATH loses node (an optional plane), not the shell the
	// planes find by absolute path: still exit 0, with the install hint.
	code, out, _ = runAiod(t, []string{"PATH="}, "doctor", "--workspace", ws)
	if code != 0 || !regexp.MustCompile(`(?m)^missing +code javascript +optional .*install: apt-get install nodejs$`).MatchString(out) {
		t.Errorf("doctor with PATH emptied: exit %d\n%s", code, out)
	}

	// A required plane unusable: exit 1, the plane named.
	code, out, _ = runAiod(t, nil, "doctor", "--workspace", filepath.Join(ws, "gone"))
	if code != 1 || !regexp.MustCompile(`(?m)^missing +files +required .*problem: GET /v2/fs/stat answered 404: `).MatchString(out) ||
		!strings.HasSuffix(out, "result: unusable required plane(s): commands, files, terminals, watch\n") {
		t.Errorf("doctor without a workspace: exit %d\n%s", code, out)
	}
	code, out, _ = runAiod(t, []string{"AIO_DEFAULT_USER=no-such-user-aiod"}, "doctor", "--workspace", ws)
	if code != 1 || !regexp.MustCompile(`(?m)^missing +commands +required .*no-such-user-aiod`).MatchString(out) {
		t.Errorf("doctor with a missing default account: exit %d\n%s", code, out)
	}

	// --json: the same report for scripts.
	code, out, _ = runAiod(t, []string{"PATH="}, "doctor", "--json", "--workspace", ws)
	var r struct {
		OK     bool
		Planes []struct {
			Plane    string
			Required bool
			OK       bool
			Fix      string
		}
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || !r.OK || len(r.Planes) != 11 || r.Planes[10].Plane != "isolation" || !r.Planes[10].OK || r.Planes[10].Required {
		t.Fatalf("doctor --json: exit %d %v\n%s", code, err, out)
	}
	for _, p := range r.Planes {
		if p.Plane == "code javascript" && (p.OK || p.Required || p.Fix != "apt-get install nodejs") {
			t.Errorf("json javascript: %+v", p)
		}
	}
}

// TestAiodAPISurfaceV2: only /v2, /mcp and the public routes are
// served; a /v1 route answers as an unknown one.
func TestAiodAPISurfaceV2(t *testing.T) {
	notFound := `{"success":false,"message":"Not Found","data":null,"hint":null}`
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--api-surface", "v2"}},
		{[]string{"AIO_API_SURFACE=v2"}, nil},
	} {
		d := startAiod(t, append(c.env, "AIO_API_KEY=sk"), append(c.args, "--workspace", t.TempDir())...)
		a := &aio{t: t, base: d.URL, key: "sk"}
		if !strings.Contains(d.Logs(), "api_surface=v2") {
			t.Errorf("%v: the first line does not say the surface:\n%s", c, d.Logs())
		}
		if code, e := a.call("GET", "/v2/sandbox", "/v2/sandbox", nil); code != 200 || !e.Success {
			t.Errorf("%v /v2/sandbox: %d %s", c, code, e.raw)
		}
		if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo hi"}); code != 200 || e.obj()["stdout"] != "hi\n" {
			t.Errorf("%v /v2/commands: %d %s", c, code, e.raw)
		}
		for _, p := range []string{"/v1/capabilities", "/v1/sandbox", "/v1/bash/sessions", "/v2/%2e%2e/v1/sandbox"} {
			if code, body := get(t, d.URL+p, "X-API-Key", "sk"); code != 404 || body != notFound {
				t.Errorf("%v %s: %d %s", c, p, code, body)
			}
		}
		resp, body := a.raw("POST", "/v1/file/read", map[string]any{"file": "/etc/hostname"})
		if resp.StatusCode != 404 || strings.TrimSpace(string(body)) != notFound {
			t.Errorf("%v POST /v1/file/read: %d %s", c, resp.StatusCode, body)
		}
		resp, body = a.raw("POST", "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "Accept", "application/json")
		var rpc struct {
			ID     int
			Result struct{ Tools []struct{ Name string } }
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &rpc) != nil || rpc.ID != 7 || len(rpc.Result.Tools) == 0 {
			t.Errorf("%v /mcp tools/list: %d %.300s", c, resp.StatusCode, body)
		}
		for _, p := range []string{"/health", "/v1/ping", "/v2/openapi.json", "/v1/openapi.json"} {
			if code, body := get(t, d.URL+p); code != 200 { // public: no key
				t.Errorf("%v %s: %d %.100s", c, p, code, body)
			}
		}
		if code, _ := get(t, d.URL+"/metrics", "X-API-Key", "sk"); code != 200 {
			t.Errorf("%v /metrics: %d", c, code)
		}
	}
}

// TestAiodUsageErrors: bad flags, values and commands end with exit 2
// and one line naming the problem, before anything listens.
func TestAiodUsageErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--nope"}, "aiod: flag provided but not defined: -nope"},
		{nil, []string{"--port", "x"}, `aiod: invalid value "x" for flag -port: parse error`},
		{nil, []string{"--api-surface", "v1"}, `aiod: --api-surface must be full or v2, got "v1"`},
		{nil, []string{"start", "--mcp-servers", "{"}, `aiod: --mcp-servers must be a JSON object such as {"name": {"url": "http://127.0.0.1:PORT/mcp", "prefix": "p"}} (its value is not shown: it may hold credentials)`},
		{nil, []string{"--office", "o1"}, "aiod: --office needs --server URL"},
		{nil, []string{"--server", "http://127.0.0.1:8000"}, "aiod: --server needs --office"},
		{nil, []string{"--office", "o1", "--server", "http://127.0.0.1:8000", "--approve", "ask"}, `aiod: --approve must be all or none, got "ask"`},
		{nil, []string{"launch"}, `aiod: unknown command "launch" (commands: start, version, doctor, print-openapi, computer-use, pool; see aiod --help)`},
		{nil, []string{"print-openapi", "v3"}, `aiod: print-openapi: unknown document "v3" (want v1 or v2)`},
		{[]string{"AIO_API_SURFACE=v1"}, nil, `aiod: AIO_API_SURFACE must be full or v2, got "v1"`},
		{[]string{"EXTRA_MCP_SERVERS=[]"}, nil, `aiod: EXTRA_MCP_SERVERS must be a JSON object such as`},
		{[]string{"AIO_PORT=http"}, nil, `aiod: AIO_PORT must be a port number (0-65535), got "http"`},
		{[]string{"AIO_BASH_KILL_GRACE_SECS=60"}, nil, `aiod: AIO_BASH_KILL_GRACE_SECS must be at most 10, got "60"`},
	} {
		code, out, errs := runAiod(t, c.env, append([]string{}, c.args...)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, c.want) {
			t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.env, c.args, code, out, errs, c.want)
		}
	}
}

// TestAiodHelp: --help lists the subcommands and the flags.
func TestAiodHelp(t *testing.T) {
	code, out, _ := runAiod(t, nil, "--help")
	for _, want := range []string{"\n  start ", "\n  version ", "\n  doctor ", "\n  print-openapi ", "-api-surface", "-mcp-servers", "-office",
		"-server", "-name", "-token", "-approve", "-config", "-bundle-id", "-default-user", "-host", "-port", "-workspace", "-api-key"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--help (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
}

// TestAiodOffice: `aiod --office --server` serves HTTP and joins the
// office as a Computer: an Agent lists and calls the sandbox's tools
// there, the token never reaches the log, and SIGTERM ends both.
func TestAiodOffice(t *testing.T) {
	srv := harness.Run(t, exec.Command(harness.Bin(t, "a2c"), "server", "--listen", "127.0.0.1:0", "--token", "hub-tok-4242"), true)
	office := agent.NewReqID()
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws, "--office", office, "--server", srv.URL, "--name", "box", "--token", "hub-tok-4242")
	if code, body := get(t, d.URL+"/health"); code != 200 {
		t.Fatalf("health: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, srv.URL, agent.Options{Name: "agent", Auth: map[string]any{"x-api-key": "hub-tok-4242"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Join(ctx, office); err != nil {
		t.Fatal(err)
	}
	var names []string
	for ctx.Err() == nil && !slices.Contains(names, "sandbox__sandbox_execute_bash") {
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		tools, err := a.Tools(tctx, "box")
		tcancel()
		names = names[:0]
		for _, x := range tools {
			names = append(names, x.Name)
		}
		if err != nil || len(names) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if !slices.Contains(names, "sandbox__sandbox_execute_bash") {
		t.Fatalf("the office never listed the sandbox's tools: %v\n%s", names, d.Logs())
	}
	res, err := a.CallTool(ctx, agent.Call{Computer: "box", Tool: "sandbox__sandbox_execute_bash",
		Params: map[string]any{"cmd": "echo office-$((40+2))"}, Timeout: 30 * time.Second})
	if err != nil || res.IsError || !strings.Contains(res.Text(), "office-42") {
		t.Errorf("call: %v %+v", err, res)
	}
	d.Stop(t)
	if logs := d.Logs(); strings.Contains(logs, "hub-tok-4242") || !strings.Contains(logs, "joining office") || !strings.Contains(logs, "stopped") {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestAiodOfficeUsageError: an office option the office refuses (a
// bundle id with "__") stops the daemon, already listening, with exit 2
// and the reason on its last line.
func TestAiodOfficeUsageError(t *testing.T) {
	code, _, logs := runAiod(t, nil, "--port", "0", "--workspace", t.TempDir(), "--office", "o1", "--server", "http://127.0.0.1:1", "--bundle-id", "bad__id")
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if code != 2 || !strings.Contains(logs, "aiod listening") ||
		!strings.HasPrefix(lines[len(lines)-1], `aiod: office: --bundle-id "bad__id" is not a valid bundle_id`) {
		t.Errorf("exit %d:\n%s", code, logs)
	}
}
