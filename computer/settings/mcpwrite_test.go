package settings

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func srv(command string) map[string]any {
	return map[string]any{"type": "stdio", "server_parameters": map[string]any{"command": command}}
}

// TestUpsertMCP (§1.3): a new server goes to the requested scope, an
// existing one where it is defined; an equal body writes nothing; a
// server the policy or the flag file defines is not written; a corrupt
// target is left as it is; a body named otherwise than its key is
// refused; the other keys of the file stay.
func TestUpsertMCP(t *testing.T) {
	p := testPaths(t)
	write(t, p.MCPFile(User), `{"servers":{"mine":{"type":"stdio","server_parameters":{"command":"old"}}},"inputs":[],"x-note":"kept"}`)
	flag := filepath.Join(t.TempDir(), "flag.json")
	write(t, flag, `{"servers":{"pinned":{"type":"stdio","server_parameters":{"command":"flag"}}}}`)

	if s, err := UpsertMCP(p, flag, nil, Local, "fresh", srv("new")); err != nil || s != Local {
		t.Fatalf("new server: %v %v", s, err)
	}
	if s, err := UpsertMCP(p, flag, nil, Local, "mine", srv("newer")); err != nil || s != User {
		t.Fatalf("existing server: %v %v", s, err)
	}
	m := LoadMCP(p, flag, nil)
	if got, _ := m.Server("mine"); got.Server.Stdio.Command != "newer" || got.Origin != User {
		t.Errorf("mine: %+v", got)
	}
	if got, _ := m.Server("fresh"); got.Origin != Local {
		t.Errorf("fresh: %+v", got)
	}
	doc, _ := readObject(p.MCPFile(User))
	if doc["x-note"] != "kept" {
		t.Errorf("the file's other keys: %v", doc)
	}
	st, _ := os.Stat(p.MCPFile(User))
	if _, err := UpsertMCP(p, flag, nil, Local, "mine", srv("newer")); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(p.MCPFile(User)); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("an equal body was written")
	}
	if _, err := UpsertMCP(p, flag, nil, Local, "pinned", srv("mine")); !errors.Is(err, ErrMCPWriteTarget) {
		t.Errorf("a flag server: %v", err)
	}
	if _, err := UpsertMCP(p, flag, nil, Local, "named", map[string]any{"name": "other", "type": "stdio", "server_parameters": map[string]any{"command": "x"}}); err == nil {
		t.Error("a body named otherwise was written")
	}
	if _, err := UpsertMCP(p, flag, nil, Local, "bad", map[string]any{"type": "stdio"}); err == nil {
		t.Error("an invalid server was written")
	}
	write(t, p.MCPFile(Project), `{not json`)
	if _, err := UpsertMCP(p, flag, nil, Project, "p", srv("x")); !errors.Is(err, ErrMCPCorrupt) {
		t.Errorf("a corrupt target: %v", err)
	}
	if b, _ := os.ReadFile(p.MCPFile(Project)); string(b) != `{not json` {
		t.Errorf("the corrupt file changed: %s", b)
	}
}

// TestRemoveMCP (§1.3): remove deletes the key in every writable scope
// that defines it; a server whose winner is the flag file is refused; an
// unknown one is an error.
func TestRemoveMCP(t *testing.T) {
	p := testPaths(t)
	write(t, p.MCPFile(User), `{"servers":{"both":{"type":"stdio","server_parameters":{"command":"u"}}}}`)
	write(t, p.MCPFile(Local), `{"servers":{"both":{"type":"stdio","server_parameters":{"command":"l"}}}}`)
	flag := filepath.Join(t.TempDir(), "flag.json")
	write(t, flag, `{"servers":{"pinned":{"type":"stdio","server_parameters":{"command":"flag"}}}}`)
	scopes, err := RemoveMCP(p, flag, nil, "both")
	if err != nil || !slices.Equal(scopes, []Scope{User, Local}) {
		t.Fatalf("remove: %v %v", scopes, err)
	}
	if _, ok := LoadMCP(p, flag, nil).Server("both"); ok {
		t.Error("still declared")
	}
	if _, err := RemoveMCP(p, flag, nil, "pinned"); !errors.Is(err, ErrMCPWriteTarget) {
		t.Errorf("a flag server: %v", err)
	}
	if _, err := RemoveMCP(p, flag, nil, "nothing"); err == nil {
		t.Error("an unknown server was removed")
	}
}
