package market

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// TestGC (P33): gc removes the ledger records that no intent names,
// with their own clones; it reports the dangling intents (each reason:
// marketplace-not-added, catalog-missing, manifest-unreadable,
// entry-missing) and changes no settings without prune; with prune it
// removes them from the user's settings (prunedIntents) and never
// rewrites a project or local declaration (residualDeclarations, the
// files byte-identical). An intent whose entry is there but that has no
// record is recoverable (the next boot materializes it).
func TestGC(t *testing.T) {
	ctx := context.Background()
	m, _ := extManager(t, "audit@acme", "ext@acme")
	for _, name := range []string{"bare", "broken"} {
		if _, err := m.Add(ctx, AddOptions{URL: "file:///nowhere/" + name + ".git", Name: name, Trust: true, NoClone: true}); err != nil {
			t.Fatal(err)
		}
	}
	// broken's clone has a catalog that is not JSON; bare has none.
	catalog := filepath.Join(m.cloneDir("broken"), CatalogFile)
	if err := os.MkdirAll(filepath.Dir(catalog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catalog, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	// ext@acme leaves the intent: its record is an orphan.
	if err := settings.Set(m.Paths, settings.User, "installedPlugins", []string{
		"audit@acme", "ghost@nomp", "missing@acme", "spare@acme", "lost@bare", "junk@broken", "both@nomp"}); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, m.Paths.SettingsFile(settings.Project), map[string]any{"installedPlugins": []string{"decl@nomp", "audit@acme", "both@nomp"}})
	writeJSON(t, m.Paths.SettingsFile(settings.Local), map[string]any{"installedPlugins": []string{"loc@nomp"}})
	ext := m.ownClone("acme", "ext")
	if !exists(filepath.Join(ext, ".tfrobot-plugin", "plugin.json")) {
		t.Fatalf("ext's own clone is not at %s", ext)
	}
	files := []string{m.Paths.SettingsFile(settings.User), m.Paths.SettingsFile(settings.Project), m.Paths.SettingsFile(settings.Local)}
	read := func() []string {
		var out []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	before := read()
	auditRec, _ := json.Marshal(func() any { l, _ := m.Ledger(); return l.Plugins["audit@acme"] }())

	dangling := `[{"id":"ghost@nomp","reason":"marketplace-not-added"},{"id":"missing@acme","reason":"entry-missing"},` +
		`{"id":"lost@bare","reason":"catalog-missing"},{"id":"junk@broken","reason":"manifest-unreadable"},` +
		`{"id":"both@nomp","reason":"marketplace-not-added"},{"id":"decl@nomp","reason":"marketplace-not-added"},` +
		`{"id":"loc@nomp","reason":"marketplace-not-added"}]`

	// Without prune: the orphan goes, the dangling intents are reported.
	res, err := m.GC(false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"removed":["ext@acme"],"dangling":`+dangling+`,"prunedIntents":[],"residualDeclarations":[],"recoverable":["spare@acme"]}` {
		t.Errorf("gc: %s", got)
	}
	if after := read(); !slices.Equal(after, before) {
		t.Errorf("gc without prune changed the settings:\n%v\nwas\n%v", after, before)
	}
	ledger, _ := m.Ledger()
	if got := sortedNames(ledger.Plugins); !slices.Equal(got, []string{"audit@acme"}) {
		t.Errorf("ledger: %v", got)
	}
	if got, _ := json.Marshal(ledger.Plugins["audit@acme"]); string(got) != string(auditRec) {
		t.Errorf("audit's record changed: %s, was %s", got, auditRec)
	}
	if exists(ext) {
		t.Error("the orphan's own clone is left")
	}
	if !exists(filepath.Join(m.cloneDir("acme"), CatalogFile)) || !exists(filepath.Join(m.cloneDir("acme"), "plugins", "audit")) {
		t.Error("gc removed the catalog's clone")
	}

	// With prune: the user's dangling intents go; the project's and the
	// local's stay where they are, reported.
	res, err = m.GC(true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"removed":[],"dangling":`+dangling+`,"prunedIntents":["ghost@nomp","missing@acme","lost@bare","junk@broken"],`+
		`"residualDeclarations":["both@nomp","decl@nomp","loc@nomp"],"recoverable":["spare@acme"]}` {
		t.Errorf("gc --prune-dangling: %s", got)
	}
	after := read()
	if after[1] != before[1] || after[2] != before[2] {
		t.Errorf("gc rewrote a project or local declaration:\n%s\n%s", after[1], after[2])
	}
	user := stringList(userValues(t, m)["installedPlugins"])
	if !slices.Equal(user, []string{"audit@acme", "spare@acme"}) {
		t.Errorf("the user's intent after the prune: %v", user)
	}
	if slices.Contains(user, "both@nomp") {
		t.Errorf("a dangling intent of the user's that the project declares too stayed in the user's settings: %v", user)
	}

	// The residual declarations are all that is left dangling, and spare
	// is still recoverable.
	res, err = m.GC(false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"removed":[],"dangling":[{"id":"decl@nomp","reason":"marketplace-not-added"},`+
		`{"id":"both@nomp","reason":"marketplace-not-added"},{"id":"loc@nomp","reason":"marketplace-not-added"}],`+
		`"prunedIntents":[],"residualDeclarations":[],"recoverable":["spare@acme"]}` {
		t.Errorf("gc after the prune: %s", got)
	}
	if !slices.Equal(res.Recoverable, []string{"spare@acme"}) || len(res.Removed) != 0 {
		t.Errorf("gc after the prune: %+v", res)
	}

	// The recoverable intent is what a boot materializes.
	rep, err := m.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Rematerialized, []string{"spare@acme"}) {
		t.Errorf("boot after gc: %s", reportJSON(rep))
	}
}
