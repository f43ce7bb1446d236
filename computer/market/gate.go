package market

import (
	"fmt"
	"slices"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// Verdict is the approval gate's answer for one server.
type Verdict string

// The gate's verdicts.
const (
	Enabled  Verdict = "enabled"
	Disabled Verdict = "disabled"
	Pending  Verdict = "pending" // a person must approve it (or --approve-all-mcp)
)

// gate is the MCP server approval gate (guides/mcp-approval-gate-
// alignment): seven tiers, the first that matches decides.
//
//  1. the bundle_id is in deniedMcpServers (policy): DISABLED;
//  2. allowedMcpServers (policy) is not empty and lacks it: DISABLED;
//  3. it is in disabledMcpjsonServers (any scope): DISABLED;
//  4. its origin is trusted (user, flag, embed, policy): ENABLED;
//  5. it is in enabledMcpjsonServers (user, local, flag, policy): ENABLED;
//  6. enableAllProjectMcpServers is true (same scopes): ENABLED;
//  7. else PENDING.
//
// Every list holds bundle_ids (O2: the guide's rule; settings reports a
// display name there with the bundle_id it would be). The scope rules
// (tiers 1-2 from policy only, 5-6 never from the project) are enforced
// when settings are read: a value from a scope that may not supply it
// never reaches the merge, and is reported as a settings error.
//
// A plugin's server (0.4.0, the Rust SDK's 0.3.2) passes tiers 1-3 like
// any; tiers 4-7 let it through when the plugin was enabled by a scope
// the operator owns (user or local), and otherwise ask like a project
// server: a plugin enabled by the committed project settings alone is
// PENDING.
type gate struct {
	denied, allowed, disabled, enabled []string
	all                                bool
	approved                           []string // this run's approvals
	notes                              []string
}

func newGate(merged *settings.Merged, o ResolveOptions) *gate {
	g := &gate{
		denied:   stringList(merged.Values["deniedMcpServers"]),
		allowed:  stringList(merged.Values["allowedMcpServers"]),
		disabled: stringList(merged.Values["disabledMcpjsonServers"]),
		enabled:  stringList(merged.Values["enabledMcpjsonServers"]),
		approved: o.Approved,
	}
	g.all, _ = merged.Values["enableAllProjectMcpServers"].(bool)
	if o.ApproveAll {
		g.all = true
	}
	for _, e := range merged.Errors {
		if e.Scope == settings.Project && (e.Field == "enabledMcpjsonServers" || e.Field == "enableAllProjectMcpServers") {
			g.notes = append(g.notes, fmt.Sprintf("%s in the project's settings is ignored: only user, local, flag or policy may approve servers (%s)", e.Field, e.SourcePath))
		}
	}
	return g
}

// deny is tiers 1-3.
func (g *gate) deny(id string) (Verdict, int, bool) {
	switch {
	case slices.Contains(g.denied, id):
		return Disabled, 1, true
	case len(g.allowed) > 0 && !slices.Contains(g.allowed, id):
		return Disabled, 2, true
	case slices.Contains(g.disabled, id):
		return Disabled, 3, true
	}
	return "", 0, false
}

// approve is tiers 5-7.
func (g *gate) approve(id string) (Verdict, int) {
	switch {
	case slices.Contains(g.enabled, id) || slices.Contains(g.approved, id):
		return Enabled, 5
	case g.all:
		return Enabled, 6
	}
	return Pending, 7
}

// verdict is a declared server's verdict and the tier that gave it.
func (g *gate) verdict(id string, origin settings.Scope) (Verdict, int) {
	if v, t, ok := g.deny(id); ok {
		return v, t
	}
	if origin.Trusted() {
		return Enabled, 4
	}
	return g.approve(id)
}

// pluginVerdict is a plugin server's verdict; trusted reports whether
// the plugin's enable came from a scope the operator owns.
func (g *gate) pluginVerdict(id string, trusted bool) (Verdict, int) {
	if v, t, ok := g.deny(id); ok {
		return v, t
	}
	if trusted {
		return Enabled, 4
	}
	return g.approve(id)
}
