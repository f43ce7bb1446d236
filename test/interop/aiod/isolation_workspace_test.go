package aiod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// runBin runs a binary of the project to its end (at most 30 s: one
// that starts serving instead of refusing is killed and reported).
func runBin(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, bin), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %v did not refuse (it was still running after 30 s): %v\n%s", bin, args, err, e.String())
	}
	return code, o.String(), e.String()
}

// TestIsolationRefusedWorkspaces: a workspace whose exposure would undo
// the sandbox (a home or system directory, or a symbolic link to one) is
// refused by a2c up and by aiod --isolation namespaces alike: exit 1
// with one line, never a fallback to running on the host as root.
func TestIsolationRefusedWorkspaces(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	for _, target := range []string{"/", "/root", "/etc", "/home"} {
		if err := os.Symlink(target, filepath.Join(dir, "to-"+strings.Trim(strings.ReplaceAll(target, "/", "-"), "-")+"root")); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"A2C_TOKEN=", "AIO_ISOLATION=", "AIO_PYTHON_BIN=/usr/bin/python3"}
	for _, c := range []struct{ ws, why string }{
		{"/root", "is a home directory"},
		{"/etc", "is a system directory"},
		{filepath.Join(dir, "to-root"), "is the root of the filesystem"},
		{filepath.Join(dir, "to-rootroot"), "is a home directory"},
		{filepath.Join(dir, "to-etcroot"), "is a system directory"},
		{filepath.Join(dir, "to-homeroot"), "is a home directory"},
	} {
		for _, bin := range []string{"a2c", "aiod"} {
			args := []string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--workspace", c.ws}
			if bin == "aiod" {
				args = []string{"--port", "0", "--isolation", "namespaces", "--workspace", c.ws}
			}
			code, stdout, stderr := runBin(t, bin, env, args...)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.why) ||
				!strings.Contains(stderr, "--workspace") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", bin, c.ws, code, stdout, stderr)
			}
		}
	}
}

// TestIsolationTmpFilled: under --memory 512MiB, 400 MiB written to
// /tmp and then 300 MiB to /dev/shm end in ENOSPC for the writer (the
// two share one bound, half the limit), while the sandbox's init stays
// the same process, a code session and a command started before still
// answer, and a file left in /tmp is still there.
func TestIsolationTmpFilled(t *testing.T) {
	d := startIsolated(t, "", nil, "--memory", "512MiB")
	survivor := startSurvivor(t, d.a)
	if _, cm := d.cell(t, "keep", "x = 41"); cm["status"] != "ok" {
		t.Fatalf("cell: %v", cm)
	}
	m := d.command(t, map[string]any{"command": "echo kept > /tmp/kept"})
	if m["exit_code"] != 0.0 {
		t.Fatalf("write /tmp/kept: %v", m)
	}
	m = d.command(t, map[string]any{"command": "dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>&1 | grep -c 'No space left'; " +
		"dd if=/dev/zero of=/dev/shm/fill bs=1M count=300 2>&1 | grep -c 'No space left'"})
	if m["status"] != "completed" || m["stdout"] != "1\n1\n" {
		t.Errorf("the writer: %v; want ENOSPC from /tmp and /dev/shm", m)
	}
	if got := sandboxInit(d.Cmd().Process.Pid); got != d.init {
		t.Errorf("the sandbox's init is now %d, was %d (the sandbox started again)", got, d.init)
	}
	if strings.Contains(d.Logs(), "init exited") {
		t.Errorf("the daemon's log: %s", d.Logs())
	}
	if _, cm := d.cell(t, "keep", "print(x + 1)"); cm["status"] != "ok" || cm["stdout"] != "42\n" {
		t.Errorf("the code session after the writer: %v", cm)
	}
	survives(t, d.a, survivor)
	m = d.command(t, map[string]any{"command": "cat /tmp/kept; rm /tmp/fill /dev/shm/fill"})
	if m["exit_code"] != 0.0 || m["stdout"] != "kept\n" {
		t.Errorf("/tmp after the writer: %v", m)
	}
}

// TestIsolationProjectFolder: a newcomer's project folder (content, owned
// by uid 1000) given to aiod --isolation namespaces is writable from a
// command and through the files plane; on the host the new files belong
// to uid 1000, no owner changed, and the capabilities say it is idmapped.
func TestIsolationProjectFolder(t *testing.T) {
	requireRoot(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "README"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "README")} {
		if err := os.Chown(p, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	p := startAiod(t, []string{"AIO_PYTHON_BIN=/usr/bin/python3"}, "--workspace", ws, "--isolation", "namespaces")
	d := &isoDaemon{Proc: p, a: &aio{t: t, base: p.URL}, ws: ws}
	_, e := d.a.call("GET", "/v1/capabilities", "/v1/capabilities", nil)
	var caps struct {
		Isolation struct {
			Workspace string   `json:"workspace"`
			Warnings  []string `json:"warnings"`
		} `json:"isolation"`
	}
	_ = json.Unmarshal(e.Data, &caps)
	if caps.Isolation.Workspace != "idmapped: host uid 1000 gid 1000 appear as the account's" || len(caps.Isolation.Warnings) != 0 {
		t.Errorf("capabilities: %s", e.raw)
	}
	m := d.command(t, map[string]any{"command": "cd " + ws + " && echo more >> README && echo new > notes && mkdir src && id -u"})
	if m["exit_code"] != 0.0 || m["stdout"] != fmt.Sprintf("%d\n", sandboxUID) {
		t.Errorf("a command in the project folder: %v", m)
	}
	if code, body := isoUpload(t, d.a, filepath.Join(ws, "uploaded"), []byte("up\n")); code != 200 {
		t.Errorf("upload into the project folder: %d %s", code, body)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README")); string(b) != "mine\nmore\n" {
		t.Errorf("README on the host: %q", b)
	}
	for _, name := range []string{".", "README", "notes", "src", "uploaded"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, name), &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("%s on the host: %d:%d %v; want 1000:1000", name, st.Uid, st.Gid, err)
		}
	}
}
