package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// testPaths are paths under a temporary directory, every scope's.
func testPaths(t *testing.T) Paths {
	t.Helper()
	dir := t.TempDir()
	p := Paths{UserDir: filepath.Join(dir, "config", "a2c"), SkillHome: filepath.Join(dir, "skills"),
		Cwd: filepath.Join(dir, "project"), ManagedDir: filepath.Join(dir, "managed"), FlagSettings: filepath.Join(dir, "flag.json")}
	return p
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDefaultPaths (P1): the scopes' files follow the XDG rules; a
// relative XDG_* is ignored; A2C_SKILL_HOME wins; a system directory is
// refused as the SKILL home.
func TestDefaultPaths(t *testing.T) {
	cases := []struct {
		name               string
		env                map[string]string
		userDir, skillHome string
		wantErr            bool
	}{
		{"defaults", nil, "/home/u/.config/a2c", "/home/u/.a2c/skills", false},
		{"xdg", map[string]string{"XDG_CONFIG_HOME": "/x/cfg", "XDG_DATA_HOME": "/x/data"}, "/x/cfg/a2c", "/x/data/a2c/skills", false},
		{"relative xdg ignored", map[string]string{"XDG_CONFIG_HOME": "cfg", "XDG_DATA_HOME": "data"}, "/home/u/.config/a2c", "/home/u/.a2c/skills", false},
		{"skill home", map[string]string{"A2C_SKILL_HOME": "/s/home/", "XDG_DATA_HOME": "/x/data"}, "/home/u/.config/a2c", "/s/home", false},
		{"relative skill home", map[string]string{"A2C_SKILL_HOME": "skills"}, "", "", true},
		{"system skill home", map[string]string{"A2C_SKILL_HOME": "/usr"}, "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := DefaultPaths(func(k string) string { return c.env[k] }, "/home/u", "/work/proj")
			if (err != nil) != c.wantErr {
				t.Fatalf("%v, want error %v", err, c.wantErr)
			}
			if err != nil {
				return
			}
			if p.UserDir != c.userDir || p.SkillHome != c.skillHome {
				t.Errorf("got %s %s, want %s %s", p.UserDir, p.SkillHome, c.userDir, c.skillHome)
			}
			want := map[Scope]string{User: c.userDir + "/settings.json", Project: "/work/proj/.tfrobot/settings.json",
				Local: "/work/proj/.tfrobot/settings.local.json"}
			for s, f := range want {
				if got := p.SettingsFile(s); got != f {
					t.Errorf("%s: %s, want %s", s, got, f)
				}
			}
			if got := p.MCPFile(Local); got != "/work/proj/.tfrobot/mcp.local.json" {
				t.Errorf("local mcp.json: %s", got)
			}
		})
	}
}

// TestLoadMerge (P2): objects merge key by key, lists concatenate from
// the lowest scope without duplicates, scalars are the highest scope's;
// policy is managed-settings.json then managed-settings.d/*.json in
// name order; unknown keys are kept.
func TestLoadMerge(t *testing.T) {
	p := testPaths(t)
	write(t, p.SettingsFile(User), `{"enabledPlugins":{"a@m":true,"b@m":true},"disabledMcpjsonServers":["x","y"],"landingRoot":"/u","future":{"k":1}}`)
	write(t, p.SettingsFile(Project), `{"enabledPlugins":{"a@m":false},"disabledMcpjsonServers":["y","z"],"strictKnownMarketplaces":false}`)
	write(t, p.SettingsFile(Local), `{"enabledPlugins":{"c@m":true},"landingRoot":"/l"}`)
	write(t, p.FlagSettings, `{"disabledMcpjsonServers":["f"]}`)
	write(t, filepath.Join(p.ManagedDir, "managed-settings.json"), `{"strictKnownMarketplaces":true,"deniedMcpServers":["bad"]}`)
	write(t, filepath.Join(p.ManagedDir, "managed-settings.d", "20-b.json"), `{"deniedMcpServers":["worse"]}`)
	write(t, filepath.Join(p.ManagedDir, "managed-settings.d", "10-a.json"), `{"deniedMcpServers":["bad","first"]}`)
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Errors) != 0 {
		t.Fatalf("errors: %v", m.Errors)
	}
	want := `{"deniedMcpServers":["bad","first","worse"],"disabledMcpjsonServers":["x","y","z","f"],` +
		`"enabledPlugins":{"a@m":false,"b@m":true,"c@m":true},"future":{"k":1},"landingRoot":"/l","strictKnownMarketplaces":true}`
	if got := asJSON(m.Values); got != want {
		t.Errorf("merged:\n%s\nwant\n%s", got, want)
	}
	if got := m.Layer(Policy).Files; len(got) != 3 || filepath.Base(got[1]) != "10-a.json" {
		t.Errorf("policy files: %v", got)
	}
}

// TestLoadErrors (P3, P4): a bad key or item is dropped and reported
// with scope, dotted field, reason and file, the rest of the layer
// stands; a corrupt file is an empty layer and is left untouched;
// allowed/denied lists outside policy, and the trusted scopes' keys from
// project, are filtered with an error; from local they apply.
func TestLoadErrors(t *testing.T) {
	p := testPaths(t)
	corrupt := `{"enabledPlugins": {`
	write(t, p.SettingsFile(User), corrupt)
	write(t, p.SettingsFile(Project), `{"enabledMcpjsonServers":["a"],"enableAllProjectMcpServers":true,"landingRoot":"/p",`+
		`"allowedMcpServers":["a"],"installedPlugins":["good@acme","Bad@acme","nope"],"strictKnownMarketplaces":"yes",`+
		`"extraKnownMarketplaces":{"acme":{"source":{"type":"git","url":"file:///srv/acme.git"}},"bad_name":{},`+
		`"web":{"source":{"type":"git","url":"ftp://x/y"}},"svn":{"source":{"type":"svn","url":"https://x/y"}}}}`)
	write(t, p.SettingsFile(Local), `{"enabledMcpjsonServers":["my.server","ok_1"],"enableAllProjectMcpServers":true,"landingRoot":"relative"}`)
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	u, pr, lo := p.SettingsFile(User), p.SettingsFile(Project), p.SettingsFile(Local)
	want := []Error{
		{User, "<file>", "not a JSON object: the layer is left out, the file untouched", u},
		{Project, "allowedMcpServers", policyOnly, pr},
		{Project, "enableAllProjectMcpServers", notProject, pr},
		{Project, "enabledMcpjsonServers", notProject, pr},
		{Project, "extraKnownMarketplaces.bad_name", "a marketplace name is 1 to 64 of [a-z0-9] in words joined by '-'", pr},
		{Project, "extraKnownMarketplaces.svn.source.type", "only \"git\" is supported", pr},
		{Project, "extraKnownMarketplaces.web.source.url", "must be a git remote: ssh://, git://, http(s)://, file:///path or user@host:path", pr},
		{Project, "installedPlugins[1]", "invalid plugin id 'Bad@acme' (expected '<plugin>@<marketplace>')", pr},
		{Project, "installedPlugins[2]", "invalid plugin id 'nope' (expected '<plugin>@<marketplace>')", pr},
		{Project, "landingRoot", notProject, pr},
		{Project, "strictKnownMarketplaces", "must be true or false", pr},
		{Local, "enabledMcpjsonServers[0]", `"my.server" is not a bundle_id (letters, digits, '_' and '-', no "__"); did you mean "my_server"?`, lo},
		{Local, "landingRoot", "must be an absolute path", lo},
	}
	if !reflect.DeepEqual(m.Errors, want) {
		t.Errorf("errors:\n%s\nwant\n%s", asJSON(m.Errors), asJSON(want))
	}
	wantValues := `{"enableAllProjectMcpServers":true,"enabledMcpjsonServers":["ok_1"],` +
		`"extraKnownMarketplaces":{"acme":{"source":{"type":"git","url":"file:///srv/acme.git"}}},"installedPlugins":["good@acme"]}`
	if got := asJSON(m.Values); got != wantValues {
		t.Errorf("merged:\n%s\nwant\n%s", got, wantValues)
	}
	if b, _ := os.ReadFile(u); string(b) != corrupt {
		t.Errorf("the corrupt file changed: %q", b)
	}
	if got := asJSON(m.Errors[0]); got != `{"scope":"user","field":"\u003cfile\u003e","reason":"not a JSON object: the layer is left out, the file untouched","source_path":"`+u+`"}` {
		t.Errorf("the error's wire shape: %s", got)
	}
}

// TestSetDelete (P2, P44): a write changes one key and keeps the rest,
// unknown keys included; a list replaces the list; dotted keys nest;
// a value Load would drop is refused; policy and flag are read-only; a
// corrupt file is not overwritten.
func TestSetDelete(t *testing.T) {
	p := testPaths(t)
	f := p.SettingsFile(User)
	write(t, f, `{"future":{"k":[1,2]},"disabledMcpjsonServers":["a","b"]}`)
	steps := []struct {
		do   func() error
		want string // the file after, as JSON
		err  string
	}{
		{func() error { return Set(p, User, "disabledMcpjsonServers", []string{"c"}) }, `{"disabledMcpjsonServers":["c"],"future":{"k":[1,2]}}`, ""},
		{func() error { return Set(p, User, "permissions.additionalDirectories", []string{"/data"}) },
			`{"disabledMcpjsonServers":["c"],"future":{"k":[1,2]},"permissions":{"additionalDirectories":["/data"]}}`, ""},
		{func() error { return Set(p, User, "enabledPlugins", map[string]bool{"audit@acme": true}) },
			`{"disabledMcpjsonServers":["c"],"enabledPlugins":{"audit@acme":true},"future":{"k":[1,2]},"permissions":{"additionalDirectories":["/data"]}}`, ""},
		{func() error { return Set(p, User, "landingRoot", "relative") }, "", "settings: landingRoot: must be an absolute path"},
		{func() error { return Set(p, User, "allowedMcpServers", []string{"x"}) }, "", "settings: allowedMcpServers: " + policyOnly},
		{func() error { return Set(p, Policy, "landingRoot", "/x") }, "", `scope "policy" is read-only (writable: user|project|local)`},
		{func() error { return Set(p, Flag, "landingRoot", "/x") }, "", `scope "flag" is read-only (writable: user|project|local)`},
		{func() error { return Delete(p, User, "enabledPlugins") },
			`{"disabledMcpjsonServers":["c"],"future":{"k":[1,2]},"permissions":{"additionalDirectories":["/data"]}}`, ""},
		{func() error { return Delete(p, User, "permissions.additionalDirectories") },
			`{"disabledMcpjsonServers":["c"],"future":{"k":[1,2]},"permissions":{}}`, ""},
		{func() error { return Set(p, User, "future.other", "v") },
			`{"disabledMcpjsonServers":["c"],"future":{"k":[1,2],"other":"v"},"permissions":{}}`, ""},
	}
	for i, st := range steps {
		err := st.do()
		if st.err != "" {
			if err == nil || err.Error() != st.err {
				t.Fatalf("step %d: %v, want %q", i, err, st.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		b, _ := os.ReadFile(f)
		var v any
		if err := json.Unmarshal(b, &v); err != nil || asJSON(v) != st.want {
			t.Fatalf("step %d: %s, want %s", i, b, st.want)
		}
	}
	if err := Set(p, Policy, "x", 1); !errors.Is(err, ErrReadOnly) {
		t.Errorf("policy: %v", err)
	}
	// A project write lands in .tfrobot/settings.json, made if missing.
	if err := Set(p, Project, "disabledMcpjsonServers", []string{"p"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p.SettingsFile(Project)); string(b) != "{\n  \"disabledMcpjsonServers\": [\n    \"p\"\n  ]\n}\n" {
		t.Errorf("project file: %q", b)
	}
	write(t, f, `{"broken":`)
	if err := Set(p, User, "landingRoot", "/x"); err == nil {
		t.Error("a corrupt file was overwritten")
	}
	if b, _ := os.ReadFile(f); string(b) != `{"broken":` {
		t.Errorf("the corrupt file changed: %q", b)
	}
}

// TestConcurrentWrites: writers of one file, in goroutines and under
// the sidecar lock, lose no write; a writer waits for a held lock.
func TestConcurrentWrites(t *testing.T) {
	p := testPaths(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if err := Set(p, Local, fmt.Sprintf("k%d", i), i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	m, _ := Load(p)
	if n := len(m.Layer(Local).Values); n != 4 {
		t.Errorf("%d keys, want 4: %v", n, m.Layer(Local).Values)
	}
	unlock, err := Lock(p.SettingsFile(Local))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Set(p, Local, "late", true) }()
	select {
	case err := <-done:
		t.Fatalf("a write did not wait for the held lock: %v", err)
	case <-time.After(120 * time.Millisecond):
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
