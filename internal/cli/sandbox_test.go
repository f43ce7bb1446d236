package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// poolRequest is one request as the fake pool received it.
type poolRequest struct {
	Method, Path, Query, Body, Token string
}

// fakeSandboxPool answers each "METHOD /path" from its table (404 in the
// pool's error shape otherwise) and keeps what it received.
type fakeSandboxPool struct {
	mu      sync.Mutex
	answers map[string]poolAnswer
	reqs    []poolRequest
}

type poolAnswer struct {
	status int
	body   string
}

func (f *fakeSandboxPool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, poolRequest{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Get("x-api-key")})
	a, ok := f.answers[r.Method+" "+r.URL.EscapedPath()]
	f.mu.Unlock()
	if !ok {
		a = poolAnswer{404, `{"error":{"code":404,"message":"no sandbox \"sb9\""}}`}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// take returns the requests received since the last take.
func (f *fakeSandboxPool) take() []poolRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

const (
	cliSandbox = `{"id":"sb1","state":"running","template":"base","office":null,"computer":null,
"created_at":"2026-12-06T07:00:00Z","expires_at":null,"on_timeout":"kill","idle_timeout_s":0,
"limits":{"memory":"1GiB","pids":512,"cpus":1},"network":"none","metadata":{},
"api_url":"http://127.0.0.1:18100/sandboxes/sb1","mcp_url":"http://127.0.0.1:18100/sandboxes/sb1/mcp"}`
	cliOffice = `{"id":"sb2","state":"paused","template":"py","office":"t1","computer":"box",
"created_at":"2026-12-06T07:00:00.5+01:00","expires_at":"2026-12-06T07:05:00Z","on_timeout":"pause","idle_timeout_s":60,
"limits":{"memory":536870912,"pids":64,"cpus":0.5},"network":"host","metadata":{"owner":"ann","z":"two\nlines"},
"api_url":"http://127.0.0.1:18100/sandboxes/sb2","mcp_url":"http://127.0.0.1:18100/sandboxes/sb2/mcp"}`
	cliMetrics = `{"cpu_usage_ns":1500000000,"memory_bytes":1048576,"memory_limit_bytes":1073741824,"pids":3,"pids_limit":512,"disk_bytes":4096,"since":"2026-12-06T07:00:00Z"}`
)

func startSandboxPool(t *testing.T) (*fakeSandboxPool, *httptest.Server) {
	t.Helper()
	f := &fakeSandboxPool{answers: map[string]poolAnswer{
		"POST /v2/sandboxes":             {201, cliSandbox},
		"GET /v2/sandboxes":              {200, `{"sandboxes":[` + cliSandbox + `,` + cliOffice + `]}`},
		"GET /v2/sandboxes/sb1":          {200, cliSandbox},
		"GET /v2/sandboxes/sb2":          {200, cliOffice},
		"DELETE /v2/sandboxes/sb1":       {204, ""},
		"POST /v2/sandboxes/sb2/pause":   {200, cliOffice},
		"POST /v2/sandboxes/sb1/resume":  {200, cliSandbox},
		"POST /v2/sandboxes/sb2/timeout": {200, cliOffice},
		"GET /v2/sandboxes/sb1/metrics":  {200, cliMetrics},
		"GET /v2/sandboxes/bad/metrics":  {502, "gateway\ndown"},
	}}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts
}

// TestSandboxCommands checks each command's exact request and output.
func TestSandboxCommands(t *testing.T) {
	f, ts := startSandboxPool(t)
	t.Setenv("A2C_SANDBOX_POOL", ts.URL)
	t.Setenv("A2C_TOKEN", "env-tok")
	table := "ID   STATE    TEMPLATE  OFFICE  CREATED               EXPIRES\n" +
		"sb1  running  base      -       2026-12-06T07:00:00Z  never\n" +
		"sb2  paused   py        t1      2026-12-06T06:00:00Z  2026-12-06T07:05:00Z\n"
	for _, tc := range []struct {
		name           string
		args           []string
		want           []poolRequest
		code           int
		stdout, stderr string
	}{
		{"create", []string{"create"}, []poolRequest{{"POST", "/v2/sandboxes", "", "{}", "env-tok"}}, 0,
			"sb1\n", "sandbox sb1 running: template base, no deadline, api http://127.0.0.1:18100/sandboxes/sb1\n"},
		{"create all", []string{"create", "--template", "py", "--office", "t1", "--name", "box", "--timeout", "0", "--on-timeout", "pause",
			"--idle-timeout", "60", "--env", "A=1", "--env", "B=x=y", "--env", "A=2", "--memory", "512MiB", "--pids", "64", "--cpus", "0.5",
			"--network", "host", "--metadata", "owner=ann", "--metadata", "empty=", "--token", "flag-tok"},
			[]poolRequest{{"POST", "/v2/sandboxes", "", `{"template":"py","office":"t1","name":"box","timeout_s":0,"on_timeout":"pause",` +
				`"idle_timeout_s":60,"env":{"A":"2","B":"x=y"},"limits":{"memory":"512MiB","pids":64,"cpus":0.5},"network":"host",` +
				`"metadata":{"empty":"","owner":"ann"}}`, "flag-tok"}}, 0,
			"sb1\n", "sandbox sb1 running: template base, no deadline, api http://127.0.0.1:18100/sandboxes/sb1\n"},
		{"create machine", []string{"create", "--machine"}, []poolRequest{{"POST", "/v2/sandboxes", "", `{"machine":true}`, "env-tok"}}, 0,
			"sb1\n", "sandbox sb1 running: template base, no deadline, api http://127.0.0.1:18100/sandboxes/sb1\n"},
		{"create plain", []string{"create", "--machine=false"}, []poolRequest{{"POST", "/v2/sandboxes", "", `{"machine":false}`, "env-tok"}}, 0,
			"sb1\n", "sandbox sb1 running: template base, no deadline, api http://127.0.0.1:18100/sandboxes/sb1\n"},
		{"create limits", []string{"create", "--timeout", "30", "--pids", "10"},
			[]poolRequest{{"POST", "/v2/sandboxes", "", `{"timeout_s":30,"limits":{"memory":0,"pids":10,"cpus":0}}`, "env-tok"}}, 0,
			"sb1\n", "sandbox sb1 running: template base, no deadline, api http://127.0.0.1:18100/sandboxes/sb1\n"},
		{"create json", []string{"create", "--json"}, []poolRequest{{"POST", "/v2/sandboxes", "", "{}", "env-tok"}}, 0, `{
  "id": "sb1",
  "state": "running",
  "template": "base",
  "created_at": "2026-12-06T07:00:00Z",
  "expires_at": null,
  "on_timeout": "kill",
  "idle_timeout_s": 0,
  "limits": {
    "memory": "1GiB",
    "pids": 512,
    "cpus": 1
  },
  "network": "none",
  "metadata": {},
  "api_url": "http://127.0.0.1:18100/sandboxes/sb1",
  "mcp_url": "http://127.0.0.1:18100/sandboxes/sb1/mcp",
  "office": null,
  "computer": null
}
`, ""},
		{"ls", []string{"ls"}, []poolRequest{{"GET", "/v2/sandboxes", "", "", "env-tok"}}, 0, table, ""},
		{"ls filtered", []string{"ls", "--state", "paused", "--office", "t 1", "--metadata", "owner=ann", "--metadata", "k=v&w"},
			[]poolRequest{{"GET", "/v2/sandboxes", "metadata.k=v%26w&metadata.owner=ann&office=t+1&state=paused", "", "env-tok"}}, 0, table, ""},
		{"ls json", []string{"ls", "--json"}, []poolRequest{{"GET", "/v2/sandboxes", "", "", "env-tok"}}, 0, "", ""}, // stdout checked below
		{"get", []string{"get", "sb2"}, []poolRequest{{"GET", "/v2/sandboxes/sb2", "", "", "env-tok"}}, 0,
			"id: sb2\nstate: paused\ntemplate: py\noffice: t1\ncomputer: box\ncreated_at: 2026-12-06T06:00:00Z\n" +
				"expires_at: 2026-12-06T07:05:00Z\non_timeout: pause\nidle_timeout_s: 60\nlimits.memory: 512MiB\nlimits.pids: 64\n" +
				"limits.cpus: 0.5\nnetwork: host\nmetadata.owner: ann\nmetadata.z: \"two\\nlines\"\n" +
				"api_url: http://127.0.0.1:18100/sandboxes/sb2\nmcp_url: http://127.0.0.1:18100/sandboxes/sb2/mcp\n", ""},
		{"get nulls", []string{"get", "sb1"}, []poolRequest{{"GET", "/v2/sandboxes/sb1", "", "", "env-tok"}}, 0,
			"id: sb1\nstate: running\ntemplate: base\noffice: -\ncomputer: -\ncreated_at: 2026-12-06T07:00:00Z\n" +
				"expires_at: never\non_timeout: kill\nidle_timeout_s: 0\nlimits.memory: 1GiB\nlimits.pids: 512\n" +
				"limits.cpus: 1\nnetwork: none\napi_url: http://127.0.0.1:18100/sandboxes/sb1\nmcp_url: http://127.0.0.1:18100/sandboxes/sb1/mcp\n", ""},
		{"get escaped", []string{"get", "a/b c"}, []poolRequest{{"GET", "/v2/sandboxes/a%2Fb%20c", "", "", "env-tok"}}, 1,
			"", "a2c sandbox: the pool answered 404: no sandbox \"sb9\"\n"},
		{"rm", []string{"rm", "sb1"}, []poolRequest{{"DELETE", "/v2/sandboxes/sb1", "", "", "env-tok"}}, 0, "sandbox sb1 removed\n", ""},
		{"rm keep", []string{"rm", "--keep-workspace", "sb1"}, []poolRequest{{"DELETE", "/v2/sandboxes/sb1", "keep_workspace=true", "", "env-tok"}}, 0,
			"sandbox sb1 removed, its workspace kept\n", ""},
		{"rm json", []string{"rm", "sb1", "--json"}, []poolRequest{{"DELETE", "/v2/sandboxes/sb1", "", "", "env-tok"}}, 0,
			"{\n  \"id\": \"sb1\",\n  \"keep_workspace\": false,\n  \"removed\": true\n}\n", ""},
		{"rm unknown", []string{"rm", "sb9"}, []poolRequest{{"DELETE", "/v2/sandboxes/sb9", "", "", "env-tok"}}, 1,
			"", "a2c sandbox: the pool answered 404: no sandbox \"sb9\"\n"},
		{"pause", []string{"pause", "sb2"}, []poolRequest{{"POST", "/v2/sandboxes/sb2/pause", "", "", "env-tok"}}, 0,
			"sandbox sb2 paused, expires 2026-12-06T07:05:00Z\n", ""},
		{"resume", []string{"resume", "sb1"}, []poolRequest{{"POST", "/v2/sandboxes/sb1/resume", "", "{}", "env-tok"}}, 0,
			"sandbox sb1 running, no deadline\n", ""},
		{"resume timeout", []string{"resume", "sb1", "--timeout", "0"}, []poolRequest{{"POST", "/v2/sandboxes/sb1/resume", "", `{"timeout_s":0}`, "env-tok"}}, 0,
			"sandbox sb1 running, no deadline\n", ""},
		{"timeout", []string{"timeout", "sb2", "600"}, []poolRequest{{"POST", "/v2/sandboxes/sb2/timeout", "", `{"timeout_s":600}`, "env-tok"}}, 0,
			"sandbox sb2 paused, expires 2026-12-06T07:05:00Z\n", ""},
		{"timeout json", []string{"timeout", "sb2", "0", "--json"}, []poolRequest{{"POST", "/v2/sandboxes/sb2/timeout", "", `{"timeout_s":0}`, "env-tok"}}, 0,
			"", ""}, // stdout checked below
		{"metrics", []string{"metrics", "sb1"}, []poolRequest{{"GET", "/v2/sandboxes/sb1/metrics", "", "", "env-tok"}}, 0,
			"cpu_usage_ns: 1500000000\nmemory_bytes: 1048576\nmemory_limit_bytes: 1073741824\npids: 3\npids_limit: 512\ndisk_bytes: 4096\nsince: 2026-12-06T07:00:00Z\n", ""},
		{"metrics json", []string{"metrics", "sb1", "--json"}, []poolRequest{{"GET", "/v2/sandboxes/sb1/metrics", "", "", "env-tok"}}, 0,
			"{\n  \"cpu_usage_ns\": 1500000000,\n  \"memory_bytes\": 1048576,\n  \"memory_limit_bytes\": 1073741824,\n  \"pids\": 3,\n" +
				"  \"pids_limit\": 512,\n  \"disk_bytes\": 4096,\n  \"since\": \"2026-12-06T07:00:00Z\"\n}\n", ""},
		{"not the pool's shape", []string{"metrics", "bad"}, []poolRequest{{"GET", "/v2/sandboxes/bad/metrics", "", "", "env-tok"}}, 1,
			"", "a2c sandbox: the pool answered 502 Bad Gateway: gateway down\n"},
		{"url", []string{"url", "sb1", "3000"}, nil, 0, "http://3000-sb1.localhost:" + ts.URL[strings.LastIndex(ts.URL, ":")+1:] + "/\n", ""},
		{"url path", []string{"url", "sb1", "3000", "--path", "--pool", "http://10.0.0.5:18100/"}, nil, 0,
			"http://10.0.0.5:18100/sandboxes/sb1/ports/3000/\n", ""},
		{"url json", []string{"url", "--json", "sb1", "80", "--pool", "https://pool.example"}, nil, 0,
			"{\n  \"url\": \"https://80-sb1.localhost/\"\n}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(append([]string{"sandbox"}, tc.args...)...)
			if got := f.take(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("requests\n got %+v\nwant %+v", got, tc.want)
			}
			if code != tc.code || stderr != tc.stderr || (tc.stdout != "" || code != 0) && stdout != tc.stdout {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %d\nstdout %q\nstderr %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
			switch tc.name {
			case "ls json":
				if !strings.HasPrefix(stdout, "[\n  {\n    \"id\": \"sb1\",") || !strings.Contains(stdout, "\n  },\n  {\n    \"id\": \"sb2\",") ||
					!strings.Contains(stdout, `"office": "t1"`) || !strings.HasSuffix(stdout, "\n  }\n]\n") {
					t.Errorf("ls --json: %s", stdout)
				}
			case "timeout json":
				if !strings.HasPrefix(stdout, "{\n  \"id\": \"sb2\",\n  \"state\": \"paused\",") || !strings.HasSuffix(stdout, "\"computer\": \"box\"\n}\n") {
					t.Errorf("timeout --json: %s", stdout)
				}
			}
		})
	}

	// No sandbox: the table is its header, the JSON an empty array.
	f.mu.Lock()
	f.answers["GET /v2/sandboxes"] = poolAnswer{200, `{"sandboxes":[]}`}
	f.mu.Unlock()
	if code, out, _ := run("sandbox", "ls"); code != 0 || out != "ID  STATE  TEMPLATE  OFFICE  CREATED  EXPIRES\n" {
		t.Errorf("empty ls: %d %q", code, out)
	}
	if code, out, _ := run("sandbox", "ls", "--json"); code != 0 || out != "[]\n" {
		t.Errorf("empty ls --json: %d %q", code, out)
	}
	f.take()
}

// TestSandboxPoolChoice checks where the pool and the token come from:
// the flags, else the environment, else the default.
func TestSandboxPoolChoice(t *testing.T) {
	t.Setenv("A2C_SANDBOX_POOL", "")
	t.Setenv("A2C_TOKEN", "")
	if code, out, _ := run("sandbox", "url", "sb1", "80", "--path"); code != 0 || out != "http://127.0.0.1:18100/sandboxes/sb1/ports/80/\n" {
		t.Errorf("default pool: %d %q", code, out)
	}
	f, ts := startSandboxPool(t)
	if code, _, stderr := run("sandbox", "get", "sb1", "--pool", ts.URL); code != 0 || stderr != "" {
		t.Fatalf("get: %d %q", code, stderr)
	}
	if got := f.take(); len(got) != 1 || got[0].Token != "" {
		t.Errorf("no token anywhere, yet sent: %+v", got)
	}
	t.Setenv("A2C_SANDBOX_POOL", "http://127.0.0.1:1")
	t.Setenv("A2C_TOKEN", "env-tok")
	if code, _, stderr := run("sandbox", "get", "sb1", "--pool", ts.URL+"/", "--token", "flag-tok"); code != 0 || stderr != "" {
		t.Fatalf("get: %d %q", code, stderr)
	}
	if got := f.take(); len(got) != 1 || got[0].Token != "flag-tok" || got[0].Path != "/v2/sandboxes/sb1" {
		t.Errorf("flags over the environment: %+v", got)
	}
}

// TestSandboxUnreachable checks the error when nothing listens at the
// pool's address.
func TestSandboxUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	ts.Close() // its port is now free: a connection is refused
	code, out, stderr := run("sandbox", "ls", "--pool", ts.URL)
	want := "a2c sandbox: pool: Get \"" + ts.URL + "/v2/sandboxes\": dial tcp " + strings.TrimPrefix(ts.URL, "http://") +
		": connect: connection refused (is aiod pool running there? see --pool, $A2C_SANDBOX_POOL)\n"
	if code != 1 || out != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr\n %q\nwant\n %q", code, out, stderr, want)
	}
}

// TestSandboxBadCommandLines checks that bad input is a usage error
// (exit 2, one line) and reaches no pool.
func TestSandboxBadCommandLines(t *testing.T) {
	f, ts := startSandboxPool(t)
	t.Setenv("A2C_SANDBOX_POOL", ts.URL)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `a2c sandbox: unknown command "nope" (create, ls, get, rm, pause, resume, timeout, metrics, url)`},
		{[]string{"create", "extra"}, `a2c sandbox: create takes no arguments, got ["extra"]`},
		{[]string{"create", "--bogus"}, "a2c sandbox: flag provided but not defined: -bogus"},
		{[]string{"create", "--timeout", "-1"}, "a2c sandbox: --timeout must be zero or more, got -1"},
		{[]string{"create", "--timeout", "soon"}, `a2c sandbox: invalid value "soon" for flag -timeout: not a whole number`},
		{[]string{"create", "--idle-timeout", "-1"}, "a2c sandbox: --idle-timeout must be zero or more, got -1"},
		{[]string{"create", "--pids", "-1"}, "a2c sandbox: --pids must be zero or more, got -1"},
		{[]string{"create", "--cpus", "-0.5"}, "a2c sandbox: --cpus must be zero or more, got -0.5"},
		{[]string{"create", "--memory", "12XB"}, `a2c sandbox: invalid value "12XB" for flag -memory: size "12XB": unknown unit (use KiB, MiB or GiB)`},
		{[]string{"create", "--memory", "0"}, `a2c sandbox: invalid value "0" for flag -memory: size "0" is out of range`},
		{[]string{"create", "--env", "NOEQUALS"}, `a2c sandbox: invalid value "NOEQUALS" for flag -env: want KEY=VALUE`},
		{[]string{"create", "--metadata", "=v"}, `a2c sandbox: invalid value "=v" for flag -metadata: want KEY=VALUE`},
		{[]string{"create", "--pool", "127.0.0.1:18100"}, `a2c sandbox: the pool URL must be http://HOST:PORT, got "127.0.0.1:18100"`},
		{[]string{"ls", "--pool", "ftp://h"}, `a2c sandbox: the pool URL must be http://HOST:PORT, got "ftp://h"`},
		{[]string{"ls", "--metadata", "k"}, `a2c sandbox: invalid value "k" for flag -metadata: want KEY=VALUE`},
		{[]string{"get"}, "a2c sandbox: get wants ID, got 0 arguments"},
		{[]string{"get", "a", "b"}, "a2c sandbox: get wants ID, got 2 arguments"},
		{[]string{"get", ""}, "a2c sandbox: get: ID is empty"},
		{[]string{"rm"}, "a2c sandbox: rm wants ID, got 0 arguments"},
		{[]string{"pause", "sb1", "--timeout", "5"}, "a2c sandbox: flag provided but not defined: -timeout"},
		{[]string{"resume", "sb1", "--timeout", "-1"}, "a2c sandbox: --timeout must be zero or more, got -1"},
		{[]string{"timeout", "sb1"}, "a2c sandbox: timeout wants ID SECONDS, got 1 arguments"},
		{[]string{"timeout", "sb1", "soon"}, "a2c sandbox: SECONDS: not a whole number"},
		{[]string{"timeout", "sb1", "--", "-5"}, "a2c sandbox: SECONDS must be zero or more, got -5"},
		{[]string{"metrics"}, "a2c sandbox: metrics wants ID, got 0 arguments"},
		{[]string{"url", "sb1"}, "a2c sandbox: url wants ID PORT, got 1 arguments"},
		{[]string{"url", "sb1", "0"}, `a2c sandbox: PORT must be 1-65535, got "0"`},
		{[]string{"url", "sb1", "http"}, `a2c sandbox: PORT must be 1-65535, got "http"`},
		{[]string{"url", "a.b", "80"}, `a2c sandbox: sandbox id "a.b" cannot be part of a host name; use --path`},
	} {
		code, stdout, stderr := run(append([]string{"sandbox"}, tc.args...)...)
		if code != 2 || stdout != "" || stderr != tc.want+"\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
	if got := f.take(); len(got) != 0 {
		t.Errorf("bad command lines reached the pool: %+v", got)
	}

	if code, out, stderr := run("sandbox"); code != 2 || out != "" || stderr != sandboxHelp {
		t.Errorf("sandbox: %d %q %q", code, out, stderr)
	}
	for _, help := range []string{"help", "-h", "--help"} {
		if code, out, _ := run("sandbox", help); code != 0 || out != sandboxHelp {
			t.Errorf("sandbox %s: %d %q", help, code, out)
		}
	}
	if code, out, _ := run("sandbox", "create", "-h"); code != 0 || !strings.HasPrefix(out, "Usage of a2c sandbox create:\n") ||
		!strings.Contains(out, "-on-timeout string") || !strings.Contains(out, "-pool string") {
		t.Errorf("create -h: %d %q", code, out)
	}
	if code, out, _ := run("help"); code != 0 || !strings.Contains(out, "\n  a2c sandbox create|ls|get|rm|pause|resume|timeout|metrics|url") {
		t.Errorf("help: %d %q", code, out)
	}
}
