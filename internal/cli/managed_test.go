package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/market"
	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// TestApprovePending (P36): the boot's question about each PENDING
// server shows its name, bundle_id and origin; y approves it, n denies
// it, a approves every project server and ends the questions, each
// written to the local settings only, so that the next boot asks
// nothing.
func TestApprovePending(t *testing.T) {
	dir := t.TempDir()
	paths := settings.Paths{UserDir: filepath.Join(dir, "user"), SkillHome: filepath.Join(dir, "home"), Cwd: filepath.Join(dir, "cwd"),
		ManagedDir: filepath.Join(dir, "managed")}
	servers := map[string]any{}
	for _, n := range []string{"one", "two", "three", "four"} {
		servers[n] = map[string]any{"name": n, "type": "stdio", "server_parameters": map[string]any{"command": "x"}}
	}
	b, _ := json.Marshal(map[string]any{"servers": servers})
	if err := os.MkdirAll(filepath.Join(paths.Cwd, ".tfrobot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths.MCPFile(settings.Project), b, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &market.Manager{Paths: paths}
	proj, err := m.Resolve(market.ResolveOptions{})
	if err != nil || len(proj.Pending()) != 4 {
		t.Fatalf("pending: %+v %v", proj.Pending(), err)
	}
	var out bytes.Buffer
	approvePending(strings.NewReader("y\nn\na\n"), &out, paths, proj.Pending()) // four, one, three: y, n, a
	if !strings.Contains(out.String(), "⚠ Unapproved workspace MCP server 'four' (bundle_id four, origin=project)\n  [y]es this server · [a]ll project servers · [n]o (deny): ") {
		t.Errorf("question: %q", out.String())
	}
	if n := strings.Count(out.String(), "Unapproved"); n != 3 {
		t.Errorf("%d questions after a, want 3:\n%s", n, out.String())
	}
	local, _ := os.ReadFile(paths.SettingsFile(settings.Local))
	var got map[string]any
	_ = json.Unmarshal(local, &got)
	want := `{"disabledMcpjsonServers":["one"],"enableAllProjectMcpServers":true,"enabledMcpjsonServers":["four"]}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("local settings %s, want %s", b, want)
	}
	for _, s := range []settings.Scope{settings.User, settings.Project} {
		if _, err := os.Stat(paths.SettingsFile(s)); !os.IsNotExist(err) {
			t.Errorf("%s settings written", s)
		}
	}
	proj, _ = m.Resolve(market.ResolveOptions{})
	if len(proj.Pending()) != 0 {
		t.Errorf("pending after the answers: %+v", proj.Pending())
	}
	verdicts := map[string]market.Verdict{}
	for _, s := range proj.Servers {
		verdicts[s.BundleID] = s.Verdict
	}
	if verdicts["four"] != market.Enabled || verdicts["one"] != market.Disabled || verdicts["two"] != market.Enabled || verdicts["three"] != market.Enabled {
		t.Errorf("verdicts: %v", verdicts)
	}
}
