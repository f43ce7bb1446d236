package aiod

import (
	"slices"
	"strings"
	"testing"
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
