package desktop

import (
	"reflect"
	"testing"
)

func TestNewSet(t *testing.T) {
	s := NewSet("window://a/1", "http://x/y", "window://a/1", "window://", "window://b?q=1", "file:///z")
	want := Set{"window://a/1": {}, "window://b?q=1": {}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("NewSet = %v, want %v", s, want)
	}
	if NewSet() == nil {
		t.Error("NewSet() = nil")
	}
}

func TestSetEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b Set
		want bool
	}{
		{"both empty", NewSet(), NewSet(), true},
		{"nil and empty", nil, NewSet(), true},
		{"same, different order", NewSet("window://a", "window://b"), NewSet("window://b", "window://a"), true},
		{"non-window URIs ignored", NewSet("window://a", "skill://x"), NewSet("window://a"), true},
		{"added", NewSet("window://a"), NewSet("window://a", "window://b"), false},
		{"removed", NewSet("window://a", "window://b"), NewSet("window://a"), false},
		{"replaced", NewSet("window://a", "window://b"), NewSet("window://a", "window://c"), false},
		{"query is part of the string", NewSet("window://a"), NewSet("window://a?x=1"), false},
	}
	for _, tt := range tests {
		if got := tt.a.Equal(tt.b); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
		if got := tt.b.Equal(tt.a); got != tt.want {
			t.Errorf("%s: reverse Equal = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRefreshOnUpdated(t *testing.T) {
	tests := []struct {
		uri  string
		want bool
	}{
		{"window://com.example/x", true},
		{"window://com.example/x?priority=1", true},
		{"WINDOW://h", true},
		{"skill://s/SKILL.md", false},
		{"file:///tmp/a", false},
		{"window://", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := RefreshOnUpdated(tt.uri); got != tt.want {
			t.Errorf("RefreshOnUpdated(%q) = %v, want %v", tt.uri, got, tt.want)
		}
	}
}

func TestHostCollisions(t *testing.T) {
	ws := []Window{
		{URI: "window://shared/a", Server: "s2"},
		{URI: "window://shared/b", Server: "s1"},
		{URI: "window://shared/c", Server: "s2"},
		{URI: "window://own/a", Server: "s1"},
		{URI: "window://own/b", Server: "s1"},
		{URI: "window://also/x?q", Server: "s3"},
		{URI: "window://also#f", Server: "s1"},
		{URI: "http://shared/a", Server: "s3"},
		{URI: "window://", Server: "s3"},
	}
	got := HostCollisions(ws)
	want := []Collision{
		{Host: "also", Servers: []string{"s1", "s3"}},
		{Host: "shared", Servers: []string{"s1", "s2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("HostCollisions = %+v, want %+v", got, want)
	}
	if got := HostCollisions(ws[3:5]); got != nil {
		t.Errorf("HostCollisions without collision = %+v, want nil", got)
	}
	if got := HostCollisions(nil); got != nil {
		t.Errorf("HostCollisions(nil) = %+v, want nil", got)
	}
}
