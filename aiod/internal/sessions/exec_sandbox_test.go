package sessions

import (
	"slices"
	"testing"
)

// TestSandboxedEnv: a sandbox inherits only the locating and locale
// variables of the daemon's environment.
func TestSandboxedEnv(t *testing.T) {
	x := NewExec("/w", "", []string{"PATH=/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "GITHUB_TOKEN=secret",
		"HTTPS_PROXY=http://u:p@h", "TERM=xterm", "HOME=/root"}, nil)
	x.sandbox = nil
	// Sandboxed(nil) is x itself: everything but the secrets stays.
	if x.Sandboxed(nil) != x || !slices.Contains(x.env, "GITHUB_TOKEN=secret") {
		t.Fatalf("host env %q", x.env)
	}
	y := *x
	filtered := SandboxEnv(y.env)
	if want := []string{"PATH=/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm"}; !slices.Equal(filtered, want) {
		t.Errorf("sandbox env %q, want %q", filtered, want)
	}
}
