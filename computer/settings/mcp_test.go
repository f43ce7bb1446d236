package settings

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/config"
)

// TestLoadMCP (P5): a server whose body names it otherwise than its key
// is dropped; a higher scope replaces a server whole; its origin is the
// highest scope that defines it; a bad server drops only itself; inputs
// resolve by id the same way; the host's own servers are origin embed.
func TestLoadMCP(t *testing.T) {
	p := testPaths(t)
	write(t, p.MCPFile(User), `{"servers":{"alpha":{"type":"stdio","server_parameters":{"command":"user-alpha","args":["-v"]}},`+
		`"beta":{"name":"beta","type":"stdio","server_parameters":{"command":"user-beta"}}},`+
		`"inputs":[{"id":"tok","type":"promptString","description":"user's"}]}`)
	write(t, p.MCPFile(Project), `{"servers":{"alpha":{"type":"stdio","server_parameters":{"command":"project-alpha"}},`+
		`"broken":{"type":"stdio","server_parameters":{}}}}`)
	write(t, p.MCPFile(Local), `{"servers":{"gamma":{"name":"other","type":"stdio","server_parameters":{"command":"x"}}},`+
		`"inputs":[{"id":"tok","type":"promptString","description":"local's"}]}`)
	flag := filepath.Join(t.TempDir(), "flag-mcp.json")
	write(t, flag, `{"servers":{"beta":{"type":"stdio","server_parameters":{"command":"flag-beta"}}}}`)
	write(t, p.MCPFile(Policy), `not json`)
	embedFile, err := config.Parse([]byte(`{"servers":{"delta":{"type":"stdio","server_parameters":{"command":"host-delta"}}}}`), "host.json")
	if err != nil {
		t.Fatal(err)
	}
	m := LoadMCP(p, flag, embedFile.Servers)
	type row struct {
		key     string
		origin  Scope
		command string
	}
	var got []row
	for _, s := range m.Servers {
		got = append(got, row{s.Key, s.Origin, s.Server.Stdio.Command})
	}
	want := []row{{"alpha", Project, "project-alpha"}, {"beta", Flag, "flag-beta"}, {"delta", Embed, "host-delta"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("servers %v, want %v", got, want)
	}
	if a, _ := m.Server("alpha"); len(a.Server.Stdio.Args) != 0 || a.File != p.MCPFile(Project) {
		t.Errorf("alpha is not project's whole: %+v", a)
	}
	wantErrs := []Error{
		{Project, "servers.broken", "server_parameters.command: required", p.MCPFile(Project)},
		{Local, "servers.gamma.name", `"other" is not the server's key "gamma"`, p.MCPFile(Local)},
		{Policy, "<file>", "not a JSON object: the layer is left out, the file untouched", p.MCPFile(Policy)},
	}
	if !reflect.DeepEqual(m.Errors, wantErrs) {
		t.Errorf("errors:\n%s\nwant\n%s", asJSON(m.Errors), asJSON(wantErrs))
	}
	// The working directory's inputs are its own (workspace/ID): local's
	// tok does not replace the user's.
	if len(m.Inputs) != 2 || m.Inputs[0].ID != "tok" || m.Inputs[0].Description != "user's" ||
		m.Inputs[1].ID != "workspace/tok" || m.Inputs[1].Description != "local's" {
		t.Errorf("inputs: %+v", m.Inputs)
	}
	for s, trusted := range map[Scope]bool{User: true, Project: false, Local: false, Embed: true, Flag: true, Policy: true} {
		if s.Trusted() != trusted {
			t.Errorf("%s trusted %v", s, s.Trusted())
		}
	}
}

// TestCheckMCPFile (P6, the check): --mcp-config must be an object with
// "servers" or "inputs".
func TestCheckMCPFile(t *testing.T) {
	for doc, ok := range map[string]bool{`{"servers":{}}`: true, `{"inputs":[]}`: true, `{}`: false, `[]`: false, `{"mcpServers":{}}`: false, `x`: false} {
		if err := CheckMCPFile([]byte(doc)); (err == nil) != ok {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
