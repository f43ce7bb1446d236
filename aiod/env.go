package aiod

// This file is the daemon's environment: every variable aiod reads, in
// one place, so that `aiod start` and a program that runs a daemon in
// its own process (`a2c up`) configure it the same way.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// EnvError is a bad value of an environment variable [ConfigFromEnv]
// reads. Its text names the variable, what it must be and what it was.
type EnvError struct {
	// Name is the variable, Value its value, Want what it must be.
	Name, Value, Want string
	// Secret keeps Value out of the text: a value that may hold
	// credentials (EXTRA_MCP_SERVERS URLs) must not reach a log.
	Secret bool
}

func (e *EnvError) Error() string {
	if e.Secret {
		return fmt.Sprintf("%s must be %s (its value is not shown: it may hold credentials)", e.Name, e.Want)
	}
	return fmt.Sprintf("%s must be %s, got %q", e.Name, e.Want, e.Value)
}

// Environment variables of the daemon, with the defaults a [Config] left
// zero gets from [New] or its planes.
const (
	EnvAPIKey        = "AIO_API_KEY"
	EnvSandboxAPIKey = "SANDBOX_API_KEY" // alias of AIO_API_KEY, as on aiod's images
	EnvAPISurface    = "AIO_API_SURFACE"
	EnvDefaultUser   = "AIO_DEFAULT_USER"
	EnvMCPServers    = "EXTRA_MCP_SERVERS"
	EnvSkillsPath    = "AIO_SKILLS_PATH"
	// EnvAllowedHosts lists, comma-separated, the host names the daemon
	// answers to besides loopback and its listen address (a proxy's or
	// a public name); EnvMCPAllowedHosts is its older name, when only
	// /mcp checked Host, and feeds the same list.
	EnvAllowedHosts    = "AIO_ALLOWED_HOSTS"
	EnvMCPAllowedHosts = "AIO_MCP_ALLOWED_HOSTS"
	// EnvAllowedOrigins lists, comma-separated, the web origins whose
	// pages may call the daemon (with CORS).
	EnvAllowedOrigins = "AIO_ALLOWED_ORIGINS"
	EnvHost           = "AIO_HOST"
	EnvPort           = "AIO_PORT"
	// EnvComputerUseURL is where the computer-use worker is reached.
	EnvComputerUseURL = "AIO_COMPUTER_USE_URL"
	// EnvStateDir is where the daemon keeps state of its own (the
	// browser profile of --browser).
	EnvStateDir = "AIO_STATE_DIR"
)

// Surfaces are the values of AIO_API_SURFACE and --api-surface.
const (
	SurfaceFull = "full"
	SurfaceV2   = "v2"
)

// ConfigFromEnv returns the daemon configuration the environment
// describes, as `aiod start` reads it before its flags:
//
//	AIO_API_KEY (or SANDBOX_API_KEY)      APIKey
//	AIO_DEFAULT_USER                      DefaultUser
//	AIO_API_SURFACE  full|v2              APISurface (default full)
//	EXTRA_MCP_SERVERS  JSON object        MCPServers
//	AIO_SKILLS_PATH                       SkillsPath
//	AIO_PYTHON_BIN, AIO_NODE_BIN          PythonBin, NodeBin
//	AIO_BASH_BIN                          BashBin
//	AIO_ALLOWED_HOSTS, AIO_MCP_ALLOWED_HOSTS  a,b   AllowedHosts (both)
//	AIO_ALLOWED_ORIGINS  https://a,http://b:3000     AllowedOrigins
//	BROWSER_REMOTE_DEBUGGING_HOST, _PORT  CDPEndpoint (default 127.0.0.1:9222; a browser the
//	                                      user runs; unused under --browser, whose Chromium
//	                                      has only its DevTools pipe)
//	AIO_COMPUTER_USE_URL                  ComputerUseURL (default http://127.0.0.1:18100)
//	AIO_STATE_DIR                         StateDir
//	AIO_BASH_MAX_SESSIONS (50), AIO_BASH_SESSION_TIMEOUT_SECS (3600),
//	AIO_BASH_KILL_GRACE_SECS (2, at most 10), AIO_SHELL_MAX_SESSIONS (20),
//	AIO_SHELL_SESSION_TIMEOUT_SECS (3600), AIO_KERNEL_MAX_SESSIONS (5),
//	AIO_CODE_MAX_SESSIONS (20), AIO_KERNEL_SESSION_TIMEOUT_SECS (300),
//	AIO_CODE_SESSION_TIMEOUT_SECS (1800), AIO_BODY_IDLE_TIMEOUT_SECS (30):
//	positive integers for the limits of the same names.
//
// An unset or empty variable takes its default. A bad value is an
// [*EnvError] naming the variable: the daemon must not start on a
// configuration it cannot honour. Where the daemon listens (AIO_HOST,
// AIO_PORT) is not part of a Config; see the aiod command line.
func ConfigFromEnv() (Config, error) {
	return configFromEnv(os.Getenv)
}

// configFromEnv is [ConfigFromEnv] over any lookup, for tests.
func configFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		APIKey:      getenv(EnvAPIKey),
		DefaultUser: getenv(EnvDefaultUser),
		SkillsPath:  getenv(EnvSkillsPath),
		StateDir:    getenv(EnvStateDir),
		PythonBin:   getenv("AIO_PYTHON_BIN"),
		NodeBin:     getenv("AIO_NODE_BIN"),
		BashBin:     getenv("AIO_BASH_BIN"),
	}
	for _, env := range []string{EnvAllowedHosts, EnvMCPAllowedHosts} {
		hosts, err := origin.ParseEnv(getenv(env), env, origin.ParseHost)
		if err != nil {
			return Config{}, &EnvError{Name: env, Want: "comma-separated host names or addresses (like sandbox.example,10.0.0.5)", Value: getenv(env)}
		}
		cfg.AllowedHosts = append(cfg.AllowedHosts, hosts...)
	}
	origins, err := origin.ParseEnv(getenv(EnvAllowedOrigins), EnvAllowedOrigins, origin.ParseOrigin)
	if err != nil {
		return Config{}, &EnvError{Name: EnvAllowedOrigins, Want: "comma-separated origins, scheme://host[:port] (like https://app.example)", Value: getenv(EnvAllowedOrigins)}
	}
	cfg.AllowedOrigins = origins
	if cfg.APIKey == "" {
		cfg.APIKey = getenv(EnvSandboxAPIKey)
	}
	if cfg.Isolation, err = isolationFromEnv(getenv); err != nil {
		return Config{}, err
	}
	if cfg.APISurface, err = checkSurface(EnvAPISurface, getenv(EnvAPISurface)); err != nil {
		return Config{}, err
	}
	if cfg.MCPServers, err = checkMCPServers(EnvMCPServers, getenv(EnvMCPServers)); err != nil {
		return Config{}, err
	}
	if cfg.CDPEndpoint, err = cdpFromEnv(getenv); err != nil {
		return Config{}, err
	}
	if v := getenv(EnvComputerUseURL); v != "" {
		if u, perr := url.Parse(v); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, &EnvError{Name: EnvComputerUseURL, Value: v, Want: "an http:// or https:// URL such as http://127.0.0.1:18100"}
		}
		cfg.ComputerUseURL = v
	}
	ints := []struct {
		name     string
		def, max int // max 0: no upper bound
		set      func(int)
	}{
		{"AIO_BASH_MAX_SESSIONS", 50, 0, func(n int) { cfg.MaxCommandSessions = n }},
		{"AIO_BASH_SESSION_TIMEOUT_SECS", 3600, 0, func(n int) { cfg.CommandSessionIdle = secs(n) }},
		{"AIO_BASH_KILL_GRACE_SECS", 2, 10, func(n int) { cfg.CommandKillGrace = secs(n) }},
		{"AIO_SHELL_MAX_SESSIONS", 20, 0, func(n int) { cfg.MaxTerminals = n }},
		{"AIO_SHELL_SESSION_TIMEOUT_SECS", 3600, 0, func(n int) { cfg.TerminalIdle = secs(n) }},
		{"AIO_KERNEL_MAX_SESSIONS", 5, 0, func(n int) { cfg.MaxKernels = n }},
		{"AIO_CODE_MAX_SESSIONS", 20, 0, func(n int) { cfg.MaxCodeSessions = n }},
		{"AIO_KERNEL_SESSION_TIMEOUT_SECS", 300, 0, func(n int) { cfg.KernelIdle = secs(n) }},
		{"AIO_CODE_SESSION_TIMEOUT_SECS", 1800, 0, func(n int) { cfg.CodeIdle = secs(n) }},
		{"AIO_BODY_IDLE_TIMEOUT_SECS", int(DefaultBodyIdle / time.Second), 0, func(n int) { cfg.BodyIdle = secs(n) }},
	}
	for _, v := range ints {
		n, err := positiveInt(v.name, getenv(v.name), v.def, v.max)
		if err != nil {
			return Config{}, err
		}
		v.set(n)
	}
	return cfg, nil
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

// positiveInt parses a positive integer of at most max (0: unbounded);
// def when v is empty.
func positiveInt(name, v string, def, max int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0, &EnvError{Name: name, Value: v, Want: "a positive integer"}
	}
	if max > 0 && n > max {
		return 0, &EnvError{Name: name, Value: v, Want: fmt.Sprintf("at most %d", max)}
	}
	return n, nil
}

// checkSurface validates an API surface; "" is full.
func checkSurface(name, v string) (string, error) {
	switch v {
	case "", SurfaceFull:
		return SurfaceFull, nil
	case SurfaceV2:
		return SurfaceV2, nil
	}
	return "", &EnvError{Name: name, Value: v, Want: "full or v2"}
}

// checkMCPServers checks that a registry of extra MCP servers is a JSON
// object of objects ({"name": {"url": ..., "prefix": ...}}). Which
// entries are served (loopback HTTP only) is the MCP endpoint's rule; it
// warns about the others at start.
func checkMCPServers(name, v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", nil
	}
	var reg map[string]map[string]any
	if err := json.Unmarshal([]byte(v), &reg); err != nil || reg == nil {
		return "", &EnvError{Name: name, Value: v, Want: `a JSON object such as {"name": {"url": "http://127.0.0.1:PORT/mcp", "prefix": "p"}}`, Secret: true}
	}
	return v, nil
}

// cdpFromEnv is the browser's DevTools endpoint from
// BROWSER_REMOTE_DEBUGGING_HOST and _PORT; "" (the daemon's default)
// when neither is set.
func cdpFromEnv(getenv func(string) string) (string, error) {
	host, port := getenv("BROWSER_REMOTE_DEBUGGING_HOST"), getenv("BROWSER_REMOTE_DEBUGGING_PORT")
	if host == "" && port == "" {
		return "", nil
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, "/?#@ ") {
		return "", &EnvError{Name: "BROWSER_REMOTE_DEBUGGING_HOST", Value: host, Want: "a host name or address"}
	}
	p := 9222
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", &EnvError{Name: "BROWSER_REMOTE_DEBUGGING_PORT", Value: port, Want: "a port number (1-65535)"}
		}
		p = n
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// listenFromEnv is where `aiod start` listens unless flags say
// otherwise: AIO_HOST (default 127.0.0.1) and AIO_PORT (default 18091; 0
// picks a free port).
func listenFromEnv(getenv func(string) string) (host string, port int, err error) {
	host, port = getenv(EnvHost), 18091
	if host == "" {
		host = "127.0.0.1"
	}
	if v := getenv(EnvPort); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			return "", 0, &EnvError{Name: EnvPort, Value: v, Want: "a port number (0-65535)"}
		}
		port = n
	}
	return host, port, nil
}
