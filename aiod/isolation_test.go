package aiod

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

func TestIsolationMode(t *testing.T) {
	for _, c := range []struct {
		flags         []string
		env, def, out string
	}{
		{nil, "", "none", "none"},
		{nil, "", "namespaces", "namespaces"},
		{nil, "namespaces", "none", "namespaces"},
		{[]string{"--isolation", "none"}, "namespaces", "namespaces", "none"},
		{[]string{"-isolation=namespaces", "--port", "0"}, "", "none", "namespaces"},
		{[]string{"--isolation=none", "--isolation", "namespaces"}, "", "none", "namespaces"},
		{[]string{"--", "--isolation", "namespaces"}, "", "none", "none"},
		{[]string{"--workspace", "--isolation"}, "", "none", "none"},
	} {
		if got := isolationMode(c.flags, c.env, c.def); got != c.out {
			t.Errorf("isolationMode(%q, %q, %q) = %q, want %q", c.flags, c.env, c.def, got, c.out)
		}
	}
}

// TestIsolationFallbackNarrow: a2c up's fallback (Fallback) covers only
// a machine that cannot isolate; a refused workspace fails the start
// instead of running on the host without a sandbox.
func TestIsolationFallbackNarrow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a non-root daemon here falls back before any check")
	}
	for _, ws := range []string{"/root", "/etc"} {
		cfg := Config{Workspace: ws, Isolation: Isolation{Mode: sandbox.Namespaces, Fallback: true}}
		sb, err := startSandbox(cfg, slog.New(slog.DiscardHandler))
		if sb != nil {
			sb.Close()
		}
		if err == nil || errors.Is(err, sandbox.ErrCannotIsolate) || !strings.Contains(err.Error(), "the workspace "+ws+" is a") {
			t.Errorf("workspace %s with the fallback: %v", ws, err)
		}
	}
}
