package smcp

import (
	"encoding/json"
	"testing"
)

func TestManagementStateEncoding(t *testing.T) {
	tests := []struct {
		name string
		v    ManagementState
		want string
	}{
		{"empty", ManagementState{Computer: "pc"}, `{"computer":"pc","servers":[],"plugins":[]}`},
		{"full", ManagementState{
			Computer: "pc",
			Servers: []ManagedServer{
				{BundleID: "fs", Name: "fs", Origin: "user", Verdict: "enabled", Served: true},
				{BundleID: "acme_audit_srv", Name: "audit-srv", Origin: "plugin", Plugin: "audit@acme", Verdict: "pending"},
			},
			Plugins: []ManagedPlugin{
				{ID: "audit@acme", State: "installed_enabled", Enabled: true, Reason: "server 'audit-srv' (acme_audit_srv) is pending", MCPServers: []string{"acme_audit_srv"}},
				{ID: "lone@acme", State: "installed_disabled"},
			},
		}, `{"computer":"pc","servers":[` +
			`{"bundle_id":"fs","name":"fs","origin":"user","verdict":"enabled","served":true},` +
			`{"bundle_id":"acme_audit_srv","name":"audit-srv","origin":"plugin","plugin":"audit@acme","verdict":"pending","served":false}],` +
			`"plugins":[{"id":"audit@acme","state":"installed_enabled","enabled":true,"active":false,"reason":"server 'audit-srv' (acme_audit_srv) is pending","mcpServers":["acme_audit_srv"]},` +
			`{"id":"lone@acme","state":"installed_disabled","enabled":false,"active":false,"mcpServers":[]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("encoded\n got %s\nwant %s", b, tt.want)
			}
			var back ManagementState
			if err := Decode(b, &back); err != nil {
				t.Fatal(err)
			}
			if b2, _ := json.Marshal(back); string(b2) != tt.want {
				t.Fatalf("round trip\n got %s\nwant %s", b2, tt.want)
			}
		})
	}
	if EventManagementState != "a2c:management_state" || IsClientEvent(EventManagementState) || IsServerEvent(EventManagementState) || IsNotifyEvent(EventManagementState) {
		t.Fatalf("EventManagementState %q must be an extension, in no protocol list", EventManagementState)
	}
}
