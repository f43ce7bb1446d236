package aiod

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/code"
	"github.com/a2c-smcp/a2c-go/aiod/commands"
	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/files"
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/janitor"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/mcp"
	"github.com/a2c-smcp/a2c-go/aiod/pty"
	"github.com/a2c-smcp/a2c-go/aiod/transfer"
	"github.com/a2c-smcp/a2c-go/aiod/watch"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// Version is the aiod API version this daemon implements.
const Version = "0.9.2"

// Config configures a [Daemon].
type Config struct {
	// Workspace is the directory commands start in and relative paths
	// resolve against. Default the daemon account's home, as aiod's.
	Workspace string
	// APIKey, when set, must accompany every request but the public ones
	// (Authorization: Bearer, x-api-key, or ?api_key=).
	APIKey string
	// Revision names the build, for /health. Default "dev".
	Revision string
	Logger   *slog.Logger
	// DefaultUser is the account commands run as and created files belong
	// to when a request names none (AIO_DEFAULT_USER); empty = the
	// daemon's own.
	DefaultUser string
	// MaxCommandSessions caps command sessions (default 50); at the cap
	// the least recently used idle one is closed.
	MaxCommandSessions int
	// CommandSessionIdle closes command sessions idle this long (default
	// one hour).
	CommandSessionIdle time.Duration
	// CommandKillGrace is how long a killed command's tree has after
	// SIGTERM before SIGKILL (default 2 s, at most 10 s).
	CommandKillGrace time.Duration
	// MaxTerminals caps terminals (default 20); TerminalIdle reclaims
	// expiring ones idle this long (default one hour).
	MaxTerminals int
	TerminalIdle time.Duration
	// MaxKernels and MaxCodeSessions cap python kernels (default 5) and
	// node sessions (default 20); KernelIdle and CodeIdle reclaim them
	// when idle (defaults 300 s and 1800 s).
	MaxKernels, MaxCodeSessions int
	KernelIdle, CodeIdle        time.Duration
	// PythonBin and NodeBin pin the interpreters of the code plane
	// (AIO_PYTHON_BIN, AIO_NODE_BIN); empty = looked up (python3 with
	// ipykernel, node).
	PythonBin, NodeBin string
	// BodyIdle cuts a request body that makes no progress for this long
	// (headers sent, body stalled). Default [DefaultBodyIdle].
	BodyIdle time.Duration
	// CDPEndpoint is where the browser's DevTools protocol is probed.
	// Default http://127.0.0.1:9222.
	CDPEndpoint string
	// ComputerUseURL is where the computer-use worker is reached
	// (AIO_COMPUTER_USE_URL). Default computer.DefaultURL.
	ComputerUseURL string
	// MCPServers is EXTRA_MCP_SERVERS (--mcp-servers): the loopback MCP
	// servers whose tools /mcp lists beside the built-in ones.
	MCPServers string
	// APISurface is "full" (default: /v1, /v2, /mcp) or "v2" (only /v2,
	// /mcp and the public routes).
	APISurface string
	// SkillsPath is where sandbox_load_skill reads skills
	// (AIO_SKILLS_PATH).
	SkillsPath string
	// Listen is the address the daemon listens on (host:port): its host
	// is one the daemon answers to (every IP literal when it is 0.0.0.0
	// or ::). Empty: the loopback names and AllowedHosts only.
	Listen string
	// AllowedHosts are the other host names the daemon answers to (a
	// proxy's or a public name: --allowed-host, AIO_ALLOWED_HOSTS and
	// the older AIO_MCP_ALLOWED_HOSTS); AllowedOrigins the web origins
	// whose pages may call it, with CORS (--allowed-origin,
	// AIO_ALLOWED_ORIGINS). Every route, /mcp, WebSocket upgrades and
	// /cdp included, meets this rule first (package origin).
	AllowedHosts, AllowedOrigins []string
	// BashBin is the bash that commands and terminals start
	// (AIO_BASH_BIN); empty = bash on PATH.
	BashBin string
	// Isolation contains what the daemon runs (default none).
	Isolation Isolation
	// Browser makes the daemon run Chromium itself (aiod --browser),
	// headless, with its DevTools port at CDPEndpoint, instead of only
	// attaching to one started by someone else.
	Browser bool
	// Desktop makes the daemon run an X display, a window manager and the
	// computer-use worker at ComputerUseURL (aiod --desktop).
	Desktop bool
	// PublicURL is the daemon's own base URL as clients reach it, set by
	// a2c up, which serves the browser's DevTools under /cdp there:
	// browser_get_info called with no HTTP request (the sandbox Computer
	// of an office) builds its cdp_url on it. Empty: that cdp_url is the
	// browser's own DevTools address.
	PublicURL string
	// TracerProvider, if set, traces what the sandbox runs for a tool
	// call (aiod.tool, aiod.command, aiod.cell), as a child of the trace
	// context the MCP request carries in params._meta. Nil traces nothing.
	TracerProvider trace.TracerProvider
	// StateDir holds what the daemon keeps between its programs' restarts
	// (the browser's profile). Default $XDG_STATE_HOME/aiod, else
	// ~/.local/state/aiod.
	StateDir string

	// Sandbox, when set, is a sandbox already started by the caller
	// (package aiod/pool, which gives each sandbox its own account and
	// keeps its handle for pause, resume and usage): the daemon runs
	// everything in it instead of starting one from Isolation, and owns
	// it from New on (Shutdown closes it, as does a failed New).
	Sandbox *sandbox.Sandbox
	// Pooled marks one of a pool's many daemons in one process: the
	// capability probe runs on first use rather than at start, no
	// goroutine returns idle memory to the kernel (the pool does), and
	// the daemon's own /metrics holds its routes and tools only (the
	// process's Go and process collectors are the pool's).
	Pooled bool
	// PathPrefix is where the daemon's routes are mounted on its URL
	// (a pool serves a sandbox under /sandboxes/{id}): the URLs the
	// daemon builds (the terminal page's) carry it. Empty: the root.
	PathPrefix string
	// BeforeTool, if set, runs before every MCP tool call, on every path
	// (/mcp and an office's Computer); an error fails the call. A pool
	// resumes a paused sandbox there and counts the call as activity.
	BeforeTool func(ctx context.Context) error
	// OnActivity, if set, is called on each input a terminal takes (its
	// socket's keystrokes never pass the HTTP layer again): a pool's idle
	// clock.
	OnActivity func()
}

// Daemon is the aiod HTTP surface: the envelope, validation, auth and the
// routes of every plane.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	reg     *prometheus.Registry
	reqs    *prometheus.CounterVec
	dur     *prometheus.HistogramVec
	probe   *prober
	sandbox *sandbox.Sandbox // nil: isolation none
	stop    context.CancelFunc
	planes  []plane
	mcp     *mcp.Server
	origins *origin.Policy // the Host and Origin rule of every route
	// programs are what --browser and --desktop run (see launch.go).
	programs programs
	// lastRequest is when the latest request began (Unix ns).
	lastRequest atomic.Int64
}

// plane is one family of routes with state of its own (processes,
// staged files) that the daemon ends at shutdown.
type plane interface {
	Mount(mux *http.ServeMux)
	Close(ctx context.Context) error
}

//go:embed openapi/v2-openapi.json
var openapiV2 []byte

//go:embed openapi/v1-openapi.json
var openapiV1 []byte

// New returns a daemon ready to serve with [Daemon.Handler].
func New(cfg Config) (*Daemon, error) {
	if cfg.Workspace == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			if home, err = os.Getwd(); err != nil {
				return nil, err
			}
		}
		cfg.Workspace = home
	}
	if cfg.CDPEndpoint == "" {
		cfg.CDPEndpoint = "http://127.0.0.1:9222"
	}
	if cfg.BodyIdle <= 0 {
		cfg.BodyIdle = DefaultBodyIdle
	}
	if cfg.Revision == "" {
		cfg.Revision = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	origins, err := origin.New(origin.Config{Listen: cfg.Listen, Hosts: cfg.AllowedHosts, Origins: cfg.AllowedOrigins})
	if err != nil {
		_ = cfg.Sandbox.Close()
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry(), origins: origins}
	d.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total", Help: "HTTP requests by method, route and status."},
		[]string{"method", "route", "status"})
	d.dur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_duration_seconds", Help: "HTTP request durations by route.",
		Buckets: prometheus.DefBuckets}, []string{"route"})
	d.reg.MustRegister(d.reqs, d.dur)
	if !cfg.Pooled {
		d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}

	sb := cfg.Sandbox
	if sb == nil {
		if sb, err = startSandbox(cfg, cfg.Logger); err != nil {
			return nil, err
		}
	}
	d.sandbox = sb
	if sb != nil {
		cfg.DefaultUser = "" // the sandbox account runs everything
		d.cfg.DefaultUser = ""
	}
	if sb != nil {
		d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "aiod_sandbox_oom_kills_total",
			Help: "Processes the kernel killed for reaching the sandbox's memory limit."}, func() float64 { return float64(sb.OOMKills()) }))
	}
	hide := keyHolders(cfg.APIKey, os.Environ())
	cmdPlane := commands.New(commands.Config{Workspace: cfg.Workspace, Logger: cfg.Logger, MaxSessions: cfg.MaxCommandSessions,
		SessionIdle: cfg.CommandSessionIdle, KillGrace: cfg.CommandKillGrace, DefaultUser: cfg.DefaultUser, BashBin: cfg.BashBin,
		HideEnv: hide, Registerer: d.reg, Sandbox: sb})
	filePlane := files.New(files.Config{Workspace: cfg.Workspace, DefaultUser: cfg.DefaultUser, Logger: cfg.Logger, Sandbox: sb})
	codePlane := code.New(code.Config{Workspace: cfg.Workspace, Logger: cfg.Logger, DefaultUser: cfg.DefaultUser,
		Python: cfg.PythonBin, Node: cfg.NodeBin, MaxKernelSessions: cfg.MaxKernels, MaxSessions: cfg.MaxCodeSessions,
		KernelIdle: cfg.KernelIdle, SessionIdle: cfg.CodeIdle, HideEnv: hide, Sandbox: sb})
	if cfg.Desktop || cfg.Pooled {
		// The worker aiod --desktop runs gets a key of its own, never the
		// daemon's (see computer.Config.WorkerKey). A pool's daemon holds
		// the pool's token, which opens every sandbox: whatever answers
		// on its worker's port is the sandbox's own program at best, so
		// it gets a throwaway key too and never a client's credentials.
		d.programs.workerKey = rand.Text()
	}
	compPlane := computer.New(computer.Config{URL: cfg.ComputerUseURL, Dial: d.dial, APIKey: cfg.APIKey,
		WorkerKey: d.programs.workerKey, Logger: cfg.Logger})
	brPlane := browser.New(d.browserConfig())
	d.planes = []plane{
		cmdPlane,
		filePlane,
		transfer.New(transfer.Config{Workspace: cfg.Workspace, DefaultUser: cfg.DefaultUser, Logger: cfg.Logger, Sandbox: sb}),
		watch.New(watch.Config{Workspace: cfg.Workspace, Logger: cfg.Logger, Sandbox: sb}),
		pty.New(pty.Config{Workspace: cfg.Workspace, Logger: cfg.Logger, DefaultUser: cfg.DefaultUser,
			MaxSessions: cfg.MaxTerminals, SessionIdle: cfg.TerminalIdle, Shell: cfg.BashBin, HideEnv: hide, Sandbox: sb,
			PathPrefix: cfg.PathPrefix, OnInput: cfg.OnActivity}),
		codePlane,
		compPlane,
		brPlane,
	}
	ctx, stop := context.WithCancel(context.Background())
	d.stop = stop
	if err := d.startPrograms(ctx); err != nil {
		stop()
		_ = d.sandbox.Close()
		return nil, err
	}
	d.probe = &prober{ttl: 5 * time.Second, cdp: d.cdpEndpointName(), computer: compPlane, browser: brPlane, python: cfg.PythonBin, node: cfg.NodeBin, ctx: ctx,
		iso: isolationCaps{Report: sb.Report(), Machine: sandbox.Probe()}}
	if !cfg.Pooled {
		d.probe.start() // the first read waits for it, later ones never
		go d.trimWhenIdle(ctx, 5*time.Second)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", d.health)
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { OK(w, "pong") })
	mux.HandleFunc("/internal/auth", d.internalAuth)
	mux.HandleFunc("GET /v2/openapi.json", rawJSON(openapiV2))
	mux.HandleFunc("GET /v1/openapi.json", rawJSON(openapiV1))
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v2/sandbox", d.sandboxInfo)
	mux.HandleFunc("GET /v2/sandbox/packages", d.packages)
	mux.HandleFunc("GET /v1/sandbox", d.sandboxInfoV1)
	mux.HandleFunc("GET /v1/sandbox/packages/{lang}", d.packagesV1)
	mux.HandleFunc("GET /v1/capabilities", d.capabilities)
	for _, p := range d.planes {
		p.Mount(mux)
	}
	// The MCP tools drive the planes' own engines: a tool and its route
	// share sessions, processes and files.
	d.mcp = mcp.New(mcp.Config{Commands: cmdPlane.Engine(), Files: filePlane.Engine(), Code: codePlane.Engine(),
		Context: d.sandboxContext, Packages: d.packageList, Browser: newBrowserTools(d, brPlane, compPlane), SkillsPath: cfg.SkillsPath, Upstreams: cfg.MCPServers,
		Origins: d.origins, Version: Version, Logger: cfg.Logger, Registerer: d.reg, TracerProvider: cfg.TracerProvider,
		BeforeCall: cfg.BeforeTool})
	mux.Handle("/mcp", d.mcp)
	d.handler = api.BodyProgress(cfg.BodyIdle, d.instrument(mux, requestID(d.guard(d.auth(limitJSON(api.EnvelopeErrors(apiSurface(cfg.APISurface, mux))))))))
	return d, nil
}

// keyHolders names the variables of environ that hold the API key under
// another name than AIO_API_KEY (a2c up takes it from A2C_TOKEN, or from
// whatever variable a launcher chose): no process the daemon starts
// inherits them, whatever they are called.
func keyHolders(key string, environ []string) []string {
	if key == "" {
		return nil
	}
	var names []string
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); v == key {
			names = append(names, k)
		}
	}
	return names
}

// MCP is the daemon's MCP server: its /mcp endpoint and, through
// [mcp.Server.Connect], the same tools for a Computer in this process.
func (d *Daemon) MCP() *mcp.Server { return d.mcp }

// sandboxContext is what the MCP tool sandbox_get_context reports: the
// version, the workspace (the account's home, as home_dir too) and the
// environment GET /v2/sandbox describes.
func (d *Daemon) sandboxContext(ctx context.Context) (any, error) {
	c := d.probe.get(ctx, false)
	return map[string]any{"version": Version, "home_dir": d.cfg.Workspace, "workspace_dir": d.cfg.Workspace,
		"detail": d.environment(c)}, nil
}

// Handler serves every route.
func (d *Daemon) Handler() http.Handler { return d.handler }

func rawJSON(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}

// healthBody is /health's answer, the one route outside the envelope.
type healthBody struct {
	Status   string `json:"status"`
	Version  string `json:"version"`
	Server   string `json:"server"`
	Revision string `json:"revision"`
}

func (d *Daemon) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(healthBody{Status: "ok", Version: Version, Server: "aiod", Revision: d.cfg.Revision})
}

// environment is what /v2/sandbox and /v1/sandbox say about where the
// daemon runs.
func (d *Daemon) environment(c *Capabilities) map[string]any {
	return map[string]any{
		"system": map[string]any{
			"os": runtime.GOOS, "os_version": osVersion(), "arch": runtime.GOARCH, "user": accountName(),
			"workspace_dir": d.cfg.Workspace, "workspace": d.cfg.Workspace, "timezone": timezone(),
			"occupied_ports": d.occupiedPorts(), "sandbox_user": d.sandboxUser(),
		},
		"runtime": c.runtime,
		"utils":   c.utils,
	}
}

// Isolated reports whether the daemon's processes run in a sandbox.
func (d *Daemon) Isolated() bool { return d.sandbox != nil }

// occupiedPorts are the TCP ports listening where the daemon's commands
// run: the sandbox's network under isolation, else the host's.
func (d *Daemon) occupiedPorts() []string {
	if d.sandbox == nil {
		return listeningPorts("/proc/net")
	}
	// In the view, /proc is the sandbox's: its init (pid 1) is in the
	// sandbox's network namespace, where the daemon's thread is not a
	// process /proc/self could name.
	var ports []string
	if err := d.sandbox.Do(func() error { ports = listeningPorts("/proc/1/net"); return nil }); err != nil {
		return []string{}
	}
	return ports
}

// sandboxUser is the account sandbox processes run as (the published
// SandboxAccount: name, uid and gid as the sandbox sees them, and its
// home, the workspace), or nil without isolation.
func (d *Daemon) sandboxUser() any {
	if d.sandbox == nil {
		return nil
	}
	name, uid, gid := d.sandbox.Account()
	return map[string]any{"name": name, "uid": uid, "gid": gid, "home": d.cfg.Workspace}
}

// sandboxInfo is GET /v2/sandbox: identity, directories, versions and the
// capability snapshot in one answer. It never re-probes on demand.
func (d *Daemon) sandboxInfo(w http.ResponseWriter, r *http.Request) {
	c := d.probe.get(r.Context(), false)
	OK(w, map[string]any{
		"workspace_dir": d.cfg.Workspace,
		"workspace":     d.cfg.Workspace,
		"version":       Version,
		"detail":        d.environment(c),
		"capabilities":  c,
	})
}

// sandboxInfoV1 is GET /v1/sandbox: a text summary as data, the fields at
// the top level beside the envelope's, and home_dir (1.x's name).
func (d *Daemon) sandboxInfoV1(w http.ResponseWriter, r *http.Request) {
	c := d.probe.get(r.Context(), false)
	detail := d.environment(c)
	detail["system"].(map[string]any)["home_dir"] = d.cfg.Workspace
	text := fmt.Sprintf("aiod %s on %s/%s (%s), user %s, workspace %s", Version, runtime.GOOS, runtime.GOARCH, osVersion(), accountName(), d.cfg.Workspace)
	api.JSON(w, http.StatusOK, map[string]any{
		"success": true, "message": api.SuccessMessage, "data": text, "hint": nil,
		"home_dir": d.cfg.Workspace, "workspace_dir": d.cfg.Workspace, "workspace": d.cfg.Workspace,
		"version": Version, "detail": detail,
	})
}

// capabilities is GET /v1/capabilities?refresh=bool.
func (d *Daemon) capabilities(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Refresh *bool `json:"refresh"`
	}
	if !api.Query(w, r, &q) {
		return
	}
	OK(w, d.probe.get(r.Context(), q.Refresh != nil && *q.Refresh))
}

// timezone is the IANA zone name: TZ, /etc/timezone, or the target of
// /etc/localtime; else the abbreviation.
func timezone() string {
	if tz := os.Getenv("TZ"); tz != "" {
		return strings.TrimPrefix(tz, ":")
	}
	if b, err := os.ReadFile("/etc/timezone"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	if t, err := os.Readlink("/etc/localtime"); err == nil {
		if _, z, ok := strings.Cut(t, "zoneinfo/"); ok {
			return z
		}
	}
	z, _ := time.Now().Zone()
	return z
}

// publicRoutes are served without the key: each by itself or as a
// prefix followed by "/" ("/health/x" is public, "/healthcheck" is not).
// "/" is public only by itself.
// "/terminal" is the terminal page and its files (aiod/pty): static,
// holding no secret; its WebSocket asks for the key.
var publicRoutes = []string{"/health", "/v1/ping", "/v1/openapi.json", "/v2/openapi.json", "/internal/auth", "/terminal"}

// publicRoute reports whether a request path, as sent on the wire
// (still percent-encoded; a query or fragment is ignored), names a public
// route. It is the one rule both the middleware and /internal/auth (for a
// gateway's X-Original-URI) apply.
//
// The path is decoded once and cleaned before it is matched, so that
// "/health/../v2/commands" is judged as "/v2/commands". Anything a
// gateway or a backend might read differently from us is never public:
// a path that does not decode, that still holds a percent sign after
// decoding (double encoding such as %252e), a backslash, a semicolon
// (path parameters), a control character, or that is not absolute.
// Refusing such a path only means the key is asked for.
func publicRoute(raw string) bool {
	p, ok := cleanRoute(raw)
	if !ok {
		return false
	}
	if p == "/" {
		return true
	}
	for _, r := range publicRoutes {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// keyOK reports whether r carries the daemon's key (api.HasKey).
func (d *Daemon) keyOK(r *http.Request) bool { return api.HasKey(r, d.cfg.APIKey) }

// auth refuses protected routes without the key (when one is set) with
// 401 and the envelope, before anything else runs (and so before any
// WebSocket upgrade).
func (d *Daemon) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.cfg.APIKey == "" || publicRoute(r.URL.EscapedPath()) || d.keyOK(r) {
			next.ServeHTTP(w, r)
			return
		}
		Fail(w, http.StatusUnauthorized, "Unauthorized", nil)
	})
}

// internalAuth answers a gateway's auth subrequest: 204 when the original
// URI is public, no key is set, or the key is right; 401 otherwise. Never
// a body.
func (d *Daemon) internalAuth(w http.ResponseWriter, r *http.Request) {
	if d.cfg.APIKey == "" || publicRoute(r.Header.Get("X-Original-URI")) || d.keyOK(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusUnauthorized)
}

// requestID takes x-tt-logid or x-request-id (or makes one) and echoes it
// in x-tt-logid.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Tt-Logid")
		if id == "" {
			id = r.Header.Get("X-Request-Id")
		}
		if id == "" || len(id) > 128 {
			id = newRequestID()
		}
		w.Header().Set("X-Tt-Logid", id)
		next.ServeHTTP(w, r)
	})
}

// trimWhenIdle hands the heap the last burst of requests left behind back
// to the kernel once no request has arrived for quiet (janitor.Trimmer).
func (d *Daemon) trimWhenIdle(ctx context.Context, quiet time.Duration) {
	trim := janitor.Trimmer(quiet, d.lastRequest.Load)
	t := time.NewTicker(quiet)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			trim(now)
		}
	}
}

// instrument counts requests by the route pattern that served them.
func (d *Daemon) instrument(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		d.lastRequest.Store(start.UnixNano())
		sw := api.NewStatusWriter(w)
		next.ServeHTTP(sw, r)
		_, route := mux.Handler(r)
		if route == "" || route == "/" {
			route = "unmatched"
		}
		d.reqs.WithLabelValues(r.Method, route, strconv.Itoa(sw.Status)).Inc()
		d.dur.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// Shutdown ends what the daemon runs: every plane's processes and staged
// files, and background probes. It returns the first plane's error.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.stop()
	var first error
	if err := d.mcp.Close(ctx); err != nil {
		first = err
	}
	for _, p := range d.planes {
		if err := p.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	if err := d.stopPrograms(ctx); err != nil && first == nil {
		first = err
	}
	// Last: ending the sandbox kills whatever the planes left in it.
	if err := d.sandbox.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
