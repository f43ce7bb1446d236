package aiod

// This file is the aiod command line: subcommands, flag parsing and the
// wiring of the daemon. cmd/aiod only calls [Main].

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/desktop"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/internal/origin"
	"github.com/a2c-smcp/a2c-go/internal/redact"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// Main runs aiod with args (without the program name) and returns the
// exit code: 0 on success, 2 for a usage error (bad flag, bad
// environment value, unknown command), 1 for anything else (and for a
// doctor that found a required plane unusable).
func Main(args []string, stdout, stderr io.Writer) int {
	if code, ok := SandboxInit(args); ok {
		return code
	}
	// Not root and asked to isolate: run again in a user namespace of
	// our own, where the sandbox can be made (start, and doctor, which
	// checks it).
	switch {
	case len(args) == 0 || strings.HasPrefix(args[0], "-") && !helpOrVersion(args[0]):
		if code, ok := ReexecForIsolation(append([]string{os.Args[0]}, args...), args, sandbox.None); ok {
			return code
		}
	case args[0] == "start" || args[0] == "doctor":
		if code, ok := ReexecForIsolation(append([]string{os.Args[0]}, args...), args[1:], sandbox.None); ok {
			return code
		}
	case extra[args[0]].namespaces && !helpArg(args[1:]):
		if code, ok := sandbox.ReexecUnprivileged(append([]string{os.Args[0]}, args...)); ok {
			return code
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, args, stdout, stderr)
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		if ue != "" {
			fmt.Fprintf(stderr, "aiod: %s\n", oneLine(string(ue)))
		}
		return 2
	case errors.As(err, &ee):
		return int(ee)
	}
	fmt.Fprintf(stderr, "aiod: %s\n", oneLine(err.Error()))
	return 1
}

// commands are aiod's subcommands with their one-line summaries, in the
// order --help lists them.
var subcommands = [][2]string{
	{"start", "serve the API (the default when no command is given)"},
	{"version", "print the version line: aio-daemon <version>+<revision>"},
	{"doctor", "check what each plane needs on this machine; exit 1 when a required plane is unusable"},
	{"print-openapi", "print an embedded OpenAPI document: v2 (default) or v1"},
	{"computer-use", "serve the computer-use worker on the X display in DISPLAY (at AIO_COMPUTER_USE_LISTEN)"},
	{"help", "print this help"},
}

// Command is a subcommand a binary adds to aiod's (see [AddCommand]).
type Command struct {
	// Name is the command's word; Summary its line in aiod --help.
	Name, Summary string
	// Namespaces: the command makes sandboxes, so an unprivileged run is
	// started again in a user namespace of its own, as start's is.
	Namespaces bool
	// Run runs it with the arguments after its name. A [UsageError]
	// exits 2 with its text; another error exits 1.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

type extraCommand struct {
	namespaces bool
	run        func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// extra are the commands added by AddCommand.
var extra = map[string]extraCommand{}

// AddCommand adds a subcommand to [Main]: cmd/aiod adds "pool" (package
// aiod/pool, which builds on this package and so cannot be imported by
// it). Call it before Main, from main.
func AddCommand(c Command) {
	extra[c.Name] = extraCommand{namespaces: c.Namespaces, run: c.Run}
	subcommands = append(subcommands[:len(subcommands)-1], [2]string{c.Name, c.Summary}, subcommands[len(subcommands)-1])
}

// UsageError is a bad command line: aiod exits 2 with its text on one
// line.
func UsageError(msg string) error { return usageError(msg) }

// helpArg reports whether args ask for help.
func helpArg(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}

// dispatch runs the subcommand args name; no name (or a flag first) is
// start.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		switch {
		case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
			usage(stdout)
			return nil
		case len(args) > 0 && (args[0] == "-version" || args[0] == "--version"):
			return runVersion(args[1:], stdout)
		}
		return run(ctx, args, stdout, stderr)
	}
	name, rest := args[0], args[1:]
	switch name {
	case mcphost.SupervisorArg:
		// This binary holds the process tree of a stdio MCP server of
		// --config (see OfficeOptions.Supervisor); not a user command.
		if code := mcphost.Supervise(rest); code != 0 {
			return exitError(code)
		}
		return nil
	case "start":
		return run(ctx, rest, stdout, stderr)
	case "version":
		return runVersion(rest, stdout)
	case "print-openapi":
		return runPrintOpenAPI(rest, stdout)
	case "doctor":
		return runDoctor(ctx, rest, stdout)
	case "computer-use":
		return desktop.Run(ctx, rest, os.Getenv, stdout, stderr)
	case "help":
		usage(stdout)
		return nil
	}
	if c, ok := extra[name]; ok {
		return c.run(ctx, rest, stdout, stderr)
	}
	names := make([]string, 0, len(subcommands))
	for _, c := range subcommands {
		if c[0] != "help" {
			names = append(names, c[0])
		}
	}
	return usageError(fmt.Sprintf("unknown command %q (commands: %s; see aiod --help)", name, strings.Join(names, ", ")))
}

// usage is `aiod --help`: the subcommands, then the flags of start.
func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: aiod [command] [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "aiod is the sandbox daemon: the aiod HTTP API (v2, the v1 compatibility routes) and /mcp on one port.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-14s %s\n", c[0], c[1])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags of start (aiod <command> --help for the others):")
	fs, _ := startFlagSet()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// ReadHeaderTimeout bounds how long a client may take to send a
// request's headers; the body is bounded by progress instead (see
// [Config.BodyIdle]).
const ReadHeaderTimeout = 10 * time.Second

// newServer is the daemon's HTTP server. It has no ReadTimeout or
// WriteTimeout, which would cut long uploads, downloads, streams and
// WebSockets by their total time.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: 120 * time.Second}
}

// usageError is a bad command line or environment: exit code 2 with its
// text on one line.
type usageError string

func (e usageError) Error() string { return string(e) }

// exitError ends aiod with its code and no further message (the command
// has said why).
type exitError int

func (e exitError) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// oneLine keeps a reason on the one line the command line promises.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// buildRevision, when set at link time
// (-ldflags "-X github.com/a2c-smcp/a2c-go/aiod.buildRevision=REV"),
// names the build instead of the VCS stamp (for builds with
// -buildvcs=false).
var buildRevision string

// revision names the build: buildRevision, else the VCS revision Go
// stamped into the binary (seven digits, "-dirty" for a modified tree),
// else "dev".
func revision() string {
	if buildRevision != "" {
		return buildRevision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	rev = rev[:min(7, len(rev))]
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// versionLine is what `aiod version` prints, in aiod's published form
// "aio-daemon <version>+<commit>".
func versionLine() string { return "aio-daemon " + Version + "+" + revision() }

// subFlags is the flag set of a subcommand with no flags of its own but
// --help.
func subFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("aiod "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseSub parses a subcommand's flags; help is true when --help was
// asked (its text is then written).
func parseSub(fs *flag.FlagSet, args []string, stdout io.Writer, synopsis string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return true, nil
		}
		return false, usageError(fs.Name() + ": " + err.Error())
	}
	return false, nil
}

func runVersion(args []string, stdout io.Writer) error {
	fs := subFlags("version")
	if help, err := parseSub(fs, args, stdout, "Usage: aiod version\n\nPrints aio-daemon <version>+<revision>."); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("version takes no argument, got " + strconv.Quote(fs.Arg(0)))
	}
	_, err := fmt.Fprintln(stdout, versionLine())
	return err
}

func runPrintOpenAPI(args []string, stdout io.Writer) error {
	fs := subFlags("print-openapi")
	if help, err := parseSub(fs, args, stdout, "Usage: aiod print-openapi [v2|v1]\n\nWrites the OpenAPI document the daemon serves at /v2/openapi.json (default) or /v1/openapi.json."); help || err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError("print-openapi takes one argument, v1 or v2")
	}
	doc := openapiV2
	if fs.NArg() == 1 {
		switch fs.Arg(0) {
		case "v2":
		case "v1":
			doc = openapiV1
		default:
			return usageError(fmt.Sprintf("print-openapi: unknown document %q (want v1 or v2)", fs.Arg(0)))
		}
	}
	_, err := stdout.Write(doc)
	return err
}

// startOptions is a parsed `aiod start` command line over the
// environment.
type startOptions struct {
	cfg   Config
	host  string
	port  int
	level slog.Level
	// office is set by --office: the office the daemon joins as a
	// Computer besides serving HTTP.
	office *OfficeOptions
}

// startValues are the flags of start, as parsed.
type startValues struct {
	host, workspace, apiKey, defaultUser, surface, mcpServers, logLevel *string
	port                                                                *int
	office, server, name, token, approve, config, bundleID              *string
	protocolVersion, landingRoot, skills, settingsFile, mcpConfig       *string
	manage                                                              *bool
	stateDir                                                            *string
	browser, desktop                                                    *bool
	isolation                                                           *IsolationFlags
	origins                                                             *origin.Flags
}

// officeFlags are the flags that only mean something with --office.
var officeFlags = []string{"server", "name", "token", "approve", "config", "bundle-id", "protocol-version", "landing-root", "skills",
	"manage", "settings", "mcp-config"}

// startFlagSet declares the flags of start. Defaults shown are the
// built-in ones; the environment variable named in each usage, when
// set, replaces it, and a flag given wins over both.
func startFlagSet() (*flag.FlagSet, *startValues) {
	fs := flag.NewFlagSet("aiod start", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	v := &startValues{
		host:            fs.String("host", "127.0.0.1", "address to listen on (env AIO_HOST)"),
		port:            fs.Int("port", 18091, "port to listen on, 0 picks a free one (env AIO_PORT)"),
		workspace:       fs.String("workspace", "", "directory commands start in and relative paths resolve against (default the account's home)"),
		apiKey:          fs.String("api-key", "", "API key required on protected routes (env AIO_API_KEY or SANDBOX_API_KEY)"),
		defaultUser:     fs.String("default-user", "", "account commands, terminals and code run as when a request names none (env AIO_DEFAULT_USER)"),
		surface:         fs.String("api-surface", SurfaceFull, "full (v1 and v2) or v2 (only /v2, /mcp, /metrics and the public routes) (env AIO_API_SURFACE)"),
		mcpServers:      fs.String("mcp-servers", "", `loopback MCP servers whose tools /mcp lists too, as JSON {"name": {"url": "http://127.0.0.1:PORT/mcp", "prefix": "p"}} (env EXTRA_MCP_SERVERS)`),
		logLevel:        fs.String("log-level", "info", "debug, info, warn or error"),
		office:          fs.String("office", "", "also join this office as a Computer serving the sandbox's tools (needs --server)"),
		server:          fs.String("server", "", "with --office: the A2C server URL (http or https)"),
		name:            fs.String("name", "", `with --office: this Computer's name in the office (default the host name, else "aiod")`),
		token:           fs.String("token", "", "with --office: credential presented to the server (default env A2C_TOKEN)"),
		approve:         fs.String("approve", "all", "with --office: tools that need confirmation: all (run them) or none (refuse them)"),
		config:          fs.String("config", "", "with --office: a Computer configuration file whose MCP servers are served beside the sandbox's tools"),
		bundleID:        fs.String("bundle-id", "sandbox", "with --office: the bundle id that names the sandbox's tools"),
		protocolVersion: fs.String("protocol-version", smcp.ProtocolVersion, "with --office: the A2C-SMCP version to speak ("+strings.Join(smcp.SupportedVersions(), ", ")+")"),
		landingRoot:     fs.String("landing-root", "", `with --office: where client:put_blob uploads land (default <workspace>/uploads; "-" refuses uploads)`),
		skills:          fs.String("skills", "", "with --office: a folder of skill packages served on the SKILL channel (default AIO_SKILLS_PATH)"),
		manage:          fs.Bool("manage", true, "with --office: also serve the Computer management plane (the mcp.json servers and enabled plugins of the user, project, local and policy settings) beside the sandbox's tools"),
		settingsFile:    fs.String("settings", "", "with --office: the management plane's flag-scope settings.json"),
		mcpConfig:       fs.String("mcp-config", "", "with --office: the management plane's flag-scope mcp.json"),
		browser:         fs.Bool("browser", false, "run Chromium (headless) with its DevTools port at BROWSER_REMOTE_DEBUGGING_HOST:PORT, restart it if it dies, end it on shutdown"),
		desktop:         fs.Bool("desktop", false, "run an X display (Xvfb), a window manager and the computer-use worker at AIO_COMPUTER_USE_URL's port"),
		stateDir:        fs.String("state-dir", "", "folder for what the daemon keeps, such as the browser's profile (env AIO_STATE_DIR; default $XDG_STATE_HOME/aiod or ~/.local/state/aiod)"),
	}
	v.isolation = AddIsolationFlags(fs, "none")
	v.origins = origin.AddFlags(fs, EnvAllowedHosts, EnvAllowedOrigins)
	return fs, v
}

// helpOrVersion reports whether a first argument asks for help or the
// version, which need no sandbox.
func helpOrVersion(a string) bool {
	switch strings.TrimLeft(a, "-") {
	case "h", "help", "version":
		return true
	}
	return false
}

// SandboxInit runs the sandbox's init when args (a command line without
// the program name) ask for it: every binary that may start a sandbox
// (aiod, a2c) is also its init, and must call this first in main.
func SandboxInit(args []string) (code int, ok bool) {
	if len(args) > 0 && args[0] == sandbox.InitArg {
		return sandbox.Init(args[1:]), true
	}
	return 0, false
}

// parseStart turns the command line of start and the environment
// (getenv) into the daemon's options. A flag given wins over its
// variable; a bad flag or variable is a usageError naming it.
func parseStart(args []string, getenv func(string) string) (startOptions, error) {
	fs, v := startFlagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return startOptions{}, err
		}
		return startOptions{}, usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return startOptions{}, usageError("unexpected argument " + strconv.Quote(fs.Arg(0)))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var o startOptions
	if err := o.level.UnmarshalText([]byte(*v.logLevel)); err != nil {
		return o, usageError("--log-level must be debug, info, warn or error, got " + strconv.Quote(*v.logLevel))
	}
	cfg, err := configFromEnv(getenv)
	if err != nil {
		return o, usageError(err.Error())
	}
	if o.host, o.port, err = listenFromEnv(getenv); err != nil {
		return o, usageError(err.Error())
	}
	if set["host"] {
		o.host = *v.host
	}
	if set["port"] {
		if *v.port < 0 || *v.port > 65535 {
			return o, usageError(fmt.Sprintf("--port must be a port number (0-65535), got %d", *v.port))
		}
		o.port = *v.port
	}
	cfg.Workspace = *v.workspace
	if set["api-key"] {
		cfg.APIKey = *v.apiKey
	}
	if set["default-user"] {
		cfg.DefaultUser = *v.defaultUser
	}
	if err := v.isolation.Apply(set, &cfg.Isolation); err != nil {
		return o, usageError(err.Error())
	}
	if set["api-surface"] {
		if cfg.APISurface, err = checkSurface("--api-surface", *v.surface); err != nil || *v.surface == "" {
			return o, usageError(fmt.Sprintf("--api-surface must be full or v2, got %q", *v.surface))
		}
	}
	if set["mcp-servers"] {
		if cfg.MCPServers, err = checkMCPServers("--mcp-servers", *v.mcpServers); err != nil {
			return o, usageError(err.Error())
		}
	}
	if set["allowed-host"] {
		cfg.AllowedHosts = v.origins.Hosts.Values()
	}
	if set["allowed-origin"] {
		cfg.AllowedOrigins = v.origins.Origins.Values()
	}
	cfg.Listen = net.JoinHostPort(o.host, strconv.Itoa(o.port))
	cfg.Browser, cfg.Desktop = *v.browser, *v.desktop
	if set["state-dir"] {
		cfg.StateDir = *v.stateDir
	}
	cfg.Revision = revision()
	o.cfg = cfg
	if o.office, err = officeOptions(v, set, getenv); err != nil {
		return o, err
	}
	return o, nil
}

// officeOptions checks the office flags: nil without --office.
func officeOptions(v *startValues, set map[string]bool, getenv func(string) string) (*OfficeOptions, error) {
	if !set["office"] {
		for _, f := range officeFlags {
			if set[f] {
				return nil, usageError("--" + f + " needs --office")
			}
		}
		return nil, nil
	}
	if strings.TrimSpace(*v.office) == "" {
		return nil, usageError("--office must name an office")
	}
	if *v.server == "" {
		return nil, usageError("--office needs --server URL")
	}
	u, err := url.Parse(*v.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError(fmt.Sprintf("--server must be an http or https URL, got %q", *v.server))
	}
	if *v.approve != "all" && *v.approve != "none" {
		return nil, usageError(fmt.Sprintf("--approve must be all or none, got %q", *v.approve))
	}
	if *v.bundleID == "" {
		return nil, usageError("--bundle-id must not be empty")
	}
	if *v.config != "" {
		if fi, err := os.Stat(*v.config); err != nil || fi.IsDir() {
			return nil, usageError(fmt.Sprintf("--config %s: not a readable file", *v.config))
		}
	}
	if _, err := smcp.NewProfile(*v.protocolVersion); err != nil {
		return nil, usageError("--protocol-version: " + strings.TrimPrefix(err.Error(), "smcp: "))
	}
	o := &OfficeOptions{Server: *v.server, Office: *v.office, Name: *v.name, Token: *v.token,
		Approve: *v.approve, ConfigFile: *v.config, BundleID: *v.bundleID,
		ProtocolVersion: *v.protocolVersion, LandingRoot: *v.landingRoot, SkillsDir: *v.skills, MCPConfig: *v.mcpConfig}
	if !*v.manage && (*v.settingsFile != "" || *v.mcpConfig != "") {
		return nil, usageError("--settings and --mcp-config need --manage")
	}
	if *v.manage {
		p, err := settings.CurrentPaths(getenv, *v.settingsFile)
		if err != nil {
			return nil, usageError("--manage: " + err.Error())
		}
		if *v.mcpConfig != "" {
			if err := settings.CheckMCPPath(*v.mcpConfig); err != nil {
				return nil, usageError(err.Error())
			}
		}
		o.Settings = &p
	}
	if !set["token"] {
		o.Token = getenv("A2C_TOKEN")
	}
	if exe, err := os.Executable(); err == nil {
		o.Supervisor = exe // runs mcphost.Supervise when called with its argument
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseStart(args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "Usage: aiod [start] [flags]")
		fs, _ := startFlagSet()
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.level}))
	if err := hideSelf(); err != nil {
		log.Warn("aiod: cannot make the process non-dumpable; commands running as its account can read its environment", "error", err.Error())
	}
	o.cfg.Logger = log
	tr, err := tracing.New(ctx, tracing.Options{Service: "aiod"})
	if err != nil {
		return usageError(err.Error())
	}
	defer func() {
		if err := tr.Close(); err != nil {
			log.Warn("aiod: flushing spans at exit", "err", err)
		}
	}()
	o.cfg.TracerProvider = tr.Provider
	d, err := New(o.cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		_ = d.Shutdown(context.Background())
		return fmt.Errorf("listen: %w", err)
	}
	log.Log(ctx, max(slog.LevelInfo, o.level), "aiod listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"version", Version, "revision", o.cfg.Revision, "auth", o.cfg.APIKey != "", "api_surface", o.cfg.APISurface)
	hs := newServer(d.Handler())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()

	// The office connection is owned here: it ends with officeCtx, and
	// run waits for it before the planes close.
	officeCtx, cancelOffice := context.WithCancel(ctx)
	defer cancelOffice()
	var officeDone chan error
	if o.office != nil {
		officeDone = make(chan error, 1)
		log.Info("joining office", "server", redact.URL(o.office.Server), "office", o.office.Office, "name", cmp.Or(o.office.Name, "(host name)"),
			"approve", o.office.Approve, "bundle_id", o.office.BundleID, "config", o.office.ConfigFile, "token", o.office.Token != "")
		go func(oo OfficeOptions) { officeDone <- d.JoinOffice(officeCtx, oo) }(*o.office)
	}
	redact := func(s string) string {
		for _, secret := range []string{o.cfg.APIKey, officeToken(o.office)} {
			if secret != "" {
				s = strings.ReplaceAll(s, secret, "[redacted]")
			}
		}
		return s
	}
	var result error
	officeRunning := officeDone != nil
wait:
	for {
		select {
		case err := <-errc:
			result = fmt.Errorf("serve: %w", err)
			break wait
		case <-ctx.Done():
			break wait
		case err := <-officeDone:
			officeDone, officeRunning = nil, false
			if err == nil {
				log.Info("left the office; serving HTTP")
				continue
			}
			msg := redact(err.Error())
			var ue usageError
			if errors.As(err, &ue) {
				log.Error("office: cannot join; stopping", "error", msg)
				result = usageError("office: " + msg)
				break wait
			}
			log.Error("office: connection ended; serving HTTP without it", "error", msg)
		}
	}
	cancelOffice()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if officeRunning {
		select {
		case <-officeDone:
		case <-sctx.Done():
			log.Warn("office: did not end within the shutdown bound")
		}
	}
	_ = d.Shutdown(sctx)
	_ = hs.Shutdown(sctx)
	log.Info("stopped")
	return result
}

func officeToken(o *OfficeOptions) string {
	if o == nil {
		return ""
	}
	return o.Token
}
