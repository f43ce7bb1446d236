package settings

import (
	"os"
	"testing"
)

// FuzzLoad: no project settings file (a cloned repository's: anyone's)
// makes Load fail or panic, and what Load keeps passes its own checks
// again (nothing bad survives a layer).
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"enabledPlugins":{"a@m":true},"extraKnownMarketplaces":{"acme":{"source":{"type":"git","url":"file:///x.git"}}}}`))
	f.Add([]byte(`{"installedPlugins":["a@b",1,null],"permissions":{"additionalDirectories":["/x","y"]},"landingRoot":"/z"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		p := Paths{UserDir: dir + "/u", Cwd: dir, ManagedDir: dir + "/m"}
		if err := os.MkdirAll(dir+"/.tfrobot", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.SettingsFile(Project), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if again := checkLayer(Project, "again", clone(m.Layer(Project).Values)); len(again) != 0 {
			t.Fatalf("kept what fails the checks: %v", again)
		}
	})
}
