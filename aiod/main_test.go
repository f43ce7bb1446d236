package aiod

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseStart(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "computer.json")
	if err := os.WriteFile(cfgFile, []byte(`{"servers":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mcp := `{"p":{"url":"http://127.0.0.1:1/mcp"}}`
	for _, c := range []struct {
		name  string
		args  []string
		env   []string
		check func(o startOptions) bool
	}{
		{"defaults", nil, nil, func(o startOptions) bool {
			return o.host == "127.0.0.1" && o.port == 18091 && o.cfg.APISurface == "full" && o.office == nil && o.cfg.Revision != ""
		}},
		{"env listen", nil, []string{"AIO_HOST", "0.0.0.0", "AIO_PORT", "9000"}, func(o startOptions) bool { return o.host == "0.0.0.0" && o.port == 9000 }},
		{"flags beat env", []string{"--host", "127.0.0.2", "--port", "0"}, []string{"AIO_HOST", "0.0.0.0", "AIO_PORT", "9000"},
			func(o startOptions) bool { return o.host == "127.0.0.2" && o.port == 0 }},
		{"api key env", nil, []string{"AIO_API_KEY", "e"}, func(o startOptions) bool { return o.cfg.APIKey == "e" }},
		{"api key flag", []string{"--api-key", "f"}, []string{"AIO_API_KEY", "e"}, func(o startOptions) bool { return o.cfg.APIKey == "f" }},
		{"empty api key flag turns auth off", []string{"--api-key="}, []string{"AIO_API_KEY", "e"}, func(o startOptions) bool { return o.cfg.APIKey == "" }},
		{"default user", []string{"--default-user", "gem"}, []string{"AIO_DEFAULT_USER", "x"}, func(o startOptions) bool { return o.cfg.DefaultUser == "gem" }},
		{"surface env", nil, []string{"AIO_API_SURFACE", "v2"}, func(o startOptions) bool { return o.cfg.APISurface == "v2" }},
		{"surface flag", []string{"--api-surface", "full"}, []string{"AIO_API_SURFACE", "v2"}, func(o startOptions) bool { return o.cfg.APISurface == "full" }},
		{"mcp env", nil, []string{"EXTRA_MCP_SERVERS", mcp}, func(o startOptions) bool { return o.cfg.MCPServers == mcp }},
		{"mcp flag", []string{"--mcp-servers", "{}"}, []string{"EXTRA_MCP_SERVERS", mcp}, func(o startOptions) bool { return o.cfg.MCPServers == "{}" }},
		{"allowed env", nil, []string{"AIO_ALLOWED_HOSTS", "a.example", "AIO_ALLOWED_ORIGINS", "https://b.example"}, func(o startOptions) bool {
			return reflect.DeepEqual(o.cfg.AllowedHosts, []string{"a.example"}) && reflect.DeepEqual(o.cfg.AllowedOrigins, []string{"https://b.example"})
		}},
		{"allowed flags beat env", []string{"--allowed-host", "c.example", "--allowed-host", "d.example,e.example", "--allowed-origin", "http://f.example:3000"},
			[]string{"AIO_ALLOWED_HOSTS", "a.example", "AIO_MCP_ALLOWED_HOSTS", "g.example", "AIO_ALLOWED_ORIGINS", "https://b.example"}, func(o startOptions) bool {
				return reflect.DeepEqual(o.cfg.AllowedHosts, []string{"c.example", "d.example", "e.example"}) && reflect.DeepEqual(o.cfg.AllowedOrigins, []string{"http://f.example:3000"})
			}},
		{"listen", []string{"--host", "0.0.0.0", "--port", "0"}, nil, func(o startOptions) bool { return o.cfg.Listen == "0.0.0.0:0" }},
		{"workspace", []string{"--workspace", "/tmp"}, nil, func(o startOptions) bool { return o.cfg.Workspace == "/tmp" }},
		{"log level", []string{"--log-level", "debug"}, nil, func(o startOptions) bool { return o.level.String() == "DEBUG" }},
		{"office defaults", []string{"--office", "o1", "--server", "http://127.0.0.1:8000"}, []string{"A2C_TOKEN", "tk"}, func(o startOptions) bool {
			return o.office != nil && reflect.DeepEqual(*o.office, OfficeOptions{Server: "http://127.0.0.1:8000", Office: "o1", Token: "tk", Approve: "all", BundleID: "sandbox", Supervisor: o.office.Supervisor, ProtocolVersion: "0.4.0",
				Settings: o.office.Settings}) && o.office.Supervisor != "" && o.office.Settings != nil && filepath.IsAbs(o.office.Settings.UserDir)
		}},
		{"office all flags", []string{"--office", "o1", "--server", "https://hub.example", "--name", "box", "--token", "t", "--approve", "none", "--manage=false",
			"--config", cfgFile, "--bundle-id", "sb2", "--protocol-version", "0.3.2", "--landing-root", "/tmp/up", "--skills", "/tmp/sk"}, []string{"A2C_TOKEN", "tk"}, func(o startOptions) bool {
			return o.office != nil && reflect.DeepEqual(*o.office, OfficeOptions{Server: "https://hub.example", Office: "o1", Name: "box", Token: "t", Approve: "none",
				ConfigFile: cfgFile, BundleID: "sb2", Supervisor: o.office.Supervisor, ProtocolVersion: "0.3.2", LandingRoot: "/tmp/up", SkillsDir: "/tmp/sk"})
		}},
	} {
		o, err := parseStart(c.args, envOf(c.env...))
		if err != nil || !c.check(o) {
			t.Errorf("%s: %+v %+v %v", c.name, o, o.office, err)
		}
	}
}

func TestParseStartErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--nope"}, nil, "flag provided but not defined: -nope"},
		{[]string{"--port", "x"}, nil, `invalid value "x" for flag -port`},
		{[]string{"--port", "70000"}, nil, "--port must be a port number (0-65535), got 70000"},
		{[]string{"--port", "-1"}, nil, "--port must be a port number (0-65535), got -1"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"--log-level", "loud"}, nil, `--log-level must be debug, info, warn or error, got "loud"`},
		{[]string{"--api-surface", "v1"}, nil, `--api-surface must be full or v2, got "v1"`},
		{[]string{"--api-surface", ""}, nil, `--api-surface must be full or v2, got ""`},
		{[]string{"--mcp-servers", "[1]"}, nil, "--mcp-servers must be a JSON object"},
		{[]string{"--allowed-origin", "app.example"}, nil, `invalid value "app.example" for flag -allowed-origin: bad allowed origin "app.example": want scheme://host[:port], like https://app.example or http://localhost:3000`},
		{[]string{"--allowed-host", "http://a.example"}, nil, `invalid value "http://a.example" for flag -allowed-host: bad allowed host "http://a.example"`},
		{nil, []string{"AIO_ALLOWED_ORIGINS", "*"}, `AIO_ALLOWED_ORIGINS must be comma-separated origins`},
		{nil, []string{"AIO_API_SURFACE", "all"}, `AIO_API_SURFACE must be full or v2, got "all"`},
		{nil, []string{"AIO_PORT", "x"}, `AIO_PORT must be a port number (0-65535), got "x"`},
		{nil, []string{"AIO_BASH_MAX_SESSIONS", "0"}, `AIO_BASH_MAX_SESSIONS must be a positive integer, got "0"`},
		{nil, []string{"EXTRA_MCP_SERVERS", "x"}, "EXTRA_MCP_SERVERS must be a JSON object"},
		{[]string{"--office", "o"}, nil, "--office needs --server URL"},
		{[]string{"--office", " ", "--server", "http://h"}, nil, "--office must name an office"},
		{[]string{"--office", "o", "--server", "127.0.0.1:8000"}, nil, `--server must be an http or https URL, got "127.0.0.1:8000"`},
		{[]string{"--office", "o", "--server", "ws://h"}, nil, `--server must be an http or https URL, got "ws://h"`},
		{[]string{"--office", "o", "--server", "http://h", "--approve", "ask"}, nil, `--approve must be all or none, got "ask"`},
		{[]string{"--office", "o", "--server", "http://h", "--bundle-id", ""}, nil, "--bundle-id must not be empty"},
		{[]string{"--office", "o", "--server", "http://h", "--config", "/nonexistent/c.json"}, nil, "--config /nonexistent/c.json: not a readable file"},
		{[]string{"--server", "http://h"}, nil, "--server needs --office"},
		{[]string{"--name", "n"}, nil, "--name needs --office"},
		{[]string{"--token", "t"}, nil, "--token needs --office"},
		{[]string{"--approve", "none"}, nil, "--approve needs --office"},
		{[]string{"--config", "f"}, nil, "--config needs --office"},
		{[]string{"--bundle-id", "b"}, nil, "--bundle-id needs --office"},
	} {
		_, err := parseStart(c.args, envOf(c.env...))
		var ue usageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want usage error %q", c.args, c.env, err, c.want)
		}
	}
	if _, err := parseStart([]string{"--help"}, envOf()); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

// TestMainCommands: the subcommands that end at once, their output and
// exit codes.
func TestMainCommands(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string // regexps; "" means empty
	}{
		{[]string{"version"}, 0, `^aio-daemon 0\.9\.2\+(dev|[0-9a-f]{7}(-dirty)?)\n$`, ""},
		{[]string{"--version"}, 0, `^aio-daemon 0\.9\.2\+`, ""},
		{[]string{"version", "x"}, 2, "", `^aiod: version takes no argument, got "x"\n$`},
		{[]string{"version", "--bad"}, 2, "", `^aiod: aiod version: flag provided but not defined: -bad\n$`},
		{[]string{"print-openapi", "v3"}, 2, "", `^aiod: print-openapi: unknown document "v3" \(want v1 or v2\)\n$`},
		{[]string{"print-openapi", "v1", "v2"}, 2, "", `^aiod: print-openapi takes one argument, v1 or v2\n$`},
		{[]string{"frobnicate"}, 2, "", `^aiod: unknown command "frobnicate" \(commands: start, version, doctor, print-openapi, computer-use; see aiod --help\)\n$`},
		{[]string{"start", "--bogus"}, 2, "", `^aiod: flag provided but not defined: -bogus\n$`},
		{[]string{"--api-surface", "v3"}, 2, "", `^aiod: --api-surface must be full or v2, got "v3"\n$`},
		{[]string{"--office", "o"}, 2, "", `^aiod: --office needs --server URL\n$`},
		{[]string{"doctor", "now"}, 2, "", `^aiod: doctor takes no argument, got "now"\n$`},
		{[]string{"--help"}, 0, `(?s)^Usage: aiod \[command\] \[flags\].*\n  start .*\n  version .*\n  doctor .*\n  print-openapi .*-api-surface.*-mcp-servers.*-office.*-server`, ""},
		{[]string{"-h"}, 0, `(?s)^Usage: aiod \[command\]`, ""},
		{[]string{"help"}, 0, `(?s)^Usage: aiod \[command\]`, ""},
		{[]string{"start", "--help"}, 0, `(?s)^Usage: aiod \[start\] \[flags\].*-bundle-id`, ""},
		{[]string{"doctor", "--help"}, 0, `(?s)^Usage: aiod doctor .*-json`, ""},
		{[]string{"print-openapi", "--help"}, 0, `(?s)^Usage: aiod print-openapi`, ""},
		{[]string{"version", "-h"}, 0, `(?s)^Usage: aiod version`, ""},
	} {
		var out, errb bytes.Buffer
		code := Main(c.args, &out, &errb)
		if code != c.code || !match(c.stdout, out.String()) || !match(c.stderr, errb.String()) {
			t.Errorf("%v: exit %d (want %d)\nstdout: %q\nstderr: %q", c.args, code, c.code, out.String(), errb.String())
		}
	}
}

func match(re, s string) bool {
	if re == "" {
		return s == ""
	}
	return regexp.MustCompile(re).MatchString(s)
}

func TestPrintOpenAPI(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []byte
	}{{[]string{"print-openapi"}, openapiV2}, {[]string{"print-openapi", "v2"}, openapiV2}, {[]string{"print-openapi", "v1"}, openapiV1}} {
		var out, errb bytes.Buffer
		if code := Main(c.args, &out, &errb); code != 0 || !bytes.Equal(out.Bytes(), c.want) {
			t.Errorf("%v: exit %d, %d bytes, stderr %q", c.args, code, out.Len(), errb.String())
		}
	}
}

// TestStartStopsOnCancel: run serves until its context ends, then stops
// cleanly; with --office the office goroutine is owned and waited for.
func TestStartStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--port", "0", "--workspace", t.TempDir(), "--office", "o", "--server", "http://127.0.0.1:1", "--token", "secret-tok"}, &out, &errb)
	}()
	waitFor(t, &errb, "aiod listening")
	waitFor(t, &errb, "joining office")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if logs := errb.String(); strings.Contains(logs, "secret-tok") || !strings.Contains(logs, "stopped") {
		t.Errorf("logs:\n%s", logs)
	}
}

// syncBuffer is a log sink a test can wait on.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// next is closed at the next write.
func (s *syncBuffer) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// waitFor waits until the buffer holds text, for at most 15 s.
func waitFor(t *testing.T, s *syncBuffer, text string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		ch := s.next()
		if strings.Contains(s.String(), text) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %q in:\n%s", text, s.String())
		}
	}
}
