package watch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// nobody is the sandbox account's uid on the CI machines (host nobody).
const nobody = 65534

// sandboxEnv is an env whose plane runs in a real sandbox over its tree;
// it skips where a sandbox cannot be made (not root).
func sandboxEnv(t *testing.T) (*env, *sandbox.Sandbox) {
	t.Helper()
	sb, dir := planetest.Sandbox(t, sandbox.Config{})
	e := newEnv(t, Config{Workspace: dir, Sandbox: sb})
	e.dir = dir
	return e, sb
}

// inSandbox runs a shell script as a sandbox process (the sandbox
// account, in the view) and fails the test if it fails.
func inSandbox(t *testing.T, sb *sandbox.Sandbox, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := sb.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v: %s", script, err, out.String())
	}
}

// TestSandboxWatch: under isolation a watch resolves in the sandbox's
// view as its account. It sees what a sandbox process does in the
// workspace (new directories included) and in a directory only the view
// has (the sandbox's own /tmp).
func TestSandboxWatch(t *testing.T) {
	e, sb := sandboxEnv(t)
	id := e.create(nil).WatcherID
	inSandbox(t, sb, "echo hi > "+e.path("a.txt"))
	c := e.expect(id, 0, "create a.txt", "write a.txt")
	var st syscall.Stat_t
	if err := syscall.Stat(e.path("a.txt"), &st); err != nil || st.Uid != nobody {
		t.Errorf("a.txt on the host: uid %d %v", st.Uid, err)
	}
	inSandbox(t, sb, "mkdir "+e.path("d"))
	c = e.expect(id, c, "create d/")
	inSandbox(t, sb, "echo x > "+e.path("d/x"))
	e.expect(id, c, "create d/x", "write d/x")
	var res PollWatchResult
	e.OK("GET", "/v2/watch/"+id+"/poll?cursor=0&limit=1000", nil, &res)
	if ev := res.Events[1]; ev.Size == nil || *ev.Size != 3 || ev.Inode == nil || *ev.Inode != uint64(st.Ino) {
		t.Errorf("write a.txt: %+v", ev)
	}

	// A directory of the view's own /tmp: the host has no such path.
	own := fmt.Sprintf("/tmp/aiod-watch-view-%d", os.Getpid())
	if _, err := os.Lstat(own); err == nil {
		t.Fatalf("%s exists on the host", own)
	}
	inSandbox(t, sb, "mkdir "+own)
	var w WatcherCreatedResult
	e.OK("POST", "/v2/watch", map[string]any{"path": own, "debounce": 50}, &w)
	inSandbox(t, sb, "echo y > "+own+"/f")
	e.expect(w.WatcherID, 0, "create f", "write f")

}

// TestSandboxWatchRefusals: under isolation a path outside the view,
// even through a link in the workspace, is not_found, and a directory
// the sandbox account may not read is permission_denied (v2 status, v1
// 200 with success false, the same error object).
func TestSandboxWatchRefusals(t *testing.T) {
	e, _ := sandboxEnv(t)
	out, err := os.MkdirTemp("/var/tmp", "aiod-watch-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	if err := os.Symlink(out, e.path("to-outside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.path("private"), 0o700); err != nil { // the host root's
		t.Fatal(err)
	}
	missing := `{"errno":2,"errno_name":"ENOENT","error_type":"not_found","exception_type":"FileNotFoundError",` +
		`"message":"Failed to watch: No such file or directory (os error 2)","operation":"watch","path":%q,"retryable":false}`
	denied := `{"errno":13,"errno_name":"EACCES","error_type":"permission_denied","exception_type":"PermissionError",` +
		`"message":"Failed to watch: Permission denied (os error 13)","operation":"watch","path":%q,"retryable":false}`
	for _, c := range []struct {
		method, route, path string
		status              int
		want                string
	}{
		{"POST", "/v2/watch", "/root", 404, missing},
		{"POST", "/v2/watch", out, 404, missing},
		{"POST", "/v2/watch", "to-outside", 404, missing},
		{"POST", "/v1/file/watch", "to-outside", 200, missing},
		{"POST", "/v1/file/watch/wait", filepath.Join(out, "f"), 200, missing},
		{"POST", "/v2/watch", "private", 403, denied},
		{"POST", "/v1/file/watch", "private", 200, denied},
	} {
		code, r, _ := e.Do(c.method, c.route, map[string]any{"path": c.path, "timeout": 1})
		want := fmt.Sprintf(c.want, c.path)
		var m map[string]any
		_ = json.Unmarshal([]byte(want), &m)
		if code != c.status || r.Success || r.Message != m["message"] || !planetest.SameJSON(r.Data, []byte(want)) {
			t.Errorf("%s %s %s: %d %s %s", c.method, c.route, c.path, code, r.Message, r.Data)
		}
	}
	var list []WatcherInfo
	e.OK("GET", "/v2/watch", nil, &list)
	if len(list) != 0 {
		t.Errorf("watchers: %+v", list)
	}
}

// TestSandboxMounts: the sandboxed engine reads the view's mount table,
// so the view's /proc is a pseudo filesystem and the workspace is not.
func TestSandboxMounts(t *testing.T) {
	e, sb := sandboxEnv(t)
	eng := e.plane.Engine()
	var proc, dev, work bool
	if err := sb.Do(func() error {
		eng.mounts.refresh()
		proc, dev, work = eng.mounts.pseudoPath("/proc"), eng.mounts.pseudoPath("/dev/pts"), eng.mounts.pseudoPath(e.dir)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !proc || !dev || work {
		t.Errorf("/proc %v /dev/pts %v workspace %v", proc, dev, work)
	}
}
