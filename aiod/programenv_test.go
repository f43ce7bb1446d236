package aiod

import (
	"slices"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// TestProgramEnvNoCredential: the programs the daemon runs (Chromium, the
// X server, the window manager, the computer-use worker before its key is
// added on purpose) inherit no credential variable, nor the API key under
// another name.
func TestProgramEnvNoCredential(t *testing.T) {
	t.Setenv("AIO_API_KEY", "the-key")
	t.Setenv("A2C_TOKEN", "tok")
	t.Setenv("A2C_REDIS_URL", "redis://:pw@127.0.0.1:1")
	t.Setenv("LAUNCHER_KEY", "the-key")
	t.Setenv("PROGRAMENV_TEST", "kept")
	d := &Daemon{cfg: Config{APIKey: "the-key"}}
	env := d.programEnv()
	for _, kv := range env {
		if strings.Contains(kv, "the-key") || strings.HasPrefix(kv, "A2C_TOKEN=") || strings.HasPrefix(kv, "A2C_REDIS_URL=") {
			t.Errorf("program env has %s", kv)
		}
	}
	if !slices.Contains(env, "PROGRAMENV_TEST=kept") {
		t.Error("program env lacks PROGRAMENV_TEST")
	}
}

// TestProgramEnvSandboxed: in a sandbox the programs run as the sandbox's
// account, where any command reads their /proc/PID/environ, so they get
// only what a sandboxed command gets; a secret of the launcher's under a
// name no list knows stays out (a red-team pass read OPENAI_API_KEY from
// Chromium's environment).
func TestProgramEnvSandboxed(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("LANG", "C.UTF-8")
	d := &Daemon{cfg: Config{APIKey: "the-key"}, sandbox: new(sandbox.Sandbox)}
	env := d.programEnv()
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "PATH" && k != "LANG" && k != "LANGUAGE" && k != "TZ" && k != "TERM" && k != "COLORTERM" && k != "NO_COLOR" && !strings.HasPrefix(k, "LC_") {
			t.Errorf("sandboxed program env has %s", kv)
		}
	}
	if !slices.Contains(env, "LANG=C.UTF-8") {
		t.Errorf("sandboxed program env lacks LANG: %q", env)
	}
}
