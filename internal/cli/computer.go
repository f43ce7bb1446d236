package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/a2c-smcp/a2c-go/blob"
	"github.com/a2c-smcp/a2c-go/computer"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/market"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

func runComputer(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "check" {
		return runComputerCheck(ctx, e, args[1:])
	}
	if len(args) > 0 && args[0] == "history" {
		return runComputerHistory(ctx, e, args[1:])
	}
	if root, group, rest, ok := splitManage(args); ok {
		return runManage(ctx, e, root, group, rest)
	}
	fs := newFlags(e, "computer")
	server := fs.String("server", "http://127.0.0.1:8000", "signalling server URL")
	path := fs.String("path", "/socket.io/", "the server's Engine.IO path")
	office := fs.String("office", "default", "office to join")
	name := fs.String("name", "", "this Computer's name in the office (default the host name)")
	cfgPath := fs.String("config", "", "serve exactly this MCP server configuration file (JSON or YAML; no settings, no plugins)")
	flagSettings := fs.String("settings", "", "the flag scope's settings.json (without --config)")
	mcpConfig := fs.String("mcp-config", "", "the flag scope's mcp.json (without --config)")
	fs.StringVar(mcpConfig, "c", "", "short for --mcp-config")
	approveMCP := fs.Bool("approve-all-mcp", false, "approve every workspace MCP server awaiting approval, for this run only")
	token := fs.String("token", "", "credential to present (default $A2C_TOKEN)")
	authField := fs.String("auth-field", "x-api-key", "auth field and header that carry the token")
	approve := fs.String("approve", "all", "tools without auto_apply: all (run), none (refuse), ask (prompt on the terminal), agent (run when the Agent confirmed the call, as the MCP gateway does after asking its client)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	admin := fs.String("admin", "", "serve the local management plane (status, history) on this loopback HOST:PORT")
	version := addVersionFlag(fs)
	landing := fs.String("landing-root", "", "folder where client:put_blob uploads land (created if missing); unset refuses every upload")
	maxUpload := fs.Int64("upload-max-bytes", blob.DefaultUploadMaxBytes, "largest client:put_blob upload accepted, in bytes")
	maxUploads := fs.Int("upload-max-concurrent", blob.DefaultUploadMaxConcurrent, "client:put_blob uploads open at once")
	uploadIdle := fs.Duration("upload-idle-timeout", blob.DefaultUploadIdleTimeout, "end an upload that receives no chunk for this long")
	skillsDir := fs.String("skills", defaultSkillsDir(), "folder of the user's skill packages served on the SKILL channel (\"\" for none)")
	cpuProfile := fs.String("cpu-profile", "", "write a Go CPU profile to this file until shutdown (for benchmarks)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := positiveFlags(fs, "upload-max-bytes", "upload-max-concurrent", "upload-idle-timeout"); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{"bad --log-level " + *logLevel}
	}
	policy := computer.Approval(*approve)
	if policy != computer.ApproveAll && policy != computer.ApproveNone && policy != computer.ApproveAsk && policy != computer.ApproveAgent {
		return usageError{"--approve must be all, none, ask or agent"}
	}
	if *name == "" {
		h, _ := os.Hostname()
		*name = "computer-" + h
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	cfg := &config.File{}
	var mb *managedBoot
	if *cfgPath != "" && (*flagSettings != "" || *mcpConfig != "") {
		return usageError{"--config serves one file; --settings and --mcp-config are for the settings scopes (leave out --config)"}
	}
	if *cfgPath == "" {
		var err error
		if mb, err = bootManaged(ctx, e, *flagSettings, *mcpConfig, *approveMCP, nil, log); err != nil {
			return err
		}
		if *landing == "" {
			*landing = mb.LandingRoot
		}
	}
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
		for _, d := range cfg.Diagnostics {
			log.Warn("config", "problem", d.String())
		}
	}
	if *token == "" {
		*token = os.Getenv("A2C_TOKEN")
	}
	tr, stopTracing, err := startTracing(ctx, "a2c-computer", false, nil, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	o := computer.Options{Server: *server, Path: *path, Office: *office, Name: *name, Config: cfg, Approval: policy, Logger: log, TracerProvider: tr.Provider,
		Resolver:   &config.Resolver{Inputs: cfg.Inputs, Prompt: terminalPrompt(e), Run: runCommandInput},
		Supervisor: supervisor(), ProtocolVersion: *version, LandingRoot: *landing, SkillsDir: *skillsDir,
		Uploads: blob.UploadOptions{MaxBytes: *maxUpload, MaxConcurrent: *maxUploads, IdleTimeout: *uploadIdle}}
	if *token != "" {
		o.Auth = map[string]any{*authField: *token}
	}
	if policy == computer.ApproveAsk {
		o.Confirm = terminalConfirm(e)
	}
	// The management plane's address is checked before any server starts.
	var ln net.Listener
	if *admin != "" {
		var err error
		if ln, err = net.Listen("tcp", *admin); err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		defer ln.Close()
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			return usageError{"--admin must be a loopback address"}
		}
	}
	stopProfile, err := cpuProfileTo(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	c, err := computer.New(o)
	if err != nil {
		return err
	}
	defer c.Close()
	if mb != nil {
		if err := mb.start(ctx, c, log); err != nil {
			return err
		}
	}
	log.Log(ctx, max(slog.LevelInfo, level), "a2c computer starting", "server", *server, "office", *office, "name", *name,
		"servers", len(cfg.Servers))
	if *cfgPath != "" {
		// SIGHUP is caught from here on (before the office can see this
		// Computer), so a reload request never meets its default action.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go watchConfig(ctx, *cfgPath, hup, c, log)
	}
	if ln != nil {
		// The plane has no key; the Host and Origin rule keeps web pages
		// (DNS rebinding, another site's fetch) away from it.
		pol, err := origin.New(origin.Config{Listen: ln.Addr().String()})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		hs := &http.Server{Handler: c.AdminHandler(pol), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		log.Info("management plane listening", "admin", "http://"+ln.Addr().String())
	}
	return c.Run(ctx)
}

// supervisor is this binary, which runs mcphost.Supervise when called
// with mcphost.SupervisorArg; empty (no supervision) if it cannot be found.
func supervisor() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}

// runComputerHistory prints the last tool calls of a running Computer,
// read from its management plane.
func runComputerHistory(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "computer history")
	admin := fs.String("admin", "http://127.0.0.1:8001", "the Computer's management plane (its --admin address)")
	last := fs.Int("last", 20, "how many calls")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := positiveFlags(fs, "last"); err != nil {
		return err
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, fmt.Sprintf("%s/history?last=%d", strings.TrimRight(base, "/"), *last), nil)
	if err != nil {
		return usageError{"bad --admin: " + err.Error()}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("management plane: %w", err)
	}
	defer resp.Body.Close()
	var recs []computer.Record
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		return fmt.Errorf("management plane: %w", err)
	}
	if *asJSON {
		return printJSON(e, recs)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tTOOL\tOUTCOME\tDURATION\tAGENT\tREQ_ID")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Started.Format(time.RFC3339), r.Tool, r.Outcome,
			r.Duration.Round(time.Millisecond), r.Agent, r.ReqID)
	}
	return tw.Flush()
}

// watchConfig reloads the configuration when the file changes or a
// signal arrives on hup (SIGHUP), without leaving the office, until ctx
// ends.
func watchConfig(ctx context.Context, path string, hup <-chan os.Signal, c *computer.Computer, log *slog.Logger) {
	stat := func() time.Time {
		if fi, err := os.Stat(path); err == nil {
			return fi.ModTime()
		}
		return time.Time{}
	}
	last := stat()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
			if m := stat(); m.Equal(last) {
				continue
			} else {
				last = m
			}
		}
		cfg, err := config.Load(path)
		if err != nil {
			log.Warn("config reload failed; keeping the current one", "err", err)
			continue
		}
		if err := c.Reload(ctx, cfg); err != nil {
			// The rest of the file is applied: a changed server whose
			// inputs fail keeps running as it was, a new one waits.
			log.Warn("config reloaded, but some servers' inputs could not be resolved", "servers", len(cfg.Servers), "err", err)
			continue
		}
		log.Info("config reloaded", "servers", len(cfg.Servers))
	}
}

// terminalConfirm asks on the terminal, one question at a time.
func terminalConfirm(e *env) func(ctx context.Context, tool string, params json.RawMessage) (bool, error) {
	var mu sync.Mutex
	return func(ctx context.Context, tool string, params json.RawMessage) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		tty, err := os.Open("/dev/tty")
		if err != nil {
			return false, err
		}
		defer tty.Close()
		fmt.Fprintf(e.stderr, "Allow tool %s with %s? [y/N] ", tool, firstLine(string(params), 200))
		answer := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(tty).ReadString('\n')
			answer <- strings.TrimSpace(strings.ToLower(line))
		}()
		select {
		case a := <-answer:
			return a == "y" || a == "yes", nil
		case <-ctx.Done():
			fmt.Fprintln(e.stderr, "(no answer: refused)")
			return false, ctx.Err()
		}
	}
}

// runComputerCheck validates a configuration, starts its servers just long
// enough to list their tools, and prints what Agents would see.
// checkReport is one server in "a2c computer check".
type checkReport struct {
	BundleID string `json:"bundle_id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Origin   string `json:"origin,omitempty"` // without --config: a settings scope, or plugin:<id>
	Disabled bool   `json:"disabled"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	// Category classifies an error resolving the server's inputs:
	// missing_input, invalid_selection or validation.
	Category string   `json:"category,omitempty"`
	Tools    []string `json:"tools"`
}

func runComputerCheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "computer check")
	cfgPath := fs.String("config", "", "MCP server configuration file (JSON or YAML); without, what a2c computer without --config would serve (the settings scopes and plugins, after the boot's reconcile)")
	flagSettings := fs.String("settings", "", "without --config: the flag scope's settings.json")
	mcpConfig := fs.String("mcp-config", "", "without --config: the flag scope's mcp.json")
	fs.StringVar(mcpConfig, "c", "", "short for --mcp-config")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for each server to list its tools")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := positiveFlags(fs, "wait"); err != nil {
		return err
	}
	var cfg *config.File
	var proj *market.Projection // the management plane's, without --config
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	} else {
		if *mcpConfig != "" {
			if err := settings.CheckMCPPath(*mcpConfig); err != nil {
				return usageError{err.Error()}
			}
		}
		paths, err := settings.CurrentPaths(os.Getenv, *flagSettings)
		if err != nil {
			return usageError{err.Error()}
		}
		// What a boot does, without the office: the reconcile (clones of
		// declared marketplaces, plugins materialized), then the files.
		m := &market.Manager{Paths: paths, Log: e.log()}
		pr, _, err := m.Boot(ctx, market.ResolveOptions{FlagMCP: *mcpConfig})
		if err != nil {
			return err
		}
		if proj, err = pr.M.Resolve(pr.Options); err != nil {
			return err
		}
		cfg = proj.Config
	}
	resolver := &config.Resolver{Inputs: cfg.Inputs, Prompt: terminalPrompt(e), Run: runCommandInput}
	reports := make([]checkReport, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range cfg.Servers {
		reports[i] = checkReport{BundleID: s.BundleID, Name: s.Name, Type: s.Type, Disabled: s.Disabled, State: "disabled", Tools: []string{}}
		if proj != nil {
			reports[i].Origin = proj.Origins[s.BundleID]
		}
		if s.Disabled {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &reports[i]
			rendered, err := resolver.Render(ctx, s)
			if err != nil {
				r.State, r.Error = "error", err.Error()
				var ce *config.Error
				if errors.As(err, &ce) {
					r.Category = ce.Category()
				}
				return
			}
			up := mcphost.Start(computer.UpstreamSpec(rendered), mcphost.Options{Supervisor: supervisor()})
			defer up.Close()
			deadline := time.Now().Add(*wait)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if st, _ := up.State(); st == mcphost.Ready {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			st, lastErr := up.State()
			r.State = string(st)
			if lastErr != nil {
				r.Error = lastErr.Error()
			}
			for _, t := range up.Tools() {
				if !s.Forbidden(t.Name) {
					r.Tools = append(r.Tools, s.ExposedName(t.Name))
				}
			}
		}()
	}
	wg.Wait()
	var diags []string
	for _, d := range cfg.Diagnostics {
		diags = append(diags, d.String())
	}
	if proj != nil {
		if err := printManagedCheck(e, *asJSON, proj, reports); err != nil {
			return err
		}
		return checkFailed(reports)
	}
	if *asJSON {
		return printJSON(e, map[string]any{"servers": reports, "diagnostics": diags})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUNDLE_ID\tNAME\tTYPE\tSTATE\tTOOLS")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.BundleID, r.Name, r.Type, r.State, len(r.Tools))
	}
	tw.Flush()
	for _, r := range reports {
		for _, t := range r.Tools {
			fmt.Fprintf(e.stdout, "  %s\n", t)
		}
		if r.Error != "" && r.Category != "" {
			fmt.Fprintf(e.stdout, "  %s: %s: %s\n", r.BundleID, r.Category, oneLine(r.Error))
		} else if r.Error != "" {
			fmt.Fprintf(e.stdout, "  %s: %s\n", r.BundleID, oneLine(r.Error))
		}
	}
	for _, d := range diags {
		fmt.Fprintf(e.stdout, "warning: %s\n", d)
	}
	return checkFailed(reports)
}

// checkFailed is check's error: the first server that did not come up.
func checkFailed(reports []checkReport) error {
	for _, r := range reports {
		if r.State != string(mcphost.Ready) && r.State != "disabled" {
			return fmt.Errorf("server %s is %s", r.BundleID, r.State)
		}
	}
	return nil
}

// printManagedCheck prints check's answer for the management plane's
// files: each served server with its origin and tools, the plugins'
// skills, the servers awaiting approval, and the settings' problems.
func printManagedCheck(e *env, asJSON bool, proj *market.Projection, reports []checkReport) error {
	type skillRow struct {
		Name    string `json:"name"`
		Source  string `json:"source"`
		Version string `json:"version,omitempty"`
	}
	skills := []skillRow{}
	for _, src := range slices.Sorted(maps.Keys(proj.Skills)) {
		for _, p := range proj.Skills[src] {
			skills = append(skills, skillRow{p.Ref.Name, p.Ref.Source, p.Ref.Version})
		}
	}
	pending := []market.ServerState{}
	pending = append(pending, proj.Pending()...)
	errs := []settings.Error{}
	errs = append(errs, proj.Errors...)
	if asJSON {
		return printJSON(e, map[string]any{"servers": reports, "skills": skills, "plugins": proj.Plugins,
			"pending": pending, "errors": errs, "notes": append([]string{}, proj.Notes...)})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUNDLE_ID\tNAME\tTYPE\tORIGIN\tSTATE\tTOOLS")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.BundleID, printable(r.Name), r.Type, r.Origin, r.State, len(r.Tools))
	}
	tw.Flush()
	for _, r := range reports {
		for _, t := range r.Tools {
			fmt.Fprintf(e.stdout, "  %s\n", t)
		}
		if r.Error != "" {
			fmt.Fprintf(e.stdout, "  %s: %s\n", r.BundleID, oneLine(r.Error))
		}
	}
	for _, k := range skills {
		fmt.Fprintf(e.stdout, "skill %s (%s %s)\n", k.Name, k.Source, k.Version)
	}
	for _, p := range pending {
		fmt.Fprintf(e.stdout, "pending %s (%s, origin %s): approve it (a2c computer, on a terminal) or pass --approve-all-mcp\n", printable(p.Name), printable(p.BundleID), p.Origin)
	}
	for _, ps := range proj.Plugins {
		if ps.Reason != "" {
			fmt.Fprintf(e.stdout, "plugin %s not active: %s\n", ps.ID, printable(ps.Reason))
		}
	}
	for _, n := range proj.Notes {
		fmt.Fprintf(e.stdout, "note: %s\n", printable(n))
	}
	for _, se := range errs {
		fmt.Fprintf(e.stdout, "warning: %s settings (%s): %s: %s\n", se.Scope, printable(se.SourcePath), printable(se.Field), printable(se.Reason))
	}
	return nil
}
