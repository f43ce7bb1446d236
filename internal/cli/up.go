package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/pool"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/server/console"
	"github.com/a2c-smcp/a2c-go/server/gateway"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// upStopTimeout bounds each step of a2c up's shutdown: the Computer's
// leave, the sandbox's processes, the hub's in-flight calls.
const upStopTimeout = 10 * time.Second

// runUp is "a2c up": the signalling hub, the sandbox daemon's HTTP API and
// the sandbox as a Computer in one office of that hub, in this process,
// with no configuration.
func runUp(ctx context.Context, e *env, args []string) (err error) {
	start := time.Now()
	fs := newFlags(e, "up")
	listen := fs.String("listen", "127.0.0.1:8000", "the hub's address, HOST:PORT (port 0 picks a free one)")
	sandboxListen := fs.String("sandbox-listen", "127.0.0.1:18091", "the sandbox HTTP API's address, HOST:PORT (port 0 picks a free one)")
	workspace := fs.String("workspace", "./workspace", "the sandbox's working directory (created if missing)")
	cfgPath := fs.String("config", "", "MCP server configuration file (JSON or YAML) whose servers the Computer serves beside the sandbox")
	token := fs.String("token", "", "shared secret for the hub and the sandbox API (default $A2C_TOKEN)")
	office := fs.String("office", "default", "the office the sandbox Computer joins")
	name := fs.String("name", "sandbox", "the sandbox Computer's name in the office")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	manage := fs.Bool("manage", true, "also serve the Computer management plane (the mcp.json servers and enabled plugins of the user, project, local and policy settings) beside the sandbox's tools")
	flagSettings := fs.String("settings", "", "the management plane's flag-scope settings.json")
	mcpConfig := fs.String("mcp-config", "", "the management plane's flag-scope mcp.json")
	cpuProfile := fs.String("cpu-profile", "", "write a Go CPU profile to this file until shutdown (for benchmarks)")
	version := addVersionFlag(fs)
	landing := fs.String("landing-root", "", `folder where uploads (a2c put) land (default <workspace>/uploads; "-" refuses uploads)`)
	skillsDir := fs.String("skills", defaultSkillsDir(), "folder of the user's skill packages served on the SKILL channel (\"\" for none)")
	browser := fs.Bool("browser", false, "run Chromium (headless; headful on the display with --desktop) for the sandbox's browser plane, and serve its DevTools endpoint at /cdp/* on the sandbox API's address (cdp_url in the banner; the token is checked)")
	desktop := fs.Bool("desktop", false, "run an X display (Xvfb), a window manager and the computer-use worker for the sandbox's computer-use plane")
	officeIdle := fs.Duration("office-idle", 10*time.Minute, "release an office's own sandbox (every office but --office gets one when an Agent first joins it) after the office has had no Agent for this long")
	officeOnTimeout := fs.String("office-on-timeout", pool.OnTimeoutKill, "what releasing an office's sandbox does: kill or pause")
	var machine pool.Config // --machine's part of the pool's config
	fs.Var(pool.MachineFlag(&machine), "machine", "let creates of the in-process pool ask for whole machines (aiod pool --machine): root inside, a writable system on layers, snapshots and forks; --machine=all: each office's sandbox is one; needs root")
	egress := fs.Bool("egress", false, "let sandboxes of the in-process pool ask for network egress (a routed, filtered way out; aiod pool --egress); needs root and nftables, and turns the host's IPv4 forwarding on")
	isolation := aiod.AddIsolationFlags(fs, "namespaces")
	allowed := addOriginFlags(fs)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	if err := positiveFlags(fs, "office-idle"); err != nil {
		return err
	}
	if *officeOnTimeout != pool.OnTimeoutKill && *officeOnTimeout != pool.OnTimeoutPause {
		return usageError{"bad --office-on-timeout " + *officeOnTimeout + " (kill or pause)"}
	}
	// The management plane's files are checked before anything starts.
	var managed *settings.Paths
	if !*manage && (*flagSettings != "" || *mcpConfig != "") {
		return usageError{"--settings and --mcp-config need --manage"}
	}
	if *manage {
		p, err := settings.CurrentPaths(os.Getenv, *flagSettings)
		if err != nil {
			return usageError{err.Error()}
		}
		if *mcpConfig != "" {
			if err := settings.CheckMCPPath(*mcpConfig); err != nil {
				return usageError{err.Error()}
			}
		}
		managed = &p
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{"bad --log-level " + *logLevel}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	secret, tokenFromEnv := *token, false
	if secret == "" {
		secret, tokenFromEnv = os.Getenv("A2C_TOKEN"), true
	}

	// Everything that can be wrong with the command line is found before
	// anything listens or starts.
	dcfg, err := aiod.ConfigFromEnv()
	if err != nil {
		return fmt.Errorf("sandbox environment: %w", err)
	}
	// The sandbox is isolated unless the command line or AIO_ISOLATION
	// says otherwise; left to that default, a machine that cannot isolate
	// (not root) runs without, with a warning.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if dcfg.Isolation.Mode == "" && !set["isolation"] {
		dcfg.Isolation.Mode, dcfg.Isolation.Fallback = "namespaces", true
	}
	if err := isolation.Apply(set, &dcfg.Isolation); err != nil {
		return usageError{err.Error()}
	}
	allowHosts, allowOrigins, err := originLists(allowed)
	if err != nil {
		return err
	}
	if *cfgPath != "" {
		if _, err := config.Load(*cfgPath); err != nil {
			return err
		}
	}
	ws, err := filepath.Abs(*workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	undoWorkspace, err := makeWorkspace(ws)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	// A failed start removes the folders it made (never one that was
	// there before, nor anything put in them).
	defer func() {
		if err != nil {
			undoWorkspace()
		}
	}()
	if err := hideSelf(); err != nil {
		log.Warn("cannot make the process non-dumpable; commands running as its account can read its environment", "err", err)
	}
	stopProfile, err := cpuProfileTo(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	hubLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("hub: listen: %w", err)
	}
	defer hubLn.Close()
	boxLn, err := net.Listen("tcp", *sandboxListen)
	if err != nil {
		return fmt.Errorf("sandbox API: listen: %w", err)
	}
	defer boxLn.Close()

	// One process, one provider: the hub's, the Computer's and the
	// sandbox's spans all land in rec, which the console shows; OTEL_*
	// may add export.
	rec := tracing.NewRecorder(0, 0)
	tr, stopTracing, err := startTracing(ctx, "a2c-up", true, rec, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The hub and the sandbox API answer to the same --allowed-host and
	// --allowed-origin, each besides its own listen address.
	hubOrigins, err := listenerPolicy(hubLn.Addr().String(), allowHosts, allowOrigins)
	if err != nil {
		return err
	}
	dcfg.Workspace, dcfg.APIKey, dcfg.Logger = ws, secret, log
	dcfg.TracerProvider = tr.Provider
	dcfg.Listen = boxLn.Addr().String()
	dcfg.AllowedHosts, dcfg.AllowedOrigins = append(dcfg.AllowedHosts, allowHosts...), append(dcfg.AllowedOrigins, allowOrigins...)
	dcfg.Browser, dcfg.Desktop = *browser, *desktop
	if *browser {
		// The office's browser_get_info names the /cdp proxy below, as
		// the banner does.
		dcfg.PublicURL = "http://" + localURL(boxLn.Addr().String())
	}
	poolBase := dcfg // the per-office sandboxes' daemons: the environment's settings, no browser or desktop
	d, err := aiod.New(dcfg)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}

	hubURL, boxURL := "http://"+hubLn.Addr().String(), "http://"+boxLn.Addr().String()
	// The Computer dials the hub on loopback when it listens on every
	// address (0.0.0.0 or ::).
	dial := "http://" + localURL(hubLn.Addr().String())
	if secret == "" && (unspecified(hubLn.Addr()) || unspecified(boxLn.Addr())) {
		log.Warn("listening on every address without a token: anyone who can reach this machine can run commands in the sandbox; set --token or $A2C_TOKEN")
	}
	if secret == "" && *cfgPath != "" && d.Isolated() && dcfg.Isolation.Network != "none" {
		// The sandbox shares the host's network: its processes can join
		// the hub as an Agent and call the tools of the configuration's
		// servers, which run on the host, outside the sandbox.
		log.Warn("the sandbox can reach the hub on this machine's network and call the tools of --config's MCP servers, which run outside the sandbox; set --token (or $A2C_TOKEN), or --network none")
	}
	banner := upBanner{hubAddr: hubLn.Addr().String(), server: dial, boxAddr: boxLn.Addr().String(), office: *office, name: *name,
		workspace: ws, config: *cfgPath, auth: secret != "", token: secret, tokenFromEnv: tokenFromEnv, display: d.Display()}
	pcfg := upPoolConfig(poolBase, dial, secret, boxLn.Addr().String(), dcfg.AllowedHosts, dcfg.AllowedOrigins, log, d.Handler())
	pcfg.Egress, pcfg.Machine, pcfg.MachineAll = *egress, machine.Machine, machine.MachineAll
	offices, err := startUpPool(pcfg, d.Isolated(), log)
	if err != nil {
		_ = d.Shutdown(context.Background())
		return err
	}
	defer offices.Close()
	boxHandler := offices.handler(d.Handler())
	scfg := server.Config{Logger: log, Version: *version, TracerProvider: tr.Provider, Recorder: rec, Calls: true, Origins: hubOrigins}
	if secret != "" {
		scfg.Auth = server.TokenAuth(secret, "x-api-key")
	}
	if offices != nil {
		// Every office but the default one gets a sandbox of its own when
		// an Agent first joins it (the join is answered once its Computer
		// is in), released --office-idle after the last Agent left.
		boxes := newOfficeSandboxes(localPool{offices.Pool}, *officeOnTimeout, log)
		defer boxes.Close()
		scfg.Provisioner, scfg.OfficeIdle = &upOffices{officeSandboxes: boxes, office: *office, name: *name}, *officeIdle
	}
	hub, err := server.New(scfg)
	if err != nil {
		_ = d.Shutdown(context.Background())
		return err
	}
	gw, err := gateway.New(gateway.Config{Hub: hub, Logger: log, Version: aiod.Version, DefaultOffice: *office})
	if err != nil {
		_ = d.Shutdown(context.Background())
		return err
	}
	hub.HandleMCP(gw)
	con, err := console.New(console.Config{Server: hub, Token: secret, Logger: log, Pool: offices.console(),
		Sandboxes: []console.Sandbox{{Name: *name, URL: "http://" + localURL(boxLn.Addr().String()), Token: secret}}})
	if err != nil {
		_ = d.Shutdown(context.Background())
		return err
	}
	defer con.Close()
	// aiod serves /cdp itself, behind the token (its API key).
	banner.cdpPath = d.CDPBrowserPath()
	printUpBanner(e, banner)
	fmt.Fprintf(e.stderr, "a2c up: console url=http://%s/\n", localURL(hubLn.Addr().String()))
	fmt.Fprintf(e.stderr, "a2c up: mcp url=http://%s/mcp\n", localURL(hubLn.Addr().String()))

	hubSrv := &http.Server{Handler: hub.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	// The console's live streams and proxied requests end as the hub's
	// HTTP server starts its shutdown, not at its timeout.
	hubSrv.RegisterOnShutdown(con.Close)
	boxSrv := &http.Server{Handler: boxHandler, ReadHeaderTimeout: aiod.ReadHeaderTimeout, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- fmt.Errorf("hub: %w", hubSrv.Serve(hubLn)) }()
	go func() { errc <- fmt.Errorf("sandbox API: %w", boxSrv.Serve(boxLn)) }()

	cctx, stopComputer := context.WithCancel(ctx)
	defer stopComputer()
	var once sync.Once
	joined := func() {
		once.Do(func() {
			fmt.Fprintf(e.stderr, "a2c up: ready in %s: Computer %q joined office %q\n", time.Since(start).Round(time.Millisecond), *name, *office)
		})
	}
	computerDone := make(chan error, 1)
	go func() {
		computerDone <- d.JoinOffice(cctx, aiod.OfficeOptions{Server: dial, Office: *office, Name: *name, Token: secret,
			ConfigFile: *cfgPath, Supervisor: supervisor(), OnJoined: joined,
			ProtocolVersion: *version, LandingRoot: *landing, SkillsDir: *skillsDir, Settings: managed, MCPConfig: *mcpConfig})
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	case runErr = <-computerDone:
		computerDone <- nil
		if runErr == nil {
			runErr = errors.New("the sandbox Computer stopped")
		}
		runErr = fmt.Errorf("sandbox Computer: %w", runErr)
	}
	log.Info("stopping", "hub", hubURL, "sandbox", boxURL)
	// The gateway's calls first, then the Computer (it cancels its calls
	// and leaves the office), then the sandbox's processes, then the two
	// HTTP servers.
	gw.Close()
	stopComputer()
	select {
	case <-computerDone:
	case <-time.After(upStopTimeout):
		log.Warn("the sandbox Computer did not stop in time")
	}
	sctx, cancel := context.WithTimeout(context.Background(), upStopTimeout)
	defer cancel()
	if err := d.Shutdown(sctx); err != nil {
		log.Warn("sandbox shutdown", "err", err)
	}
	if err := offices.Close(); err != nil {
		log.Warn("office sandboxes shutdown", "err", err)
	}
	if err := hub.Shutdown(sctx); err != nil {
		log.Warn("hub shutdown", "err", err)
	}
	_ = hubSrv.Shutdown(sctx)
	_ = boxSrv.Shutdown(sctx)
	if runErr != nil {
		return runErr
	}
	log.Info("stopped")
	return nil
}

// upBanner is what a2c up's first lines say.
type upBanner struct {
	// server is the hub's URL for clients on this machine.
	server                                            string
	hubAddr, boxAddr, office, name, workspace, config string
	auth, tokenFromEnv                                bool
	token                                             string
	// cdpPath is the browser's DevTools WebSocket path
	// (/devtools/browser/<uuid>) under --browser, display the X display
	// under --desktop.
	cdpPath, display string
}

// printUpBanner writes a2c up's first lines to stderr: where the hub and
// the sandbox API listen (as addr= and sandbox_addr=, for scripts), the
// office and workspace, and a command to try with the flags it needs.
func printUpBanner(e *env, b upBanner) {
	w := e.stderr
	fmt.Fprintf(w, "a2c up: hub listening addr=%s url=http://%s office=%s auth=%t\n", b.hubAddr, localURL(b.hubAddr), b.office, b.auth)
	fmt.Fprintf(w, "a2c up: sandbox API listening sandbox_addr=%s url=http://%s workspace=%s\n", b.boxAddr, localURL(b.boxAddr), b.workspace)
	cfg := "none"
	if b.config != "" {
		cfg = b.config
	}
	fmt.Fprintf(w, "a2c up: Computer name=%s office=%s tools=%s__* config=%s\n", b.name, b.office, aiod.DefaultSandboxBundleID, cfg)
	if b.cdpPath != "" {
		// The token goes into the URL only when it was given on the
		// command line (the user has it on screen already), as --token
		// in the try line.
		q := ""
		if b.auth && !b.tokenFromEnv {
			q = "?api_key=" + url.QueryEscape(b.token)
		}
		fmt.Fprintf(w, "a2c up: browser cdp_url=ws://%s%s%s%s auth=%t\n", localURL(b.boxAddr), browser.CDPPrefix, b.cdpPath, q, b.auth)
	}
	if b.display != "" {
		fmt.Fprintf(w, "a2c up: desktop display=%s\n", b.display)
	}
	var flags []string
	if b.server != "http://127.0.0.1:8000" {
		flags = append(flags, "--server "+b.server)
	}
	if b.office != "default" {
		flags = append(flags, "--office "+shellQuote(b.office))
	}
	if b.auth && !b.tokenFromEnv {
		flags = append(flags, "--token "+shellQuote(b.token))
	}
	try := "a2c call " + aiod.DefaultSandboxBundleID + "__sandbox_execute_bash --args '{\"cmd\":\"echo hi\"}'"
	if len(flags) > 0 {
		try += " " + strings.Join(flags, " ")
	}
	fmt.Fprintf(w, "a2c up: try: %s\n", try)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// unspecified reports whether a listens on every address (0.0.0.0, ::).
func unspecified(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsUnspecified()
}

// localURL is how a client on this machine reaches addr: an address that
// listens everywhere (0.0.0.0:P, [::]:P) is reached on 127.0.0.1:P.
func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
