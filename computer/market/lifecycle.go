package market

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// This file is the plugin lifecycle after install: enable, disable,
// uninstall (with the reclaim rule), list, info and gc, and the removal
// of a marketplace. Every operation writes the intent (the settings)
// first and the derived state (the ledger, the clones) after; a running
// Computer follows the files ([Projector]).

// EnableResult is `plugin enable --json`'s output.
type EnableResult struct {
	Enabled string           `json:"enabled"`
	Scopes  []settings.Scope `json:"scopes"`
}

// DisableResult is `plugin disable --json`'s output.
type DisableResult struct {
	Disabled string           `json:"disabled"`
	Scopes   []settings.Scope `json:"scopes"`
}

// UninstallResult is `plugin uninstall --json`'s output.
type UninstallResult struct {
	Uninstalled string `json:"uninstalled"`
	KeptServers bool   `json:"keptServers"`
	// Reclaimed are the bundle_ids no other plugin or declaration keeps
	// (not printed: the running Computer unmounts them).
	Reclaimed []string `json:"-"`
}

// EnableOptions are `plugin enable`'s.
type EnableOptions struct {
	// Interactive is set when a person can answer the plugin's inputs
	// when the Computer starts its servers; without, every input must
	// have a value now (its A2C_SMCP_ variable, or a default), or the
	// enable is taken back.
	Interactive bool
	// Env looks up the environment (os.LookupEnv when nil).
	Env func(string) (string, bool)
}

// records returns id's ledger records, or the SDKs' "not installed"
// error with suffix.
func (m *Manager) records(id, suffix string) ([]settings.PluginRecord, error) {
	if _, _, err := settings.ParsePluginID(id); err != nil {
		return nil, userErr("%s", err.Error())
	}
	ledger, err := m.Ledger()
	if err != nil {
		return nil, &Error{Code: 3, Message: err.Error()}
	}
	recs := ledger.Plugins[id]
	if len(recs) == 0 {
		return nil, userErr("plugin '%s' not installed%s", id, suffix)
	}
	return recs, nil
}

// scopePaths are the paths a record of scope s writes through: the
// project and local scopes of its project, not of the current directory.
func (m *Manager) scopePaths(r settings.PluginRecord) settings.Paths {
	p := m.Paths
	if r.Scope != settings.User && r.ProjectPath != "" {
		p.Cwd = r.ProjectPath
	}
	return p
}

// prior is one scope's enabledPlugins value before an enable.
type prior struct {
	paths settings.Paths
	scope settings.Scope
	value any // nil: absent
}

// Enable enables an installed plugin: in the scope of each of its
// records it writes enabledPlugins[id] = true, then checks that its
// servers can be configured (manifests, and the inputs when nobody can
// be asked). A failure puts every scope back as it was (an absent value
// is deleted again) and the plugin stays installed_disabled. Enabling an
// enabled plugin changes nothing.
func (m *Manager) Enable(ctx context.Context, id string, o EnableOptions) (EnableResult, error) {
	unlock, err := m.lock()
	if err != nil {
		return EnableResult{}, err
	}
	defer unlock()
	recs, err := m.records(id, " (install it first)")
	if err != nil {
		return EnableResult{}, err
	}
	if err := m.migrate(); err != nil {
		return EnableResult{}, &Error{Code: 3, Message: err.Error()}
	}
	res := EnableResult{Enabled: id, Scopes: []settings.Scope{}}
	var before []prior
	for _, r := range recs {
		p := m.scopePaths(r)
		merged, err := settings.Load(p)
		if err != nil {
			return EnableResult{}, &Error{Code: 3, Message: err.Error()}
		}
		v, _ := merged.Layer(r.Scope).Values["enabledPlugins"].(map[string]any)
		before = append(before, prior{p, r.Scope, v[id]})
		res.Scopes = append(res.Scopes, r.Scope)
	}
	for _, b := range before {
		if b.value == true {
			continue
		}
		if err := settings.Set(b.paths, b.scope, "enabledPlugins."+id, true); err != nil {
			m.restore(id, before)
			return EnableResult{}, &Error{Code: 3, Message: err.Error()}
		}
	}
	if err := m.checkEnable(ctx, id, o); err != nil {
		m.restore(id, before)
		return EnableResult{}, err
	}
	return res, nil
}

// restore puts enabledPlugins[id] back as before recorded it (an
// absent value is deleted again).
func (m *Manager) restore(id string, before []prior) {
	for _, b := range before {
		var err error
		switch b.value {
		case true:
			continue
		case nil:
			err = settings.Delete(b.paths, b.scope, "enabledPlugins."+id)
		default:
			err = settings.Set(b.paths, b.scope, "enabledPlugins."+id, b.value)
		}
		if err != nil && m.Log != nil {
			m.Log.Warn("market: taking back a failed enable", "plugin", id, "scope", b.scope, "err", err)
		}
	}
}

// checkEnable checks that an enabled plugin's servers can be hosted:
// its manifests parse, and, when nobody can answer, each input has a
// value now. Its error names the missing A2C_SMCP_ variable and never a
// value.
func (m *Manager) checkEnable(ctx context.Context, id string, o EnableOptions) error {
	plugin, mp, _ := settings.ParsePluginID(id)
	known, err := m.Known()
	if err != nil {
		return &Error{Code: 3, Message: err.Error()}
	}
	dir, err := m.pluginDir(known, mp, plugin)
	if err != nil {
		return userErr("plugin '%s': %v", id, err)
	}
	servers, inputs, err := pluginServers(dir, id)
	if err != nil {
		return userErr("plugin '%s': %v", id, err)
	}
	if o.Interactive {
		return nil
	}
	p, err := m.Resolve(ResolveOptions{})
	if err != nil {
		return &Error{Code: 3, Message: err.Error()}
	}
	all := append(slices.Clone(p.Config.Inputs), inputs...)
	r := &config.Resolver{Inputs: all, Env: o.Env}
	for _, s := range servers {
		if _, err := r.Render(ctx, s); err != nil {
			return userErr("plugin '%s': server '%s': %v", id, s.Name, err)
		}
	}
	return nil
}

// Disable disables an installed plugin: enabledPlugins[id] = false in the
// scope of each of its records. Its record, its intent and its clone
// stay; a running Computer hides its skills and unmounts the servers no
// one else keeps.
func (m *Manager) Disable(id string) (DisableResult, error) {
	unlock, err := m.lock()
	if err != nil {
		return DisableResult{}, err
	}
	defer unlock()
	recs, err := m.records(id, " (no-op)")
	if err != nil {
		return DisableResult{}, err
	}
	res := DisableResult{Disabled: id, Scopes: []settings.Scope{}}
	for _, r := range recs {
		if err := settings.Set(m.scopePaths(r), r.Scope, "enabledPlugins."+id, false); err != nil {
			return DisableResult{}, &Error{Code: 3, Message: err.Error()}
		}
		res.Scopes = append(res.Scopes, r.Scope)
	}
	// A true left in another writable scope of this directory would still
	// win the merge: disable means off, there too.
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return DisableResult{}, &Error{Code: 3, Message: err.Error()}
	}
	for _, s := range []settings.Scope{settings.User, settings.Project, settings.Local} {
		if v, _ := merged.Layer(s).Values["enabledPlugins"].(map[string]any); v[id] == true {
			if err := settings.Set(m.Paths, s, "enabledPlugins."+id, false); err != nil {
				return DisableResult{}, &Error{Code: 3, Message: err.Error()}
			}
		}
	}
	return res, nil
}

// Reclaimable returns which of ids (a plugin's servers) the reclaim rule
// lets go once plugin id no longer holds them: X goes when no other
// plugin's record (disabled ones included) declares it and no non-plugin
// source (an mcp.json scope, the host's own servers) declares it.
// ledger is the ledger without the records being dropped (so a scoped
// uninstall counts the plugin's remaining records as dependents).
func Reclaimable(ids []string, ledger *settings.InstalledPlugins, nonPlugin map[string]bool) []string {
	var out []string
	for _, x := range ids {
		if nonPlugin[x] {
			continue
		}
		kept := false
		for _, recs := range ledger.Plugins {
			for _, r := range recs {
				if slices.Contains(r.MCPServers, x) {
					kept = true
				}
			}
		}
		if !kept {
			out = append(out, x)
		}
	}
	return out
}

// UninstallOptions are `plugin uninstall`'s.
type UninstallOptions struct {
	ID string
	// Scope uninstalls that scope's record only ("": every record).
	Scope settings.Scope
	// KeepServers skips the reclaim: the plugin's servers stay mounted in
	// a running Computer until it ends.
	KeepServers bool
	// Embed are the host's own servers (non-plugin declarations).
	Embed []config.Server
	// FlagMCP is the flag scope's mcp.json, a non-plugin declaration too.
	FlagMCP string
}

// Uninstall uninstalls a plugin: it takes the servers to stop from the
// ledger first, removes the plugin's own clone (never anything outside
// the SKILL home, never the marketplace's catalog), computes the reclaim
// and drops the records last. Once no record is left it drops the
// intent and clears enabledPlugins[id], in the user's settings and in
// the project and local settings of the records' projects and of the
// current directory.
func (m *Manager) Uninstall(o UninstallOptions) (UninstallResult, error) {
	unlock, err := m.lock()
	if err != nil {
		return UninstallResult{}, err
	}
	defer unlock()
	return m.uninstall(o)
}

// uninstall is Uninstall under the lock.
func (m *Manager) uninstall(o UninstallOptions) (UninstallResult, error) {
	recs, err := m.records(o.ID, " (no-op)")
	if err != nil {
		return UninstallResult{}, err
	}
	drop := recs
	if o.Scope != "" {
		drop = nil
		for _, r := range recs {
			if r.Scope == o.Scope {
				drop = append(drop, r)
			}
		}
		if len(drop) == 0 {
			return UninstallResult{}, userErr("plugin '%s' not installed in scope '%s' (no-op)", o.ID, o.Scope)
		}
	}
	var stop []string // the stop-list, from the ledger, before anything goes
	for _, r := range drop {
		for _, x := range r.MCPServers {
			if !slices.Contains(stop, x) {
				stop = append(stop, x)
			}
		}
	}
	ledger, err := m.Ledger()
	if err != nil {
		return UninstallResult{}, &Error{Code: 3, Message: err.Error()}
	}
	left := slices.DeleteFunc(slices.Clone(recs), func(r settings.PluginRecord) bool {
		return slices.ContainsFunc(drop, func(d settings.PluginRecord) bool { return d.Scope == r.Scope })
	})
	plugin, mp, _ := settings.ParsePluginID(o.ID)
	if len(left) == 0 {
		if err := m.removeTree(m.ownClone(mp, plugin)); err != nil {
			return UninstallResult{}, &Error{Code: 3, Message: err.Error()}
		}
	}
	res := UninstallResult{Uninstalled: o.ID, KeptServers: o.KeepServers}
	if !o.KeepServers {
		p, err := m.Resolve(ResolveOptions{FlagMCP: o.FlagMCP, Embed: o.Embed})
		if err != nil {
			return UninstallResult{}, &Error{Code: 3, Message: err.Error()}
		}
		after := &settings.InstalledPlugins{Plugins: map[string][]settings.PluginRecord{}}
		for k, v := range ledger.Plugins {
			if k != o.ID {
				after.Plugins[k] = v
			}
		}
		if len(left) > 0 {
			after.Plugins[o.ID] = left
		}
		res.Reclaimed = Reclaimable(stop, after, p.NonPlugin)
	}
	if len(left) == 0 {
		if err := m.dropIntent(o.ID, recs); err != nil {
			return UninstallResult{}, &Error{Code: 3, Message: err.Error()}
		}
		delete(ledger.Plugins, o.ID)
	} else {
		ledger.Plugins[o.ID] = left
	}
	if o.KeepServers {
		if err := m.keepServers(stop); err != nil {
			return UninstallResult{}, &Error{Code: 3, Message: err.Error()}
		}
	}
	if err := settings.WriteDerived(m.pluginsPath(), ledger); err != nil {
		return UninstallResult{}, &Error{Code: 3, Message: err.Error()}
	}
	return res, nil
}

// dropIntent removes id from installedPlugins and enabledPlugins in the
// user's settings and in the project and local settings of recs'
// projects and of the current directory.
func (m *Manager) dropIntent(id string, recs []settings.PluginRecord) error {
	type target struct {
		p settings.Paths
		s settings.Scope
	}
	targets := []target{{m.Paths, settings.User}, {m.Paths, settings.Project}, {m.Paths, settings.Local}}
	for _, r := range recs {
		if r.Scope != settings.User && r.ProjectPath != "" && r.ProjectPath != m.Paths.Cwd {
			p := m.scopePaths(r)
			targets = append(targets, target{p, settings.Project}, target{p, settings.Local})
		}
	}
	for _, t := range targets {
		merged, err := settings.Load(t.p)
		if err != nil {
			return err
		}
		l := merged.Layer(t.s).Values
		if list, ok := l["installedPlugins"].([]any); ok && slices.Contains(list, any(id)) {
			if err := settings.Set(t.p, t.s, "installedPlugins", slices.DeleteFunc(stringList(list), func(x string) bool { return x == id })); err != nil {
				return err
			}
		}
		if v, _ := l["enabledPlugins"].(map[string]any); v != nil {
			if _, ok := v[id]; ok {
				if err := settings.Delete(t.p, t.s, "enabledPlugins."+id); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeTree removes dir, which must be inside the SKILL home.
func (m *Manager) removeTree(dir string) error {
	home := filepath.Clean(m.Paths.SkillHome)
	rel, err := filepath.Rel(home, filepath.Clean(dir))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return fmt.Errorf("market: refusing to remove %s: not inside the SKILL home %s", dir, home)
	}
	return os.RemoveAll(dir)
}

// KeptFile, in the SKILL home, lists the servers `plugin uninstall
// --keep-servers` kept: a running Computer keeps them until it ends, and
// the next boot forgets them.
const KeptFile = settings.KeptServersFile

func (m *Manager) keepServers(ids []string) error {
	kept := &settings.KeptServers{}
	p := filepath.Join(m.Paths.SkillHome, KeptFile)
	if _, err := settings.ReadDerived(p, kept, m.Log); err != nil {
		return err
	}
	for _, x := range ids {
		if !slices.Contains(kept.Servers, x) {
			kept.Servers = append(kept.Servers, x)
		}
	}
	return settings.WriteDerived(p, kept)
}

// Kept reads KeptFile's servers.
func (m *Manager) Kept() []string {
	kept := &settings.KeptServers{}
	_, _ = settings.ReadDerived(filepath.Join(m.Paths.SkillHome, KeptFile), kept, m.Log)
	return kept.Servers
}

// ForgetKept removes KeptFile (a boot does: kept servers last one run).
func (m *Manager) ForgetKept() {
	_ = os.Remove(filepath.Join(m.Paths.SkillHome, KeptFile))
}

// PluginRow is a `plugin list --json` row.
type PluginRow struct {
	ID         string           `json:"id"`
	Enabled    bool             `json:"enabled"`
	Scopes     []settings.Scope `json:"scopes"`
	MCPServers []string         `json:"mcpServers"`
}

// Plugins lists every installed plugin (installed_disabled ones too: O3,
// as the Python SDK 0.3 does), by id.
func (m *Manager) Plugins() ([]PluginRow, error) {
	ledger, err := m.Ledger()
	if err != nil {
		return nil, &Error{Code: 3, Message: err.Error()}
	}
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return nil, &Error{Code: 3, Message: err.Error()}
	}
	rows := []PluginRow{}
	for _, id := range sortedNames(ledger.Plugins) {
		row := PluginRow{ID: id, Enabled: enabled(merged, id), Scopes: []settings.Scope{}, MCPServers: []string{}}
		for _, r := range ledger.Plugins[id] {
			if !slices.Contains(row.Scopes, r.Scope) {
				row.Scopes = append(row.Scopes, r.Scope)
			}
			for _, x := range r.MCPServers {
				if !slices.Contains(row.MCPServers, x) {
					row.MCPServers = append(row.MCPServers, x)
				}
			}
		}
		slices.Sort(row.Scopes)
		slices.Sort(row.MCPServers)
		rows = append(rows, row)
	}
	return rows, nil
}

// PluginInfo is `plugin info --json`'s output.
type PluginInfo struct {
	ID      string                  `json:"id"`
	Enabled bool                    `json:"enabled"`
	Records []settings.PluginRecord `json:"records"`
}

// PluginInfo returns an installed plugin's records.
func (m *Manager) PluginInfo(id string) (PluginInfo, error) {
	recs, err := m.records(id, "")
	if err != nil {
		return PluginInfo{}, err
	}
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return PluginInfo{}, &Error{Code: 3, Message: err.Error()}
	}
	return PluginInfo{ID: id, Enabled: enabled(merged, id), Records: recs}, nil
}

// Dangling is an intent gc cannot materialize, and why.
type Dangling struct {
	ID     string `json:"id"`
	Reason string `json:"reason"` // marketplace-not-added, catalog-missing, manifest-unreadable, entry-missing
}

// GCResult is `plugin gc --json`'s output.
type GCResult struct {
	Removed              []string   `json:"removed"`
	Dangling             []Dangling `json:"dangling"`
	PrunedIntents        []string   `json:"prunedIntents"`
	ResidualDeclarations []string   `json:"residualDeclarations"`
	Recoverable          []string   `json:"recoverable"`
}

// GC removes the records of plugins that are no longer intended (the
// ledger minus the merged installedPlugins) with their own clones, and
// reports the dangling intents: with prune it removes them from the
// user's settings; one declared in project or local settings is never
// rewritten there (a residual declaration). Recoverable are intents
// with no record that the next boot will materialize.
func (m *Manager) GC(prune bool) (GCResult, error) {
	unlock, err := m.lock()
	if err != nil {
		return GCResult{}, err
	}
	defer unlock()
	res := GCResult{Removed: []string{}, Dangling: []Dangling{}, PrunedIntents: []string{}, ResidualDeclarations: []string{}, Recoverable: []string{}}
	ledger, err := m.Ledger()
	if err != nil {
		return res, &Error{Code: 3, Message: err.Error()}
	}
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return res, &Error{Code: 3, Message: err.Error()}
	}
	intent := Intent(merged)
	for _, id := range sortedNames(ledger.Plugins) {
		if slices.Contains(intent, id) {
			continue
		}
		plugin, mp, _ := settings.ParsePluginID(id)
		if err := m.removeTree(m.ownClone(mp, plugin)); err != nil {
			return res, &Error{Code: 3, Message: err.Error()}
		}
		delete(ledger.Plugins, id)
		res.Removed = append(res.Removed, id)
	}
	if len(res.Removed) > 0 {
		if err := settings.WriteDerived(m.pluginsPath(), ledger); err != nil {
			return res, &Error{Code: 3, Message: err.Error()}
		}
	}
	known, err := m.Known()
	if err != nil {
		return res, &Error{Code: 3, Message: err.Error()}
	}
	var prunedUser []string
	for _, id := range intent {
		reason := danglingReason(known, id)
		if reason == "" {
			if len(ledger.Plugins[id]) == 0 {
				res.Recoverable = append(res.Recoverable, id)
			}
			continue
		}
		res.Dangling = append(res.Dangling, Dangling{ID: id, Reason: reason})
		if !prune {
			continue
		}
		prunedUser = append(prunedUser, id)
		committed := false
		for _, s := range []settings.Scope{settings.Project, settings.Local} {
			committed = committed || slices.Contains(stringList(merged.Layer(s).Values["installedPlugins"]), id)
		}
		if committed {
			res.ResidualDeclarations = append(res.ResidualDeclarations, id)
		} else {
			res.PrunedIntents = append(res.PrunedIntents, id)
		}
	}
	// One write for every pruned intent of the user's settings (the
	// project's and local's are never rewritten here).
	user := stringList(merged.Layer(settings.User).Values["installedPlugins"])
	if kept := slices.DeleteFunc(slices.Clone(user), func(x string) bool { return slices.Contains(prunedUser, x) }); len(kept) != len(user) {
		if err := settings.Set(m.Paths, settings.User, "installedPlugins", kept); err != nil {
			return res, &Error{Code: 3, Message: err.Error()}
		}
	}
	return res, nil
}

// danglingReason says why intent id cannot be materialized ("" when it
// can).
func danglingReason(known *settings.KnownMarketplaces, id string) string {
	plugin, mp, err := settings.ParsePluginID(id)
	if err != nil {
		return "entry-missing"
	}
	rec, ok := known.Marketplaces[mp]
	if !ok {
		return "marketplace-not-added"
	}
	if _, err := os.Stat(filepath.Join(rec.InstallLocation, CatalogFile)); err != nil {
		return "catalog-missing"
	}
	cat, err := ReadCatalog(rec.InstallLocation)
	if err != nil {
		return "manifest-unreadable"
	}
	if !slices.ContainsFunc(cat.Plugins, func(e Entry) bool { return e.Name == plugin }) {
		return "entry-missing"
	}
	return ""
}

// RemoveResult is `marketplace remove --json`'s output.
type RemoveResult struct {
	Removed            string   `json:"removed"`
	Pruned             []string `json:"pruned"`
	UninstalledPlugins []string `json:"uninstalledPlugins"`
	KeptPlugins        bool     `json:"keptPlugins"`
}

// Remove removes a marketplace: it uninstalls each of its plugins (with
// the reclaim; keepPlugins leaves their records, orphans for gc), then
// prunes its clone, its plugins' own clones and its record, and takes
// back the user's trust in its url. Declarations (extraKnownMarketplaces)
// are the user's and stay: a declared marketplace is cloned again by the
// next boot.
func (m *Manager) Remove(name string, keepPlugins bool) (RemoveResult, error) {
	unlock, err := m.lock()
	if err != nil {
		return RemoveResult{}, err
	}
	defer unlock()
	known, err := m.Known()
	if err != nil {
		return RemoveResult{}, &Error{Code: 3, Message: err.Error()}
	}
	rec, ok := known.Marketplaces[name]
	if !ok {
		return RemoveResult{}, userErr("unknown marketplace: '%s'", name)
	}
	res := RemoveResult{Removed: name, Pruned: []string{}, UninstalledPlugins: []string{}, KeptPlugins: keepPlugins}
	if !keepPlugins {
		ledger, err := m.Ledger()
		if err != nil {
			return res, &Error{Code: 3, Message: err.Error()}
		}
		for _, id := range sortedNames(ledger.Plugins) {
			if _, mp, err := settings.ParsePluginID(id); err != nil || mp != name {
				continue
			}
			if _, err := m.uninstall(UninstallOptions{ID: id}); err != nil {
				return res, err
			}
			res.UninstalledPlugins = append(res.UninstalledPlugins, id)
		}
	}
	for _, dir := range []string{m.cloneDir(name), filepath.Join(m.Paths.SkillHome, "marketplace", ".plugins", name)} {
		if err := m.removeTree(dir); err != nil {
			return res, &Error{Code: 3, Message: err.Error()}
		}
	}
	if known, err = m.Known(); err != nil {
		return res, &Error{Code: 3, Message: err.Error()}
	}
	delete(known.Marketplaces, name)
	if err := settings.WriteDerived(m.knownPath(), known); err != nil {
		return res, &Error{Code: 3, Message: err.Error()}
	}
	res.Pruned = append(res.Pruned, name)
	merged, err := settings.Load(m.Paths)
	if err == nil {
		trusted := stringList(merged.Layer(settings.User).Values["trustedMarketplaces"])
		if slices.Contains(trusted, rec.Source.URL) {
			err = settings.Set(m.Paths, settings.User, "trustedMarketplaces", slices.DeleteFunc(trusted, func(x string) bool { return x == rec.Source.URL }))
		}
	}
	if err != nil && m.Log != nil {
		m.Log.Warn("market: taking back the trust of a removed marketplace", "marketplace", name, "err", err)
	}
	return res, nil
}
