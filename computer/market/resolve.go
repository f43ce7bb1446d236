package market

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/skill"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// This file computes what a Computer serves from the files alone: the
// mcp.json servers of every scope through the approval gate, and the
// skills and servers of every active plugin (installed and enabled).
// Nothing here is remembered between two calls: ownership and origin are
// a pure function of the intent (settings), the clones and the
// manifests, so a restart gives the same answer (runtime contract, boot
// recovery). Reclaiming a server of a plugin that has just been disabled
// is the one thing that depends on what ran before; [Projector] does it.

// OriginPlugin is the origin of a server a plugin brings.
const OriginPlugin = "plugin"

// ResolveOptions are what a Computer adds to the files.
type ResolveOptions struct {
	// FlagMCP is the flag scope's mcp.json (--mcp-config), if any.
	FlagMCP string
	// Embed are the host program's own servers (origin embed).
	Embed []config.Server
	// ApproveAll approves every PENDING server for this run only
	// (--approve-all-mcp); nothing is written.
	ApproveAll bool
	// Approved are bundle_ids approved for this run only (the answers of
	// a prompt that were not written down).
	Approved []string
}

// ServerState is one server the resolution met, whether it is served or
// not.
type ServerState struct {
	// Key is its key in mcp.json (its name); for a plugin's server, its
	// name.
	Key      string `json:"key"`
	Name     string `json:"name"`
	BundleID string `json:"bundle_id"`
	// Origin is the settings scope that defines it, or "plugin".
	Origin string `json:"origin"`
	// Plugin is "<plugin>@<marketplace>" for origin plugin.
	Plugin string `json:"plugin,omitempty"`
	// Verdict is the approval gate's; Tier the tier that decided (0: a
	// plugin's server whose bundle_id a declaration already has).
	Verdict Verdict `json:"verdict"`
	Tier    int     `json:"tier"`
	// Served reports whether the Computer hosts it.
	Served bool `json:"served"`
}

// PluginState is one installed plugin as the resolution sees it.
type PluginState struct {
	ID string `json:"id"`
	// Enabled is the merged enabledPlugins value ("only true activates").
	Enabled bool `json:"enabled"`
	// State is installed_enabled, installed_disabled, or not_installed (a
	// record without intent, for gc).
	State string `json:"state"`
	// Scopes are the scopes of its records.
	Scopes []settings.Scope `json:"scopes"`
	// MCPServers are the bundle_ids its records declare.
	MCPServers []string `json:"mcpServers"`
	// Active reports whether its skills and servers are projected;
	// Reason says why an enabled plugin is not (its clone is missing, a
	// server is denied or awaits approval).
	Active bool   `json:"active"`
	Reason string `json:"reason,omitempty"`
}

// Projection is what a Computer serves, resolved from the files.
type Projection struct {
	// Config is the servers to host (every ENABLED server: the mcp.json
	// scopes' and the active plugins'), and every input, the plugins'
	// pooled as "<plugin>@<mp>/<id>".
	Config *config.File
	// Origins are the origin of each hosted bundle_id (a scope, or
	// "plugin:<plugin>@<mp>").
	Origins map[string]string
	// Servers are every server met, with the gate's verdict.
	Servers []ServerState
	// Skills are the active plugins' skills by source
	// ("marketplace:<mp>"), each listed source with its skills in plugin
	// order.
	Skills map[string][]skill.Package
	// Plugins are the installed plugins (a record, or an intent).
	Plugins []PluginState
	// Declared maps each bundle_id a ledger record declares to the
	// plugins declaring it (every record, disabled ones included: the
	// reclaim rule counts them).
	Declared map[string][]string
	// NonPlugin is the bundle_ids declared by a non-plugin source (every
	// mcp.json scope and embed, whatever their verdict).
	NonPlugin map[string]bool
	// PluginServers are the servers of every installed plugin whose
	// clone is there, by bundle_id (a reclaimed server is looked up here
	// while its plugin stays installed).
	PluginServers map[string]config.Server
	// Errors are the settings' and mcp.json's problems; Notes what a
	// person should know (a dependency satisfied, a filtered key).
	Errors []settings.Error
	Notes  []string
}

// Pending are the servers the gate left PENDING.
func (p *Projection) Pending() []ServerState {
	var out []ServerState
	for _, s := range p.Servers {
		if s.Verdict == Pending {
			out = append(out, s)
		}
	}
	return out
}

// Resolve computes what a Computer serves from the files of m.Paths
// (see [Projection]). It reads, never writes, and nothing in it stops a
// Computer from starting: every problem is an Error or a Note.
func (m *Manager) Resolve(o ResolveOptions) (*Projection, error) {
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return nil, err
	}
	mcpFiles := settings.LoadMCP(m.Paths, o.FlagMCP, o.Embed)
	p := &Projection{Config: &config.File{Inputs: slices.Clone(mcpFiles.Inputs)}, Origins: map[string]string{},
		Skills: map[string][]skill.Package{}, Declared: map[string][]string{}, NonPlugin: map[string]bool{},
		PluginServers: map[string]config.Server{}, Errors: append(slices.Clone(merged.Errors), mcpFiles.Errors...)}
	g := newGate(merged, o)
	taken := map[string]bool{} // hosted bundle_ids
	for _, s := range mcpFiles.Servers {
		p.NonPlugin[s.Server.BundleID] = true
		v, tier := g.verdict(s.Server.BundleID, s.Origin)
		st := ServerState{Key: s.Key, Name: s.Server.Name, BundleID: s.Server.BundleID, Origin: string(s.Origin), Verdict: v, Tier: tier}
		if v == Enabled && !taken[s.Server.BundleID] {
			st.Served = true
			taken[s.Server.BundleID] = true
			p.Config.Servers = append(p.Config.Servers, s.Server)
			p.Origins[s.Server.BundleID] = string(s.Origin)
		}
		p.Servers = append(p.Servers, st)
	}
	p.Notes = append(p.Notes, g.notes...)
	if err := m.resolvePlugins(p, merged, g, taken); err != nil {
		return nil, err
	}
	return p, nil
}

// resolvePlugins adds the installed plugins' states and the active ones'
// servers and skills to p.
func (m *Manager) resolvePlugins(p *Projection, merged *settings.Merged, g *gate, taken map[string]bool) error {
	ledger, err := m.Ledger()
	if err != nil {
		return err
	}
	known, err := m.Known() // read once for every plugin
	if err != nil {
		return err
	}
	intent := Intent(merged)
	var ready []pending
	ids := slices.Clone(intent)
	for id := range ledger.Plugins {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		recs := ledger.Plugins[id]
		ps := PluginState{ID: id, Enabled: enabled(merged, id), Scopes: []settings.Scope{}, MCPServers: []string{}}
		for _, r := range recs {
			ps.Scopes = append(ps.Scopes, r.Scope)
			for _, b := range r.MCPServers {
				if !slices.Contains(ps.MCPServers, b) {
					ps.MCPServers = append(ps.MCPServers, b)
				}
				if !slices.Contains(p.Declared[b], id) {
					p.Declared[b] = append(p.Declared[b], id)
				}
			}
		}
		slices.Sort(ps.MCPServers)
		switch {
		case !slices.Contains(intent, id):
			ps.State = "not_installed"
		case ps.Enabled:
			ps.State = "installed_enabled"
		default:
			ps.State = "installed_disabled"
		}
		plugin, mp, _ := settings.ParsePluginID(id)
		var dir string
		if len(recs) > 0 {
			dir, err = m.pluginDir(known, mp, plugin)
		}
		if err == nil && len(recs) > 0 {
			err = checkTrust(merged, known, mp)
		}
		var servers []config.Server
		var inputs []smcp.MCPServerInput
		if dir != "" && err == nil {
			servers, inputs, err = pluginServers(dir, id)
		}
		if err == nil && len(recs) > 0 {
			for _, s := range servers {
				if _, ok := p.PluginServers[s.BundleID]; !ok {
					p.PluginServers[s.BundleID] = s
				}
			}
		}
		switch {
		case ps.State != "installed_enabled":
		case len(recs) == 0:
			ps.Reason = "not materialized (run a boot or 'plugin install' again)"
		case err != nil:
			ps.Reason = err.Error()
		default:
			ready = append(ready, pending{len(p.Plugins), id, mp, dir, servers, inputs, recs})
		}
		p.Plugins = append(p.Plugins, ps)
	}
	// An input's value comes from its A2C_SMCP_ variable, whose name
	// folds '@', '/' and '-' alike: two inputs whose names meet would
	// read each other's value (a plugin named to meet another's would
	// read its password). Every plugin with such an input stays inactive.
	vars := map[string][]string{} // variable → the plugins (or "" for a declared input) that read it
	for _, in := range p.Config.Inputs {
		vars[config.EnvName(in.ID, "", "")] = append(vars[config.EnvName(in.ID, "", "")], "")
	}
	for _, c := range ready {
		for _, in := range c.inputs {
			vars[config.EnvName(in.ID, "", "")] = append(vars[config.EnvName(in.ID, "", "")], c.id)
		}
	}
	for _, c := range ready {
		ps := &p.Plugins[c.index]
		for _, in := range c.inputs {
			if v := config.EnvName(in.ID, "", ""); len(vars[v]) > 1 {
				ps.Reason = fmt.Sprintf("input %s's variable %s is another input's too (%s)", in.ID, v, strings.Join(vars[v], ", "))
			}
		}
		if ps.Reason == "" {
			m.activate(p, ps, merged, g, taken, c.id, c.mp, c.dir, c.servers, c.inputs, c.recs)
		}
	}
	return nil
}

// pending is an enabled plugin that may be activated.
type pending struct {
	index   int // in Projection.Plugins
	id, mp  string
	dir     string
	servers []config.Server
	inputs  []smcp.MCPServerInput
	recs    []settings.PluginRecord
}

// activate projects an enabled plugin's servers and skills into p,
// unless the gate denies one of its servers or leaves it PENDING (then
// nothing of it is: no half state, and a denied server's skills are
// suppressed with it).
func (m *Manager) activate(p *Projection, ps *PluginState, merged *settings.Merged, g *gate, taken map[string]bool, id, mp, dir string, servers []config.Server, inputs []smcp.MCPServerInput, recs []settings.PluginRecord) {
	trusted := enabledTrusted(merged, id)
	var states []ServerState
	var host []config.Server
	blocked := ""
	for _, s := range servers {
		st := ServerState{Key: s.Name, Name: s.Name, BundleID: s.BundleID, Origin: OriginPlugin, Plugin: id}
		st.Verdict, st.Tier = g.pluginVerdict(s.BundleID, trusted)
		switch {
		case st.Verdict != Enabled:
			if blocked == "" {
				blocked = fmt.Sprintf("server '%s' (%s) is %s", s.Name, s.BundleID, st.Verdict)
			}
		case taken[s.BundleID]:
			st.Tier = 0 // existing wins: the dependency is satisfied
			p.Notes = append(p.Notes, fmt.Sprintf("plugin '%s': server %s is already declared; dependency satisfied", id, s.BundleID))
		case p.NonPlugin[s.BundleID]:
			// Declared, but not served (awaiting approval, or denied): the
			// declaration wins and the plugin waits with it; its skills
			// without their server would be a half state.
			if blocked == "" {
				blocked = fmt.Sprintf("server %s is declared by a settings scope that is not approved", s.BundleID)
			}
		default:
			host = append(host, s)
		}
		states = append(states, st)
	}
	if blocked != "" {
		ps.Reason = blocked
		for i := range states {
			if states[i].Verdict == Enabled {
				states[i].Verdict, states[i].Tier = Disabled, 0
			}
		}
		p.Servers = append(p.Servers, states...)
		return
	}
	ps.Active = true
	for _, s := range host {
		taken[s.BundleID] = true
		p.Config.Servers = append(p.Config.Servers, s)
		p.Origins[s.BundleID] = OriginPlugin + ":" + id
		i := slices.IndexFunc(states, func(x ServerState) bool { return x.BundleID == s.BundleID })
		states[i].Served = true
	}
	p.Servers = append(p.Servers, states...)
	p.Config.Inputs = append(p.Config.Inputs, inputs...)
	version := ""
	for _, r := range recs {
		if r.Scope == settings.User || version == "" {
			version = r.Version
		}
	}
	source := "marketplace:" + mp
	p.Skills[source] = append(p.Skills[source], PluginSkills(dir, id, source, version, m.Log)...)
}

// checkTrust fails when the operator does not trust marketplace mp at
// the url it was cloned from (see trust.go): its plugins stay inactive.
func checkTrust(merged *settings.Merged, known *settings.KnownMarketplaces, mp string) error {
	rec := known.Marketplaces[mp]
	if !trustedURL(merged, mp, rec.Source.URL) {
		return fmt.Errorf("marketplace '%s' (%s) is not trusted by the user or the policy (marketplace add --trust, or trustedMarketplaces), or is blocked", mp, rec.Source.URL)
	}
	return nil
}

// Intent is the merged installedPlugins: the plugins installed (O1: the
// intent lives in the settings, as the Python SDK keeps it).
func Intent(merged *settings.Merged) []string {
	return stringList(merged.Values["installedPlugins"])
}

// enabled reports whether the merged enabledPlugins says true for id:
// only true activates, and a higher scope's false wins over a lower's
// true.
func enabled(merged *settings.Merged, id string) bool {
	v, _ := merged.Values["enabledPlugins"].(map[string]any)
	return v[id] == true
}

// enabledTrusted reports whether a scope the operator owns (user, local)
// says enabledPlugins[id] = true: a plugin enabled by the project's
// committed settings alone passes the gate like a project server.
func enabledTrusted(merged *settings.Merged, id string) bool {
	for _, s := range []settings.Scope{settings.User, settings.Local} {
		l := merged.Layer(s)
		if v, _ := l.Values["enabledPlugins"].(map[string]any); v[id] == true && !l.Committed {
			return true
		}
	}
	return false
}

// pluginDir is where plugin of marketplace mp lives: a pure function of
// the marketplace's clone and catalog (a stored installPath is never
// trusted): its directory in the catalog's clone for a relative source,
// else its own clone under <home>/marketplace/.plugins/<mp>/<plugin>.
// known is known_marketplaces.json as read.
func (m *Manager) pluginDir(known *settings.KnownMarketplaces, mp, plugin string) (string, error) {
	rec, ok := known.Marketplaces[mp]
	if !ok {
		return "", fmt.Errorf("marketplace '%s' not added", mp)
	}
	cat, err := ReadCatalog(rec.InstallLocation)
	if err != nil {
		return "", fmt.Errorf("marketplace '%s' catalog not cloned at %s", mp, rec.InstallLocation)
	}
	i := slices.IndexFunc(cat.Plugins, func(e Entry) bool { return e.Name == plugin })
	if i < 0 {
		return "", fmt.Errorf("plugin '%s' not found in marketplace '%s' manifest", plugin, mp)
	}
	src, err := cat.pluginSource(rec.InstallLocation, cat.Plugins[i])
	if err != nil {
		return "", err
	}
	dir, root := src.dir, rec.InstallLocation
	if dir == "" {
		dir, root = m.ownClone(mp, plugin), m.ownClone(mp, plugin)
		if src.path != "" {
			dir = filepath.Join(dir, filepath.Clean(src.path))
		}
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("plugin '%s@%s' is not materialized at %s", plugin, mp, dir)
	}
	if err := insideClone(root, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// insideClone fails unless dir, its links resolved, is inside the clone
// at root (resolved too): a link committed in a repository must not
// make a plugin of a directory elsewhere.
func insideClone(root, dir string) error {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("the clone %s cannot be resolved", root)
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("the plugin's directory %s cannot be resolved", dir)
	}
	if d != r && !strings.HasPrefix(d, r+string(filepath.Separator)) {
		return fmt.Errorf("the plugin's directory %s leads out of its clone", dir)
	}
	return nil
}

// ownClone is where a plugin with its own repository is cloned.
func (m *Manager) ownClone(mp, plugin string) string {
	return filepath.Join(m.Paths.SkillHome, "marketplace", ".plugins", mp, plugin)
}

// pluginServers parses every mcp-servers/*.json of the plugin at dir
// (each one server whose name is the file's stem; inputs.json holds the
// plugin's inputs, [...] or {"inputs": [...]}). The plugin's inputs are
// pooled as "<id>/<input>": a bare ${input:x} of its servers names the
// plugin's x when it declares one (the scoped id first), else the global
// x; so two plugins' inputs of the same id stay apart. Any problem fails
// the whole plugin.
func pluginServers(dir, id string) ([]config.Server, []smcp.MCPServerInput, error) {
	inputs, err := pluginInputs(dir, id)
	if err != nil {
		return nil, nil, err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "mcp-servers", "*.json"))
	var out []config.Server
	for _, f := range files {
		stem := strings.TrimSuffix(filepath.Base(f), ".json")
		if stem == "inputs" {
			continue
		}
		if st, err := os.Lstat(f); err != nil || !st.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("mcp-servers/%s.json is not a regular file", stem)
		}
		b, err := settings.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("mcp-servers/%s.json cannot be read", stem)
		}
		text := string(b)
		for _, in := range inputs {
			bare := strings.TrimPrefix(in.ID, id+"/")
			text = strings.ReplaceAll(text, "${input:"+bare+"}", "${input:"+in.ID+"}")
		}
		parsed, err := config.Parse([]byte(text), "mcp-servers/"+stem+".json")
		if err != nil {
			return nil, nil, err
		}
		if len(parsed.Servers) != 1 {
			return nil, nil, fmt.Errorf("mcp-servers/%s.json must hold one server", stem)
		}
		s := parsed.Servers[0]
		if s.Name != stem {
			return nil, nil, fmt.Errorf("mcp-servers/%s.json: the server's name %q is not the file's stem", stem, s.Name)
		}
		if slices.ContainsFunc(out, func(x config.Server) bool { return x.BundleID == s.BundleID }) {
			return nil, nil, fmt.Errorf("mcp-servers/%s.json: bundle_id %q is another server's of the plugin", stem, s.BundleID)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b config.Server) int { return strings.Compare(a.BundleID, b.BundleID) })
	return out, inputs, nil
}

// pluginInputs reads a plugin's mcp-servers/inputs.json, its ids pooled
// as "<id>/<input>".
func pluginInputs(dir, id string) ([]smcp.MCPServerInput, error) {
	b, err := settings.ReadFile(filepath.Join(dir, "mcp-servers", "inputs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.New("mcp-servers/inputs.json cannot be read")
	}
	var list json.RawMessage
	var wrapped struct {
		Inputs json.RawMessage `json:"inputs"`
	}
	if json.Unmarshal(b, &wrapped) == nil && wrapped.Inputs != nil {
		list = wrapped.Inputs
	} else {
		list = b
	}
	doc, _ := json.Marshal(map[string]any{"servers": map[string]any{}, "inputs": list})
	parsed, err := config.Parse(doc, "mcp-servers/inputs.json")
	if err != nil {
		return nil, err
	}
	out := parsed.Inputs
	for i := range out {
		out[i].ID = id + "/" + out[i].ID
	}
	return out, nil
}

// PluginSkills are the skills of the plugin at dir: each skills/<dir>/
// with a SKILL.md whose front matter has a description, one level below
// skills/, named "<plugin>:<dir>" (the front matter's name is display
// only), of source ("marketplace:<mp>") and version.
func PluginSkills(dir, id, source, version string, log *slog.Logger) []skill.Package {
	plugin, _, _ := settings.ParsePluginID(id)
	ents, _ := os.ReadDir(filepath.Join(dir, "skills"))
	inside := mustEval(dir) + string(filepath.Separator)
	var out []skill.Package
	for _, e := range ents {
		sd := filepath.Join(dir, "skills", e.Name())
		if !e.IsDir() || !skill.ValidLeaf(e.Name()) {
			continue
		}
		root, err := filepath.EvalSymlinks(sd)
		if err != nil || !strings.HasPrefix(root, inside) {
			continue // never a package outside the plugin
		}
		doc, err := skill.ReadDoc(root)
		if err != nil || !doc.HasFront {
			continue
		}
		meta, err := skill.ParseMeta(relaxName(doc.Front, e.Name()), nil)
		if err != nil || strings.TrimSpace(meta.Description) == "" {
			if log != nil {
				log.Warn("market: plugin skill left out", "plugin", id, "skill", e.Name())
			}
			continue
		}
		ref := meta.Ref(plugin+":"+e.Name(), source, root)
		ref.Version = version
		out = append(out, skill.Package{Ref: ref, Root: root, Digest: skill.Fingerprint(root)})
	}
	return out
}

// relaxName gives front matter the directory's name when its own is
// missing or differs: a plugin skill's name is display only, and is not
// checked against its directory as a user skill's is.
func relaxName(front []byte, name string) []byte {
	raw, err := skill.ParseYAML(front)
	if err != nil {
		return front
	}
	raw["name"] = name
	b, err := json.Marshal(raw)
	if err != nil {
		return front
	}
	return b // JSON is YAML
}

func mustEval(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
