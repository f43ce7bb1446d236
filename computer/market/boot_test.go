package market

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// remoteHead is the commit HEAD names in the bare repository at url
// (file://...).
func remoteHead(t *testing.T, url string) string {
	t.Helper()
	return gitCmd(t, strings.TrimPrefix(url, "file://"), "rev-parse", "HEAD")
}

// reportJSON is a BootReport as JSON.
func reportJSON(rep BootReport) string {
	b, _ := json.Marshal(rep)
	return string(b)
}

// emptyReport is the JSON of a reconcile that did nothing.
const emptyReport = `{"cloned":[],"recloned":[],"pulled":[],"rematerialized":[],"scope_normalized":[],"failed_marketplaces":[],"failed_plugins":[]}`

// recordJSON is marketplace name's record in known_marketplaces.json as
// JSON ("" when there is none).
func recordJSON(t *testing.T, m *Manager, name string) string {
	t.Helper()
	known, err := m.Known()
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := known.Marketplaces[name]
	if !ok {
		return ""
	}
	b, _ := json.Marshal(rec)
	return string(b)
}

// TestReconcileMarketplaces (P11): a boot's reconcile of the
// marketplaces declared in extraKnownMarketplaces (user and project
// settings): one not known is cloned (a project's, once the user trusts
// its url; one nobody trusts is not), one whose clone is gone is cloned
// again, one whose declared url differs from its record's is cloned
// again from the declared url (the record follows it), one declared
// autoUpdate is pulled (its record's commit and time move, only when
// there is a new commit); a known marketplace that is not declared is
// left alone, even when its remote moved.
func TestReconcileMarketplaces(t *testing.T) {
	m := testManager(t)
	ctx := context.Background()
	soloURL, movedURL, moved2URL, autoURL, goneURL, freshURL := fixture(t), fixture(t), fixture(t), fixture(t), fixture(t), fixture(t)
	for name, url := range map[string]string{"solo": soloURL, "moved": movedURL, "auto": autoURL, "gone": goneURL} {
		if _, err := m.Add(ctx, AddOptions{URL: url, Name: name, Trust: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(m.cloneDir("gone")); err != nil {
		t.Fatal(err)
	}
	decl := func(url string, auto bool) map[string]any {
		return map[string]any{"source": map[string]any{"type": "git", "url": url}, "autoUpdate": auto}
	}
	if err := settings.Set(m.Paths, settings.User, "extraKnownMarketplaces", map[string]any{
		"moved": decl(moved2URL, false), "auto": decl(autoURL, true), "gone": decl(goneURL, false)}); err != nil {
		t.Fatal(err)
	}
	// The project declares fresh, whose url the user trusts, and
	// stranger, whose url nobody trusts: only fresh is cloned.
	strangerURL := fixture(t)
	if err := settings.Set(m.Paths, settings.User, "trustedMarketplaces", []string{soloURL, movedURL, autoURL, goneURL, freshURL}); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, m.Paths.SettingsFile(settings.Project), map[string]any{"extraKnownMarketplaces": map[string]any{
		"fresh": decl(freshURL, false), "stranger": decl(strangerURL, false)}})
	solo := recordJSON(t, m, "solo")
	autoBefore := recordJSON(t, m, "auto")
	soloHead := gitCmd(t, m.cloneDir("solo"), "rev-parse", "HEAD")

	rep, err := m.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := reportJSON(rep); got != `{"cloned":["fresh","gone"],"recloned":["moved"],"pulled":[],"rematerialized":[],"scope_normalized":[],"failed_marketplaces":["stranger"],"failed_plugins":[]}` {
		t.Errorf("first reconcile: %s", got)
	}
	known, _ := m.Known()
	for name, url := range map[string]string{"fresh": freshURL, "gone": goneURL, "moved": moved2URL} {
		want := settings.Marketplace{Source: settings.Source{Type: "git", URL: url}, InstallLocation: m.cloneDir(name),
			LastUpdated: "2026-07-01T10:00:00Z", CommitSHA: remoteHead(t, url)}
		if got := known.Marketplaces[name]; got != want {
			t.Errorf("%s's record: %+v, want %+v", name, got, want)
		}
		if _, err := os.Stat(filepath.Join(m.cloneDir(name), CatalogFile)); err != nil {
			t.Errorf("%s not cloned: %v", name, err)
		}
		if origin := gitCmd(t, m.cloneDir(name), "config", "remote.origin.url"); origin != url {
			t.Errorf("%s cloned from %s, want %s", name, origin, url)
		}
	}
	// Declared autoUpdate without a new commit: the flag is recorded,
	// the commit and time stay.
	if a := known.Marketplaces["auto"]; !a.AutoUpdate || a.CommitSHA != remoteHead(t, autoURL) || a.LastUpdated != "2026-07-01T10:00:00Z" {
		t.Errorf("auto's record: %+v (before %s)", a, autoBefore)
	}
	if got := recordJSON(t, m, "solo"); got != solo {
		t.Errorf("the undeclared record changed:\n%s\nwas\n%s", got, solo)
	}

	// New commits on auto's and solo's remotes: only auto is pulled.
	oldAuto := known.Marketplaces["auto"].CommitSHA
	moved := recordJSON(t, m, "moved")
	push(t, autoURL)
	push(t, soloURL)
	m.Now = func() time.Time { return time.Date(2026, 7, 2, 9, 0, 0, 0, time.UTC) }
	rep, err = m.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := reportJSON(rep); got != `{"cloned":[],"recloned":[],"pulled":["auto"],"rematerialized":[],"scope_normalized":[],"failed_marketplaces":["stranger"],"failed_plugins":[]}` {
		t.Errorf("second reconcile: %s", got)
	}
	known, _ = m.Known()
	a := known.Marketplaces["auto"]
	if a.CommitSHA == oldAuto || a.CommitSHA != remoteHead(t, autoURL) || a.LastUpdated != "2026-07-02T09:00:00Z" || !a.AutoUpdate {
		t.Errorf("auto after the pull: %+v (old commit %s, remote %s)", a, oldAuto, remoteHead(t, autoURL))
	}
	if head := gitCmd(t, m.cloneDir("auto"), "rev-parse", "HEAD"); head != a.CommitSHA {
		t.Errorf("auto's clone is at %s, its record says %s", head, a.CommitSHA)
	}
	if got := recordJSON(t, m, "solo"); got != solo {
		t.Errorf("the undeclared record changed:\n%s\nwas\n%s", got, solo)
	}
	if head := gitCmd(t, m.cloneDir("solo"), "rev-parse", "HEAD"); head != soloHead {
		t.Errorf("the undeclared clone moved to %s from %s", head, soloHead)
	}
	if got := recordJSON(t, m, "moved"); got != moved {
		t.Errorf("moved was cloned again though its declaration did not change:\n%s\nwas\n%s", got, moved)
	}
}

// extFixture is the acme marketplace with three plugins: audit (the
// spec's, relative), spare (relative; skill spare-guide, server
// acme_spare_srv) and ext, whose source is a repository of its own
// (cloned into <home>/marketplace/.plugins/acme/ext; server
// acme_ext_srv).
func extFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	extURL, _ := gitRepo(t, root, "ext", map[string]string{
		".tfrobot-plugin/plugin.json": `{"name":"ext","version":"3.0.0"}`,
		"skills/ext-guide/SKILL.md":   "---\nname: ext-guide\ndescription: \"The ext skill.\"\n---\n# ext-guide\n",
		"mcp-servers/ext.json":        server("ext", "acme_ext_srv", "[]"),
	})
	files := map[string]string{
		".tfrobot-plugin/marketplace.json": `{"name":"acme","owner":{"name":"Fixture Team"},"plugins":[` +
			`{"name":"audit","source":"./plugins/audit","version":"1.0.0"},` +
			`{"name":"spare","source":"./plugins/spare","version":"1.0.0"},` +
			`{"name":"ext","source":{"source":"url","url":"` + extURL + `"}}]}`,
		"plugins/audit/.tfrobot-plugin/plugin.json": `{"name":"audit","version":"1.0.0"}`,
		"plugins/audit/skills/audit-guide/SKILL.md": "---\nname: audit-guide\ndescription: \"How to run the audit tools. Use when asked to audit a file.\"\n---\n# audit-guide\n",
		"plugins/audit/mcp-servers/audit-mcp.json":  server("audit-mcp", "acme_audit_srv", "[]"),
		"plugins/spare/.tfrobot-plugin/plugin.json": `{"name":"spare"}`,
		"plugins/spare/skills/spare-guide/SKILL.md": "---\nname: spare-guide\ndescription: \"The spare skill.\"\n---\n# spare-guide\n",
		"plugins/spare/mcp-servers/spare.json":      server("spare", "acme_spare_srv", "[]"),
	}
	url, _ := gitRepo(t, root, "acme", files)
	return url
}

// extManager has extFixture's marketplace added as acme and ids
// installed.
func extManager(t *testing.T, ids ...string) (*Manager, string) {
	t.Helper()
	m := testManager(t)
	url := extFixture(t)
	ctx := context.Background()
	if _, err := m.Add(ctx, AddOptions{URL: url, Name: "acme", Trust: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := m.Install(ctx, InstallOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return m, url
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestMarketplaceRemove (P12): remove uninstalls each of the
// marketplace's plugins (intent, enable and records gone; their skills
// and servers leave the projection), prunes its clone, its plugins' own
// clones (.plugins/<mp>) and its record, and takes back the user's trust
// in its url; another marketplace and anything outside the SKILL home
// are untouched, even when the record points outside. --keep-plugins
// keeps the ledger records (orphans for gc). An unknown name is a user
// error that changes nothing.
func TestMarketplaceRemove(t *testing.T) {
	ctx := context.Background()
	t.Run("cascade", func(t *testing.T) {
		m, url := extManager(t, "audit@acme", "ext@acme")
		enable(t, m, "audit@acme")
		enable(t, m, "ext@acme")
		if _, err := m.Add(ctx, AddOptions{URL: fixture(t), Name: "beta", Trust: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Install(ctx, InstallOptions{ID: "audit@beta"}); err != nil {
			t.Fatal(err)
		}
		ext := m.ownClone("acme", "ext")
		if !exists(filepath.Join(ext, "mcp-servers", "ext.json")) {
			t.Fatalf("ext's own clone is not at %s", ext)
		}
		if got := served(resolve(t, m, ResolveOptions{})); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme", "acme_ext_srv=plugin:ext@acme"}) {
			t.Fatalf("before: %v", got)
		}
		sibling := filepath.Join(filepath.Dir(m.Paths.SkillHome), "sibling.txt")
		if err := os.WriteFile(sibling, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		betaRec := recordJSON(t, m, "beta")

		res, err := m.Remove("acme", false)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(res); string(got) != `{"removed":"acme","pruned":["acme"],"uninstalledPlugins":["audit@acme","ext@acme"],"keptPlugins":false}` {
			t.Errorf("remove: %s", got)
		}
		for _, p := range []string{m.cloneDir("acme"), filepath.Join(m.Paths.SkillHome, "marketplace", ".plugins", "acme")} {
			if exists(p) {
				t.Errorf("%s not pruned", p)
			}
		}
		if recordJSON(t, m, "acme") != "" {
			t.Error("the record is left")
		}
		ledger, _ := m.Ledger()
		if got := sortedNames(ledger.Plugins); !slices.Equal(got, []string{"audit@beta"}) {
			t.Errorf("ledger: %v", got)
		}
		user := userValues(t, m)
		if got := stringList(user["installedPlugins"]); !slices.Equal(got, []string{"audit@beta"}) {
			t.Errorf("intent: %v", got)
		}
		if got, _ := json.Marshal(user["enabledPlugins"]); string(got) != `{}` {
			t.Errorf("enabledPlugins: %s", got)
		}
		// The trust in acme's url is taken back; beta's stays.
		if got := stringList(user["trustedMarketplaces"]); slices.Contains(got, url) || len(got) != 1 {
			t.Errorf("trustedMarketplaces: %v (acme was %s)", got, url)
		}
		p := resolve(t, m, ResolveOptions{})
		if len(p.Config.Servers) != 0 || len(skillNames(p)) != 0 {
			t.Errorf("after remove: %v %v", served(p), skillNames(p))
		}
		// Nothing else went.
		if b, err := os.ReadFile(sibling); err != nil || string(b) != "keep" {
			t.Errorf("the sibling of the SKILL home: %q %v", b, err)
		}
		if got := recordJSON(t, m, "beta"); got != betaRec || !exists(filepath.Join(m.cloneDir("beta"), CatalogFile)) {
			t.Errorf("beta was touched: %s", got)
		}
	})
	t.Run("keep plugins", func(t *testing.T) {
		m, _ := extManager(t, "audit@acme", "ext@acme")
		enable(t, m, "audit@acme")
		before, _ := os.ReadFile(m.pluginsPath())
		res, err := m.Remove("acme", true)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(res); string(got) != `{"removed":"acme","pruned":["acme"],"uninstalledPlugins":[],"keptPlugins":true}` {
			t.Errorf("remove --keep-plugins: %s", got)
		}
		if after, _ := os.ReadFile(m.pluginsPath()); string(after) != string(before) {
			t.Errorf("the ledger changed:\n%s\nwas\n%s", after, before)
		}
		for _, p := range []string{m.cloneDir("acme"), filepath.Join(m.Paths.SkillHome, "marketplace", ".plugins", "acme")} {
			if exists(p) {
				t.Errorf("%s not pruned", p)
			}
		}
		if recordJSON(t, m, "acme") != "" {
			t.Error("the record is left")
		}
		// The kept records are not active: their marketplace is gone.
		p := resolve(t, m, ResolveOptions{})
		if len(p.Config.Servers) != 0 || len(skillNames(p)) != 0 {
			t.Errorf("after remove: %v %v", served(p), skillNames(p))
		}
		i := slices.IndexFunc(p.Plugins, func(s PluginState) bool { return s.ID == "audit@acme" })
		if i < 0 || p.Plugins[i].Active || p.Plugins[i].Reason != "marketplace 'acme' not added" {
			t.Errorf("audit: %+v", p.Plugins)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		m, _ := extManager(t)
		before, _ := os.ReadFile(m.knownPath())
		userBefore, _ := os.ReadFile(m.Paths.SettingsFile(settings.User))
		var e *Error
		if _, err := m.Remove("x", false); !errors.As(err, &e) || e.Code != 1 || e.Message != "unknown marketplace: 'x'" {
			t.Errorf("remove x: %v", err)
		}
		after, _ := os.ReadFile(m.knownPath())
		userAfter, _ := os.ReadFile(m.Paths.SettingsFile(settings.User))
		if string(after) != string(before) || string(userAfter) != string(userBefore) {
			t.Error("an unknown marketplace's remove wrote something")
		}
	})
	t.Run("record pointing outside", func(t *testing.T) {
		m, _ := extManager(t)
		outside := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.MkdirAll(filepath.Join(outside, ".tfrobot-plugin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, CatalogFile), []byte(`{"name":"evil","plugins":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		known, _ := m.Known()
		known.Marketplaces["evil"] = settings.Marketplace{Source: settings.Source{Type: "git", URL: "file:///nowhere/evil.git"}, InstallLocation: outside}
		if err := settings.WriteDerived(m.knownPath(), known); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Remove("evil", false); err != nil {
			t.Fatal(err)
		}
		if !exists(filepath.Join(outside, CatalogFile)) {
			t.Error("remove deleted a directory outside the SKILL home")
		}
		if recordJSON(t, m, "evil") != "" || recordJSON(t, m, "acme") == "" {
			t.Error("records after the remove")
		}
	})
}

// projectionJSON is what a projection serves and says, as JSON: the
// servers, origins, server states, skills and plugin states.
func projectionJSON(p *Projection) string {
	b, _ := json.Marshal(struct {
		Config  any
		Origins any
		Servers any
		Skills  any
		Plugins any
	}{p.Config, p.Origins, p.Servers, p.Skills, p.Plugins})
	return string(b)
}

// TestBootRecovery (P28, P29, P30): a fresh Manager over the same files
// (no memory of the one that installed) reconciles to the same
// projection: the enabled plugin's servers, origins and skills, the
// install-only plugin inert. Disable and uninstall are not undone by a
// boot. Deleting installed_plugins.json loses nothing: the boot
// materializes the records again and the projection is the same. A
// stored installPath is never trusted: a stale one does not change the
// projection, and the boot writes the computed one.
func TestBootRecovery(t *testing.T) {
	m := wideManager(t, "audit@acme", "lone@acme")
	enable(t, m, "audit@acme")
	ctx := context.Background()
	want := resolve(t, m, ResolveOptions{})
	if got := served(want); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme"}) {
		t.Fatalf("servers: %v", got)
	}
	if got := skillNames(want); !slices.Equal(got, []string{"audit:audit-guide@marketplace:acme@1.0.0"}) {
		t.Fatalf("skills: %v", got)
	}
	boot := func(t *testing.T) (*Manager, BootReport) {
		t.Helper()
		fresh := &Manager{Paths: m.Paths, Log: slog.New(slog.DiscardHandler), Now: m.Now}
		rep, err := fresh.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return fresh, rep
	}
	auditPath := filepath.Join(m.cloneDir("acme"), "plugins", "audit")
	ledgerBefore, _ := m.Ledger()

	t.Run("restart", func(t *testing.T) {
		userBefore, _ := os.ReadFile(m.Paths.SettingsFile(settings.User))
		ledgerFile, _ := os.ReadFile(m.pluginsPath())
		fresh, rep := boot(t)
		if got := reportJSON(rep); got != emptyReport {
			t.Errorf("report: %s", got)
		}
		if b, _ := os.ReadFile(m.Paths.SettingsFile(settings.User)); string(b) != string(userBefore) {
			t.Error("the boot rewrote the user's settings")
		}
		if b, _ := os.ReadFile(m.pluginsPath()); string(b) != string(ledgerFile) {
			t.Error("the boot rewrote a ledger that was right")
		}
		p := resolve(t, fresh, ResolveOptions{})
		if got := projectionJSON(p); got != projectionJSON(want) {
			t.Errorf("projection after a restart:\n%s\nwant\n%s", got, projectionJSON(want))
		}
		i := slices.IndexFunc(p.Plugins, func(s PluginState) bool { return s.ID == "lone@acme" })
		if i < 0 || p.Plugins[i].State != "installed_disabled" || p.Plugins[i].Active || p.Plugins[i].Enabled {
			t.Errorf("the install-only plugin: %+v", p.Plugins)
		}
	})
	t.Run("ledger deleted", func(t *testing.T) {
		if err := os.Remove(m.pluginsPath()); err != nil {
			t.Fatal(err)
		}
		fresh, rep := boot(t)
		if got := reportJSON(rep); got != `{"cloned":[],"recloned":[],"pulled":[],"rematerialized":["audit@acme","lone@acme"],"scope_normalized":[],"failed_marketplaces":[],"failed_plugins":[]}` {
			t.Errorf("report: %s", got)
		}
		ledger, _ := fresh.Ledger()
		for id, recs := range ledgerBefore.Plugins {
			got := ledger.Plugins[id]
			if len(got) != 1 || len(recs) != 1 {
				t.Errorf("%s: records %+v, were %+v", id, got, recs)
				continue
			}
			g, w := got[0], recs[0]
			if g.Scope != w.Scope || g.InstallPath != w.InstallPath || g.Version != w.Version || g.CommitSHA != w.CommitSHA || !slices.Equal(g.MCPServers, w.MCPServers) {
				t.Errorf("%s: record %+v, was %+v", id, g, w)
			}
		}
		if got := projectionJSON(resolve(t, fresh, ResolveOptions{})); got != projectionJSON(want) {
			t.Errorf("projection after the ledger was deleted:\n%s\nwant\n%s", got, projectionJSON(want))
		}
	})
	t.Run("stale installPath", func(t *testing.T) {
		ledger, _ := m.Ledger()
		ledger.Plugins["audit@acme"][0].InstallPath = filepath.Join(t.TempDir(), "stale", "audit")
		if err := settings.WriteDerived(m.pluginsPath(), ledger); err != nil {
			t.Fatal(err)
		}
		// Never trusted: the projection is the same before the boot.
		if got := projectionJSON(resolve(t, m, ResolveOptions{})); got != projectionJSON(want) {
			t.Errorf("projection with a stale installPath:\n%s\nwant\n%s", got, projectionJSON(want))
		}
		fresh, rep := boot(t)
		if got := reportJSON(rep); got != `{"cloned":[],"recloned":[],"pulled":[],"rematerialized":["audit@acme"],"scope_normalized":[],"failed_marketplaces":[],"failed_plugins":[]}` {
			t.Errorf("report: %s", got)
		}
		after, _ := fresh.Ledger()
		if recs := after.Plugins["audit@acme"]; len(recs) != 1 || recs[0].InstallPath != auditPath || recs[0].Scope != settings.User {
			t.Errorf("audit's record: %+v, want installPath %s", recs, auditPath)
		}
		if got := projectionJSON(resolve(t, fresh, ResolveOptions{})); got != projectionJSON(want) {
			t.Errorf("projection after the boot:\n%s\nwant\n%s", got, projectionJSON(want))
		}
	})
	t.Run("disable and uninstall stay", func(t *testing.T) {
		if _, err := m.Disable("audit@acme"); err != nil {
			t.Fatal(err)
		}
		uninstall(t, m, UninstallOptions{ID: "lone@acme"})
		fresh, rep := boot(t)
		if got := reportJSON(rep); got != emptyReport {
			t.Errorf("report: %s", got)
		}
		user := userValues(t, fresh)
		if got, _ := json.Marshal(user["enabledPlugins"]); string(got) != `{"audit@acme":false}` {
			t.Errorf("enabledPlugins: %s", got)
		}
		if got := stringList(user["installedPlugins"]); !slices.Equal(got, []string{"audit@acme"}) {
			t.Errorf("intent: %v", got)
		}
		ledger, _ := fresh.Ledger()
		if got := sortedNames(ledger.Plugins); !slices.Equal(got, []string{"audit@acme"}) {
			t.Errorf("ledger: %v", got)
		}
		p := resolve(t, fresh, ResolveOptions{})
		if len(p.Config.Servers) != 0 || len(p.Skills) != 0 || len(p.Plugins) != 1 || p.Plugins[0].State != "installed_disabled" {
			t.Errorf("after the boot: %v %v %+v", served(p), skillNames(p), p.Plugins)
		}
	})
}

// TestBootRecoveryScoped (P30): a plugin installed for the local scope
// and enabled there keeps its local record through a deleted ledger, so
// that a disable after the boot still writes false where the true is.
func TestBootRecoveryScoped(t *testing.T) {
	ctx := context.Background()
	m := wideManager(t)
	if _, err := m.Install(ctx, InstallOptions{ID: "audit@acme", Scope: settings.Local}); err != nil {
		t.Fatal(err)
	}
	enable(t, m, "audit@acme")
	if got := served(resolve(t, m, ResolveOptions{})); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme"}) {
		t.Fatalf("servers: %v", got)
	}
	before, _ := m.Ledger()
	if err := os.Remove(m.pluginsPath()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := m.Ledger()
	hasLocal := slices.ContainsFunc(after.Plugins["audit@acme"], func(r settings.PluginRecord) bool {
		return r.Scope == settings.Local && r.ProjectPath == m.Paths.Cwd
	})
	// The record is rebuilt in the scope its enable was written to.
	if !hasLocal {
		t.Errorf("records after the ledger was deleted: %+v, were %+v", after.Plugins["audit@acme"], before.Plugins["audit@acme"])
	}
	if got := served(resolve(t, m, ResolveOptions{})); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme"}) {
		t.Errorf("servers after the boot: %v", got)
	}
	if _, err := m.Disable("audit@acme"); err != nil {
		t.Fatal(err)
	}
	if got := served(resolve(t, m, ResolveOptions{})); len(got) != 0 {
		t.Errorf("disable after the boot left it served: %v", got)
	}
}

// TestDeclarativeBoot (P31): the spec's fixture declared in the user's
// settings alone (extraKnownMarketplaces, installedPlugins,
// enabledPlugins) boots to the expected projection: server
// acme_audit_srv named audit-mcp of origin plugin:audit@acme, skill
// audit:audit-guide of source marketplace:acme and version 1.0.0; and to
// the same projection as the imperative path (add, install, enable).
func TestDeclarativeBoot(t *testing.T) {
	url := fixture(t)
	ctx := context.Background()
	decl := testManager(t)
	writeJSON(t, decl.Paths.SettingsFile(settings.User), map[string]any{
		"extraKnownMarketplaces": map[string]any{"acme": map[string]any{"source": map[string]any{"type": "git", "url": url}, "autoUpdate": false}},
		"installedPlugins":       []string{"audit@acme"},
		"enabledPlugins":         map[string]any{"audit@acme": true},
	})
	userBefore, _ := os.ReadFile(decl.Paths.SettingsFile(settings.User))
	rep, err := decl.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := reportJSON(rep); got != `{"cloned":["acme"],"recloned":[],"pulled":[],"rematerialized":["audit@acme"],"scope_normalized":[],"failed_marketplaces":[],"failed_plugins":[]}` {
		t.Errorf("report: %s", got)
	}
	if b, _ := os.ReadFile(decl.Paths.SettingsFile(settings.User)); string(b) != string(userBefore) {
		t.Errorf("the boot rewrote the user's settings: %s", b)
	}
	p := resolve(t, decl, ResolveOptions{})
	if got := served(p); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme"}) {
		t.Errorf("servers: %v", got)
	}
	if len(p.Config.Servers) != 1 || p.Config.Servers[0].Name != "audit-mcp" || p.Config.Servers[0].Stdio == nil || p.Config.Servers[0].Stdio.Command != "fixture-echo-server" {
		t.Errorf("server: %+v", p.Config.Servers)
	}
	pkgs := p.Skills["marketplace:acme"]
	if len(p.Skills) != 1 || len(pkgs) != 1 {
		t.Fatalf("skills: %v", skillNames(p))
	}
	ref := pkgs[0].Ref
	if ref.Name != "audit:audit-guide" || ref.Source != "marketplace:acme" || ref.Version != "1.0.0" ||
		ref.Description != "How to run the audit tools. Use when asked to audit a file." ||
		ref.Path != filepath.Join(decl.cloneDir("acme"), "plugins", "audit", "skills", "audit-guide") {
		t.Errorf("skill: %+v", ref)
	}

	imp := testManager(t)
	if _, err := imp.Add(ctx, AddOptions{URL: url, Name: "acme", Trust: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := imp.Install(ctx, InstallOptions{ID: "audit@acme"}); err != nil {
		t.Fatal(err)
	}
	enable(t, imp, "audit@acme")
	q := resolve(t, imp, ResolveOptions{})
	// The two differ only in where their SKILL home is, and in the
	// skills' digests (their clones' file times).
	same := func(x *Projection, home string) string {
		for _, pkgs := range x.Skills {
			for i := range pkgs {
				pkgs[i].Digest = ""
			}
		}
		return strings.ReplaceAll(projectionJSON(x), home, "<home>")
	}
	if a, b := same(p, decl.Paths.SkillHome), same(q, imp.Paths.SkillHome); a != b {
		t.Errorf("declarative:\n%s\nimperative:\n%s", a, b)
	}
}
