package market

import (
	"context"
	"os"
	"path/filepath"
	"slices"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// BootReport is what a boot's reconcile did.
type BootReport struct {
	// Cloned, Recloned and Pulled are the declared marketplaces cloned
	// because they were missing, cloned again because their declared url
	// changed, and pulled because they auto-update.
	Cloned   []string `json:"cloned"`
	Recloned []string `json:"recloned"`
	Pulled   []string `json:"pulled"`
	// Rematerialized are the intended plugins whose record was missing or
	// stale, materialized again.
	Rematerialized []string `json:"rematerialized"`
	// ScopeNormalized are rematerialized plugins whose record was rebuilt
	// in another scope than their intent's: the scope their enable was
	// written to.
	ScopeNormalized []string `json:"scope_normalized"`
	// FailedMarketplaces and FailedPlugins could not be reconciled; the
	// rest was (a boot never stops on them).
	FailedMarketplaces []string `json:"failed_marketplaces"`
	FailedPlugins      []string `json:"failed_plugins"`
}

// Reconcile brings the derived state in line with the intent, as a
// Computer's boot does; it only adds (nothing is deleted but a clone a
// declaration moved elsewhere: removal is gc's and prune's):
//
//   - the 0.2 -> 0.3 migration, once;
//   - each marketplace declared in extraKnownMarketplaces that is not
//     known is cloned, one whose declared url differs from its record's
//     is cloned again, one that auto-updates is pulled; undeclared ones
//     are left alone;
//   - each intended plugin (installedPlugins) without a record, or whose
//     files are not where its marketplace puts them (a stored
//     installPath is only a hint), is materialized again.
//
// Failures are reported, never returned; the error is for what makes the
// files unreadable.
func (m *Manager) Reconcile(ctx context.Context) (BootReport, error) {
	unlock, err := m.lock()
	if err != nil {
		return BootReport{}, err
	}
	defer unlock()
	rep := BootReport{Cloned: []string{}, Recloned: []string{}, Pulled: []string{}, Rematerialized: []string{},
		ScopeNormalized: []string{}, FailedMarketplaces: []string{}, FailedPlugins: []string{}}
	if err := m.migrate(); err != nil {
		return rep, err
	}
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return rep, err
	}
	declared, _ := merged.Values["extraKnownMarketplaces"].(map[string]any)
	for _, name := range sortedNames(declared) {
		d, _ := declared[name].(map[string]any)
		src, _ := d["source"].(map[string]any)
		url, _ := src["url"].(string)
		auto, _ := d["autoUpdate"].(bool)
		if url == "" {
			continue
		}
		if why := m.mayClone(merged, name, url); why != "" {
			rep.FailedMarketplaces = append(rep.FailedMarketplaces, name)
			if m.Log != nil {
				m.Log.Warn("market: a declared marketplace is not reconciled", "marketplace", name, "why", why)
			}
			continue
		}
		if err := m.reconcileMarketplace(ctx, name, url, auto, &rep); err != nil {
			rep.FailedMarketplaces = append(rep.FailedMarketplaces, name)
			if m.Log != nil {
				m.Log.Warn("market: reconcile of a declared marketplace failed", "marketplace", name, "err", err)
			}
		}
	}
	ledger, err := m.Ledger()
	if err != nil {
		return rep, err
	}
	known, err := m.Known() // after the marketplaces' reconcile above
	if err != nil {
		return rep, err
	}
	for _, id := range Intent(merged) {
		plugin, mp, err := settings.ParsePluginID(id)
		if err != nil {
			continue
		}
		recs := ledger.Plugins[id]
		dir, derr := m.pluginDir(known, mp, plugin)
		// Stale: not where its marketplace puts it, or a legacy record
		// without mcpServers (its bundledMcpServers held names, which
		// the reclaim cannot use): materialized again.
		stale := derr != nil || slices.ContainsFunc(recs, func(r settings.PluginRecord) bool { return r.InstallPath != dir || r.MCPServers == nil })
		if len(recs) > 0 && !stale {
			continue
		}
		// A lost record is rebuilt in the scope its enable was written
		// to (enable and disable act there), else the intent's.
		scopes := []settings.Scope{recordScope(merged, id)}
		if len(recs) > 0 {
			scopes = scopes[:0]
			for _, r := range recs {
				scopes = append(scopes, r.Scope)
			}
		}
		rec, cat, entry, err := m.locate(plugin, mp)
		for _, s := range scopes {
			if err != nil {
				break
			}
			_, err = m.materialize(ctx, mp, rec, cat, entry, InstallOptions{ID: id}, s)
		}
		switch {
		case err != nil:
			rep.FailedPlugins = append(rep.FailedPlugins, id)
			if m.Log != nil {
				m.Log.Warn("market: a plugin could not be materialized", "plugin", id, "err", err)
			}
		case len(recs) == 0 && scopes[0] != intentScope(merged, id):
			rep.Rematerialized = append(rep.Rematerialized, id)
			rep.ScopeNormalized = append(rep.ScopeNormalized, id)
		default:
			rep.Rematerialized = append(rep.Rematerialized, id)
		}
	}
	m.ForgetKept()
	return rep, nil
}

// recordScope is the scope a lost record of id is rebuilt in: the
// highest of local and project whose enabledPlugins names id (where an
// enable of a record of that scope wrote), else the intent's scope.
func recordScope(merged *settings.Merged, id string) settings.Scope {
	for _, s := range []settings.Scope{settings.Local, settings.Project} {
		if v, _ := merged.Layer(s).Values["enabledPlugins"].(map[string]any); v != nil {
			if _, ok := v[id]; ok {
				return s
			}
		}
	}
	return intentScope(merged, id)
}

// mayClone says why the declaration of marketplace name at url must not
// be acted on ("" when it may): blocked; strictKnownMarketplaces and not
// trusted; or a known marketplace moved to another url by a declaration
// that is not the user's own (a working directory cannot re-point what
// the user added).
func (m *Manager) mayClone(merged *settings.Merged, name, url string) string {
	if blockedMarketplace(merged, name, url) {
		return "blocked by blockedMarketplaces"
	}
	if !trustedURL(merged, name, url) {
		// Its plugins could not run anyway; a working directory's
		// declaration makes this machine connect nowhere until the user
		// trusts the url (marketplace add URL --name NAME --trust).
		return "declared by a working directory, and its url is not trusted by the user or the policy"
	}
	known, err := m.Known()
	if err != nil {
		return err.Error()
	}
	if rec, ok := known.Marketplaces[name]; ok && rec.Source.URL != url && declaredURL(merged, settings.User, name) != url {
		return "only the user's own settings may move a known marketplace to another url"
	}
	return ""
}

// intentScope is the lowest scope whose installedPlugins lists id.
func intentScope(merged *settings.Merged, id string) settings.Scope {
	for _, s := range []settings.Scope{settings.User, settings.Project, settings.Local} {
		if slices.Contains(stringList(merged.Layer(s).Values["installedPlugins"]), id) {
			return s
		}
	}
	return settings.User
}

// reconcileMarketplace clones, re-clones or pulls declared marketplace
// name.
func (m *Manager) reconcileMarketplace(ctx context.Context, name, url string, auto bool, rep *BootReport) error {
	known, err := m.Known()
	if err != nil {
		return err
	}
	rec, ok := known.Marketplaces[name]
	dir := m.cloneDir(name)
	_, statErr := os.Stat(filepath.Join(dir, CatalogFile))
	switch {
	case !ok || statErr != nil || rec.Source.URL != url:
		sha, err := m.clone(ctx, url, dir)
		if err != nil {
			return err
		}
		if ok && rec.Source.URL != url {
			rep.Recloned = append(rep.Recloned, name)
		} else {
			rep.Cloned = append(rep.Cloned, name)
		}
		rec = settings.Marketplace{Source: settings.Source{Type: "git", URL: url}, InstallLocation: dir, CommitSHA: sha,
			LastUpdated: timestamp(m.now()), AutoUpdate: auto}
		if known, err = m.Known(); err != nil {
			return err
		}
		known.Marketplaces[name] = rec
		return settings.WriteDerived(m.knownPath(), known)
	case auto:
		if rec.AutoUpdate != auto {
			rec.AutoUpdate = auto
			known.Marketplaces[name] = rec
			if err := settings.WriteDerived(m.knownPath(), known); err != nil {
				return err
			}
		}
		rows, err := m.refresh(ctx, name)
		if err != nil {
			return err
		}
		if len(rows) == 1 && rows[0].Status == "updated" {
			rep.Pulled = append(rep.Pulled, name)
		}
	}
	return nil
}
