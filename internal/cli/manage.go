package cli

// This file is the Computer's management plane on the command line:
// a2c computer marketplace|plugin|settings|skill VERB. The verbs touch
// files only (the settings scopes, the SKILL home); a running Computer
// follows the files on its own (market.Projector). Their flags, --json
// outputs, messages and exit codes are the Python SDK's: 0 done, 1 the
// user's mistake, 2 a clone failed (or a bad --mcp-config), 3 internal.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/a2c-smcp/a2c-go/computer/market"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/skill"
)

// exitError ends a command with code, its message already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// manageGroups are the management verbs' groups.
var manageGroups = []string{"marketplace", "plugin", "settings", "skill", "server"}

// splitManage finds a management group in args: "a2c computer
// [--settings F] [--mcp-config F | -c F] [--json] GROUP VERB ...". It
// returns the root flags before the group, the group and the rest.
func splitManage(args []string) (root []string, group string, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(manageGroups, a):
			return args[:i], a, args[i+1:], true
		case a == "--settings" || a == "--mcp-config" || a == "-c":
			i++ // its value
		case strings.HasPrefix(a, "--settings=") || strings.HasPrefix(a, "--mcp-config=") || a == "--json":
		default:
			return nil, "", nil, false
		}
	}
	return nil, "", nil, false
}

// manageFlags are the flags every management verb takes.
type manageFlags struct {
	json      *bool
	settings  *string
	mcpConfig *string
}

func addManageFlags(fs *flag.FlagSet) *manageFlags {
	f := &manageFlags{json: fs.Bool("json", false, "print JSON")}
	f.settings = fs.String("settings", "", "the flag scope's settings file")
	f.mcpConfig = fs.String("mcp-config", "", "the flag scope's mcp.json")
	fs.StringVar(f.mcpConfig, "c", "", "the flag scope's mcp.json (short for --mcp-config)")
	return f
}

// manager is the Manager of the current user, directory and flags.
func (f *manageFlags) manager(e *env) (*market.Manager, error) {
	p, err := settings.CurrentPaths(os.Getenv, *f.settings)
	if err != nil {
		return nil, err
	}
	return &market.Manager{Paths: p, Log: e.log()}, nil
}

// log is where the management verbs log (warnings only, to stderr).
func (e *env) log() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// runManage runs a2c computer GROUP VERB.
func runManage(ctx context.Context, e *env, root []string, group string, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(e.stdout, manageUsage[group])
		if len(args) == 0 {
			return usageError{}
		}
		return nil
	}
	verb, rest := args[0], append(slices.Clone(root), args[1:]...)
	var run func(context.Context, *env, string, []string) error
	switch group {
	case "marketplace":
		run = runMarketplace
	case "plugin":
		run = runPlugin
	case "settings":
		run = runSettings
	case "skill":
		run = runSkillGroup
	case "server":
		run = runServerGroup
	}
	return run(ctx, e, verb, rest)
}

var manageUsage = map[string]string{
	"marketplace": `Usage: a2c computer marketplace VERB [--json]
  add URL [--name N] [--trust] [--auto-update] [--no-clone]
  list | info NAME | remove NAME [--keep-plugins]
  refresh [NAME|all] | set NAME auto-update=true|false
`,
	"plugin": `Usage: a2c computer plugin VERB [--json]
  install PLUGIN@MARKETPLACE [--scope user|project|local] [--version V]
  enable ID | disable ID | uninstall ID [--keep-servers] [--scope S]
  list | info ID | gc [--prune-dangling]
`,
	"settings": `Usage: a2c computer settings VERB [--json]
  show [--scope user|project|local|flag|policy|merged]
  get KEY [--scope ...] | set KEY VALUE [--scope user|project|local] | edit [--scope ...]
`,
	"skill": `Usage: a2c computer skill VERB [--json]
  list [--source mp|mcp|user] | info NAME
`,
	"server": `Usage: a2c computer server VERB [--json]
  list | add JSON|@FILE [--scope user|project|local] | rm NAME|BUNDLE_ID
`,
}

// fail reports a management error the SDKs' way and ends with its code:
// with --json the plugin group prints {"error":code,"message":m}, the
// others {"error":m}, on stdout; without, one line on stderr.
func (e *env) fail(group string, asJSON bool, err error) error {
	code, msg := 3, err.Error()
	var me *market.Error
	if errors.As(err, &me) {
		code, msg = me.Code, me.Message
	}
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	if asJSON {
		if group == "plugin" {
			_ = printJSON(e, map[string]string{"error": "error", "message": msg})
		} else {
			_ = printJSON(e, map[string]string{"error": msg})
		}
	} else {
		fmt.Fprintf(e.stderr, "✗ %s\n", msg)
	}
	return exitError{code}
}

// done prints v with --json, else line.
func (e *env) done(asJSON bool, v any, line string) error {
	if asJSON {
		return printJSON(e, v)
	}
	fmt.Fprintln(e.stdout, line)
	return nil
}

// stdinTerminal reports whether a person is at the standard input.
func stdinTerminal() bool { return isTerminal(os.Stdin) }

// askYesNo asks question on the terminal; false when there is none.
func askYesNo(e *env, question string) bool {
	if !stdinTerminal() {
		return false
	}
	fmt.Fprintf(e.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

func positional(fs *flag.FlagSet, n int, usage string) ([]string, error) {
	if fs.NArg() != n {
		return nil, usageError{usage}
	}
	return fs.Args(), nil
}

func runMarketplace(ctx context.Context, e *env, verb string, args []string) error {
	fs := newFlags(e, "computer marketplace "+verb)
	f := addManageFlags(fs)
	name := fs.String("name", "", "the marketplace's name (default: from the URL)")
	trust := fs.Bool("trust", false, "trust the marketplace without asking")
	auto := fs.Bool("auto-update", false, "pull the marketplace at each boot")
	noClone := fs.Bool("no-clone", false, "record the marketplace without cloning it")
	keep := fs.Bool("keep-plugins", false, "keep the records of the marketplace's plugins (gc removes them)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	m, err := f.manager(e)
	if err != nil {
		return e.fail("marketplace", *f.json, err)
	}
	fail := func(err error) error { return e.fail("marketplace", *f.json, err) }
	switch verb {
	case "add":
		pos, err := positional(fs, 1, "usage: marketplace add URL [--name N] [--trust] [--auto-update] [--no-clone]")
		if err != nil {
			return err
		}
		o := market.AddOptions{URL: pos[0], Name: *name, Trust: *trust, AutoUpdate: *auto, NoClone: *noClone}
		if stdinTerminal() {
			o.Confirm = func(q string) bool { return askYesNo(e, q) }
		}
		res, err := m.Add(ctx, o)
		if err != nil {
			return fail(err)
		}
		return e.done(*f.json, res, fmt.Sprintf("✓ added marketplace '%s' (%d skill(s))", res.Added, res.Skills))
	case "list":
		if _, err := positional(fs, 0, "usage: marketplace list"); err != nil {
			return err
		}
		rows, err := m.List()
		if err != nil {
			return fail(err)
		}
		if *f.json {
			return printJSON(e, rows)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tURL\tTRUSTED\tAUTO-UPDATE\tLAST UPDATED\tCOMMIT")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%s\t%.12s\n", r.Name, r.URL, r.Trusted, r.AutoUpdate, r.LastUpdated, r.CommitSHA)
		}
		return tw.Flush()
	case "info":
		pos, err := positional(fs, 1, "usage: marketplace info NAME")
		if err != nil {
			return err
		}
		info, err := m.Info(pos[0])
		if err != nil {
			return fail(err)
		}
		b, _ := json.MarshalIndent(info, "", "  ")
		return e.done(*f.json, info, string(b))
	case "remove":
		pos, err := positional(fs, 1, "usage: marketplace remove NAME [--keep-plugins]")
		if err != nil {
			return err
		}
		res, err := m.Remove(pos[0], *keep)
		if err != nil {
			return fail(err)
		}
		return e.done(*f.json, res, fmt.Sprintf("✓ removed marketplace '%s' (uninstalled %d plugin(s))", res.Removed, len(res.UninstalledPlugins)))
	case "refresh":
		if fs.NArg() > 1 {
			return usageError{"usage: marketplace refresh [NAME|all]"}
		}
		rows, err := m.Refresh(ctx, fs.Arg(0))
		if err != nil && rows == nil {
			return fail(err)
		}
		if *f.json {
			_ = printJSON(e, rows)
		} else {
			for _, r := range rows {
				fmt.Fprintf(e.stdout, "%s\t%s\t%d skill(s)\n", r.Name, r.Status, r.Skills)
			}
		}
		if err != nil {
			var me *market.Error
			if errors.As(err, &me) {
				fmt.Fprintf(e.stderr, "✗ %s\n", me.Message)
				return exitError{me.Code}
			}
			return err
		}
		return nil
	case "set":
		pos, err := positional(fs, 2, "usage: marketplace set NAME auto-update=true|false")
		if err != nil {
			return err
		}
		key, value, _ := strings.Cut(pos[1], "=")
		if err := m.Set(pos[0], key, value); err != nil {
			return fail(err)
		}
		return e.done(*f.json, map[string]any{"name": pos[0], "autoUpdate": value == "true"}, fmt.Sprintf("✓ '%s' auto-update set to %s", pos[0], value))
	}
	return usageError{"unknown marketplace verb " + verb + " (add, list, info, remove, refresh, set)"}
}

func runPlugin(ctx context.Context, e *env, verb string, args []string) error {
	fs := newFlags(e, "computer plugin "+verb)
	f := addManageFlags(fs)
	scope := fs.String("scope", "", "user, project or local")
	version := fs.String("version", "", "the version to record")
	keepServers := fs.Bool("keep-servers", false, "leave the plugin's servers mounted in a running Computer")
	prune := fs.Bool("prune-dangling", false, "remove dangling intents from the user's settings")
	fs.Bool("available", false, "deprecated: every installed plugin is listed")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	m, err := f.manager(e)
	if err != nil {
		return e.fail("plugin", *f.json, err)
	}
	fail := func(err error) error { return e.fail("plugin", *f.json, err) }
	id := func(usage string) (string, error) {
		pos, err := positional(fs, 1, usage)
		if err != nil {
			return "", err
		}
		return pos[0], nil
	}
	var sc settings.Scope
	if *scope != "" {
		if sc, err = settings.ParseScope(*scope); err != nil || !sc.Writable() {
			return fail(&market.Error{Code: 1, Message: fmt.Sprintf("--scope must be user, project or local, not '%s'", *scope)})
		}
	}
	switch verb {
	case "install":
		pid, err := id("usage: plugin install PLUGIN@MARKETPLACE [--scope S] [--version V]")
		if err != nil {
			return err
		}
		res, err := m.Install(ctx, market.InstallOptions{ID: pid, Scope: sc, Version: *version})
		if err != nil {
			return fail(err)
		}
		return e.done(*f.json, res, fmt.Sprintf("✓ installed '%s' (disabled; run 'plugin enable %s' to activate)", pid, pid))
	case "enable":
		pid, err := id("usage: plugin enable ID")
		if err != nil {
			return err
		}
		res, err := m.Enable(ctx, pid, market.EnableOptions{Interactive: stdinTerminal()})
		if err != nil {
			return fail(err)
		}
		return e.done(*f.json, res, fmt.Sprintf("✓ enabled '%s'", pid))
	case "disable":
		pid, err := id("usage: plugin disable ID")
		if err != nil {
			return err
		}
		res, err := m.Disable(pid)
		if err != nil {
			return fail(err)
		}
		return e.done(*f.json, res, fmt.Sprintf("✓ disabled '%s' (whole plugin offline; enable to restore)", pid))
	case "uninstall":
		pid, err := id("usage: plugin uninstall ID [--keep-servers] [--scope S]")
		if err != nil {
			return err
		}
		res, err := m.Uninstall(market.UninstallOptions{ID: pid, Scope: sc, KeepServers: *keepServers, FlagMCP: *f.mcpConfig})
		if err != nil {
			return fail(err)
		}
		line := fmt.Sprintf("✓ uninstalled '%s'", pid)
		if *keepServers {
			line += " (servers kept)"
		}
		return e.done(*f.json, res, line)
	case "list":
		rows, err := m.Plugins()
		if err != nil {
			return fail(err)
		}
		if *f.json {
			return printJSON(e, rows)
		}
		if len(rows) == 0 {
			fmt.Fprintln(e.stdout, "No plugins installed. Install one: plugin install <plugin>@<marketplace>")
			return nil
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PLUGIN\tENABLED\tSCOPES\tMCP SERVERS")
		for _, r := range rows {
			sc := make([]string, len(r.Scopes))
			for i, s := range r.Scopes {
				sc[i] = string(s)
			}
			fmt.Fprintf(tw, "%s\t%t\t%s\t%s\n", r.ID, r.Enabled, strings.Join(sc, ","), strings.Join(r.MCPServers, ","))
		}
		return tw.Flush()
	case "info":
		pid, err := id("usage: plugin info ID")
		if err != nil {
			return err
		}
		info, err := m.PluginInfo(pid)
		if err != nil {
			return fail(err)
		}
		b, _ := json.MarshalIndent(info, "", "  ")
		return e.done(*f.json, info, string(b))
	case "gc":
		if _, err := positional(fs, 0, "usage: plugin gc [--prune-dangling]"); err != nil {
			return err
		}
		res, err := m.GC(*prune)
		if err != nil {
			return fail(err)
		}
		if *f.json {
			return printJSON(e, res)
		}
		fmt.Fprintf(e.stdout, "✓ gc removed %d orphan plugin(s): %s\n", len(res.Removed), strings.Join(res.Removed, ", "))
		for _, d := range res.Dangling {
			status := "diagnosed only (pass --prune-dangling)"
			if slices.Contains(res.PrunedIntents, d.ID) {
				status = "pruned"
			} else if slices.Contains(res.ResidualDeclarations, d.ID) {
				status = "intent declaration remains in project/local settings (remove manually)"
			}
			fmt.Fprintf(e.stdout, "⚠ dangling intent %s [%s]: %s\n", d.ID, d.Reason, status)
		}
		for _, id := range res.Recoverable {
			fmt.Fprintf(e.stdout, "recoverable: %s (not materialized; the next boot materializes it)\n", id)
		}
		return nil
	}
	return usageError{"unknown plugin verb " + verb + " (install, uninstall, enable, disable, list, info, gc)"}
}

func runSettings(ctx context.Context, e *env, verb string, args []string) error {
	fs := newFlags(e, "computer settings "+verb)
	f := addManageFlags(fs)
	scope := fs.String("scope", "", "user, project, local, flag, policy or merged")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	fail := func(err error) error { return e.fail("settings", *f.json, err) }
	p, err := settings.CurrentPaths(os.Getenv, *f.settings)
	if err != nil {
		return fail(err)
	}
	read := func(s string) (map[string]any, error) {
		merged, err := settings.Load(p)
		if err != nil {
			return nil, err
		}
		if s == "" || s == "merged" {
			return merged.Values, nil
		}
		sc, err := settings.ParseScope(s)
		if err != nil {
			return nil, &market.Error{Code: 1, Message: fmt.Sprintf("unknown scope '%s' (expected user|project|local|flag|policy|merged)", s)}
		}
		return merged.Layer(sc).Values, nil
	}
	writable := func(def string) (settings.Scope, error) {
		s := *scope
		if s == "" {
			s = def
		}
		sc, err := settings.ParseScope(s)
		if err != nil || !sc.Writable() {
			return "", &market.Error{Code: 1, Message: fmt.Sprintf("scope \"%s\" is read-only (writable: user|project|local)", s)}
		}
		return sc, nil
	}
	switch verb {
	case "show":
		v, err := read(*scope)
		if err != nil {
			return fail(err)
		}
		merged, _ := settings.Load(p)
		if *f.json {
			return printJSON(e, v)
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
		for _, se := range merged.Errors {
			fmt.Fprintf(e.stderr, "⚠ %s settings (%s): %s: %s\n", se.Scope, printable(se.SourcePath), printable(se.Field), printable(se.Reason))
		}
		return nil
	case "get":
		pos, err := positional(fs, 1, "usage: settings get KEY [--scope S]")
		if err != nil {
			return err
		}
		v, err := read(*scope)
		if err != nil {
			return fail(err)
		}
		val, ok := lookupDotted(v, pos[0])
		if !ok {
			s := *scope
			if s == "" {
				s = "merged"
			}
			return fail(&market.Error{Code: 1, Message: fmt.Sprintf("key '%s' not set in scope '%s'", pos[0], s)})
		}
		return printJSON(e, map[string]any{pos[0]: val})
	case "set":
		pos, err := positional(fs, 2, "usage: settings set KEY VALUE [--scope user|project|local]")
		if err != nil {
			return err
		}
		sc, err := writable("user")
		if err != nil {
			return fail(err)
		}
		var val any
		if json.Unmarshal([]byte(pos[1]), &val) != nil {
			val = pos[1] // not JSON: a literal string
		}
		if err := settings.Set(p, sc, pos[0], val); err != nil {
			return fail(&market.Error{Code: 1, Message: err.Error()})
		}
		return e.done(*f.json, map[string]any{"key": pos[0], "scope": sc, "value": val}, fmt.Sprintf("✓ set %s in %s scope", pos[0], sc))
	case "edit":
		if _, err := positional(fs, 0, "usage: settings edit [--scope user|project|local]"); err != nil {
			return err
		}
		sc, err := writable("user")
		if err != nil {
			return fail(err)
		}
		path := p.SettingsFile(sc)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fail(err)
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(path, []byte("{\n}\n"), 0o644); err != nil {
				return fail(err)
			}
		}
		editor := os.Getenv("EDITOR")
		if editor == "" {
			editor = os.Getenv("VISUAL")
		}
		if editor == "" {
			editor = "vi"
		}
		words := strings.Fields(editor)
		cmd := exec.CommandContext(ctx, words[0], append(words[1:], path)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fail(&market.Error{Code: 1, Message: "editor failed: " + err.Error()})
		}
		merged, _ := settings.Load(p)
		for _, se := range merged.Errors {
			if se.Scope == sc {
				fmt.Fprintf(e.stderr, "⚠ %s: %s: %s\n", printable(se.SourcePath), printable(se.Field), printable(se.Reason))
			}
		}
		return e.done(*f.json, map[string]any{"edited": path, "scope": sc}, fmt.Sprintf("✓ edited %s settings (%s)", sc, path))
	}
	return usageError{"unknown settings verb " + verb + " (show, get, set, edit)"}
}

// lookupDotted finds key in v, dotted keys through objects.
func lookupDotted(v map[string]any, key string) (any, bool) {
	if x, ok := v[key]; ok {
		return x, true
	}
	cur := any(v)
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// skillRow is a `skill list --json` row.
type skillRow struct {
	Name    string `json:"name"`
	Source  string `json:"source"`
	Enabled bool   `json:"enabled"`
	Orphan  bool   `json:"orphan"`
}

func runSkillGroup(ctx context.Context, e *env, verb string, args []string) error {
	fs := newFlags(e, "computer skill "+verb)
	f := addManageFlags(fs)
	source := fs.String("source", "", "mp, mcp or user")
	skillsDir := fs.String("skills", defaultSkillsDir(), "folder of the user's skill packages")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	m, err := f.manager(e)
	if err != nil {
		return e.fail("skill", *f.json, err)
	}
	// Offline: the user's folder and the active plugins' skills. MCP
	// servers' skills need their servers: a2c skills asks a running
	// Computer.
	var refs []skill.Package
	refs = append(refs, skill.ScanUser(*skillsDir, nil)...)
	proj, err := m.Resolve(market.ResolveOptions{FlagMCP: *f.mcpConfig})
	if err != nil {
		return e.fail("skill", *f.json, err)
	}
	for _, src := range slices.Sorted(maps.Keys(proj.Skills)) {
		refs = append(refs, proj.Skills[src]...)
	}
	switch verb {
	case "list":
		want := map[string]string{"mp": "marketplace", "mcp": "mcp", "user": "user", "": ""}[*source]
		if *source != "" && want == "" {
			return e.fail("skill", *f.json, &market.Error{Code: 1, Message: fmt.Sprintf("unknown --source '%s' (expected mp|mcp|user)", *source)})
		}
		rows := []skillRow{}
		for _, p := range refs {
			kind, _, _ := strings.Cut(p.Ref.Source, ":")
			if want == "" || kind == want {
				rows = append(rows, skillRow{Name: p.Ref.Name, Source: p.Ref.Source, Enabled: true})
			}
		}
		slices.SortFunc(rows, func(a, b skillRow) int { return strings.Compare(a.Name, b.Name) })
		if *f.json {
			return printJSON(e, rows)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSOURCE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Source)
		}
		return tw.Flush()
	case "info":
		pos, err := positional(fs, 1, "usage: skill info NAME")
		if err != nil {
			return err
		}
		for _, p := range refs {
			if p.Ref.Name == pos[0] {
				out := map[string]any{}
				b, _ := json.Marshal(p.Ref)
				_ = json.Unmarshal(b, &out)
				out["enabled"], out["orphan"] = true, false
				b, _ = json.MarshalIndent(out, "", "  ")
				return e.done(*f.json, out, string(b))
			}
		}
		return e.fail("skill", *f.json, &market.Error{Code: 1, Message: "unknown skill: " + pos[0]})
	}
	return usageError{"unknown skill verb " + verb + " (list, info)"}
}

func runServerGroup(ctx context.Context, e *env, verb string, args []string) error {
	fs := newFlags(e, "computer server "+verb)
	f := addManageFlags(fs)
	scope := fs.String("scope", "local", "add: the scope of a new server (user, project or local)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	fail := func(err error) error { return e.fail("server", *f.json, err) }
	m, err := f.manager(e)
	if err != nil {
		return fail(err)
	}
	switch verb {
	case "list":
		if _, err := positional(fs, 0, "usage: server list"); err != nil {
			return err
		}
		proj, err := m.Resolve(market.ResolveOptions{FlagMCP: *f.mcpConfig})
		if err != nil {
			return fail(err)
		}
		if *f.json {
			return printJSON(e, append([]market.ServerState{}, proj.Servers...))
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tBUNDLE_ID\tORIGIN\tVERDICT\tSERVED")
		for _, s := range proj.Servers {
			origin := s.Origin
			if s.Plugin != "" {
				origin += ":" + s.Plugin
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\n", s.Name, s.BundleID, origin, s.Verdict, s.Served)
		}
		return tw.Flush()
	case "add":
		pos, err := positional(fs, 1, "usage: server add JSON|@FILE [--scope user|project|local]")
		if err != nil {
			return err
		}
		doc := []byte(pos[0])
		if name, ok := strings.CutPrefix(pos[0], "@"); ok {
			if doc, err = os.ReadFile(name); err != nil {
				return fail(&market.Error{Code: 1, Message: fmt.Sprintf("%s cannot be read", name)})
			}
		}
		var body map[string]any
		if json.Unmarshal(doc, &body) != nil || body == nil {
			return fail(&market.Error{Code: 1, Message: "the server must be a JSON object (an MCPServerConfig)"})
		}
		key, _ := body["name"].(string)
		if key == "" {
			return fail(&market.Error{Code: 1, Message: "the server needs a name"})
		}
		sc, err := settings.ParseScope(*scope)
		if err != nil || !sc.Writable() {
			return fail(&market.Error{Code: 1, Message: fmt.Sprintf("scope \"%s\" is read-only (writable: user|project|local)", *scope)})
		}
		written, err := settings.UpsertMCP(m.Paths, *f.mcpConfig, nil, sc, key, body)
		if err != nil {
			return fail(&market.Error{Code: 1, Message: err.Error()})
		}
		return e.done(*f.json, map[string]any{"added": key, "scope": written}, fmt.Sprintf("✓ server '%s' in the %s scope", key, written))
	case "rm":
		pos, err := positional(fs, 1, "usage: server rm NAME|BUNDLE_ID")
		if err != nil {
			return err
		}
		proj, err := m.Resolve(market.ResolveOptions{FlagMCP: *f.mcpConfig})
		if err != nil {
			return fail(err)
		}
		key, err := resolveServerName(proj.Servers, pos[0])
		if err != nil {
			return fail(&market.Error{Code: 1, Message: err.Error()})
		}
		scopes, err := settings.RemoveMCP(m.Paths, *f.mcpConfig, nil, key)
		if err != nil {
			return fail(&market.Error{Code: 1, Message: err.Error()})
		}
		return e.done(*f.json, map[string]any{"removed": key, "scopes": scopes}, fmt.Sprintf("✓ removed server '%s'", key))
	}
	return usageError{"unknown server verb " + verb + " (list, add, rm)"}
}

// resolveServerName finds the declared server a person means by arg (the
// rule of the SDKs' human surfaces): the server whose bundle_id is arg,
// else the one whose name is arg; several, or one only a plugin brings,
// is an error that lists them (bundle_id, name, owner). Never a guess.
func resolveServerName(servers []market.ServerState, arg string) (string, error) {
	var byID, byName []market.ServerState
	for _, s := range servers {
		if s.BundleID == arg {
			byID = append(byID, s)
		}
		if s.Name == arg || s.Key == arg {
			byName = append(byName, s)
		}
	}
	matches := byID
	if len(matches) == 0 {
		matches = byName
	}
	declared := slices.DeleteFunc(slices.Clone(matches), func(s market.ServerState) bool { return s.Origin == market.OriginPlugin })
	switch {
	case len(matches) == 0:
		return "", fmt.Errorf("no server named '%s'", arg)
	case len(declared) == 1:
		return declared[0].Key, nil
	case len(declared) == 0:
		return "", fmt.Errorf("server '%s' comes from plugin %s: disable or uninstall the plugin ('plugin uninstall %s')", arg, matches[0].Plugin, matches[0].Plugin)
	}
	var lines []string
	for _, s := range declared {
		lines = append(lines, fmt.Sprintf("%s (name %s, %s)", s.BundleID, s.Name, s.Origin))
	}
	return "", fmt.Errorf("'%s' names several servers: %s; give the bundle_id", arg, strings.Join(lines, ", "))
}

// printable is text from files a repository may have written (a server's
// name, a settings key) as a terminal may show it: every control
// character (an escape sequence's start, a carriage return) is replaced,
// so that it cannot rewrite what the user reads or answers.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}
