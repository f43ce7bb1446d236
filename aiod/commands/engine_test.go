package commands

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDaemonSecretsNotInherited(t *testing.T) {
	t.Setenv("AIO_API_KEY", "secret-aio-key")
	t.Setenv("SANDBOX_API_KEY", "secret-sandbox-key")
	t.Setenv("AIOD_TEST_HIDDEN", "secret-config")
	t.Setenv("AIOD_TEST_KEPT", "visible")
	h := newHarness(t, Config{HideEnv: []string{"AIOD_TEST_HIDDEN"}}, nil)
	for _, path := range []string{"/v2/commands", "/v1/bash/exec"} {
		var d execData
		h.OK("POST", path, map[string]any{"command": "env"}, &d)
		out := str(d.Stdout)
		for _, secret := range []string{"AIO_API_KEY", "SANDBOX_API_KEY", "secret-", "AIOD_TEST_HIDDEN"} {
			if strings.Contains(out, secret) {
				t.Fatalf("%s: env shows %s:\n%s", path, secret, out)
			}
		}
		if !strings.Contains(out, "AIOD_TEST_KEPT=visible\n") {
			t.Fatalf("%s: the rest of the environment is lost:\n%s", path, out)
		}
	}
	// A request may still set one for its own command.
	if d := h.run(map[string]any{"command": "echo $AIO_API_KEY", "env": map[string]string{"AIO_API_KEY": "mine"}}); str(d.Stdout) != "mine\n" {
		t.Fatalf("%+v", d)
	}
}

func TestMissingCwd(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const missing = "cannot use cwd /nonexistent: No such file or directory (os error 2)"
	notDir := "cannot use cwd " + file + ": Not a directory (os error 20)"
	for _, c := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/v2/commands", map[string]any{"command": "true", "cwd": "/nonexistent"}, missing},
		{"/v2/commands", map[string]any{"command": "true", "cwd": file}, notDir},
		{"/v2/commands", map[string]any{"command": "true", "cwd": "/nonexistent", "shell": "none"}, missing},
		{"/v1/bash/exec", map[string]any{"command": "true", "exec_dir": "/nonexistent"}, missing},
		{"/v2/commands/sessions", map[string]any{"cwd": "/nonexistent"}, missing},
		{"/v1/bash/sessions/create", map[string]any{"exec_dir": "/nonexistent"}, missing},
	} {
		if msg := h.Fails(400, "POST", c.path, c.body); msg != c.want {
			t.Errorf("%s %v: %q, want %q", c.path, c.body, msg, c.want)
		}
	}
	// A session's directory removed after its creation.
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "s", "cwd": dir}, nil)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "session": "s"}); msg != "cannot use cwd "+dir+": No such file or directory (os error 2)" {
		t.Errorf("%q", msg)
	}
}

func TestStdinNotAccepting(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.stdinTimeout = 200 * time.Millisecond })
	d := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	input := strings.Repeat("x", 1<<20)
	msg := h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": input})
	re := regexp.MustCompile(`^stdin of command ` + d.CommandID + ` is not accepting input \(wrote (\d+) of 1048576 bytes\)$`)
	m := re.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("%q", msg)
	}
	if n, _ := strconv.Atoi(m[1]); n <= 0 || n >= 1<<20 {
		t.Fatalf("%q", msg)
	}
}

func TestNoGoErrorText(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	goText := regexp.MustCompile(`fork/exec|exec: |0x[0-9a-f]+|i/o timeout|: no such file|%!`)
	for _, body := range []map[string]any{
		{"command": "/no/such/program", "shell": "none"},
		{"command": "no-such-program-xyz", "shell": "none"},
		{"command": "true", "cwd": "/nonexistent"},
	} {
		msg := h.Fails(400, "POST", "/v2/commands", body)
		if goText.MatchString(msg) || !strings.Contains(msg, "(os error 2)") {
			t.Errorf("%v: %q", body, msg)
		}
	}
	if msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "/etc/passwd", "shell": "none"}); msg != "failed to start /etc/passwd: Permission denied (os error 13)" {
		t.Errorf("%q", msg)
	}
}
