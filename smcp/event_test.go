package smcp

import (
	"reflect"
	"strings"
	"testing"
)

func TestEventNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{EventToolCall, "client:tool_call"},
		{EventGetTools, "client:get_tools"},
		{EventGetConfig, "client:get_config"},
		{EventGetDesktop, "client:get_desktop"},
		{EventGetResources, "client:get_resources"},
		{EventGetSkills, "client:get_skills"},
		{EventGetSkill, "client:get_skill"},
		{EventGetBlob, "client:get_blob"},
		{EventJoinOffice, "server:join_office"},
		{EventLeaveOffice, "server:leave_office"},
		{EventUpdateConfig, "server:update_config"},
		{EventUpdateToolList, "server:update_tool_list"},
		{EventUpdateDesktop, "server:update_desktop"},
		{EventUpdateSkills, "server:update_skills"},
		{EventCancelToolCall, "server:tool_call_cancel"},
		{EventListRoom, "server:list_room"},
		{NotifyEnterOffice, "notify:enter_office"},
		{NotifyLeaveOffice, "notify:leave_office"},
		{NotifyUpdateConfig, "notify:update_config"},
		{NotifyUpdateToolList, "notify:update_tool_list"},
		{NotifyUpdateDesktop, "notify:update_desktop"},
		{NotifyUpdateSkills, "notify:update_skills"},
		{NotifyCancelToolCall, "notify:tool_call_cancel"},
		{Namespace, "/smcp"},
		{ProtocolVersion, "0.4.0"},
		{QueryVersion, "a2c_version"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestEventLists(t *testing.T) {
	lists := []struct {
		name   string
		events []string
		n      int
		prefix string
		is     func(string) bool
	}{
		{"client", ClientEvents(), 9, "client:", IsClientEvent},
		{"server", ServerEvents(), 8, "server:", IsServerEvent},
		{"notify", NotifyEvents(), 7, "notify:", IsNotifyEvent},
	}
	seen := map[string]bool{}
	for _, l := range lists {
		if len(l.events) != l.n {
			t.Errorf("%s: %d events, want %d", l.name, len(l.events), l.n)
		}
		for _, e := range l.events {
			if seen[e] {
				t.Errorf("duplicate event %q", e)
			}
			seen[e] = true
			if !strings.HasPrefix(e, l.prefix) {
				t.Errorf("%s: %q lacks prefix %q", l.name, e, l.prefix)
			}
			for _, other := range lists {
				if got, want := other.is(e), other.name == l.name; got != want {
					t.Errorf("Is%sEvent(%q) = %v, want %v", other.name, e, got, want)
				}
			}
		}
	}
	if len(seen) != 24 {
		t.Errorf("%d distinct events, want 24", len(seen))
	}
	want := []string{EventToolCall, EventGetTools, EventGetConfig, EventGetDesktop,
		EventGetResources, EventGetSkills, EventGetSkill, EventGetBlob, EventPutBlob}
	if got := ClientEvents(); !reflect.DeepEqual(got, want) {
		t.Errorf("ClientEvents() = %v, want spec order %v", got, want)
	}
	ClientEvents()[0] = "mutated"
	if ClientEvents()[0] != EventToolCall {
		t.Error("ClientEvents shares its backing array")
	}
	for _, s := range []string{"", "client:", "CLIENT:TOOL_CALL", "client:tool_call ", "tool_call"} {
		if IsClientEvent(s) || IsServerEvent(s) || IsNotifyEvent(s) {
			t.Errorf("%q recognised as an event", s)
		}
	}
}

func TestNewClientRequest(t *testing.T) {
	want := map[string]ClientRequest{
		EventToolCall:     &ToolCallReq{},
		EventGetTools:     &GetToolsReq{},
		EventGetConfig:    &GetComputerConfigReq{},
		EventGetDesktop:   &GetDesktopReq{},
		EventGetResources: &GetResourcesReq{},
		EventGetSkills:    &GetSkillsReq{},
		EventGetSkill:     &GetSkillReq{},
		EventGetBlob:      &GetBlobReq{},
		EventPutBlob:      &PutBlobReq{},
	}
	for _, e := range ClientEvents() {
		got := NewClientRequest(e)
		if reflect.TypeOf(got) != reflect.TypeOf(want[e]) {
			t.Errorf("NewClientRequest(%q) = %T, want %T", e, got, want[e])
		}
	}
	for _, e := range append(ServerEvents(), NotifyEvents()...) {
		if got := NewClientRequest(e); got != nil {
			t.Errorf("NewClientRequest(%q) = %T, want nil", e, got)
		}
	}
	raw := []byte(`{"agent":"a","req_id":"r","computer":"pc"}`)
	for _, e := range ClientEvents() {
		req := NewClientRequest(e)
		if err := Decode(raw, req); err != nil {
			t.Fatal(err)
		}
		if req.Target() != "pc" || req.CallData() != (AgentCallData{"a", "r"}) {
			t.Errorf("%s: Target/CallData = %q/%v", e, req.Target(), req.CallData())
		}
	}
}

func TestRole(t *testing.T) {
	for r, want := range map[Role]bool{RoleAgent: true, RoleComputer: true, "": false, "Agent": false, "server": false} {
		if r.Valid() != want {
			t.Errorf("Role(%q).Valid() = %v", r, !want)
		}
	}
	if RoleAgent != "agent" || RoleComputer != "computer" {
		t.Error("role values changed")
	}
}
