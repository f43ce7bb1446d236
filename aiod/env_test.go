package aiod

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envOf is a lookup over a fixed environment.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// defaultConfig is what an empty environment gives.
func defaultConfig() Config {
	return Config{APISurface: SurfaceFull, MaxCommandSessions: 50, CommandSessionIdle: time.Hour, CommandKillGrace: 2 * time.Second,
		MaxTerminals: 20, TerminalIdle: time.Hour, MaxKernels: 5, MaxCodeSessions: 20, KernelIdle: 300 * time.Second,
		CodeIdle: 1800 * time.Second, BodyIdle: DefaultBodyIdle}
}

func TestConfigFromEnv(t *testing.T) {
	mcp := `{"peer":{"url":"http://127.0.0.1:9/mcp","prefix":"peer"}}`
	for _, c := range []struct {
		env  []string
		edit func(*Config)
	}{
		{nil, func(*Config) {}},
		{[]string{"AIO_API_KEY", "k1"}, func(c *Config) { c.APIKey = "k1" }},
		{[]string{"SANDBOX_API_KEY", "k2"}, func(c *Config) { c.APIKey = "k2" }},
		{[]string{"AIO_API_KEY", "k1", "SANDBOX_API_KEY", "k2"}, func(c *Config) { c.APIKey = "k1" }},
		{[]string{"AIO_DEFAULT_USER", "gem"}, func(c *Config) { c.DefaultUser = "gem" }},
		{[]string{"AIO_API_SURFACE", "v2"}, func(c *Config) { c.APISurface = SurfaceV2 }},
		{[]string{"AIO_API_SURFACE", "full"}, func(*Config) {}},
		{[]string{"EXTRA_MCP_SERVERS", mcp}, func(c *Config) { c.MCPServers = mcp }},
		{[]string{"EXTRA_MCP_SERVERS", " "}, func(*Config) {}},
		{[]string{"AIO_SKILLS_PATH", "/opt/skills"}, func(c *Config) { c.SkillsPath = "/opt/skills" }},
		{[]string{"AIO_PYTHON_BIN", "/usr/bin/python3"}, func(c *Config) { c.PythonBin = "/usr/bin/python3" }},
		{[]string{"AIO_NODE_BIN", "node22"}, func(c *Config) { c.NodeBin = "node22" }},
		{[]string{"AIO_BASH_BIN", "/bin/bash"}, func(c *Config) { c.BashBin = "/bin/bash" }},
		{[]string{"AIO_MCP_ALLOWED_HOSTS", " gw.example, ,sandbox.local "}, func(c *Config) { c.AllowedHosts = []string{"gw.example", "sandbox.local"} }},
		{[]string{"AIO_ALLOWED_HOSTS", "Box.Example:8080,10.0.0.5", "AIO_MCP_ALLOWED_HOSTS", "gw.example"}, func(c *Config) {
			c.AllowedHosts = []string{"box.example", "10.0.0.5", "gw.example"}
		}},
		{[]string{"AIO_ALLOWED_ORIGINS", "https://app.example/, http://localhost:3000"}, func(c *Config) {
			c.AllowedOrigins = []string{"https://app.example", "http://localhost:3000"}
		}},
		{[]string{"BROWSER_REMOTE_DEBUGGING_PORT", "9333"}, func(c *Config) { c.CDPEndpoint = "http://127.0.0.1:9333" }},
		{[]string{"BROWSER_REMOTE_DEBUGGING_HOST", "::1"}, func(c *Config) { c.CDPEndpoint = "http://[::1]:9222" }},
		{[]string{"AIO_BASH_MAX_SESSIONS", "7"}, func(c *Config) { c.MaxCommandSessions = 7 }},
		{[]string{"AIO_BASH_SESSION_TIMEOUT_SECS", "60"}, func(c *Config) { c.CommandSessionIdle = time.Minute }},
		{[]string{"AIO_BASH_KILL_GRACE_SECS", "10"}, func(c *Config) { c.CommandKillGrace = 10 * time.Second }},
		{[]string{"AIO_SHELL_MAX_SESSIONS", "3"}, func(c *Config) { c.MaxTerminals = 3 }},
		{[]string{"AIO_SHELL_SESSION_TIMEOUT_SECS", "5"}, func(c *Config) { c.TerminalIdle = 5 * time.Second }},
		{[]string{"AIO_KERNEL_MAX_SESSIONS", "2"}, func(c *Config) { c.MaxKernels = 2 }},
		{[]string{"AIO_CODE_MAX_SESSIONS", "4"}, func(c *Config) { c.MaxCodeSessions = 4 }},
		{[]string{"AIO_KERNEL_SESSION_TIMEOUT_SECS", "9"}, func(c *Config) { c.KernelIdle = 9 * time.Second }},
		{[]string{"AIO_CODE_SESSION_TIMEOUT_SECS", "8"}, func(c *Config) { c.CodeIdle = 8 * time.Second }},
		{[]string{"AIO_BODY_IDLE_TIMEOUT_SECS", "1"}, func(c *Config) { c.BodyIdle = time.Second }},
	} {
		got, err := configFromEnv(envOf(c.env...))
		if err != nil {
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		want := defaultConfig()
		c.edit(&want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v:\n got %+v\nwant %+v", c.env, got, want)
		}
	}
}

func TestConfigFromEnvBadValues(t *testing.T) {
	for _, c := range []struct {
		name, value, want string
	}{
		{"AIO_API_SURFACE", "v1", `AIO_API_SURFACE must be full or v2, got "v1"`},
		{"AIO_API_SURFACE", "FULL", `AIO_API_SURFACE must be full or v2, got "FULL"`},
		{"EXTRA_MCP_SERVERS", "{", "EXTRA_MCP_SERVERS must be a JSON object"},
		{"EXTRA_MCP_SERVERS", "[]", "EXTRA_MCP_SERVERS must be a JSON object"},
		{"EXTRA_MCP_SERVERS", `{"a":1}`, "EXTRA_MCP_SERVERS must be a JSON object"},
		{"EXTRA_MCP_SERVERS", "null", "EXTRA_MCP_SERVERS must be a JSON object"},
		{"BROWSER_REMOTE_DEBUGGING_PORT", "0", `BROWSER_REMOTE_DEBUGGING_PORT must be a port number (1-65535), got "0"`},
		{"BROWSER_REMOTE_DEBUGGING_PORT", "x", `BROWSER_REMOTE_DEBUGGING_PORT must be a port number (1-65535), got "x"`},
		{"BROWSER_REMOTE_DEBUGGING_HOST", "h/x", `BROWSER_REMOTE_DEBUGGING_HOST must be a host name or address, got "h/x"`},
		{"AIO_BASH_MAX_SESSIONS", "0", `AIO_BASH_MAX_SESSIONS must be a positive integer, got "0"`},
		{"AIO_BASH_SESSION_TIMEOUT_SECS", "-1", `AIO_BASH_SESSION_TIMEOUT_SECS must be a positive integer, got "-1"`},
		{"AIO_BASH_KILL_GRACE_SECS", "11", `AIO_BASH_KILL_GRACE_SECS must be at most 10, got "11"`},
		{"AIO_SHELL_MAX_SESSIONS", "many", `AIO_SHELL_MAX_SESSIONS must be a positive integer, got "many"`},
		{"AIO_SHELL_SESSION_TIMEOUT_SECS", "1.5", `AIO_SHELL_SESSION_TIMEOUT_SECS must be a positive integer, got "1.5"`},
		{"AIO_KERNEL_MAX_SESSIONS", "0", `AIO_KERNEL_MAX_SESSIONS must be a positive integer, got "0"`},
		{"AIO_CODE_MAX_SESSIONS", "x", `AIO_CODE_MAX_SESSIONS must be a positive integer, got "x"`},
		{"AIO_KERNEL_SESSION_TIMEOUT_SECS", "0", `AIO_KERNEL_SESSION_TIMEOUT_SECS must be a positive integer, got "0"`},
		{"AIO_CODE_SESSION_TIMEOUT_SECS", "1e3", `AIO_CODE_SESSION_TIMEOUT_SECS must be a positive integer, got "1e3"`},
		{"AIO_BODY_IDLE_TIMEOUT_SECS", "0", `AIO_BODY_IDLE_TIMEOUT_SECS must be a positive integer, got "0"`},
		{"AIO_ALLOWED_HOSTS", "a.example,http://b.example", `AIO_ALLOWED_HOSTS must be comma-separated host names or addresses (like sandbox.example,10.0.0.5), got "a.example,http://b.example"`},
		{"AIO_MCP_ALLOWED_HOSTS", "*.example", `AIO_MCP_ALLOWED_HOSTS must be comma-separated host names or addresses`},
		{"AIO_ALLOWED_ORIGINS", "app.example", `AIO_ALLOWED_ORIGINS must be comma-separated origins, scheme://host[:port] (like https://app.example), got "app.example"`},
	} {
		_, err := configFromEnv(envOf(c.name, c.value))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Name != c.name || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s=%q: %v, want %s", c.name, c.value, err, c.want)
		}
	}
	// A value that may hold credentials is not repeated in the error.
	_, err := configFromEnv(envOf("EXTRA_MCP_SERVERS", `{"p":{"url":"http://u:hunter2@127.0.0.1:9/mcp"}`))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("EXTRA_MCP_SERVERS error shows the value: %v", err)
	}
}

func TestListenFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  []string
		host string
		port int
		err  string
	}{
		{nil, "127.0.0.1", 18091, ""},
		{[]string{"AIO_HOST", "0.0.0.0", "AIO_PORT", "8091"}, "0.0.0.0", 8091, ""},
		{[]string{"AIO_PORT", "0"}, "127.0.0.1", 0, ""},
		{[]string{"AIO_PORT", "65536"}, "", 0, `AIO_PORT must be a port number (0-65535), got "65536"`},
		{[]string{"AIO_PORT", "http"}, "", 0, `AIO_PORT must be a port number (0-65535), got "http"`},
	} {
		host, port, err := listenFromEnv(envOf(c.env...))
		if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) || host != c.host || port != c.port {
			t.Errorf("%v: %s %d %v", c.env, host, port, err)
		}
	}
}
