package settings

// Adversarial tests of the settings files (the security review of issue
// 33). A test named for a FINDING was seen failing before its fix and is
// its regression test; the others show a defence that held.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func atkPaths(t *testing.T) (Paths, string) {
	t.Helper()
	dir := t.TempDir()
	return Paths{UserDir: filepath.Join(dir, "config", "a2c"), SkillHome: filepath.Join(dir, "skills"),
		Cwd: filepath.Join(dir, "project"), ManagedDir: filepath.Join(dir, "managed")}, dir
}

func atkWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAttackSetRoundsBigNumbers: FINDING 16 (low). "Unknown keys are
// kept" by a write, but a write decodes the whole file into float64s:
// an integer above 2^53 anywhere in the file (an unknown key of another
// tool, an id) is silently changed by any `settings set`, install,
// enable or approval.
func TestAttackSetRoundsBigNumbers(t *testing.T) {
	p, _ := atkPaths(t)
	atkWrite(t, p.SettingsFile(User), `{"otherTool":{"accountId":9007199254740993,"ratio":0.1}}`)
	if err := Set(p, User, "trustedMarketplaces", []string{"file:///x/y.git"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p.SettingsFile(User))
	if !bytes.Contains(b, []byte("9007199254740993")) {
		t.Errorf("an unknown key's number changed: %s", b)
	}
}

// TestAttackLockFollowsProjectSymlink: FINDING 14 (low). The sidecar
// lock is opened with O_CREATE through whatever is at <file>.lock, and
// the .tfrobot directory is whatever the project made it: a cloned
// repository that commits .tfrobot/settings.local.json.lock as a link
// (or .tfrobot itself as one) makes the first local write (an answer to
// the approval question, a local enable) create files outside the
// project.
func TestAttackLockFollowsProjectSymlink(t *testing.T) {
	p, dir := atkPaths(t)
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(p.Cwd, ".tfrobot"), 0o755); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(outside, "autostart.desktop")
	if err := os.Symlink(planted, p.SettingsFile(Local)+".lock"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, Local, "disabledMcpjsonServers", []string{"x"}); err == nil {
		t.Error("a write went through the project's .lock link")
	}
	if _, err := os.Stat(planted); err == nil {
		t.Errorf("a local write created %s through the project's .lock link", planted)
	}
	// .tfrobot as a link to a directory elsewhere.
	p2, dir2 := atkPaths(t)
	elsewhere := filepath.Join(dir2, "elsewhere")
	if err := os.MkdirAll(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p2.Cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(p2.Cwd, ".tfrobot")); err != nil {
		t.Fatal(err)
	}
	if err := Set(p2, Local, "enabledMcpjsonServers", []string{"x"}); err == nil {
		t.Error("a write went through the project's .tfrobot link")
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) > 0 {
		t.Errorf("a local write wrote %d file(s) into %s, outside the project", len(ents), elsewhere)
	}
}

// TestAttackSettingsFileIsAPipe: FINDING 6 (settings form). Load reads
// each scope's file with os.ReadFile: a project's .tfrobot/settings.json
// or mcp.json that is a link to /dev/zero, /dev/stdin or a pipe makes it
// allocate without bound or block. A pipe stands in for the devices.
func TestAttackSettingsFileIsAPipe(t *testing.T) {
	p, _ := atkPaths(t)
	if err := os.MkdirAll(filepath.Join(p.Cwd, ".tfrobot"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := p.MCPFile(Project)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	go func() { LoadMCP(p, "", nil); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Error("LoadMCP blocks on a project mcp.json that is a pipe")
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-done
	}
}

// TestAttackStaleLock: a .lock file left behind by a process that died
// holds nothing (flock dies with its holder): the next write goes
// through at once. A lock that is held is waited for a bounded time,
// then the write fails: it never blocks forever.
func TestAttackStaleLock(t *testing.T) {
	p, _ := atkPaths(t)
	f := p.SettingsFile(User)
	atkWrite(t, f+".lock", "stale")
	start := time.Now()
	if err := Set(p, User, "enabledPlugins.a@b", true); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a stale .lock file delayed the write %v", d)
	}
	held, err := os.OpenFile(f+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = Set(p, User, "enabledPlugins.a@b", false)
	if err == nil || !strings.Contains(err.Error(), "locked by another writer") {
		t.Errorf("write under a held lock: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the lock wait took %v", d)
	}
	if b, _ := os.ReadFile(f); !bytes.Contains(b, []byte("true")) {
		t.Errorf("the file changed without its lock: %s", b)
	}
}

// TestAttackHostileSettingsJSON: deeply nested, huge, wrongly typed,
// BOM-prefixed, duplicated-key and trailing-garbage settings: Load never
// panics or hangs, reports the problems, and a write to a file that is
// not a JSON object leaves it untouched.
func TestAttackHostileSettingsJSON(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	huge := `{"x":"` + strings.Repeat("a", 8<<20) + `"}`
	wrong := `{"extraKnownMarketplaces":[1],"installedPlugins":{"a":1},"enabledPlugins":{"a@b":"yes","../x@y":true,"A@b":true},` +
		`"strictKnownMarketplaces":"true","trustedMarketplaces":"x","blockedMarketplaces":[null],"enableAllProjectMcpServers":1,` +
		`"enabledMcpjsonServers":["a.b","a__b",5],"disabledMcpjsonServers":{},"allowedMcpServers":[""],"deniedMcpServers":[[]],` +
		`"permissions":{"additionalDirectories":["rel"]},"landingRoot":["/x"]}`
	for name, body := range map[string]string{"deep": deep, "huge": huge, "wrong": wrong, "bom": "\xef\xbb\xbf{}", "dup": `{"enabledPlugins":{"a@b":false},"enabledPlugins":{"a@b":true}}`,
		"trailing": `{} {}`, "array": `[1,2]`, "null": "null", "nan": `{"a":NaN}`, "binary": "\x00\x01\x02"} {
		p, _ := atkPaths(t)
		f := p.SettingsFile(User)
		atkWrite(t, f, body)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic %v", name, r)
				}
			}()
			m, err := Load(p)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			if name == "wrong" {
				if len(m.Errors) < 12 {
					t.Errorf("wrong: %d errors: %+v", len(m.Errors), m.Errors)
				}
				if b, _ := json.Marshal(m.Values); string(b) != `{"blockedMarketplaces":[],"enabledMcpjsonServers":[],"enabledPlugins":{},"permissions":{"additionalDirectories":[]}}` {
					t.Errorf("wrong: what is left %s", b)
				}
			}
			if err := Set(p, User, "disabledMcpjsonServers", []string{"x"}); err == nil && (name == "trailing" || name == "array" || name == "nan" || name == "binary" || name == "bom") {
				t.Errorf("%s: a write over a file that is not a JSON object succeeded", name)
			}
			if name != "deep" && name != "huge" && name != "wrong" && name != "dup" {
				if b, _ := os.ReadFile(f); string(b) != body {
					t.Errorf("%s: the file changed: %.60q", name, b)
				}
			}
		}()
	}
}

// TestAttackWriteKeepsUnknownKeys: a write keeps every other key of the
// file, nested unknown keys too; a dotted key never reaches outside its
// object; keys that are not keys are refused.
func TestAttackWriteKeepsUnknownKeys(t *testing.T) {
	p, _ := atkPaths(t)
	f := p.SettingsFile(User)
	atkWrite(t, f, `{"theme":"dark","enabledPlugins":{"x@y":false,"other":{"deep":[1,{"k":"v"}]}},"permissions":{"allow":["Bash"],"additionalDirectories":["/a"]}}`)
	if err := Set(p, User, "enabledPlugins.a@b", true); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, User, "permissions.additionalDirectories", []string{"/b"}); err != nil {
		t.Fatal(err)
	}
	if err := Delete(p, User, "enabledPlugins.x@y"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	b, _ := os.ReadFile(f)
	_ = json.Unmarshal(b, &got)
	want := `{"enabledPlugins":{"a@b":true,"other":{"deep":[1,{"k":"v"}]}},"permissions":{"additionalDirectories":["/b"],"allow":["Bash"]},"theme":"dark"}`
	if g, _ := json.Marshal(got); string(g) != want {
		t.Errorf("after the writes %s, want %s", g, want)
	}
	for _, k := range []string{"", ".", "a..b", ".a", "a.", "enabledPlugins.../x"} {
		if err := Set(p, User, k, 1); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
	for _, s := range []Scope{Flag, Policy, "", "embed", "../x"} {
		if err := Set(p, s, "theme", "x"); err == nil {
			t.Errorf("scope %q written", s)
		}
	}
	// A value Load would drop is refused, not written.
	for k, v := range map[string]any{"enabledPlugins.../x@y": true, "installedPlugins": []string{"Bad@x"}, "landingRoot": "rel", "allowedMcpServers": []string{"x"}} {
		if err := Set(p, User, k, v); err == nil {
			t.Errorf("%s=%v written", k, v)
		}
	}
}

// TestAttackSkillHomeSystemDir: a SKILL home that is a system directory
// or the root, however it is spelled, is refused (removing a marketplace
// deletes under it).
func TestAttackSkillHomeSystemDir(t *testing.T) {
	for _, h := range []string{"/", "//", "/usr/../", "/etc/", "/./tmp", "relative/dir", "/home"} {
		env := map[string]string{"A2C_SKILL_HOME": h}
		if _, err := DefaultPaths(func(k string) string { return env[k] }, "/home/u", "/work"); err == nil {
			t.Errorf("SKILL home %q accepted", h)
		}
	}
}
