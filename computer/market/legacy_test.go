package market

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// TestLegacyRecord (P27): a record of the old ledger, with
// bundledMcpServers (names) and no mcpServers, is materialized again by
// the boot, with the bundle_ids the reclaim needs; the old key is gone.
func TestLegacyRecord(t *testing.T) {
	m := wideManager(t, "audit@acme")
	ledger, _ := m.Ledger()
	r := ledger.Plugins["audit@acme"][0]
	legacy := `{"version":1,"plugins":{"audit@acme":[{"scope":"user","installPath":"` + r.InstallPath + `","version":"1.0.0",` +
		`"commitSha":"` + r.CommitSHA + `","installedAt":"2026-01-01T00:00:00Z","lastUpdated":"2026-01-01T00:00:00Z","bundledMcpServers":["audit-mcp"]}]}}`
	path := filepath.Join(m.Paths.SkillHome, settings.InstalledPluginsFile)
	if err := os.WriteFile(path, []byte(settings.DerivedHeader+"\n"+legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := m.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Rematerialized, []string{"audit@acme"}) {
		t.Errorf("report: %+v", rep)
	}
	ledger, _ = m.Ledger()
	if recs := ledger.Plugins["audit@acme"]; len(recs) != 1 || !slices.Equal(recs[0].MCPServers, []string{"acme_audit_srv"}) ||
		recs[0].InstalledAt != "2026-01-01T00:00:00Z" {
		t.Errorf("records: %+v", recs)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "bundledMcpServers") {
		t.Errorf("the legacy key stayed: %s", b)
	}
	// A second boot has nothing to do.
	if rep, _ := m.Reconcile(context.Background()); len(rep.Rematerialized) != 0 {
		t.Errorf("second boot: %+v", rep)
	}
}

// TestDuplicateBundleID (P17): two server files of one plugin with the
// same bundle_id fail the install at once, and leave no record and no
// intent.
func TestDuplicateBundleID(t *testing.T) {
	files := map[string]string{
		".tfrobot-plugin/marketplace.json":          `{"name":"dup","plugins":[{"name":"twice","source":"./plugins/twice"}]}`,
		"plugins/twice/.tfrobot-plugin/plugin.json": `{"name":"twice"}`,
		"plugins/twice/mcp-servers/one.json":        server("one", "dup_same", "[]"),
		"plugins/twice/mcp-servers/two.json":        server("two", "dup_same", "[]"),
	}
	url, _ := gitRepo(t, t.TempDir(), "dup", files)
	m := testManager(t)
	if _, err := m.Add(context.Background(), AddOptions{URL: url, Name: "dup", Trust: true}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Install(context.Background(), InstallOptions{ID: "twice@dup"})
	var e *Error
	if !errors.As(err, &e) || e.Code != 1 || e.Message != `plugin 'twice@dup': mcp-servers/two.json: bundle_id "dup_same" is another server's of the plugin` {
		t.Fatalf("install: %v", err)
	}
	if ledger, _ := m.Ledger(); len(ledger.Plugins) != 0 {
		t.Errorf("records: %v", ledger.Plugins)
	}
	if got := stringList(userValues(t, m)["installedPlugins"]); len(got) != 0 {
		t.Errorf("intent: %v", got)
	}
}
