package market

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// fixture builds the offline marketplace acme (plugin audit: one skill,
// one stdio server) as a bare git repository and returns its file://
// URL.
func fixture(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("needs git")
	}
	root := t.TempDir()
	files := map[string]string{
		".tfrobot-plugin/marketplace.json": `{"name":"acme","owner":{"name":"Fixture Team"},"metadata":{"pluginRoot":"./plugins"},` +
			`"plugins":[{"name":"audit","source":"./plugins/audit","description":"Audit helpers","version":"1.0.0","strict":true},` +
			`{"name":"broken","source":"broken"}]}`,
		// A plugin that must not install: its server file's stem is not
		// the server's name.
		"plugins/broken/.tfrobot-plugin/plugin.json":   `{"name":"broken"}`,
		"plugins/broken/mcp-servers/other.json":        `{"name":"not-other","type":"stdio","server_parameters":{"command":"x"}}`,
		"plugins/audit/.tfrobot-plugin/plugin.json":    `{"name":"audit","version":"1.0.0","description":"Audit helpers","author":{"name":"Fixture Team"},"license":"MIT"}`,
		"plugins/audit/skills/audit-guide/SKILL.md":    "---\nname: audit-guide\ndescription: \"How to run the audit tools. Use when asked to audit a file.\"\nlicense: MIT\n---\n# audit-guide\nCall the audit tool with a file path.\n",
		"plugins/audit/skills/no-description/SKILL.md": "---\nname: no-description\n---\n# nothing\n",
		"plugins/audit/mcp-servers/audit-mcp.json": `{"name":"audit-mcp","bundle_id":"acme_audit_srv","type":"stdio","disabled":false,"forbidden_tools":[],` +
			`"tool_meta":{},"default_tool_meta":null,"vrl":null,"server_parameters":{"command":"fixture-echo-server","args":[],"env":null,"cwd":null,` +
			`"encoding":"utf-8","encoding_error_handler":"strict"}}`,
	}
	url, _ := gitRepo(t, root, "acme", files)
	return url
}

func testManager(t testing.TB) *Manager {
	t.Helper()
	dir := t.TempDir()
	return &Manager{Paths: settings.Paths{UserDir: filepath.Join(dir, "config", "a2c"), SkillHome: filepath.Join(dir, "skills"),
		Cwd: filepath.Join(dir, "cwd"), ManagedDir: filepath.Join(dir, "managed")},
		Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC) }}
}

// TestMarketplaceAdd (P8, P9): add with --trust clones and records the
// marketplace (an absolute installLocation, a 40-hex commit, an ISO
// time) and puts the trust in the user's settings; a second add of the
// name is refused (1); without a terminal and without --trust nothing is
// cloned (1); a clone that fails exits 2 and leaves nothing.
func TestMarketplaceAdd(t *testing.T) {
	url := fixture(t)
	m := testManager(t)
	ctx := context.Background()
	res, err := m.Add(ctx, AddOptions{URL: url, Name: "acme", Trust: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); string(got) != `{"added":"acme","url":"`+url+`","skills":1}` {
		t.Errorf("add: %s", got)
	}
	known, err := m.Known()
	if err != nil {
		t.Fatal(err)
	}
	rec := known.Marketplaces["acme"]
	if !filepath.IsAbs(rec.InstallLocation) || !validSHA(rec.CommitSHA) || rec.LastUpdated != "2026-07-01T10:00:00Z" ||
		rec.Source != (settings.Source{Type: "git", URL: url}) || rec.AutoUpdate {
		t.Errorf("record: %+v", rec)
	}
	if _, err := os.Stat(filepath.Join(rec.InstallLocation, CatalogFile)); err != nil {
		t.Errorf("no clone: %v", err)
	}
	merged, _ := settings.Load(m.Paths)
	if !slices.Contains(stringList(merged.Layer(settings.User).Values["trustedMarketplaces"]), url) {
		t.Errorf("trust not in the user's settings: %v", merged.Layer(settings.User).Values)
	}
	// The same URL is trusted now; the name is taken.
	var e *Error
	if _, err := m.Add(ctx, AddOptions{URL: url, Name: "acme"}); !errors.As(err, &e) || e.Code != 1 || e.Message != "marketplace name conflict: 'acme' already exists" {
		t.Errorf("second add: %v", err)
	}
	// Another marketplace, untrusted, no terminal: nothing cloned.
	other := fixture(t)
	_, err = m.Add(ctx, AddOptions{URL: other, Name: "other"})
	if !errors.As(err, &e) || e.Code != 1 || !regexp.MustCompile(`^untrusted marketplace 'other' \(.*\); pass --trust to confirm non-interactively$`).MatchString(e.Message) {
		t.Errorf("untrusted: %v", err)
	}
	if _, err := os.Stat(m.cloneDir("other")); !os.IsNotExist(err) {
		t.Error("an untrusted marketplace was cloned")
	}
	// Asked and refused.
	if _, err := m.Add(ctx, AddOptions{URL: other, Name: "other", Confirm: func(string) bool { return false }}); !errors.As(err, &e) || e.Code != 1 {
		t.Errorf("refused: %v", err)
	}
	// A clone that fails: 2, no clone left, no record.
	_, err = m.Add(ctx, AddOptions{URL: "file:///nonexistent/none.git", Name: "none", Trust: true})
	if !errors.As(err, &e) || e.Code != 2 || e.Message != "clone/refresh failed for 'file:///nonexistent/none.git' (see logs)" {
		t.Errorf("failed clone: %v", err)
	}
	if _, err := os.Stat(m.cloneDir("none")); !os.IsNotExist(err) {
		t.Error("a failed clone left its directory")
	}
	if known, _ := m.Known(); len(known.Marketplaces) != 1 {
		t.Errorf("records: %v", known.Marketplaces)
	}
}

// TestDeriveName: a marketplace's name from its remote, and the
// owner/repo shorthand.
func TestDeriveName(t *testing.T) {
	cases := []struct{ in, url, name string }{
		{"https://github.com/Org/My_Market.git", "https://github.com/Org/My_Market.git", "my-market"},
		{"git@host:team/acme.git", "git@host:team/acme.git", "acme"},
		{"owner/repo", "https://github.com/owner/repo.git", "repo"},
		{"file:///srv/x/Acme--Tools.git/", "file:///srv/x/Acme--Tools.git/", "acme-tools"},
		{"file:///srv/x/___.git", "file:///srv/x/___.git", ""},
	}
	for _, c := range cases {
		u := ExpandURL(c.in)
		if u != c.url || DeriveName(u) != c.name {
			t.Errorf("%s: %s %q, want %s %q", c.in, u, DeriveName(u), c.url, c.name)
		}
	}
}

// push commits a change to the bare repository at url (file://...).
func push(t *testing.T, url string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	gitCmd(t, "", "clone", "-q", url, work)
	gitCmd(t, work, "commit", "-q", "--allow-empty", "-m", "more")
	gitCmd(t, work, "push", "-q", "origin", "HEAD")
}

// TestMarketplaceRefresh (P10): refresh reports unchanged without a new
// commit and updated, with the new commit and time, after a push; a
// clone that is gone is cloned again (missing); list, info and set
// auto-update show and change the record.
func TestMarketplaceRefresh(t *testing.T) {
	url := fixture(t)
	m := testManager(t)
	ctx := context.Background()
	if _, err := m.Add(ctx, AddOptions{URL: url, Name: "acme", Trust: true}); err != nil {
		t.Fatal(err)
	}
	first, _ := m.Known()
	sha := first.Marketplaces["acme"].CommitSHA
	rows, err := m.Refresh(ctx, "all")
	if err != nil || len(rows) != 1 || rows[0] != (Refreshed{"acme", "unchanged", 1}) {
		t.Fatalf("refresh: %v %v", rows, err)
	}
	push(t, url)
	m.Now = func() time.Time { return time.Date(2026, 7, 2, 9, 0, 0, 0, time.UTC) }
	if rows, err = m.Refresh(ctx, "acme"); err != nil || rows[0] != (Refreshed{"acme", "updated", 1}) {
		t.Fatalf("refresh after a push: %v %v", rows, err)
	}
	after, _ := m.Known()
	if r := after.Marketplaces["acme"]; r.CommitSHA == sha || !validSHA(r.CommitSHA) || r.LastUpdated != "2026-07-02T09:00:00Z" {
		t.Errorf("record after the update: %+v", r)
	}
	if err := os.RemoveAll(m.cloneDir("acme")); err != nil {
		t.Fatal(err)
	}
	if rows, err = m.Refresh(ctx, ""); err != nil || rows[0].Status != "missing" {
		t.Errorf("a missing clone: %v %v", rows, err)
	}
	if _, err := os.Stat(filepath.Join(m.cloneDir("acme"), CatalogFile)); err != nil {
		t.Errorf("not cloned again: %v", err)
	}
	var e *Error
	if _, err := m.Refresh(ctx, "nope"); !errors.As(err, &e) || e.Message != "unknown marketplace: 'nope'" {
		t.Errorf("unknown: %v", err)
	}
	if err := m.Set("acme", "auto-update", "true"); err != nil {
		t.Fatal(err)
	}
	if err := m.Set("acme", "colour", "blue"); !errors.As(err, &e) || e.Message != "unknown key 'colour' (only 'auto-update' supported)" {
		t.Errorf("unknown key: %v", err)
	}
	list, err := m.List()
	if err != nil || len(list) != 1 || !list[0].Trusted || !list[0].AutoUpdate || list[0].URL != url {
		t.Errorf("list: %+v %v", list, err)
	}
	if got, _ := json.Marshal(list[0]); !regexp.MustCompile(`^\{"name":"acme","url":"[^"]+","trusted":true,"autoUpdate":true,"lastUpdated":"2026-07-02T09:00:00Z","commitSha":"[0-9a-f]{40}"\}$`).Match(got) {
		t.Errorf("list row: %s", got)
	}
	info, err := m.Info("acme")
	if err != nil || info.InstallLocation != m.cloneDir("acme") || info.InstalledPlugins == nil {
		t.Errorf("info: %+v %v", info, err)
	}
}
