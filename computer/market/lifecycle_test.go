package market

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/skill"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// server is a plugin's stdio server file.
func server(name, bundleID, args string) string {
	return `{"name":"` + name + `","bundle_id":"` + bundleID + `","type":"stdio","server_parameters":{"command":"fixture-echo-server","args":` + args + `,"env":null}}`
}

// wideFixture is the acme marketplace with more plugins: audit (the
// spec's), twin (declares audit's server acme_audit_srv too), secret and
// vault (each with an input api_token, a password, used in args), and
// lone (its own server, acme_lone_srv).
func wideFixture(t testing.TB) string {
	t.Helper()
	skillMD := func(name string) string {
		return "---\nname: " + name + "\ndescription: \"The " + name + " skill.\"\n---\n# " + name + "\n"
	}
	entry := func(name string) string {
		return `{"name":"` + name + `","source":"./plugins/` + name + `","version":"1.0.0"}`
	}
	files := map[string]string{
		".tfrobot-plugin/marketplace.json": `{"name":"acme","owner":{"name":"Fixture Team"},"plugins":[` +
			strings.Join([]string{entry("audit"), entry("twin"), entry("secret"), entry("vault"), entry("lone")}, ",") + `]}`,
		"plugins/audit/.tfrobot-plugin/plugin.json":    `{"name":"audit","version":"1.0.0"}`,
		"plugins/audit/skills/audit-guide/SKILL.md":    "---\nname: audit-guide\ndescription: \"How to run the audit tools. Use when asked to audit a file.\"\nlicense: MIT\n---\n# audit-guide\n",
		"plugins/audit/skills/no-description/SKILL.md": "---\nname: no-description\n---\n# nothing\n",
		"plugins/audit/mcp-servers/audit-mcp.json":     server("audit-mcp", "acme_audit_srv", "[]"),
		"plugins/twin/.tfrobot-plugin/plugin.json":     `{"name":"twin"}`,
		"plugins/twin/skills/twin-guide/SKILL.md":      skillMD("twin-guide"),
		"plugins/twin/mcp-servers/audit-mcp.json":      server("audit-mcp", "acme_audit_srv", "[]"),
		"plugins/lone/.tfrobot-plugin/plugin.json":     `{"name":"lone"}`,
		"plugins/lone/mcp-servers/lone.json":           server("lone", "acme_lone_srv", "[]"),
	}
	for _, p := range []string{"secret", "vault"} {
		files["plugins/"+p+"/.tfrobot-plugin/plugin.json"] = `{"name":"` + p + `"}`
		files["plugins/"+p+"/skills/"+p+"-guide/SKILL.md"] = skillMD(p + "-guide")
		files["plugins/"+p+"/mcp-servers/inputs.json"] = `[{"id":"api_token","type":"promptString","description":"Token","password":true}]`
		files["plugins/"+p+"/mcp-servers/"+p+".json"] = server(p, "acme_"+p+"_srv", `["${input:api_token}"]`)
	}
	url, _ := gitRepo(t, t.TempDir(), "acme", files)
	return url
}

// wideManager has wideFixture's marketplace added and ids installed.
func wideManager(t *testing.T, ids ...string) *Manager {
	t.Helper()
	m := testManager(t)
	ctx := context.Background()
	if _, err := m.Add(ctx, AddOptions{URL: wideFixture(t), Name: "acme", Trust: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := m.Install(ctx, InstallOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func enable(t *testing.T, m *Manager, id string) {
	t.Helper()
	if _, err := m.Enable(context.Background(), id, EnableOptions{Interactive: true}); err != nil {
		t.Fatal(err)
	}
}

func resolve(t *testing.T, m *Manager, o ResolveOptions) *Projection {
	t.Helper()
	p, err := m.Resolve(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// served are the bundle_ids a projection hosts, with their origins.
func served(p *Projection) []string {
	var out []string
	for _, s := range p.Config.Servers {
		out = append(out, s.BundleID+"="+p.Origins[s.BundleID])
	}
	slices.Sort(out)
	return out
}

func skillNames(p *Projection) []string {
	var out []string
	for src, pkgs := range p.Skills {
		for _, k := range pkgs {
			out = append(out, k.Ref.Name+"@"+src+"@"+k.Ref.Version)
		}
	}
	slices.Sort(out)
	return out
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEnable (P14, P16, P18, P41): install projects nothing; enable
// writes true in the record's scope and projects the skills (named
// <plugin>:<dir>, source marketplace:<mp>, the record's version; one
// without a description hidden) and the servers (origin plugin)
// together; enabling again changes nothing.
func TestEnable(t *testing.T) {
	m := wideManager(t, "audit@acme")
	if p := resolve(t, m, ResolveOptions{}); len(p.Config.Servers) != 0 || len(skillNames(p)) != 0 {
		t.Fatalf("install projected: %v %v", served(p), skillNames(p))
	}
	res, err := m.Enable(context.Background(), "audit@acme", EnableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"enabled":"audit@acme","scopes":["user"]}` {
		t.Errorf("enable: %s", got)
	}
	if v, _ := userValues(t, m)["enabledPlugins"].(map[string]any); v["audit@acme"] != true {
		t.Errorf("enabledPlugins: %v", v)
	}
	p := resolve(t, m, ResolveOptions{})
	if got := served(p); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme"}) {
		t.Errorf("servers: %v", got)
	}
	if got := skillNames(p); !slices.Equal(got, []string{"audit:audit-guide@marketplace:acme@1.0.0"}) {
		t.Errorf("skills: %v", got)
	}
	if s := p.Config.Servers[0]; s.Name != "audit-mcp" {
		t.Errorf("server name %q", s.Name)
	}
	before, _ := os.ReadFile(m.Paths.SettingsFile(settings.User))
	enable(t, m, "audit@acme")
	if after, _ := os.ReadFile(m.Paths.SettingsFile(settings.User)); string(after) != string(before) {
		t.Error("a second enable rewrote the settings")
	}
	var e *Error
	if _, err := m.Enable(context.Background(), "lone@acme", EnableOptions{}); !errors.As(err, &e) || e.Code != 1 || e.Message != "plugin 'lone@acme' not installed (install it first)" {
		t.Errorf("enable of a plugin not installed: %v", err)
	}
}

// TestEnableRollback (P18, P43): an enable whose server cannot be
// configured (a password input, nobody to ask, no variable) is taken
// back: an absent enabledPlugins value is deleted again, a false one is
// false again; the error names the variable, never a value. With the
// variable set it enables.
func TestEnableRollback(t *testing.T) {
	m := wideManager(t, "secret@acme")
	noEnv := func(string) (string, bool) { return "", false }
	_, err := m.Enable(context.Background(), "secret@acme", EnableOptions{Env: noEnv})
	var e *Error
	if !errors.As(err, &e) || e.Code != 1 || !strings.Contains(e.Message, "A2C_SMCP_secret_acme_api_token") {
		t.Fatalf("enable without the input: %v", err)
	}
	if v, ok := userValues(t, m)["enabledPlugins"].(map[string]any); ok {
		if _, said := v["secret@acme"]; said {
			t.Errorf("enabledPlugins not taken back: %v", v)
		}
	}
	if err := settings.Set(m.Paths, settings.User, "enabledPlugins.secret@acme", false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enable(context.Background(), "secret@acme", EnableOptions{Env: noEnv}); err == nil {
		t.Fatal("enabled without the input")
	}
	if v, _ := userValues(t, m)["enabledPlugins"].(map[string]any); v["secret@acme"] != false {
		t.Errorf("the prior false was not restored: %v", v)
	}
	env := func(n string) (string, bool) { return "s3cr3t-value", n == "A2C_SMCP_secret_acme_api_token" }
	if _, err := m.Enable(context.Background(), "secret@acme", EnableOptions{Env: env}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{m.Paths.SettingsFile(settings.User), filepath.Join(m.Paths.SkillHome, settings.InstalledPluginsFile)} {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "s3cr3t") {
			t.Errorf("%s holds the secret", f)
		}
	}
}

// TestPluginInputs (P22): two plugins' inputs of the same bare id are
// pooled apart, and each server's bare ${input:api_token} renders its
// own plugin's value.
func TestPluginInputs(t *testing.T) {
	m := wideManager(t, "secret@acme", "vault@acme")
	enable(t, m, "secret@acme")
	enable(t, m, "vault@acme")
	p := resolve(t, m, ResolveOptions{})
	var ids []string
	for _, in := range p.Config.Inputs {
		ids = append(ids, in.ID)
	}
	if !slices.Equal(ids, []string{"secret@acme/api_token", "vault@acme/api_token"}) {
		t.Fatalf("inputs: %v", ids)
	}
	vals := map[string]string{"A2C_SMCP_secret_acme_api_token": "one", "A2C_SMCP_vault_acme_api_token": "two"}
	r := &config.Resolver{Inputs: p.Config.Inputs, Env: func(n string) (string, bool) { v, ok := vals[n]; return v, ok }}
	got := map[string]string{}
	for _, s := range p.Config.Servers {
		out, err := r.Render(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		got[s.BundleID] = strings.Join(out.Stdio.Args, ",")
	}
	if got["acme_secret_srv"] != "one" || got["acme_vault_srv"] != "two" {
		t.Errorf("rendered: %v", got)
	}
}

// TestEnabledMerge (P19, P40): only a merged true activates (project true
// and local false: inactive); a plugin enabled by the committed project
// settings alone is PENDING, skills included, until approved.
func TestEnabledMerge(t *testing.T) {
	m := wideManager(t, "audit@acme")
	writeJSON(t, m.Paths.SettingsFile(settings.Project), map[string]any{"enabledPlugins": map[string]any{"audit@acme": true}})
	writeJSON(t, m.Paths.SettingsFile(settings.Local), map[string]any{"enabledPlugins": map[string]any{"audit@acme": false}})
	if p := resolve(t, m, ResolveOptions{}); len(p.Config.Servers) != 0 || p.Plugins[0].State != "installed_disabled" {
		t.Errorf("project true + local false: %v %+v", served(p), p.Plugins)
	}
	_ = os.Remove(m.Paths.SettingsFile(settings.Local))
	p := resolve(t, m, ResolveOptions{})
	if len(p.Config.Servers) != 0 || len(p.Skills) != 0 || len(p.Pending()) != 1 || p.Pending()[0].BundleID != "acme_audit_srv" {
		t.Errorf("project-only enable: %v %v %+v", served(p), skillNames(p), p.Pending())
	}
	if p := resolve(t, m, ResolveOptions{Approved: []string{"acme_audit_srv"}}); len(p.Config.Servers) != 1 || len(p.Skills) != 1 {
		t.Errorf("approved: %v", served(p))
	}
}

// TestDisable (P20): disable writes false, and the plugin's skills and
// servers leave the projection; its record, its intent and its clone
// stay.
func TestDisable(t *testing.T) {
	m := wideManager(t, "audit@acme")
	enable(t, m, "audit@acme")
	res, err := m.Disable("audit@acme")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"disabled":"audit@acme","scopes":["user"]}` {
		t.Errorf("disable: %s", got)
	}
	p := resolve(t, m, ResolveOptions{})
	if len(p.Config.Servers) != 0 || len(p.Skills) != 0 {
		t.Errorf("disabled projected: %v %v", served(p), skillNames(p))
	}
	ledger, _ := m.Ledger()
	if len(ledger.Plugins["audit@acme"]) != 1 || !slices.Contains(stringList(userValues(t, m)["installedPlugins"]), "audit@acme") {
		t.Error("disable dropped the record or the intent")
	}
	if _, err := os.Stat(filepath.Join(m.cloneDir("acme"), "plugins", "audit")); err != nil {
		t.Error("disable removed the clone")
	}
	var e *Error
	if _, err := m.Disable("none@acme"); !errors.As(err, &e) || e.Message != "plugin 'none@acme' not installed (no-op)" || e.Code != 1 {
		t.Errorf("disable of a plugin not installed: %v", err)
	}
}

// TestPluginList (P21): list shows installed_disabled plugins too; info
// gives the records.
func TestPluginList(t *testing.T) {
	m := wideManager(t, "audit@acme", "lone@acme")
	enable(t, m, "lone@acme")
	rows, err := m.Plugins()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(rows); string(got) != `[{"id":"audit@acme","enabled":false,"scopes":["user"],"mcpServers":["acme_audit_srv"]},`+
		`{"id":"lone@acme","enabled":true,"scopes":["user"],"mcpServers":["acme_lone_srv"]}]` {
		t.Errorf("list: %s", got)
	}
	info, err := m.PluginInfo("lone@acme")
	if err != nil || info.ID != "lone@acme" || !info.Enabled || len(info.Records) != 1 {
		t.Errorf("info: %+v %v", info, err)
	}
	var e *Error
	if _, err := m.PluginInfo("x@acme"); !errors.As(err, &e) || e.Message != "plugin 'x@acme' not installed" {
		t.Errorf("info of a plugin not installed: %v", err)
	}
}

// TestDependencySatisfied (P17): a plugin's server whose bundle_id a
// declaration already has is not hosted twice (the declaration wins, a
// note says the dependency is satisfied); a declaration of the same
// name with another bundle_id coexists.
func TestDependencySatisfied(t *testing.T) {
	m := wideManager(t, "audit@acme", "lone@acme")
	enable(t, m, "audit@acme")
	enable(t, m, "lone@acme")
	writeJSON(t, m.Paths.MCPFile(settings.User), map[string]any{"servers": map[string]any{
		"mine":  map[string]any{"name": "mine", "bundle_id": "acme_audit_srv", "type": "stdio", "server_parameters": map[string]any{"command": "own"}},
		"lone":  map[string]any{"name": "lone", "bundle_id": "my_lone", "type": "stdio", "server_parameters": map[string]any{"command": "own"}},
		"other": map[string]any{"name": "other", "type": "stdio", "server_parameters": map[string]any{"command": "own"}},
	}})
	p := resolve(t, m, ResolveOptions{})
	got := served(p)
	if !slices.Contains(got, "acme_audit_srv=user") || !slices.Contains(got, "acme_lone_srv=plugin:lone@acme") || !slices.Contains(got, "my_lone=user") {
		t.Errorf("servers: %v", got)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool {
		return strings.Contains(n, "acme_audit_srv is already declared; dependency satisfied")
	}) {
		t.Errorf("notes: %v", p.Notes)
	}
	if len(skillNames(p)) != 1 {
		t.Errorf("the plugin's skill went with its satisfied server: %v", skillNames(p))
	}
}

// fakeTarget records what a Projector applies.
type fakeTarget struct {
	reloads int
	servers []string
	skills  []string
	mgmt    smcp.ManagementState // the last SetManagement
	mgmts   int                  // how many SetManagement calls
}

func (f *fakeTarget) SetManagement(st smcp.ManagementState) {
	f.mgmt = st
	f.mgmts++
}

func (f *fakeTarget) Reload(_ context.Context, cfg *config.File) error {
	f.reloads++
	f.servers = nil
	for _, s := range cfg.Servers {
		f.servers = append(f.servers, s.BundleID)
	}
	slices.Sort(f.servers)
	return nil
}

func (f *fakeTarget) SetMarketSkills(skills map[string][]skill.Package) bool {
	f.skills = nil
	for _, pkgs := range skills {
		for _, p := range pkgs {
			f.skills = append(f.skills, p.Ref.Name)
		}
	}
	slices.Sort(f.skills)
	return true
}

func apply(t *testing.T, p *Projector) {
	t.Helper()
	if _, err := p.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func uninstall(t *testing.T, m *Manager, o UninstallOptions) UninstallResult {
	t.Helper()
	res, err := m.Uninstall(o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestReclaim (P24, P25, P27): audit and twin both declare
// acme_audit_srv. Uninstalling one keeps it; uninstalling the other
// reclaims it; with both disabled it stays until the last uninstall;
// --keep-servers keeps it; the stop-list comes from the ledger even once
// the plugin's files are gone; a user-declared server is never
// reclaimed.
func TestReclaim(t *testing.T) {
	t.Run("shared", func(t *testing.T) {
		m := wideManager(t, "audit@acme", "twin@acme")
		enable(t, m, "audit@acme")
		enable(t, m, "twin@acme")
		f := &fakeTarget{}
		pr := &Projector{M: m, Target: f}
		apply(t, pr)
		if !slices.Equal(f.servers, []string{"acme_audit_srv"}) || !slices.Equal(f.skills, []string{"audit:audit-guide", "twin:twin-guide"}) {
			t.Fatalf("enabled: %v %v", f.servers, f.skills)
		}
		if res := uninstall(t, m, UninstallOptions{ID: "audit@acme"}); len(res.Reclaimed) != 0 {
			t.Errorf("uninstall of audit reclaimed %v", res.Reclaimed)
		}
		apply(t, pr)
		if !slices.Equal(f.servers, []string{"acme_audit_srv"}) || !slices.Equal(f.skills, []string{"twin:twin-guide"}) {
			t.Errorf("after uninstall audit: %v %v", f.servers, f.skills)
		}
		if res := uninstall(t, m, UninstallOptions{ID: "twin@acme"}); !slices.Equal(res.Reclaimed, []string{"acme_audit_srv"}) {
			t.Errorf("uninstall of twin reclaimed %v", res.Reclaimed)
		}
		apply(t, pr)
		if len(f.servers) != 0 || len(f.skills) != 0 {
			t.Errorf("after uninstall twin: %v %v", f.servers, f.skills)
		}
	})
	t.Run("both disabled", func(t *testing.T) {
		m := wideManager(t, "audit@acme", "twin@acme")
		enable(t, m, "audit@acme")
		enable(t, m, "twin@acme")
		f := &fakeTarget{}
		pr := &Projector{M: m, Target: f}
		apply(t, pr)
		for _, id := range []string{"audit@acme", "twin@acme"} {
			if _, err := m.Disable(id); err != nil {
				t.Fatal(err)
			}
			apply(t, pr)
		}
		if !slices.Equal(f.servers, []string{"acme_audit_srv"}) || len(f.skills) != 0 {
			t.Errorf("both disabled: %v %v", f.servers, f.skills)
		}
		uninstall(t, m, UninstallOptions{ID: "audit@acme"})
		apply(t, pr)
		if !slices.Equal(f.servers, []string{"acme_audit_srv"}) {
			t.Errorf("one left: %v", f.servers)
		}
		uninstall(t, m, UninstallOptions{ID: "twin@acme"})
		apply(t, pr)
		if len(f.servers) != 0 {
			t.Errorf("none left: %v", f.servers)
		}
	})
	t.Run("alone, files gone", func(t *testing.T) {
		m := wideManager(t, "lone@acme")
		enable(t, m, "lone@acme")
		f := &fakeTarget{}
		pr := &Projector{M: m, Target: f}
		apply(t, pr)
		if err := os.RemoveAll(filepath.Join(m.cloneDir("acme"), "plugins", "lone")); err != nil {
			t.Fatal(err)
		}
		if res := uninstall(t, m, UninstallOptions{ID: "lone@acme"}); !slices.Equal(res.Reclaimed, []string{"acme_lone_srv"}) {
			t.Errorf("reclaimed %v", res.Reclaimed)
		}
		apply(t, pr)
		if len(f.servers) != 0 {
			t.Errorf("servers: %v", f.servers)
		}
		if b, _ := os.ReadFile(m.Paths.SettingsFile(settings.User)); strings.Contains(string(b), "lone@acme") {
			t.Errorf("intent or enable left: %s", b)
		}
	})
	t.Run("keep servers", func(t *testing.T) {
		m := wideManager(t, "lone@acme")
		enable(t, m, "lone@acme")
		f := &fakeTarget{}
		pr := &Projector{M: m, Target: f}
		apply(t, pr)
		res := uninstall(t, m, UninstallOptions{ID: "lone@acme", KeepServers: true})
		if got, _ := json.Marshal(res); string(got) != `{"uninstalled":"lone@acme","keptServers":true}` {
			t.Errorf("uninstall: %s", got)
		}
		apply(t, pr)
		if !slices.Equal(f.servers, []string{"acme_lone_srv"}) {
			t.Errorf("kept: %v", f.servers)
		}
		if _, err := m.Reconcile(context.Background()); err != nil { // a boot forgets
			t.Fatal(err)
		}
		f2 := &fakeTarget{}
		apply(t, &Projector{M: m, Target: f2})
		if len(f2.servers) != 0 {
			t.Errorf("after a boot: %v", f2.servers)
		}
	})
	t.Run("user declared", func(t *testing.T) {
		m := wideManager(t, "lone@acme")
		enable(t, m, "lone@acme")
		writeJSON(t, m.Paths.MCPFile(settings.User), map[string]any{"servers": map[string]any{
			"lone": map[string]any{"name": "lone", "bundle_id": "acme_lone_srv", "type": "stdio", "server_parameters": map[string]any{"command": "own"}}}})
		if res := uninstall(t, m, UninstallOptions{ID: "lone@acme"}); len(res.Reclaimed) != 0 {
			t.Errorf("a user-declared server was reclaimed: %v", res.Reclaimed)
		}
	})
}

// TestReclaimOrigins (P26): the reclaim keeps a server declared by the
// flag file (1), by the host (2), or by a plugin and the flag file (4),
// and reclaims one only the plugin declares (3).
func TestReclaimOrigins(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "flag.json")
	writeJSON(t, flag, map[string]any{"servers": map[string]any{
		"lone": map[string]any{"name": "lone", "bundle_id": "acme_lone_srv", "type": "stdio", "server_parameters": map[string]any{"command": "own"}}}})
	embed := config.Server{Name: "lone", BundleID: "acme_lone_srv", Type: "stdio", Stdio: &config.Stdio{Command: "own"}}
	for _, tc := range []struct {
		name string
		o    UninstallOptions
		want []string
	}{
		{"1 flag", UninstallOptions{FlagMCP: flag}, nil},
		{"2 embed", UninstallOptions{Embed: []config.Server{embed}}, nil},
		{"3 plugin only", UninstallOptions{}, []string{"acme_lone_srv"}},
		{"4 plugin and flag", UninstallOptions{FlagMCP: flag, Embed: nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := wideManager(t, "lone@acme")
			enable(t, m, "lone@acme")
			tc.o.ID = "lone@acme"
			if res := uninstall(t, m, tc.o); !slices.Equal(res.Reclaimed, tc.want) {
				t.Errorf("reclaimed %v, want %v", res.Reclaimed, tc.want)
			}
		})
	}
}

// TestScopedUninstall: uninstalling one scope's record counts the
// plugin's other records as dependents and keeps the intent.
func TestScopedUninstall(t *testing.T) {
	m := wideManager(t, "lone@acme")
	if _, err := m.Install(context.Background(), InstallOptions{ID: "lone@acme", Scope: settings.Local}); err != nil {
		t.Fatal(err)
	}
	if res := uninstall(t, m, UninstallOptions{ID: "lone@acme", Scope: settings.Local}); len(res.Reclaimed) != 0 {
		t.Errorf("reclaimed %v", res.Reclaimed)
	}
	ledger, _ := m.Ledger()
	if recs := ledger.Plugins["lone@acme"]; len(recs) != 1 || recs[0].Scope != settings.User {
		t.Errorf("records: %+v", recs)
	}
	if !slices.Contains(stringList(userValues(t, m)["installedPlugins"]), "lone@acme") {
		t.Error("intent dropped")
	}
}
