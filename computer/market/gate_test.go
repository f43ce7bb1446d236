package market

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// mcpServer is an mcp.json server body: name, bundle_id name+"_id".
func mcpServer(name string) map[string]any {
	return map[string]any{"name": name, "bundle_id": name + "_id", "type": "stdio", "server_parameters": map[string]any{"command": "own-" + name}}
}

// gateWant is a server's expected state: its verdict, the tier that
// decided, and whether it is served.
type gateWant struct {
	origin  string
	verdict Verdict
	tier    int
	served  bool
}

// gateCase is a table row of TestGateTiers: the settings of each scope
// (policy: managed-settings.json; flag: --settings), the servers each
// mcp.json scope declares (by name; flag: --mcp-config; embed: the
// host's), the run's options, and each server's expected state.
type gateCase struct {
	name     string
	settings map[settings.Scope]map[string]any
	servers  map[settings.Scope][]string
	opts     ResolveOptions
	want     map[string]gateWant
}

// tree is every file under root with its content.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gateManager writes c's files for a test manager and returns it with
// the run's options (FlagMCP and Embed filled in) and the root of its
// files.
func gateManager(t *testing.T, c gateCase) (*Manager, ResolveOptions, string) {
	t.Helper()
	m := testManager(t)
	root := filepath.Dir(filepath.Dir(m.Paths.UserDir))
	o := c.opts
	for scope, v := range c.settings {
		var path string
		switch scope {
		case settings.Policy:
			path = filepath.Join(m.Paths.ManagedDir, "managed-settings.json")
		case settings.Flag:
			path = filepath.Join(root, "flag-settings.json")
			m.Paths.FlagSettings = path
		default:
			path = m.Paths.SettingsFile(scope)
		}
		writeJSON(t, path, v)
	}
	for scope, names := range c.servers {
		if scope == settings.Embed {
			for _, n := range names {
				o.Embed = append(o.Embed, config.Server{Name: n, BundleID: n + "_id", Type: "stdio", Stdio: &config.Stdio{Command: "own-" + n}})
			}
			continue
		}
		doc := map[string]any{}
		for _, n := range names {
			doc[n] = mcpServer(n)
		}
		path := m.Paths.MCPFile(scope)
		if scope == settings.Flag {
			path = filepath.Join(root, "flag-mcp.json")
			o.FlagMCP = path
		}
		writeJSON(t, path, map[string]any{"servers": doc})
	}
	return m, o, root
}

// stateOf is the state of the mcp.json (or embed) server with key key.
func stateOf(p *Projection, key string) (ServerState, bool) {
	i := slices.IndexFunc(p.Servers, func(s ServerState) bool { return s.Key == key && s.Origin != OriginPlugin })
	if i < 0 {
		return ServerState{}, false
	}
	return p.Servers[i], true
}

// TestGateTiers (P34, P35, P36 in part, P37, P38, P39): the approval
// gate's seven tiers, first match wins, over settings layers and
// mcp.json scopes written as files:
//
//  1. deniedMcpServers (policy) disables, whatever the origin (an embed
//     server too, P38);
//  2. a non-empty allowedMcpServers (policy) disables what it lacks;
//  3. disabledMcpjsonServers (any scope, the project's too) disables;
//  4. the trusted origins user, flag, embed and policy are enabled;
//  5. enabledMcpjsonServers (user, local, flag, policy) enables, as a
//     "y" written to the local settings does after a restart (P36);
//  6. enableAllProjectMcpServers (same scopes) enables, as "a" does;
//  7. the rest (project and local servers) is PENDING, not served.
//
// The lists hold bundle_ids (a name matches nothing, O2). A project's
// enableAllProjectMcpServers is filtered with a settings error and the
// project's server stays PENDING (P35). --approve-all-mcp and this run's
// approvals enable a PENDING server and write nothing (P37); no case
// writes a file. A project server with a plugin's server's name and
// bundle_id is PENDING and the plugin's copy is not served either; one
// with the name alone is PENDING beside the plugin's (P39).
func TestGateTiers(t *testing.T) {
	type S = map[settings.Scope][]string
	type L = map[settings.Scope]map[string]any
	en := func(origin string, tier int) gateWant { return gateWant{origin, Enabled, tier, true} }
	dis := func(origin string, tier int) gateWant { return gateWant{origin, Disabled, tier, false} }
	pend := func(origin string) gateWant { return gateWant{origin, Pending, 7, false} }
	cases := []gateCase{
		{
			name: "tier 1 denied by policy, whatever the origin",
			settings: L{
				settings.Policy: {"deniedMcpServers": []string{"usr_id", "prj_id", "loc_id", "emb_id", "flg_id", "pol_id"}},
				settings.Local:  {"enabledMcpjsonServers": []string{"prj_id"}, "enableAllProjectMcpServers": true},
			},
			servers: S{settings.User: {"usr", "ok"}, settings.Project: {"prj"}, settings.Local: {"loc"}, settings.Embed: {"emb"}, settings.Flag: {"flg"}, settings.Policy: {"pol"}},
			want: map[string]gateWant{"usr": dis("user", 1), "prj": dis("project", 1), "loc": dis("local", 1), "emb": dis("embed", 1),
				"flg": dis("flag", 1), "pol": dis("policy", 1), "ok": en("user", 4)},
		},
		{
			name:     "tier 1 before tier 2",
			settings: L{settings.Policy: {"allowedMcpServers": []string{"ok_id"}, "deniedMcpServers": []string{"both_id"}}},
			servers:  S{settings.User: {"both", "ok"}},
			want:     map[string]gateWant{"both": dis("user", 1), "ok": en("user", 4)},
		},
		{
			name: "tier 2 allowed list lacks it",
			settings: L{
				settings.Policy: {"allowedMcpServers": []string{"ok_id", "prj_id"}},
				settings.Local:  {"enableAllProjectMcpServers": true},
			},
			servers: S{settings.User: {"usr", "ok"}, settings.Embed: {"emb"}, settings.Project: {"prj", "other"}},
			want:    map[string]gateWant{"usr": dis("user", 2), "emb": dis("embed", 2), "other": dis("project", 2), "ok": en("user", 4), "prj": en("project", 6)},
		},
		{
			name: "tier 3 disabledMcpjsonServers from any scope",
			settings: L{
				settings.Project: {"disabledMcpjsonServers": []string{"usr_id"}},
				settings.Local:   {"disabledMcpjsonServers": []string{"flg_id"}, "enabledMcpjsonServers": []string{"prj_id", "loc_id"}},
				settings.User:    {"disabledMcpjsonServers": []string{"prj_id"}},
			},
			servers: S{settings.User: {"usr"}, settings.Flag: {"flg"}, settings.Project: {"prj"}, settings.Local: {"loc"}},
			want:    map[string]gateWant{"usr": dis("user", 3), "flg": dis("flag", 3), "prj": dis("project", 3), "loc": en("local", 5)},
		},
		{
			name:    "tier 4 trusted origins",
			servers: S{settings.User: {"usr"}, settings.Flag: {"flg"}, settings.Embed: {"emb"}, settings.Policy: {"pol"}},
			want:    map[string]gateWant{"usr": en("user", 4), "flg": en("flag", 4), "emb": en("embed", 4), "pol": en("policy", 4)},
		},
		{
			name:     "tier 5 enabledMcpjsonServers from local (a 'y' after a restart)",
			settings: L{settings.Local: {"enabledMcpjsonServers": []string{"prj_id", "loc_id"}}},
			servers:  S{settings.Project: {"prj", "prj2"}, settings.Local: {"loc"}},
			want:     map[string]gateWant{"prj": en("project", 5), "loc": en("local", 5), "prj2": pend("project")},
		},
		{
			name: "tier 5 from user, flag and policy",
			settings: L{
				settings.User:   {"enabledMcpjsonServers": []string{"a_id"}},
				settings.Flag:   {"enabledMcpjsonServers": []string{"b_id"}},
				settings.Policy: {"enabledMcpjsonServers": []string{"c_id"}},
			},
			servers: S{settings.Project: {"a", "b", "c", "d"}},
			want:    map[string]gateWant{"a": en("project", 5), "b": en("project", 5), "c": en("project", 5), "d": pend("project")},
		},
		{
			name:     "tier 5 before tier 6",
			settings: L{settings.Local: {"enabledMcpjsonServers": []string{"prj_id"}, "enableAllProjectMcpServers": true}},
			servers:  S{settings.Project: {"prj", "prj2"}},
			want:     map[string]gateWant{"prj": en("project", 5), "prj2": en("project", 6)},
		},
		{
			name:     "tier 6 enableAllProjectMcpServers from local (an 'a')",
			settings: L{settings.Local: {"enableAllProjectMcpServers": true}},
			servers:  S{settings.Project: {"prj"}, settings.Local: {"loc"}},
			want:     map[string]gateWant{"prj": en("project", 6), "loc": en("local", 6)},
		},
		{
			name:     "tier 6 from the flag's settings",
			settings: L{settings.Flag: {"enableAllProjectMcpServers": true}},
			servers:  S{settings.Project: {"prj"}},
			want:     map[string]gateWant{"prj": en("project", 6)},
		},
		{
			name:     "an 'n' after a restart",
			settings: L{settings.Local: {"disabledMcpjsonServers": []string{"prj_id"}}},
			servers:  S{settings.Project: {"prj"}},
			want:     map[string]gateWant{"prj": dis("project", 3)},
		},
		{
			name:    "tier 7 project and local servers",
			servers: S{settings.Project: {"prj"}, settings.Local: {"loc"}, settings.User: {"usr"}},
			want:    map[string]gateWant{"prj": pend("project"), "loc": pend("local"), "usr": en("user", 4)},
		},
		{
			name:     "lists hold bundle_ids, not names",
			settings: L{settings.Local: {"enabledMcpjsonServers": []string{"prj"}}, settings.User: {"disabledMcpjsonServers": []string{"usr"}}},
			servers:  S{settings.Project: {"prj"}, settings.User: {"usr"}},
			want:     map[string]gateWant{"prj": pend("project"), "usr": en("user", 4)},
		},
		{
			name:    "a project server replacing a user server is the project's",
			servers: S{settings.User: {"dup"}, settings.Project: {"dup"}},
			want:    map[string]gateWant{"dup": pend("project")},
		},
		{
			name:    "approve all for this run",
			servers: S{settings.Project: {"prj"}, settings.Local: {"loc"}},
			opts:    ResolveOptions{ApproveAll: true},
			want:    map[string]gateWant{"prj": en("project", 6), "loc": en("local", 6)},
		},
		{
			name:    "approved for this run",
			servers: S{settings.Project: {"prj", "prj2"}},
			opts:    ResolveOptions{Approved: []string{"prj_id"}},
			want:    map[string]gateWant{"prj": en("project", 5), "prj2": pend("project")},
		},
		{
			name:     "approve all does not lift a deny",
			settings: L{settings.Policy: {"deniedMcpServers": []string{"prj_id"}}, settings.Local: {"disabledMcpjsonServers": []string{"loc_id"}}},
			servers:  S{settings.Project: {"prj"}, settings.Local: {"loc"}},
			opts:     ResolveOptions{ApproveAll: true, Approved: []string{"prj_id", "loc_id"}},
			want:     map[string]gateWant{"prj": dis("project", 1), "loc": dis("local", 3)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, o, root := gateManager(t, c)
			before := tree(t, root)
			p := resolve(t, m, o)
			if after := tree(t, root); !maps.Equal(after, before) {
				t.Errorf("resolve wrote files: %v", slices.Sorted(maps.Keys(after)))
			}
			if len(p.Errors) != 0 {
				t.Errorf("settings errors: %v", p.Errors)
			}
			var wantServed []string
			for key, w := range c.want {
				st, ok := stateOf(p, key)
				if !ok {
					t.Errorf("%s: not met", key)
					continue
				}
				got := gateWant{st.Origin, st.Verdict, st.Tier, st.Served}
				if got != w || st.BundleID != key+"_id" || st.Name != key {
					t.Errorf("%s: %+v, want %+v", key, st, w)
				}
				if w.served {
					wantServed = append(wantServed, key+"_id="+w.origin)
				}
			}
			slices.Sort(wantServed)
			if got := served(p); !slices.Equal(got, wantServed) {
				t.Errorf("served %v, want %v", got, wantServed)
			}
			if len(p.Servers) != len(c.want) {
				t.Errorf("servers met: %+v", p.Servers)
			}
			var pending []string
			for _, s := range p.Pending() {
				pending = append(pending, s.Key)
			}
			var wantPending []string
			for key, w := range c.want {
				if w.verdict == Pending {
					wantPending = append(wantPending, key)
				}
			}
			slices.Sort(pending)
			slices.Sort(wantPending)
			if !slices.Equal(pending, wantPending) {
				t.Errorf("pending %v, want %v", pending, wantPending)
			}
		})
	}

	t.Run("P35 the project's enableAllProjectMcpServers", func(t *testing.T) {
		m, o, _ := gateManager(t, gateCase{
			settings: map[settings.Scope]map[string]any{settings.Project: {"enableAllProjectMcpServers": true, "enabledMcpjsonServers": []string{"prj_id"}}},
			servers:  map[settings.Scope][]string{settings.Project: {"prj"}},
		})
		p := resolve(t, m, o)
		if st, _ := stateOf(p, "prj"); st.Verdict != Pending || st.Tier != 7 || st.Served {
			t.Errorf("prj: %+v", st)
		}
		file := m.Paths.SettingsFile(settings.Project)
		reason := "a project's settings (committed, anyone's) may not set it; user, local, flag or policy may"
		want := []settings.Error{
			{Scope: settings.Project, Field: "enableAllProjectMcpServers", Reason: reason, SourcePath: file},
			{Scope: settings.Project, Field: "enabledMcpjsonServers", Reason: reason, SourcePath: file},
		}
		if !slices.Equal(p.Errors, want) {
			got, _ := json.Marshal(p.Errors)
			t.Errorf("errors: %s", got)
		}
		if !slices.Contains(p.Notes, "enableAllProjectMcpServers in the project's settings is ignored: only user, local, flag or policy may approve servers ("+file+")") {
			t.Errorf("notes: %q", p.Notes)
		}
	})

	t.Run("P39 a project server borrowing a plugin server's name", func(t *testing.T) {
		borrow := func(t *testing.T, bundleID string) *Projection {
			t.Helper()
			m := wideManager(t, "audit@acme")
			enable(t, m, "audit@acme")
			body := mcpServer("audit-mcp")
			body["bundle_id"] = bundleID
			writeJSON(t, m.Paths.MCPFile(settings.Project), map[string]any{"servers": map[string]any{"audit-mcp": body}})
			return resolve(t, m, ResolveOptions{})
		}
		plugin := func(p *Projection) ServerState {
			i := slices.IndexFunc(p.Servers, func(s ServerState) bool { return s.Origin == OriginPlugin })
			if i < 0 {
				return ServerState{}
			}
			return p.Servers[i]
		}
		// The name and the bundle_id: the project's is PENDING, the
		// plugin's does not take its place.
		p := borrow(t, "acme_audit_srv")
		if st, _ := stateOf(p, "audit-mcp"); st.Origin != "project" || st.Verdict != Pending || st.Tier != 7 || st.Served || st.BundleID != "acme_audit_srv" {
			t.Errorf("the project's: %+v", st)
		}
		if st := plugin(p); st.Plugin != "audit@acme" || st.Served {
			t.Errorf("the plugin's: %+v", st)
		}
		if len(p.Config.Servers) != 0 || len(p.Pending()) != 1 {
			t.Errorf("served %v, pending %+v", served(p), p.Pending())
		}
		// No half state: the plugin's skills wait with its server.
		if len(p.Skills) != 0 || len(p.Plugins) != 1 || p.Plugins[0].Active {
			t.Errorf("the plugin while its server awaits approval: %v %+v", skillNames(p), p.Plugins)
		}
		// The name alone: the project's is PENDING, the plugin's is its
		// own server and is served.
		p = borrow(t, "proj_audit")
		if st, _ := stateOf(p, "audit-mcp"); st.Origin != "project" || st.Verdict != Pending || st.Tier != 7 || st.Served {
			t.Errorf("the project's: %+v", st)
		}
		if st := plugin(p); st.Verdict != Enabled || st.Tier != 4 || !st.Served {
			t.Errorf("the plugin's: %+v", st)
		}
		if got := served(p); !slices.Equal(got, []string{"acme_audit_srv=plugin:audit@acme"}) {
			t.Errorf("served %v", got)
		}
	})
}

// TestGatePluginTiers (P40): a plugin's server passes tiers 1-3 like
// any server: denied by policy (1), left out of the allowed list (2) or
// disabled (3) it is not served and not PENDING, and its plugin's
// skills are suppressed (the plugin is not active); another plugin is
// unaffected. Tiers 4-7 take the scope of the plugin's enable: the
// user's or the local settings' is trusted (4); the project's alone is
// PENDING (7) unless the local settings approve the server (5) or all
// project servers (6).
func TestGatePluginTiers(t *testing.T) {
	policy := func(m *Manager) string { return filepath.Join(m.Paths.ManagedDir, "managed-settings.json") }
	for _, c := range []struct {
		name  string
		write func(t *testing.T, m *Manager)
		tier  int
	}{
		{"denied", func(t *testing.T, m *Manager) {
			writeJSON(t, policy(m), map[string]any{"deniedMcpServers": []string{"acme_audit_srv"}})
		}, 1},
		{"not allowed", func(t *testing.T, m *Manager) {
			writeJSON(t, policy(m), map[string]any{"allowedMcpServers": []string{"acme_lone_srv"}})
		}, 2},
		{"disabled", func(t *testing.T, m *Manager) {
			if err := settings.Set(m.Paths, settings.User, "disabledMcpjsonServers", []string{"acme_audit_srv"}); err != nil {
				t.Fatal(err)
			}
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := wideManager(t, "audit@acme", "lone@acme")
			enable(t, m, "audit@acme")
			c.write(t, m)
			p := resolve(t, m, ResolveOptions{ApproveAll: true})
			want := ServerState{Key: "audit-mcp", Name: "audit-mcp", BundleID: "acme_audit_srv", Origin: OriginPlugin, Plugin: "audit@acme", Verdict: Disabled, Tier: c.tier}
			if !slices.Equal(p.Servers, []ServerState{want}) {
				t.Errorf("servers: %+v", p.Servers)
			}
			if len(p.Config.Servers) != 0 || len(p.Pending()) != 0 || len(p.Skills) != 0 {
				t.Errorf("served %v, pending %+v, skills %v", served(p), p.Pending(), skillNames(p))
			}
			if len(p.Plugins) != 2 || p.Plugins[0].ID != "audit@acme" || p.Plugins[0].Active || !p.Plugins[0].Enabled ||
				p.Plugins[0].Reason != "server 'audit-mcp' (acme_audit_srv) is disabled" {
				t.Errorf("plugins: %+v", p.Plugins)
			}
			// Another plugin is not concerned (lone passes a deny of
			// audit's server, and is the allowed one).
			enable(t, m, "lone@acme")
			p = resolve(t, m, ResolveOptions{})
			if got := served(p); !slices.Equal(got, []string{"acme_lone_srv=plugin:lone@acme"}) || len(skillNames(p)) != 0 {
				t.Errorf("with lone: %v %v", got, skillNames(p))
			}
		})
	}
	for _, c := range []struct {
		name     string
		settings map[settings.Scope]map[string]any
		verdict  Verdict
		tier     int
	}{
		{"enabled by the user", map[settings.Scope]map[string]any{settings.User: {"enabledPlugins": map[string]any{"audit@acme": true}}}, Enabled, 4},
		{"enabled by the local settings", map[settings.Scope]map[string]any{settings.Local: {"enabledPlugins": map[string]any{"audit@acme": true}}}, Enabled, 4},
		{"enabled by the project alone", map[settings.Scope]map[string]any{settings.Project: {"enabledPlugins": map[string]any{"audit@acme": true}}}, Pending, 7},
		{"enabled by the project, approved by the local settings", map[settings.Scope]map[string]any{
			settings.Project: {"enabledPlugins": map[string]any{"audit@acme": true}},
			settings.Local:   {"enabledMcpjsonServers": []string{"acme_audit_srv"}}}, Enabled, 5},
		{"enabled by the project, all approved by the local settings", map[settings.Scope]map[string]any{
			settings.Project: {"enabledPlugins": map[string]any{"audit@acme": true}},
			settings.Local:   {"enableAllProjectMcpServers": true}}, Enabled, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := wideManager(t, "audit@acme")
			for scope, v := range c.settings {
				if scope == settings.User {
					for k, x := range v {
						if err := settings.Set(m.Paths, settings.User, k, x); err != nil {
							t.Fatal(err)
						}
					}
					continue
				}
				writeJSON(t, m.Paths.SettingsFile(scope), v)
			}
			p := resolve(t, m, ResolveOptions{})
			served := c.verdict == Enabled
			want := ServerState{Key: "audit-mcp", Name: "audit-mcp", BundleID: "acme_audit_srv", Origin: OriginPlugin, Plugin: "audit@acme", Verdict: c.verdict, Tier: c.tier, Served: served}
			if !slices.Equal(p.Servers, []ServerState{want}) {
				t.Errorf("servers: %+v", p.Servers)
			}
			wantSkills := []string(nil)
			if served {
				wantSkills = []string{"audit:audit-guide@marketplace:acme@1.0.0"}
			}
			if got := skillNames(p); !slices.Equal(got, wantSkills) || p.Plugins[0].Active != served {
				t.Errorf("skills %v, plugin %+v", got, p.Plugins[0])
			}
			if !served && (len(p.Pending()) != 1 || !strings.Contains(p.Plugins[0].Reason, "is pending")) {
				t.Errorf("pending %+v, plugin %+v", p.Pending(), p.Plugins[0])
			}
		})
	}
}
