package market

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// addedManager is a manager with the fixture's marketplace added.
func addedManager(t *testing.T) *Manager {
	t.Helper()
	m := testManager(t)
	if _, err := m.Add(context.Background(), AddOptions{URL: fixture(t), Name: "acme", Trust: true}); err != nil {
		t.Fatal(err)
	}
	return m
}

func userValues(t *testing.T, m *Manager) map[string]any {
	t.Helper()
	merged, err := settings.Load(m.Paths)
	if err != nil {
		t.Fatal(err)
	}
	return merged.Layer(settings.User).Values
}

// TestPluginInstall (P14, P16, P23): install is not activate: it writes
// the intent and the record only (no enabledPlugins, no skill staged);
// a reinstall changes nothing but the record's lastUpdated.
func TestPluginInstall(t *testing.T) {
	m := addedManager(t)
	ctx := context.Background()
	res, err := m.Install(ctx, InstallOptions{ID: "audit@acme"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"installed":"audit@acme","scope":"user","state":"installed_disabled","mcpServers":["acme_audit_srv"]}` {
		t.Errorf("install: %s", got)
	}
	user := userValues(t, m)
	if got := stringList(user["installedPlugins"]); !slices.Equal(got, []string{"audit@acme"}) {
		t.Errorf("intent: %v", got)
	}
	if _, ok := user["enabledPlugins"]; ok {
		t.Errorf("install enabled it: %v", user)
	}
	ledger, _ := m.Ledger()
	recs := ledger.Plugins["audit@acme"]
	if len(recs) != 1 || recs[0].Scope != settings.User || recs[0].Version != "1.0.0" || !validSHA(recs[0].CommitSHA) ||
		recs[0].InstallPath != filepath.Join(m.cloneDir("acme"), "plugins", "audit") || !slices.Equal(recs[0].MCPServers, []string{"acme_audit_srv"}) {
		t.Errorf("record: %+v", recs)
	}
	// Nothing staged: the SKILL home holds the clone, the derived files
	// and the locks only.
	ents, _ := os.ReadDir(m.Paths.SkillHome)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"installed_plugins.json", "installed_plugins.json.lock", "known_marketplaces.json", "known_marketplaces.json.lock", "manage.lock", "marketplace"}) {
		t.Errorf("the SKILL home: %v", names)
	}
	again, err := m.Install(ctx, InstallOptions{ID: "audit@acme"})
	if err != nil || again.State != "installed_disabled" {
		t.Fatalf("reinstall: %+v %v", again, err)
	}
	ledger2, _ := m.Ledger()
	if len(ledger2.Plugins["audit@acme"]) != 1 || ledger2.Plugins["audit@acme"][0].InstalledAt != recs[0].InstalledAt {
		t.Errorf("reinstall's record: %+v", ledger2.Plugins["audit@acme"])
	}
	if got := stringList(userValues(t, m)["installedPlugins"]); !slices.Equal(got, []string{"audit@acme"}) {
		t.Errorf("reinstall's intent: %v", got)
	}
}

// TestPluginInstallRefusals (P13, P15): a bad id, an unknown marketplace
// or plugin write nothing; a plugin that fails to materialize leaves no
// record and takes back the intent it added.
func TestPluginInstallRefusals(t *testing.T) {
	m := addedManager(t)
	ctx := context.Background()
	before, _ := os.ReadFile(m.Paths.SettingsFile(settings.User))
	for _, c := range []struct{ id, msg string }{
		{"audit", "invalid plugin id 'audit' (expected '<plugin>@<marketplace>')"},
		{"Audit@acme", "invalid plugin id 'Audit@acme' (expected '<plugin>@<marketplace>')"},
		{"audit@nope", "marketplace 'nope' not added (run 'marketplace add' first)"},
		{"ghost@acme", "plugin 'ghost' not found in marketplace 'acme' manifest"},
	} {
		var e *Error
		if _, err := m.Install(ctx, InstallOptions{ID: c.id}); !errors.As(err, &e) || e.Code != 1 || e.Message != c.msg {
			t.Errorf("%s: %v, want %q", c.id, err, c.msg)
		}
		if after, _ := os.ReadFile(m.Paths.SettingsFile(settings.User)); string(after) != string(before) {
			t.Errorf("%s changed the user's settings: %s", c.id, after)
		}
	}
	var e *Error
	_, err := m.Install(ctx, InstallOptions{ID: "broken@acme"})
	if !errors.As(err, &e) || e.Code != 1 || e.Message != `plugin 'broken@acme': mcp-servers/other.json: the server's name "not-other" is not the file's stem` {
		t.Errorf("broken: %v", err)
	}
	if got := stringList(userValues(t, m)["installedPlugins"]); len(got) != 0 {
		t.Errorf("a failed install left its intent: %v", got)
	}
	if ledger, _ := m.Ledger(); len(ledger.Plugins) != 0 {
		t.Errorf("a failed install left a record: %v", ledger.Plugins)
	}
}

// TestMigration (P32): with no installedPlugins in the user's settings,
// the ledger's plugins become the intent and are enabled where
// enabledPlugins does not say otherwise (an explicit false stays); the
// migration runs once.
func TestMigration(t *testing.T) {
	m := addedManager(t)
	ledger := &settings.InstalledPlugins{Plugins: map[string][]settings.PluginRecord{
		"old@acme": {{Scope: settings.User, InstallPath: "/gone"}}, "off@acme": {{Scope: settings.User, InstallPath: "/gone"}}}}
	if err := settings.WriteDerived(m.pluginsPath(), ledger); err != nil {
		t.Fatal(err)
	}
	if err := settings.Set(m.Paths, settings.User, "enabledPlugins", map[string]bool{"off@acme": false}); err != nil {
		t.Fatal(err)
	}
	if err := m.migrate(); err != nil {
		t.Fatal(err)
	}
	user := userValues(t, m)
	if got := stringList(user["installedPlugins"]); !slices.Equal(got, []string{"off@acme", "old@acme"}) {
		t.Errorf("intent: %v", got)
	}
	if got, _ := json.Marshal(user["enabledPlugins"]); string(got) != `{"off@acme":false,"old@acme":true}` {
		t.Errorf("enabled: %s", got)
	}
	// Once: a later run changes nothing, even with a new record.
	ledger.Plugins["new@acme"] = []settings.PluginRecord{{Scope: settings.User}}
	if err := settings.WriteDerived(m.pluginsPath(), ledger); err != nil {
		t.Fatal(err)
	}
	if err := m.migrate(); err != nil {
		t.Fatal(err)
	}
	if got := stringList(userValues(t, m)["installedPlugins"]); len(got) != 2 {
		t.Errorf("the migration ran again: %v", got)
	}
}
