package market

import (
	"encoding/json"
	"testing"
)

// TestProjectorManagementState: the Projector tells its Target each
// server's origin and each plugin's state, from the projection, and only
// when they changed.
func TestProjectorManagementState(t *testing.T) {
	m := wideManager(t, "audit@acme")
	f := &fakeTarget{}
	pr := &Projector{M: m, Target: f}
	steps := []struct {
		name  string
		do    func(t *testing.T)
		calls int
		want  string
	}{
		{"installed", func(*testing.T) {}, 1,
			`{"computer":"","servers":[],"plugins":[{"id":"audit@acme","state":"installed_disabled","enabled":false,"active":false,"mcpServers":["acme_audit_srv"]}]}`},
		{"enabled", func(t *testing.T) { enable(t, m, "audit@acme") }, 2,
			`{"computer":"","servers":[{"bundle_id":"acme_audit_srv","name":"audit-mcp","origin":"plugin","plugin":"audit@acme","verdict":"enabled","served":true}],` +
				`"plugins":[{"id":"audit@acme","state":"installed_enabled","enabled":true,"active":true,"mcpServers":["acme_audit_srv"]}]}`},
		{"unchanged", func(*testing.T) {}, 2, ""},
	}
	for _, s := range steps {
		s.do(t)
		apply(t, pr)
		if f.mgmts != s.calls {
			t.Fatalf("%s: %d SetManagement calls, want %d", s.name, f.mgmts, s.calls)
		}
		if s.want == "" {
			continue
		}
		if b, _ := json.Marshal(f.mgmt); string(b) != s.want {
			t.Fatalf("%s: state\n got %s\nwant %s", s.name, b, s.want)
		}
	}
}
