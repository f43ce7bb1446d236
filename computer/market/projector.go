package market

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/skill"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Target is a running Computer as a [Projector] drives it.
type Target interface {
	// Reload makes the hosted servers those of cfg (and tells the office
	// what changed).
	Reload(ctx context.Context, cfg *config.File) error
	// SetMarketSkills replaces the marketplace skills by source
	// ("marketplace:<mp>"; a source not in skills has none) and reports
	// whether what Agents see changed (then it tells them).
	SetMarketSkills(skills map[string][]skill.Package) bool
	// SetManagement replaces what the hub is told of the servers'
	// origins and the plugins' states (see [smcp.EventManagementState]).
	SetManagement(st smcp.ManagementState)
}

// WatchInterval is how often a [Projector] looks at the files.
const WatchInterval = 300 * time.Millisecond

// Projector keeps a running Computer in step with the files: each time
// the settings, the mcp.json scopes, the ledger or the marketplaces
// change (a `plugin enable` in another process, a hand edit), it
// resolves them again and applies the result, so that an enabled
// plugin's skills and tools appear at once, and a disabled or
// uninstalled one's disappear and can no longer be called.
//
// It is also where the reclaim rule lives for a running Computer: a
// plugin's server that leaves the projection because its plugin was
// disabled or uninstalled stays hosted while another plugin's record
// (a disabled one too) declares it, or while `uninstall --keep-servers`
// kept it; otherwise it is unmounted. A restart forgets such servers:
// a boot projects installed ∧ enabled only.
type Projector struct {
	M       *Manager
	Target  Target
	Options ResolveOptions
	Log     *slog.Logger

	mu       sync.Mutex
	last     *Projection
	applied  string                   // the config last given to Reload, as JSON
	retained map[string]retainedEntry // plugin servers kept past their plugin
	fp       string
	reported string
	managed  string // the state last given to SetManagement, as JSON
}

type retainedEntry struct {
	owner  string
	server config.Server
}

// Apply resolves the files and applies the result to the Target; it
// returns the projection applied. Reload is called only when the
// servers or inputs changed (so an install, which changes neither,
// sends nothing), the skills only tell when they changed, and
// SetManagement is called only when the servers' origins or the
// plugins' states changed.
func (p *Projector) Apply(ctx context.Context) (*Projection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	proj, err := p.M.Resolve(p.Options)
	if err != nil {
		return nil, err
	}
	p.retain(proj)
	p.report(proj)
	b, _ := json.Marshal(struct {
		S []config.Server
		I any
	}{proj.Config.Servers, proj.Config.Inputs})
	var rerr error
	if string(b) != p.applied {
		rerr = p.Target.Reload(ctx, proj.Config)
		p.applied = string(b)
	}
	p.Target.SetMarketSkills(proj.Skills)
	st := managementState(proj)
	if b, err := json.Marshal(st); err == nil && string(b) != p.managed {
		p.Target.SetManagement(st)
		p.managed = string(b)
	}
	p.last = proj
	return proj, rerr
}

// managementState is what the hub is told of proj: each server's origin,
// verdict and whether it is served, and each plugin's state. Names and
// states only: never a server's parameters.
func managementState(proj *Projection) smcp.ManagementState {
	st := smcp.ManagementState{Servers: make([]smcp.ManagedServer, 0, len(proj.Servers)), Plugins: make([]smcp.ManagedPlugin, 0, len(proj.Plugins))}
	for _, s := range proj.Servers {
		st.Servers = append(st.Servers, smcp.ManagedServer{BundleID: s.BundleID, Name: s.Name, Origin: s.Origin, Plugin: s.Plugin, Verdict: string(s.Verdict), Served: s.Served})
	}
	for _, ps := range proj.Plugins {
		st.Plugins = append(st.Plugins, smcp.ManagedPlugin{ID: ps.ID, State: ps.State, Enabled: ps.Enabled, Active: ps.Active, Reason: ps.Reason, MCPServers: slices.Clone(ps.MCPServers)})
	}
	return st
}

// retain adds to proj the plugin servers the reclaim rule keeps.
func (p *Projector) retain(proj *Projection) {
	if p.retained == nil {
		p.retained = map[string]retainedEntry{}
	}
	hosted := map[string]bool{}
	for _, s := range proj.Config.Servers {
		hosted[s.BundleID] = true
	}
	kept := p.M.Kept()
	// What left the projection since the last apply.
	if p.last != nil {
		for _, s := range p.last.Config.Servers {
			origin := p.last.Origins[s.BundleID]
			owner, ok := strings.CutPrefix(origin, OriginPlugin+":")
			if !ok || hosted[s.BundleID] {
				continue
			}
			others := slices.ContainsFunc(proj.Declared[s.BundleID], func(q string) bool { return q != owner })
			if others || slices.Contains(kept, s.BundleID) {
				p.retained[s.BundleID] = retainedEntry{owner: owner, server: s}
			}
		}
	}
	for id, r := range p.retained {
		switch {
		case hosted[id]:
			delete(p.retained, id) // projected again in its own right
		case len(proj.Declared[id]) == 0 && !slices.Contains(kept, id):
			delete(p.retained, id) // the last declaring record is gone: reclaimed
		default:
			proj.Config.Servers = append(proj.Config.Servers, r.server)
			proj.Origins[id] = OriginPlugin + ":" + r.owner
			hosted[id] = true
			for i := range proj.Servers {
				if proj.Servers[i].BundleID == id && proj.Servers[i].Origin == OriginPlugin {
					proj.Servers[i].Served = true
				}
			}
		}
	}
}

// report logs the projection's problems, PENDING servers and notes once
// each time they change.
func (p *Projector) report(proj *Projection) {
	if p.Log == nil {
		return
	}
	var lines []string
	for _, e := range proj.Errors {
		lines = append(lines, "settings error: "+e.Error())
	}
	for _, s := range proj.Pending() {
		lines = append(lines, fmt.Sprintf("skipped pending MCP server '%s' (bundle_id %s, origin=%s); approve in REPL or pass --approve-all-mcp", s.Name, s.BundleID, s.Origin))
	}
	lines = append(lines, proj.Notes...)
	for _, ps := range proj.Plugins {
		if ps.Reason != "" {
			lines = append(lines, fmt.Sprintf("plugin '%s' not active: %s", ps.ID, ps.Reason))
		}
	}
	joined := strings.Join(lines, "\n")
	if joined == p.reported {
		return
	}
	p.reported = joined
	for _, l := range lines {
		p.Log.Warn("management: " + l)
	}
}

// Watch applies the files each time they change, until ctx ends.
func (p *Projector) Watch(ctx context.Context) {
	t := time.NewTicker(WatchInterval)
	defer t.Stop()
	p.fp = p.fingerprint()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fp := p.fingerprint()
		if fp == p.fp {
			continue
		}
		p.fp = fp
		if p.Log != nil {
			p.Log.Debug("management: the files changed; applying them")
		}
		if _, err := p.Apply(ctx); err != nil && p.Log != nil {
			p.Log.Warn("management: applying the settings", "err", err)
		}
	}
}

// fingerprint is the size and time of every file a projection reads
// (settings and mcp.json of every scope, the derived files, the
// catalogs).
func (p *Projector) fingerprint() string {
	paths := p.M.Paths
	var files []string
	for _, s := range settings.Scopes {
		files = append(files, paths.SettingsFile(s))
	}
	files = append(files, paths.PolicyFiles()...)
	for _, s := range []settings.Scope{settings.User, settings.Project, settings.Local, settings.Policy} {
		files = append(files, paths.MCPFile(s))
	}
	files = append(files, p.Options.FlagMCP,
		filepath.Join(paths.SkillHome, settings.KnownMarketplacesFile),
		filepath.Join(paths.SkillHome, settings.InstalledPluginsFile),
		filepath.Join(paths.SkillHome, KeptFile))
	cats, _ := filepath.Glob(filepath.Join(paths.SkillHome, "marketplace", "*", CatalogFile))
	files = append(files, cats...)
	var b strings.Builder
	for _, f := range files {
		if f == "" {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s -\n", f)
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String()
}

// Boot is a Computer's start on the management plane's files: the
// reconcile (see [Manager.Reconcile]), then a Projector for them with
// the options o. A reconcile's failures are in the report; its error is
// for files that cannot be read.
func (m *Manager) Boot(ctx context.Context, o ResolveOptions) (*Projector, BootReport, error) {
	rep, err := m.Reconcile(ctx)
	if err != nil {
		return nil, rep, err
	}
	return &Projector{M: m, Options: o, Log: m.Log}, rep, nil
}

// Start applies the files to target and then follows them (Watch) until
// ctx ends; it returns the first projection and the error of its
// Reload (servers whose inputs could not be resolved: the rest is
// served).
func (p *Projector) Start(ctx context.Context, target Target) (*Projection, error) {
	p.Target = target
	proj, err := p.Apply(ctx)
	if proj == nil {
		return nil, err
	}
	go p.Watch(ctx)
	return proj, err
}
