package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestManagementState: a joined Computer's a2c:management_state is kept
// under its own name (capped) and returned by Management; an Agent's, an
// unjoined member's and a malformed one are dropped; and no member of any
// office receives anything because of it.
func TestManagementState(t *testing.T) {
	s, url := newTestServer(t, Config{})
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	c := connect(t, url, echo)
	c.join(smcp.RoleComputer, "c", "o")
	far := connect(t, url, echo)
	far.join(smcp.RoleComputer, "far", "o2")
	stranger := connect(t, url, nil) // connected, in no office

	st := smcp.ManagementState{
		Computer: "spoofed",
		Servers: []smcp.ManagedServer{
			{BundleID: "fs", Name: "fs", Origin: "user", Verdict: "enabled", Served: true},
			{BundleID: "acme_audit_srv", Name: "audit-srv", Origin: "plugin", Plugin: "audit@acme", Verdict: "enabled", Served: true},
		},
		Plugins: []smcp.ManagedPlugin{{ID: "audit@acme", State: "installed_enabled", Enabled: true, Active: true, MCPServers: []string{"acme_audit_srv"}}},
	}
	const want = `{"computer":"c","servers":[{"bundle_id":"fs","name":"fs","origin":"user","verdict":"enabled","served":true},` +
		`{"bundle_id":"acme_audit_srv","name":"audit-srv","origin":"plugin","plugin":"audit@acme","verdict":"enabled","served":true}],` +
		`"plugins":[{"id":"audit@acme","state":"installed_enabled","enabled":true,"active":true,"mcpServers":["acme_audit_srv"]}]}`
	stored := func(office, name string) string {
		got, ok := s.Management(office, name)
		if !ok {
			return "none"
		}
		b, _ := json.Marshal(got)
		return string(b)
	}

	if got := stored("o", "c"); got != "none" {
		t.Fatalf("before any state: %s", got)
	}
	if got := c.call(smcp.EventManagementState, st); len(got) != 0 {
		t.Fatalf("ack = %q, want an empty ack", got)
	}
	if got := stored("o", "c"); got != want {
		t.Fatalf("stored\n got %s\nwant %s", got, want)
	}
	// The caller owns what Management returns.
	if got, _ := s.Management("o", "c"); len(got.Plugins) == 1 {
		got.Servers[0].Name = "changed"
		got.Plugins[0].MCPServers[0] = "changed"
	}
	if got := stored("o", "c"); got != want {
		t.Fatalf("after the caller changed its copy: %s", got)
	}

	for _, tc := range []struct {
		name    string
		from    *peer
		payload any
	}{
		{"from an Agent", a, st},
		{"from a member in no office", stranger, st},
		{"not an object", c, json.RawMessage(`"garbage"`)},
		{"servers not an array", c, json.RawMessage(`{"computer":"c","servers":{"x":1}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.from.call(smcp.EventManagementState, tc.payload); len(got) != 0 {
				t.Fatalf("ack = %q, want an empty ack", got)
			}
			for _, who := range []struct{ office, name string }{{"o", "a"}, {"o", "stranger"}, {"o", "spoofed"}} {
				if got := stored(who.office, who.name); got != "none" {
					t.Errorf("%s/%s: %s", who.office, who.name, got)
				}
			}
			// Nothing is kept on the Agent's member either.
			s.mu.RLock()
			if m := s.offices["o"].agent; m.management != nil {
				t.Errorf("the Agent kept a state: %+v", *m.management)
			}
			s.mu.RUnlock()
			if got := stored("o", "c"); got != want {
				t.Errorf("the Computer's state changed: %s", got)
			}
		})
	}

	// A state past the bounds keeps its first 512 servers and plugins.
	big := smcp.ManagementState{}
	for i := range maxManagedServers + 10 {
		id := fmt.Sprintf("s%03d", i)
		big.Servers = append(big.Servers, smcp.ManagedServer{BundleID: id, Name: id, Origin: "user", Verdict: "enabled"})
		big.Plugins = append(big.Plugins, smcp.ManagedPlugin{ID: id + "@m", State: "installed_disabled"})
	}
	c.call(smcp.EventManagementState, big)
	got, ok := s.Management("o", "c")
	if !ok || len(got.Servers) != maxManagedServers || len(got.Plugins) != maxManagedPlugins ||
		got.Servers[maxManagedServers-1].BundleID != "s511" || got.Plugins[maxManagedPlugins-1].ID != "s511@m" || got.Computer != "c" {
		t.Fatalf("capped state: ok=%t, %d servers (last %q), %d plugins", ok, len(got.Servers), got.Servers[len(got.Servers)-1].BundleID, len(got.Plugins))
	}
	if got := stored("o2", "far"); got != "none" {
		t.Errorf("far never sent a state: %s", got)
	}
	if got := stored("nowhere", "c"); got != "none" {
		t.Errorf("another office: %s", got)
	}

	// The stranger's state, sent before it joined, was not kept for it.
	if got := stranger.join(smcp.RoleComputer, "stranger", "o"); got != "true,null" {
		t.Fatalf("stranger's join: %s", got)
	}
	if got := stored("o", "stranger"); got != "none" {
		t.Errorf("the stranger's state from before its join: %s", got)
	}

	// A Computer that left its office is no joined Computer: its state
	// is dropped, and the one of its earlier seat went with the leave (a
	// join sends its own).
	if got := c.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o"}); strings.Join(got, ",") != "true,null" {
		t.Fatalf("c's leave: %s", got)
	}
	c.call(smcp.EventManagementState, st)
	if got := c.join(smcp.RoleComputer, "c", "o"); got != "true,null" {
		t.Fatalf("c's join: %s", got)
	}
	if got := stored("o", "c"); got != "none" {
		t.Errorf("after a state sent out of the office: %s", got)
	}

	// Nobody heard of any of it: the update sent last reaches the others
	// after anything the states before it could have caused.
	c.call(smcp.EventUpdateToolList, smcp.ComputerRef{Computer: "c"})
	eventually(t, "the update at the Agent", func() bool { return len(a.got(smcp.NotifyUpdateToolList)) == 1 })
	eventually(t, "the update at the stranger", func() bool { return len(stranger.got(smcp.NotifyUpdateToolList)) == 1 })
	for _, p := range []struct {
		name string
		p    *peer
		want []string
	}{
		{"the Agent", a, []string{smcp.NotifyEnterOffice, smcp.NotifyEnterOffice, smcp.NotifyLeaveOffice, smcp.NotifyEnterOffice, smcp.NotifyUpdateToolList}},
		{"c", c, []string{smcp.NotifyEnterOffice}},
		{"the stranger", stranger, []string{smcp.NotifyLeaveOffice, smcp.NotifyEnterOffice, smcp.NotifyUpdateToolList}},
		{"far", far, nil},
	} {
		if got := eventNames(p.p); !slices.Equal(got, p.want) {
			t.Errorf("%s received %q, want %q", p.name, got, p.want)
		}
	}
}

// eventNames are the names of the events p received, in order.
func eventNames(p *peer) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, e := range p.events {
		out = append(out, e.Name)
	}
	return out
}
