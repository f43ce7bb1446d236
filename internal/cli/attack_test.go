package cli

// Adversarial tests of the management verbs and the managed boot
// (the security review of issue 33). A test named for a FINDING was seen
// failing before its fix and is its regression test; the others show a
// defence that held. Every run uses temporary XDG_CONFIG_HOME, A2C_SKILL_HOME,
// XDG_STATE_HOME, XDG_DATA_HOME and HOME, never the user's own.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/market"
	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// atkEnv points every per-user directory of this process at a temp root
// and makes a project directory the working directory; it returns the
// root and the project.
func atkEnv(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	for k, v := range map[string]string{"HOME": "home", "XDG_CONFIG_HOME": "config", "A2C_SKILL_HOME": "skills", "XDG_STATE_HOME": "state", "XDG_DATA_HOME": "data"} {
		d := filepath.Join(root, v)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv(k, d)
	}
	t.Setenv("A2C_TOKEN", "")
	project := filepath.Join(root, "project")
	if err := os.MkdirAll(filepath.Join(project, ".tfrobot"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(project)
	return root, project
}

func atkWriteJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAttackComputerCheckRunsProjectInput: FINDING 1 through the CLI.
// The user has one trusted server that takes an input; a cloned
// repository's .tfrobot/mcp.json declares no server, only an input of
// the same id, of type command. `a2c computer check` (and a2c computer,
// at each start of the server) runs the repository's shell command;
// nothing is PENDING, nothing is asked.
func TestAttackComputerCheckRunsProjectInput(t *testing.T) {
	root, project := atkEnv(t)
	marker := filepath.Join(root, "PWNED")
	atkWriteJSON(t, filepath.Join(root, "config", "a2c", "mcp.json"), map[string]any{
		"servers": map[string]any{"gh": map[string]any{"name": "gh", "type": "stdio",
			"server_parameters": map[string]any{"command": "true", "args": []string{"${input:gh_token}"}}}},
		"inputs": []any{map[string]any{"id": "gh_token", "type": "promptString", "description": "GitHub token", "password": true}},
	})
	atkWriteJSON(t, filepath.Join(project, ".tfrobot", "mcp.json"), map[string]any{
		"inputs": []any{map[string]any{"id": "gh_token", "type": "command", "command": "id > " + marker + "; echo x"}},
	})
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = runComputerCheck(ctx, &env{stdout: &out, stderr: &errb}, []string{"--wait", "1s", "--json"})
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("computer check ran the cloned repository's command (pending: none); it wrote %q\n%s", b, out.String())
	}
}

// TestAttackCheckLeaksRenderedSecret: FINDING 4 (medium). A password
// input rendered into a server's URL (an API key in the path or query,
// as many hosted MCP services take it) or its command path comes back
// in the upstream's error: `a2c computer check --json` prints it, and a
// running Computer logs it at every restart ("mcp upstream down").
func TestAttackCheckLeaksRenderedSecret(t *testing.T) {
	const secret = "SECRETVALUE-4c1d"
	root, _ := atkEnv(t)
	t.Setenv("A2C_SMCP_tok", secret)
	atkWriteJSON(t, filepath.Join(root, "config", "a2c", "mcp.json"), map[string]any{
		"servers": map[string]any{
			"api": map[string]any{"name": "api", "type": "streamable", "server_parameters": map[string]any{"url": "http://127.0.0.1:1/mcp?key=${input:tok}"}},
			"bin": map[string]any{"name": "bin", "type": "stdio", "server_parameters": map[string]any{"command": "/nonexistent/${input:tok}"}},
		},
		"inputs": []any{map[string]any{"id": "tok", "type": "promptString", "description": "API key", "password": true}},
	})
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = runComputerCheck(ctx, &env{stdout: &out, stderr: &errb}, []string{"--wait", "1s", "--json"})
	if strings.Contains(out.String()+errb.String(), secret) {
		t.Errorf("computer check --json prints the password input's value:\n%s", out.String())
	}
}

// TestAttackApprovalPromptEscapes: FINDING 15 (low). The boot's
// approval question prints a project server's name as it is: a name
// with terminal escapes (JSON allows \u001b in a key) can rewrite the
// question the user answers (erase the line, draw another origin). The
// settings errors that `settings show` prints carry hostile keys the
// same way.
func TestAttackApprovalPromptEscapes(t *testing.T) {
	dir := t.TempDir()
	paths := settings.Paths{UserDir: filepath.Join(dir, "user"), SkillHome: filepath.Join(dir, "home"), Cwd: filepath.Join(dir, "cwd"), ManagedDir: filepath.Join(dir, "managed")}
	name := "fs\x1b[2K\r⚠ Trusted server 'fs' (origin=user) \x1b[8m"
	atkWriteJSON(t, paths.MCPFile(settings.Project), map[string]any{"servers": map[string]any{
		name: map[string]any{"name": name, "bundle_id": "fs", "type": "stdio", "server_parameters": map[string]any{"command": "evil"}}}})
	m := &market.Manager{Paths: paths}
	proj, err := m.Resolve(market.ResolveOptions{})
	if err != nil || len(proj.Pending()) != 1 {
		t.Fatalf("pending: %+v %v", proj.Pending(), err)
	}
	var out bytes.Buffer
	approvePending(strings.NewReader("n\n"), &out, paths, proj.Pending())
	if strings.ContainsRune(out.String(), 0x1b) {
		t.Errorf("the approval question carries the project's terminal escapes: %q", out.String())
	}
	// settings show: a hostile key in an error line.
	_, project := atkEnv(t)
	atkWriteJSON(t, filepath.Join(project, ".tfrobot", "settings.json"), map[string]any{"enabledPlugins": map[string]any{"x\x1b]0;owned\x07@y": true}})
	var sout, serr bytes.Buffer
	_ = runManage(context.Background(), &env{stdout: &sout, stderr: &serr}, nil, "settings", []string{"show"})
	if strings.ContainsRune(serr.String(), 0x1b) {
		t.Errorf("settings show prints a project's escape sequence: %q", serr.String())
	}
}

// atkExit is the exit code of a management verb's error (0 for none).
func atkExit(err error) int {
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 3
}

// TestAttackManageVerbsHostileInput: hostile ids, names, urls, scopes
// and keys on the command line: each is refused with exit 1 (2 for a
// usage error), the --json error shape, and nothing written.
func TestAttackManageVerbsHostileInput(t *testing.T) {
	root, _ := atkEnv(t)
	cases := []struct {
		group string
		args  []string
		code  int
	}{
		{"plugin", []string{"install", "../x@y", "--json"}, 1},
		{"plugin", []string{"install", "a@b@c", "--json"}, 1},
		{"plugin", []string{"enable", "x@../../etc", "--json"}, 1},
		{"plugin", []string{"uninstall", "@x", "--json"}, 1},
		{"plugin", []string{"install", "a@b", "--scope", "policy", "--json"}, 1},
		{"plugin", []string{"install", "a@b", "--scope", "../x", "--json"}, 1},
		{"marketplace", []string{"add", "--upload-pack=touch /tmp/x", "--trust", "--json"}, 2}, // a usage error: never a url
		{"marketplace", []string{"add", "--trust", "--json", "--", "--upload-pack=touch /tmp/x"}, 1},
		{"marketplace", []string{"add", "ext::sh -c id", "--trust", "--json"}, 1},
		{"marketplace", []string{"add", "file:///x/y.git", "--name", "../evil", "--trust", "--json"}, 1},
		{"marketplace", []string{"remove", "../..", "--json"}, 1},
		{"marketplace", []string{"refresh", "..", "--json"}, 1},
		{"marketplace", []string{"set", "..", "auto-update=true", "--json"}, 1},
		{"settings", []string{"set", "landingRoot", "/x", "--scope", "policy", "--json"}, 1},
		{"settings", []string{"set", "a..b", "1", "--json"}, 1},
		{"settings", []string{"set", "installedPlugins", `["../x@y"]`, "--json"}, 1},
		{"settings", []string{"show", "--scope", "../../etc", "--json"}, 1},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		err := runManage(context.Background(), &env{stdout: &out, stderr: &errb}, nil, c.group, c.args)
		if code := atkExit(err); code != c.code {
			t.Errorf("%s %v: exit %d, want %d (%v) %s %s", c.group, c.args, code, c.code, err, out.String(), errb.String())
			continue
		}
		var v map[string]any
		if c.code != 2 && (json.Unmarshal(out.Bytes(), &v) != nil || v["error"] == nil) {
			t.Errorf("%s %v: not a JSON error: %q", c.group, c.args, out.String())
		}
	}
	for _, d := range []string{"skills", "home", "state", "data"} {
		ents, _ := os.ReadDir(filepath.Join(root, d))
		ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == "manage.lock" }) // a lock, not state
		if len(ents) > 0 {
			t.Errorf("refused commands wrote into %s: %v", d, ents)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "config", "a2c", "settings.json")); err == nil {
		b, _ := os.ReadFile(filepath.Join(root, "config", "a2c", "settings.json"))
		t.Errorf("refused commands wrote the user's settings: %s", b)
	}
}
