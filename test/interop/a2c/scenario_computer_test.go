package a2c

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/agent"
)

// The scenario scripts' Computers: computerEnv starts them in offices of
// one server and tells the script where they are through its environment:
//
//	A2C_COMPUTER_OFFICE, A2C_COMPUTER   the office and name of a Computer
//	                                    with a landing root, a user skills
//	                                    folder and the toolsrv MCP server
//	                                    (bundle "fx")
//	A2C_LANDING_ROOT                    that Computer's --landing-root
//	A2C_SKILLS_DIR                      its --skills folder (skillFiles)
//	A2C_NOROOT_OFFICE, A2C_NOROOT_COMPUTER  a Computer without a landing
//	                                    root (every upload is forbidden)
//
// Each Computer is alone in its office with at most one Agent at a time
// (the script's scenarios run one after the other and leave the office).

// skillFiles is the user skills folder the scenarios read: three valid
// skills (hello-world with tags, tagless, bad-tags whose tags are not a
// list and are dropped) and one left out for its malformed name. The
// scripts recompute every expected body and digest from these files.
var skillFiles = map[string]string{
	"hello-world/SKILL.md": "---\nname: hello-world\ndescription: Says hello to the user\nlicense: MIT\ntags: [greet, demo]\n---\n" +
		"# Hello\n\nSay hello; ${TFROBOT_SKILL_DIR} and $HOME stay as written.\n---\nnot frontmatter\n",
	"hello-world/notes.txt":   "plain notes\n",
	"hello-world/.skillenv":   "SECRET_TOKEN=do-not-serve\n",
	"hello-world/docs/ref.md": "# Reference\n",
	"tagless/SKILL.md":        "---\nname: tagless\ndescription: A skill without tags\n---\nTagless body.\n",
	"bad-tags/SKILL.md":       "---\nname: bad-tags\ndescription: Tags that are not a list\ntags: not-a-list\n---\nBad tags body.\n",
	"BadName/SKILL.md":        "---\nname: BadName\ndescription: Not kebab-case, left out\n---\nnever listed\n",
}

// Files of hello-world that skillFiles does not spell out: data.bin (binary,
// read through a blob handle), big.md (2 MiB of text, over any inline
// budget that keeps an ack under the server's 1 MB buffer), huge.txt (a
// sparse 101 MiB file, over the 100 MiB size cap) and escape.txt (a
// symbolic link out of the package).
func writeSkills(t *testing.T, dir string) {
	t.Helper()
	for rel, body := range skillFiles {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hw := filepath.Join(dir, "hello-world")
	bin := make([]byte, 3000)
	_, _ = rand.Read(bin)
	bin[0], bin[1] = 0, 0xff
	big := strings.Repeat("All work and no play makes a long markdown file.\n", (2<<20)/50+1)
	for name, body := range map[string][]byte{"data.bin": bin, "big.md": []byte(big)} {
		if err := os.WriteFile(filepath.Join(hw, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(hw, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(101 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Symlink("/etc/hostname", filepath.Join(hw, "escape.txt")); err != nil {
		t.Fatal(err)
	}
}

// toolsConfig is the Computer's config: toolsrv as bundle "fx", with
// tool_meta for two of its tools (see testdata/toolsrv).
func toolsConfig(t *testing.T, path string) {
	t.Helper()
	doc := map[string]any{"servers": map[string]any{"fx": map[string]any{
		"name": "fx", "type": "stdio",
		"server_parameters": map[string]any{"command": harness.BinPkg(t, "./test/interop/a2c/testdata/toolsrv"), "args": []string{}},
		"tool_meta": map[string]any{
			"overridden": map[string]any{"tags": []string{"cfg"}, "auto_apply": true},
			"cleared":    map[string]any{"tags": []string{}},
		},
	}}}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// computerEnv starts the scenario scripts' two Computers on serverURL with
// the protocol flags and returns the script's environment for them.
func computerEnv(t *testing.T, serverURL string, flags []string) []string {
	t.Helper()
	dir := t.TempDir()
	skills, landing, cfg := filepath.Join(dir, "skills"), filepath.Join(dir, "landing"), filepath.Join(dir, "servers.json")
	writeSkills(t, skills)
	toolsConfig(t, cfg)
	// Anything the Computers keep under the user's folders (skill staging)
	// stays in the test's folder.
	xdg := []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg-config"), "XDG_CACHE_HOME=" + filepath.Join(dir, "xdg-cache"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "xdg-state"), "XDG_DATA_HOME=" + filepath.Join(dir, "xdg-data")}
	start := func(office, name string, args ...string) {
		cmd := exec.Command(harness.Bin(t, "a2c"), append(append([]string{"computer", "--server", serverURL,
			"--office", office, "--name", name}, args...), flags...)...)
		cmd.Env = append(os.Environ(), xdg...)
		harness.Run(t, cmd, false)
	}
	office, noroot := agent.NewReqID(), agent.NewReqID()
	start(office, "pc", "--config", cfg, "--landing-root", landing, "--skills", skills)
	start(noroot, "pc-noroot", "--skills", "")
	return []string{
		"A2C_COMPUTER_OFFICE=" + office, "A2C_COMPUTER=pc",
		"A2C_LANDING_ROOT=" + landing, "A2C_SKILLS_DIR=" + skills,
		"A2C_NOROOT_OFFICE=" + noroot, "A2C_NOROOT_COMPUTER=pc-noroot",
	}
}
