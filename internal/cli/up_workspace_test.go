package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpFailedStartLeavesNoWorkspace: an a2c up that cannot listen (its
// port is taken) removes the workspace folders it made, and only those:
// a folder that existed before stays, with what the user put there.
func TestUpFailedStartLeavesNoWorkspace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	base := t.TempDir()
	existing := filepath.Join(base, "mine")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(existing, "notes"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ws, gone, kept string
	}{
		{"fresh", filepath.Join(base, "a", "b", "workspace"), filepath.Join(base, "a"), base},
		{"existing", existing, "", filepath.Join(existing, "notes")},
		{"under existing", filepath.Join(existing, "ws"), filepath.Join(existing, "ws"), filepath.Join(existing, "notes")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run("up", "--workspace", tc.ws, "--listen", taken, "--sandbox-listen", "127.0.0.1:0", "--isolation", "none")
			if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "a2c up: hub: listen: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if tc.gone != "" {
				if _, err := os.Stat(tc.gone); !os.IsNotExist(err) {
					t.Errorf("%s is still there after a failed a2c up (%v)", tc.gone, err)
				}
			}
			if _, err := os.Stat(tc.kept); err != nil {
				t.Errorf("%s was removed: %v", tc.kept, err)
			}
		})
	}
}
