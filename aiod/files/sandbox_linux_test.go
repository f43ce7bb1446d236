package files

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// nobody is the sandbox account's uid on the CI machines (host nobody).
const nobody = 65534

// newSandboxed is a fixture whose plane runs in a real sandbox over its
// workspace; it skips where a sandbox cannot be made (not root).
func newSandboxed(t *testing.T) *fixture {
	t.Helper()
	sb, dir := planetest.Sandbox(t, sandbox.Config{})
	p := New(Config{Workspace: dir, Sandbox: sb})
	mux := http.NewServeMux()
	p.Mount(mux)
	t.Cleanup(func() { _ = p.Close(t.Context()) })
	return &fixture{t: t, dir: dir, mux: mux, p: p}
}

// outside is a host file that exists but is not in any sandbox's view
// (/var is not in it), holding "TOPSECRET".
func outside(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "aiod-files-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "secret")
	if err := os.WriteFile(p, []byte("TOPSECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// errJSON is the exact error object of an errno failure.
func errJSON(op, phrase, path string, no syscall.Errno, name, typ, exc string) string {
	b, _ := json.Marshal(map[string]any{"errno": int(no), "errno_name": name, "error_type": typ, "exception_type": exc,
		"message": phrase + ": " + ioText(no), "operation": op, "path": path, "retryable": false})
	return string(b)
}

func ioText(no syscall.Errno) string {
	s := no.Error()
	return strings.ToUpper(s[:1]) + s[1:] + " (os error " + itoa(int(no)) + ")"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// brief is data to show in a failure: an error object whole, anything
// else (what a read let through: a secret) by its size only.
func brief(data []byte) string {
	var m map[string]any
	if json.Unmarshal(data, &m) == nil && m["error_type"] != nil {
		return string(data)
	}
	return fmt.Sprintf("<%d bytes of data>", len(data))
}

func denied(op, phrase, path string) string {
	return errJSON(op, phrase, path, syscall.EACCES, "EACCES", "permission_denied", "PermissionError")
}

func missing(op, phrase, path string) string {
	return errJSON(op, phrase, path, syscall.ENOENT, "ENOENT", "not_found", "FileNotFoundError")
}

// TestSandboxView: under isolation every path resolves in the sandbox's
// view as its account. /etc/shadow is the host's, read-only and
// unreadable (permission_denied, 403); a host file outside the view is
// not_found (404); a symbolic link in the workspace resolves inside the
// view and is not followed out of it. v1 answers the same error object
// with 200 and success false.
func TestSandboxView(t *testing.T) {
	f := newSandboxed(t)
	secret := outside(t)
	if _, err := os.Stat("/root"); err != nil {
		t.Skip("this host has no /root")
	}
	toShadow := filepath.Join(f.dir, "to-shadow")
	toSecret := filepath.Join(f.dir, "to-secret")
	toRoot := filepath.Join(f.dir, "to-root")
	for link, target := range map[string]string{toShadow: "/etc/shadow", toSecret: secret, toRoot: "/root"} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	const read, stat, list = "Failed to read file", "Failed to stat path", "Failed to list directory"
	tests := []struct {
		name     string
		v2m, v2t string
		v2body   any
		v1t      string
		v1body   any
		status   int
		want     string
	}{
		{"read shadow", "GET", "/v2/fs/read?path=%2Fetc%2Fshadow", nil, "/v1/file/read", map[string]any{"file": "/etc/shadow"},
			403, denied("read", read, "/etc/shadow")},
		{"read outside", "GET", "/v2/fs/read?path=" + q(secret), nil, "/v1/file/read", map[string]any{"file": secret},
			404, missing("read", read, secret)},
		{"stat outside", "GET", "/v2/fs/stat?path=" + q(secret), nil, "/v1/file/stat", map[string]any{"path": secret},
			404, missing("stat", stat, secret)},
		{"list /root", "GET", "/v2/fs/list?path=%2Froot", nil, "/v1/file/list", map[string]any{"path": "/root"},
			404, missing("list", list, "/root")},
		{"read /root/x", "GET", "/v2/fs/read?path=%2Froot%2Fx", nil, "/v1/file/read", map[string]any{"file": "/root/x"},
			404, missing("read", read, "/root/x")},
		{"read link to shadow", "GET", "/v2/fs/read?path=to-shadow", nil, "/v1/file/read", map[string]any{"file": "to-shadow"},
			403, denied("read", read, "to-shadow")},
		{"read link to outside", "GET", "/v2/fs/read?path=to-secret", nil, "/v1/file/read", map[string]any{"file": "to-secret"},
			404, missing("read", read, "to-secret")},
		{"list link to /root", "GET", "/v2/fs/list?path=to-root", nil, "/v1/file/list", map[string]any{"path": "to-root"},
			404, missing("list", list, "to-root")},
		// The anchor is in no shadow file: were the read let through, the
		// edit would still change nothing.
		{"edit shadow", "POST", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": "/etc/shadow", "old_str": "aiod: not in any shadow file", "new_str": "x"},
			"/v1/file/replace", nil, 403, denied("edit", "Failed to edit file", "/etc/shadow")},
		{"copy shadow in", "POST", "/v2/fs/copy", map[string]any{"source": "/etc/shadow", "destination": "stolen"},
			"/v1/file/copy", map[string]any{"source": "/etc/shadow", "destination": "stolen"}, 403, denied("copy", "Failed to copy path", "stolen")},
		{"copy outside in", "POST", "/v2/fs/copy", map[string]any{"source": secret, "destination": "stolen"},
			"/v1/file/copy", map[string]any{"source": secret, "destination": "stolen"}, 404, missing("copy", "Failed to copy path", secret)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e2 := f.do(tt.v2m, tt.v2t, tt.v2body)
			if e2.status != tt.status || e2.Success || !planetest.SameJSON(e2.Data, []byte(tt.want)) || e2.Message != fileErr(t, e2).Message {
				t.Fatalf("v2: %d %s %q\nwant %d %s", e2.status, brief(e2.Data), e2.Message, tt.status, tt.want)
			}
			if tt.v1body == nil {
				return
			}
			e1 := f.do("POST", tt.v1t, tt.v1body)
			if e1.status != 200 || e1.Success || !bytes.Equal(e1.Data, e2.Data) {
				t.Errorf("v1: %d %s", e1.status, brief(e1.Data))
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "stolen")); err == nil {
		t.Error("a refused copy left its destination")
	}

	// A grep of the workspace finds nothing through the links, and one
	// of /etc/shadow itself searches nothing.
	f.write("plain.txt", "root here\n")
	e := f.do("POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "TOPSECRET|root:"})
	if d := e.data(t); e.status != 200 || d["match_count"] != 0.0 || d["files_searched"] != 1.0 {
		t.Errorf("grep workspace: %d, %v matches in %v files", e.status, d["match_count"], d["files_searched"])
	}
	e = f.do("POST", "/v2/fs/grep", map[string]any{"path": "/etc/shadow", "pattern": "root"})
	if d := e.data(t); e.status != 200 || d["match_count"] != 0.0 || d["files_searched"] != 0.0 {
		t.Errorf("grep shadow: %d, %v matches in %v files", e.status, d["match_count"], d["files_searched"])
	}
	e = f.do("POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "root", "max_results": 1})
	if d := e.data(t); e.status != 200 || d["match_count"] != 1.0 {
		t.Errorf("grep plain: %d %s", e.status, e.Data)
	}

	// A write through the link to the outside file lands in the view,
	// whose root is read-only: the host file is untouched.
	e = f.do("POST", "/v2/fs/write", map[string]any{"path": "to-secret", "content": "overwritten"})
	if fe := fileErr(t, e); e.status != 500 || fe.ErrorType != "read_only_filesystem" {
		t.Errorf("write through link: %d %s", e.status, e.Data)
	}
	if got := f.read(secret); got != "TOPSECRET\n" {
		t.Errorf("host file now %q", got)
	}
}

// TestSandboxCreates: what the plane creates under isolation lands in
// the workspace on the host, owned by the sandbox account, whatever
// owner the request names; a replace of a file the account owns keeps
// working; writing under /usr is read_only_filesystem.
func TestSandboxCreates(t *testing.T) {
	f := newSandboxed(t)
	// A file of the host's root that the account may write (0666, in
	// its directory) is replaced; the new file is the account's, as it
	// cannot give files away.
	theirs := f.write("theirs.txt", "old")
	if err := os.Chmod(theirs, 0o666); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		method, target string
		body           any
	}{
		{"POST", "/v2/fs/write", map[string]any{"path": "a/b/new.txt", "content": "one"}},
		{"POST", "/v2/fs/write?user=root", map[string]any{"path": "a/b/new.txt", "content": "two"}},
		{"POST", "/v1/file/write", map[string]any{"file": "sudo.txt", "content": "s", "sudo": true}},
		{"POST", "/v2/fs/mkdir", map[string]any{"path": "d/e", "parents": true}},
		{"POST", "/v2/fs/copy", map[string]any{"source": "a", "destination": "c"}},
		{"POST", "/v1/file/str_replace_editor", map[string]any{"command": "create", "path": "ed.txt", "file_text": "x\n"}},
		{"POST", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": "ed.txt", "old_str": "x", "new_str": "y"}},
		{"POST", "/v2/fs/write", map[string]any{"path": "theirs.txt", "content": "new"}},
	}
	for _, s := range steps {
		if e := f.do(s.method, s.target, s.body); e.status != 200 || !e.Success {
			t.Fatalf("%s %s: %d %s", s.method, s.target, e.status, e.Data)
		}
	}
	for rel, want := range map[string]string{"a/b/new.txt": "two", "sudo.txt": "s", "c/b/new.txt": "two", "ed.txt": "y\n", "theirs.txt": "new"} {
		if got := f.read(filepath.Join(f.dir, rel)); got != want {
			t.Errorf("%s: %q", rel, got)
		}
	}
	for _, rel := range []string{"a", "a/b", "a/b/new.txt", "sudo.txt", "d", "d/e", "c", "c/b/new.txt", "ed.txt", "theirs.txt"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(f.dir, rel), &st); err != nil || st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s: uid %d gid %d %v", rel, st.Uid, st.Gid, err)
		}
	}
	if fi, err := os.Stat(theirs); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("theirs.txt: mode not kept: %v %v", fi.Mode(), err)
	}
	e := f.do("POST", "/v2/fs/write", map[string]any{"path": "/usr/aiod-test", "content": "x"})
	if fe := fileErr(t, e); e.status != 500 || fe.ErrorType != "read_only_filesystem" || deref(fe.ErrnoName) != "EROFS" {
		t.Errorf("write /usr: %d %s", e.status, e.Data)
	}
	if _, err := os.Lstat("/usr/aiod-test"); err == nil {
		os.Remove("/usr/aiod-test")
		t.Error("a file was written under the host's /usr")
	}
}
