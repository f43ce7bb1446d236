package desktop

import (
	"slices"
	"testing"
)

// TestChildEnvNoCredential: the programs the worker runs (xdotool, xclip,
// ffmpeg) inherit neither the daemon's key the worker holds nor any other
// credential, and get the worker's display.
func TestChildEnvNoCredential(t *testing.T) {
	t.Setenv("AIO_API_KEY", "key")
	t.Setenv("A2C_TOKEN", "tok")
	t.Setenv("DISPLAY", ":99")
	t.Setenv("DESKTOP_ENV_TEST", "kept")
	env := childEnv(":1", "/x/auth")
	for _, kv := range []string{"AIO_API_KEY=key", "A2C_TOKEN=tok", "DISPLAY=:99"} {
		if slices.Contains(env, kv) {
			t.Errorf("child env has %s", kv)
		}
	}
	for _, kv := range []string{"DISPLAY=:1", "XAUTHORITY=/x/auth", "DESKTOP_ENV_TEST=kept"} {
		if !slices.Contains(env, kv) {
			t.Errorf("child env lacks %s", kv)
		}
	}
}
