package market

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// A plugin's source, from its catalog entry.
type source struct {
	dir  string // a directory of the catalog's clone (relative source)
	url  string // else a git remote
	ref  string
	sha  string
	path string // git-subdir: the plugin's directory in the remote
}

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// pluginSource reads entry e's source for the catalog cloned at dir.
func (c *Catalog) pluginSource(dir string, e Entry) (source, error) {
	if d := c.localDir(dir, e); d != "" {
		return source{dir: d}, nil
	}
	var s string
	if json.Unmarshal(e.Source, &s) == nil {
		return source{}, fmt.Errorf("plugin '%s': source %q leaves the marketplace", e.Name, s)
	}
	var o struct {
		Source, URL, Repo, Ref, SHA, Path string
	}
	if err := json.Unmarshal(e.Source, &o); err != nil {
		return source{}, fmt.Errorf("plugin '%s': source is neither a directory nor an object", e.Name)
	}
	src := source{url: o.URL, ref: o.Ref, sha: o.SHA, path: o.Path}
	switch o.Source {
	case "url":
	case "github":
		src.url = "https://github.com/" + o.Repo + ".git"
	case "cnb":
		src.url = "https://cnb.cool/" + o.Repo + ".git"
	case "git-subdir":
		if clean := filepath.Clean(o.Path); o.Path == "" || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return source{}, fmt.Errorf("plugin '%s': git-subdir path %q", e.Name, o.Path)
		}
	default:
		return source{}, fmt.Errorf("plugin '%s': unknown source kind %q", e.Name, o.Source)
	}
	if (o.Source == "github" || o.Source == "cnb") && !ownerRepo.MatchString(o.Repo) {
		return source{}, fmt.Errorf("plugin '%s': repo %q is not owner/name", e.Name, o.Repo)
	}
	if !settings.ValidGitURL(src.url) {
		return source{}, fmt.Errorf("plugin '%s': source url %q is not a git remote", e.Name, src.url)
	}
	if src.sha != "" && !shaPattern.MatchString(src.sha) {
		return source{}, fmt.Errorf("plugin '%s': sha %q is not 40 hex digits", e.Name, src.sha)
	}
	return src, nil
}

// InstallOptions are `plugin install`'s.
type InstallOptions struct {
	ID      string         // "<plugin>@<marketplace>"
	Scope   settings.Scope // labels the record ("": user)
	Version string         // labels the record ("": the entry's, plugin.json's or the commit)
}

// InstallResult is `plugin install --json`'s output.
type InstallResult struct {
	Installed  string         `json:"installed"`
	Scope      settings.Scope `json:"scope"`
	State      string         `json:"state"` // installed_disabled, or installed_enabled when already enabled
	MCPServers []string       `json:"mcpServers"`
}

// pluginsPath is the SKILL home's installed_plugins.json.
func (m *Manager) pluginsPath() string {
	return filepath.Join(m.Paths.SkillHome, settings.InstalledPluginsFile)
}

// Ledger reads installed_plugins.json (empty when missing or set aside).
func (m *Manager) Ledger() (*settings.InstalledPlugins, error) {
	l := &settings.InstalledPlugins{}
	if _, err := settings.ReadDerived(m.pluginsPath(), l, m.Log); err != nil {
		return nil, err
	}
	if l.Plugins == nil {
		l.Plugins = map[string][]settings.PluginRecord{}
	}
	for id := range l.Plugins {
		if _, _, err := settings.ParsePluginID(id); err != nil { // never a path made of a hostile file's key
			delete(l.Plugins, id)
			if m.Log != nil {
				m.Log.Warn("market: installed_plugins.json: a record with an invalid id left out", "id", id)
			}
		}
	}
	return l, nil
}

// Install installs a plugin: install is not activate. It writes the
// intent (the user's installedPlugins) first, then materializes the
// plugin (locates it in the catalog's clone, or clones its source),
// checks its manifests and parses every bundled server, and writes its
// record; no skill is staged, no server mounted, enabledPlugins is left
// alone. A failure takes back the intent this call added and writes no
// record.
func (m *Manager) Install(ctx context.Context, o InstallOptions) (InstallResult, error) {
	unlock, err := m.lock()
	if err != nil {
		return InstallResult{}, err
	}
	defer unlock()
	plugin, mp, err := settings.ParsePluginID(o.ID)
	if err != nil {
		return InstallResult{}, userErr("%s", err.Error())
	}
	scope := o.Scope
	if scope == "" {
		scope = settings.User
	}
	if !scope.Writable() {
		return InstallResult{}, userErr("--scope must be user, project or local, not '%s'", scope)
	}
	rec, cat, entry, err := m.locate(plugin, mp)
	if err != nil {
		return InstallResult{}, err
	}
	if err := m.migrate(); err != nil {
		return InstallResult{}, &Error{Code: 3, Message: err.Error()}
	}
	// The intent first (config-first): what a later boot acts on.
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return InstallResult{}, &Error{Code: 3, Message: err.Error()}
	}
	intent := stringList(merged.Layer(settings.User).Values["installedPlugins"])
	added := !slices.Contains(intent, o.ID)
	if added {
		if err := settings.Set(m.Paths, settings.User, "installedPlugins", append(intent, o.ID)); err != nil {
			return InstallResult{}, &Error{Code: 3, Message: err.Error()}
		}
	}
	res, err := m.materialize(ctx, mp, rec, cat, entry, o, scope)
	if err != nil && added {
		if uerr := settings.Set(m.Paths, settings.User, "installedPlugins", intent); uerr != nil && m.Log != nil {
			m.Log.Warn("market: taking back a failed install's intent", "plugin", o.ID, "err", uerr)
		}
	}
	if err != nil {
		return InstallResult{}, err
	}
	state := "installed_disabled"
	if v, _ := merged.Values["enabledPlugins"].(map[string]any); v[o.ID] == true {
		state = "installed_enabled"
	}
	res.State = state
	return res, nil
}

// locate finds plugin's marketplace record, its catalog and its entry,
// or the SDKs' error for the first that is missing.
func (m *Manager) locate(plugin, mp string) (settings.Marketplace, *Catalog, Entry, error) {
	known, err := m.Known()
	if err != nil {
		return settings.Marketplace{}, nil, Entry{}, &Error{Code: 3, Message: err.Error()}
	}
	rec, ok := known.Marketplaces[mp]
	if !ok {
		return rec, nil, Entry{}, userErr("marketplace '%s' not added (run 'marketplace add' first)", mp)
	}
	cat, err := ReadCatalog(rec.InstallLocation)
	if err != nil {
		return rec, nil, Entry{}, userErr("marketplace '%s' catalog not cloned at %s (run 'marketplace add/refresh' first)", mp, rec.InstallLocation)
	}
	i := slices.IndexFunc(cat.Plugins, func(e Entry) bool { return e.Name == plugin })
	if i < 0 {
		return rec, cat, Entry{}, userErr("plugin '%s' not found in marketplace '%s' manifest", plugin, mp)
	}
	return rec, cat, cat.Plugins[i], nil
}

// materialize places the plugin's files, checks them and writes its
// record (see Install).
func (m *Manager) materialize(ctx context.Context, mp string, rec settings.Marketplace, cat *Catalog, e Entry, o InstallOptions, scope settings.Scope) (InstallResult, error) {
	src, err := cat.pluginSource(rec.InstallLocation, e)
	if err != nil {
		return InstallResult{}, userErr("%v", err)
	}
	dir, sha := src.dir, rec.CommitSHA
	if dir == "" {
		dir = filepath.Join(m.Paths.SkillHome, "marketplace", ".plugins", mp, e.Name)
		if sha, err = m.clonePlugin(ctx, src, dir); err != nil {
			return InstallResult{}, err
		}
		if src.path != "" {
			dir = filepath.Join(dir, filepath.Clean(src.path))
		}
	}
	root := rec.InstallLocation
	if src.dir == "" {
		root = m.ownClone(mp, e.Name)
	}
	if err := insideClone(root, dir); err != nil {
		return InstallResult{}, userErr("plugin '%s': %v", o.ID, err)
	}
	manifest, err := readPluginManifest(dir, e)
	if err != nil {
		return InstallResult{}, userErr("plugin '%s': %v", o.ID, err)
	}
	parsed, _, err := pluginServers(dir, o.ID)
	if err != nil {
		return InstallResult{}, userErr("plugin '%s': %v", o.ID, err)
	}
	servers := []string{}
	for _, s := range parsed {
		servers = append(servers, s.BundleID)
	}
	version := o.Version
	for _, v := range []string{e.Version, manifest.Version, sha} {
		if version == "" {
			version = v
		}
	}
	ledger, err := m.Ledger()
	if err != nil {
		return InstallResult{}, &Error{Code: 3, Message: err.Error()}
	}
	now := timestamp(m.now())
	r := settings.PluginRecord{Scope: scope, InstallPath: dir, Version: version, CommitSHA: sha, InstalledAt: now, LastUpdated: now, MCPServers: servers}
	if scope != settings.User {
		r.ProjectPath = m.Paths.Cwd
	}
	recs := ledger.Plugins[o.ID]
	if j := slices.IndexFunc(recs, func(x settings.PluginRecord) bool { return x.Scope == scope }); j >= 0 {
		r.InstalledAt = recs[j].InstalledAt // a reinstall keeps when it was first installed
		recs[j] = r
	} else {
		recs = append(recs, r)
	}
	ledger.Plugins[o.ID] = recs
	if err := settings.WriteDerived(m.pluginsPath(), ledger); err != nil {
		return InstallResult{}, &Error{Code: 3, Message: err.Error()}
	}
	return InstallResult{Installed: o.ID, Scope: scope, MCPServers: servers}, nil
}

// clonePlugin clones a plugin's own repository at dir: shallow at its
// ref, or blobless and checked out at its sha, sparse for a git-subdir.
func (m *Manager) clonePlugin(ctx context.Context, src source, dir string) (string, error) {
	fail := func(err error) (string, error) {
		_ = m.removeTree(dir)
		if m.Log != nil {
			m.Log.Warn("market: plugin clone failed", "url", src.url, "err", err)
		}
		return "", &Error{Code: 2, Message: fmt.Sprintf("clone/refresh failed for '%s' (see logs)", src.url)}
	}
	if err := m.removeTree(dir); err != nil {
		return "", &Error{Code: 3, Message: err.Error()}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", &Error{Code: 3, Message: err.Error()}
	}
	args := []string{"clone", "--quiet"}
	switch {
	case src.sha != "":
		args = append(args, "--filter=blob:none", "--no-checkout")
	default:
		args = append(args, "--depth", "1")
		if src.ref != "" {
			args = append(args, "--branch", src.ref)
		}
	}
	if src.path != "" {
		args = append(args, "--sparse")
	}
	if _, err := git(ctx, "", append(args, "--", src.url, dir)...); err != nil {
		return fail(err)
	}
	if src.path != "" {
		if _, err := git(ctx, dir, "sparse-checkout", "set", "--", src.path); err != nil {
			return fail(err)
		}
	}
	if src.sha != "" {
		if _, err := git(ctx, dir, "checkout", "--quiet", src.sha); err != nil {
			return fail(err)
		}
	}
	sha, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil || !validSHA(sha) {
		return fail(errors.Join(err, errors.New("no commit")))
	}
	return sha, nil
}

// pluginManifest is a plugin's .tfrobot-plugin/plugin.json, as far as it
// is read.
type pluginManifest struct {
	Name    string          `json:"name"`
	Version string          `json:"version"`
	Skills  json.RawMessage `json:"skills"`
	MCP     json.RawMessage `json:"mcpServers"`
}

// readPluginManifest reads dir's plugin.json. With strict (the default)
// it must be there; without, its absence is the entry's name, and a
// plugin.json that declares components conflicts with the entry.
func readPluginManifest(dir string, e Entry) (pluginManifest, error) {
	strict := e.Strict == nil || *e.Strict
	b, err := settings.ReadFile(filepath.Join(dir, ".tfrobot-plugin", "plugin.json"))
	if err != nil {
		if strict {
			return pluginManifest{}, errors.New(".tfrobot-plugin/plugin.json is missing (the entry is strict)")
		}
		return pluginManifest{Name: e.Name}, nil
	}
	var pm pluginManifest
	if err := json.Unmarshal(b, &pm); err != nil {
		return pluginManifest{}, errors.New(".tfrobot-plugin/plugin.json is not valid JSON")
	}
	if !strict && (len(pm.Skills) > 0 || len(pm.MCP) > 0) {
		return pluginManifest{}, errors.New("conflicting manifests: the entry is not strict and plugin.json declares components")
	}
	return pm, nil
}

// migrate is the 0.2 → 0.3 migration, run once: when the user's
// settings have no installedPlugins, the ledger's plugins become the
// intent, and each is enabled for the user where enabledPlugins does not
// say otherwise (an explicit false stays). The key is written even when
// empty, which marks the migration done.
func (m *Manager) migrate() error {
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return err
	}
	user := merged.Layer(settings.User).Values
	if _, done := user["installedPlugins"]; done {
		return nil
	}
	ledger, err := m.Ledger()
	if err != nil {
		return err
	}
	ids := sortedNames(ledger.Plugins)
	if len(ids) > 0 {
		enabled, _ := user["enabledPlugins"].(map[string]any)
		if enabled == nil {
			enabled = map[string]any{}
		}
		for _, id := range ids {
			if _, said := enabled[id]; !said {
				enabled[id] = true
			}
		}
		if err := settings.Set(m.Paths, settings.User, "enabledPlugins", enabled); err != nil {
			return err
		}
	}
	return settings.Set(m.Paths, settings.User, "installedPlugins", ids)
}
