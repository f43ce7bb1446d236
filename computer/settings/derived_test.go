package settings

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDerivedFiles (P7): a derived file carries the header and version
// 1 and reads back; a corrupt one is set aside as .corrupt-<ts>.bak and
// read as empty; a wrong version or an unknown key asks for a rewrite,
// with a warning.
func TestDerivedFiles(t *testing.T) {
	home := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	path := filepath.Join(home, InstalledPluginsFile)
	in := &InstalledPlugins{Plugins: map[string][]PluginRecord{"audit@acme": {{Scope: User, InstallPath: "/h/plugins/audit",
		Version: "1.0.0", CommitSHA: strings.Repeat("a", 40), InstalledAt: "2026-07-01T10:00:00Z", LastUpdated: "2026-07-01T10:00:00Z"}}}}
	if err := WriteDerived(path, in); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := DerivedHeader + "\n" + `{
  "version": 1,
  "plugins": {
    "audit@acme": [
      {
        "scope": "user",
        "installPath": "/h/plugins/audit",
        "version": "1.0.0",
        "commitSha": "` + strings.Repeat("a", 40) + `",
        "installedAt": "2026-07-01T10:00:00Z",
        "lastUpdated": "2026-07-01T10:00:00Z",
        "mcpServers": []
      }
    ]
  }
}
`
	if string(b) != want {
		t.Fatalf("written:\n%s\nwant\n%s", b, want)
	}
	var out InstalledPlugins
	if rewrite, err := ReadDerived(path, &out, log); err != nil || rewrite || out.Plugins["audit@acme"][0].CommitSHA != strings.Repeat("a", 40) {
		t.Fatalf("read back: %+v %v %v", out, rewrite, err)
	}
	// Another version, an unknown key: read, and written again.
	if err := os.WriteFile(path, []byte(`{"version":2,"plugins":{},"bundledMcpServers":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if rewrite, err := ReadDerived(path, &InstalledPlugins{}, log); err != nil || !rewrite {
		t.Errorf("version 2 and an unknown key: rewrite %v %v", rewrite, err)
	}
	if !strings.Contains(logs.String(), "another version") || !strings.Contains(logs.String(), "unknown key") {
		t.Errorf("no warning: %s", logs.String())
	}
	// Corrupt: set aside, read as empty.
	if err := os.WriteFile(path, []byte(DerivedHeader+"\n{\"version\":1,\"plugins\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	var empty InstalledPlugins
	if rewrite, err := ReadDerived(path, &empty, log); err != nil || !rewrite || len(empty.Plugins) != 0 {
		t.Fatalf("corrupt: %+v %v %v", empty, rewrite, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("the corrupt file is still in place")
	}
	aside, _ := filepath.Glob(path + ".corrupt-*.bak")
	if len(aside) != 1 {
		t.Errorf("set aside: %v", aside)
	}
	// A type that is not a derived file is refused.
	if err := WriteDerived(path, &struct{}{}); err == nil {
		t.Error("wrote a struct{}")
	}
}
