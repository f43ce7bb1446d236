package cli

import (
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/market"
)

// TestResolveServerName: the human surfaces' name → id rule: an exact
// bundle_id wins, else a unique name; several matches list each
// bundle_id, name and owner; a server only a plugin brings points to the
// plugin; nothing is guessed.
func TestResolveServerName(t *testing.T) {
	servers := []market.ServerState{
		{Key: "fs", Name: "fs", BundleID: "files", Origin: "user"},
		{Key: "files", Name: "files", BundleID: "files_proj", Origin: "project"},
		{Key: "a", Name: "a", BundleID: "dup", Origin: "user"},
		{Key: "b", Name: "b", BundleID: "dup", Origin: "local"},
		{Key: "audit-mcp", Name: "audit-mcp", BundleID: "acme_audit_srv", Origin: market.OriginPlugin, Plugin: "audit@acme"},
	}
	for _, tc := range []struct{ arg, key, err string }{
		{"files", "fs", ""}, // the bundle_id wins over the other server's name
		{"files_proj", "files", ""},
		{"fs", "fs", ""},
		{"dup", "", "'dup' names several servers: dup (name a, user), dup (name b, local); give the bundle_id"},
		{"audit-mcp", "", "server 'audit-mcp' comes from plugin audit@acme: disable or uninstall the plugin ('plugin uninstall audit@acme')"},
		{"nope", "", "no server named 'nope'"},
	} {
		key, err := resolveServerName(servers, tc.arg)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if key != tc.key || msg != tc.err {
			t.Errorf("%s: %q %q, want %q %q", tc.arg, key, msg, tc.key, tc.err)
		}
	}
}
