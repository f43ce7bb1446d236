package planetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// Sandbox starts a real sandbox with cfg over a fresh workspace (cfg's
// Workspace is replaced; symbolic links in its path resolved), closed
// when the test ends, and returns it with the workspace; it skips where a
// sandbox cannot be made (not root). The test binary must call
// sandbox.Dispatch first in TestMain: it is the sandbox's init.
func Sandbox(t testing.TB, cfg sandbox.Config) (*sandbox.Sandbox, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a sandbox needs root")
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = ws
	sb, err := sandbox.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb, ws
}
