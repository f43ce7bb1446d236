package transfer

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// nobody is the sandbox account's uid on the CI machines (host nobody).
const nobody = 65534

// sandboxed is a fixture whose plane runs in a real sandbox over its
// workspace, with links in the workspace to /etc/shadow (to-shadow), to
// a host file outside the view (to-secret) and to its directory
// (to-outside); it skips where a sandbox cannot be made (not root).
type sandboxed struct {
	*fixture
	outDir, secret string
}

func newSandboxed(t *testing.T) *sandboxed {
	t.Helper()
	sb, work := planetest.Sandbox(t, sandbox.Config{})
	// /var is not in the view: a host directory the sandbox cannot see.
	out, err := os.MkdirTemp("/var/tmp", "aiod-transfer-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	s := &sandboxed{fixture: newFixture(t, Config{Workspace: work, Sandbox: sb}), outDir: out, secret: filepath.Join(out, "secret")}
	writeFile(t, s.secret, "TOPSECRET\n", 0o666)
	for link, target := range map[string]string{"to-shadow": "/etc/shadow", "to-secret": s.secret, "to-outside": out} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// outsideUntouched fails the test when anything but the secret, intact,
// is in the outside directory.
func (s *sandboxed) outsideUntouched(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir(s.outDir)
	if len(ents) != 1 || readFile(t, s.secret) != "TOPSECRET\n" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the outside directory changed: %v, secret %q", names, readFile(t, s.secret))
	}
}

// owned fails the test unless every path under the workspace named is
// the sandbox account's on the host.
func (s *sandboxed) owned(t *testing.T, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(s.work, rel), &st); err != nil || st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s: uid %d gid %d %v", rel, st.Uid, st.Gid, err)
		}
	}
}

// mkdir makes a directory of the host's root in the workspace that the
// sandbox account may write.
func (s *sandboxed) mkdir(t *testing.T, rel string) {
	t.Helper()
	p := filepath.Join(s.work, rel)
	if err := os.Mkdir(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
}

// errObject is the exact error object of an errno failure.
func errObject(op, msg, path string, no int, name, typ, exc string) string {
	b, _ := json.Marshal(map[string]any{"errno": no, "errno_name": name, "error_type": typ, "exception_type": exc,
		"message": msg, "operation": op, "path": path, "retryable": false})
	return string(b)
}

// TestSandboxDownload: downloads resolve in the view as the sandbox
// account: /etc/shadow and a link to it are 403, a host file outside the
// view, a link to it and /root/x are 404, all bare statuses.
func TestSandboxDownload(t *testing.T) {
	s := newSandboxed(t)
	writeFile(t, filepath.Join(s.work, "ok.txt"), "fine", 0o644)
	for _, c := range []struct {
		path   string
		status int
	}{
		{"ok.txt", 200},
		{"/etc/shadow", 403},
		{"to-shadow", 403},
		{s.secret, 404},
		{"to-secret", 404},
		{"to-outside/secret", 404},
		{"/root/x", 404},
	} {
		for _, route := range []string{"/v2/fs/download", "/v1/file/download"} {
			w := s.do("GET", route+"?path="+url.QueryEscape(c.path), nil)
			want := ""
			if c.status == 200 {
				want = "fine"
			}
			if w.Code != c.status || w.Body.String() != want {
				t.Errorf("%s %s: %d, %d bytes", route, c.path, w.Code, w.Body.Len()) // the body may be a secret
			}
		}
	}
}

// TestSandboxUpload: uploads land in the view only, owned by the sandbox
// account on the host whatever user the request names; a destination
// outside the view, even through a link in the workspace, is not_found
// "Destination directory not found" and leaves the host untouched.
func TestSandboxUpload(t *testing.T) {
	s := newSandboxed(t)
	writeFile(t, filepath.Join(s.work, "theirs.txt"), "old", 0o666) // the host root's, writable by the account
	s.mkdir(t, "sub")
	for _, c := range []struct{ route, path, want string }{
		{"/v2/fs/upload", "new.txt", "new.txt"},
		{"/v2/fs/upload?user=root", "sub/", "sub/up.txt"},
		{"/v1/file/upload", "theirs.txt", "theirs.txt"},
	} {
		body, ct := form(t, "up.txt", [2]string{"path", c.path}, [2]string{"file", "data " + c.path})
		w := s.do("POST", c.route, body, "Content-Type", ct)
		r := decode(t, w)
		want := `{"file_path":"` + filepath.Join(s.work, c.want) + `","file_size":` + itoa(len("data "+c.path)) + `,"success":true}`
		if w.Code != 200 || !r.Success || !planetest.SameJSON(r.Data, []byte(want)) {
			t.Fatalf("%s %s: %d %s", c.route, c.path, w.Code, w.Body)
		}
		if got := readFile(t, filepath.Join(s.work, c.want)); got != "data "+c.path {
			t.Errorf("%s: %q", c.want, got)
		}
	}
	s.owned(t, "new.txt", "sub/up.txt", "theirs.txt")
	if fi, _ := os.Stat(filepath.Join(s.work, "theirs.txt")); fi.Mode().Perm() != 0o666 {
		t.Errorf("theirs.txt mode %v", fi.Mode())
	}

	const msg = "Failed to upload file: Destination directory not found"
	// (A directory under /root that the host lacks too: were the view
	// not in force, nothing would be written in the host's /root.)
	for _, dest := range []string{filepath.Join(s.outDir, "in.txt"), "to-outside/in.txt", "/root/aiod-absent/in.txt"} {
		body, ct := form(t, "up.txt", [2]string{"path", dest}, [2]string{"file", "x"})
		w := s.do("POST", "/v2/fs/upload", body, "Content-Type", ct)
		r := decode(t, w)
		if want := errObject("upload", msg, dest, 2, "ENOENT", "not_found", "FileNotFoundError"); w.Code != 404 || r.Success ||
			r.Message != msg || !planetest.SameJSON(r.Data, []byte(want)) {
			t.Errorf("%s: %d %s", dest, w.Code, w.Body)
		}
	}
	s.outsideUntouched(t)
	if left := staged(t, s.work); len(left) != 0 {
		t.Errorf("leftovers %v", left)
	}
}

// TestSandboxTree: a tree import lands in the view only and everything
// it creates is the sandbox account's; an import aimed outside the view
// (by path or through a link in the workspace) leaves the host
// untouched. An export looks up as the account: a link is exported as a
// link, a directory outside the view is not_found, and a tree holding a
// file the account may not read (/etc: shadow) fails.
func TestSandboxTree(t *testing.T) {
	s := newSandboxed(t)
	arch := tarball(t, entry{name: "d/", typ: tar.TypeDir, mode: 0o755}, file("d/f.txt", "hello"),
		entry{name: "d/l", typ: tar.TypeSymlink, linkname: "f.txt"}, file("top.txt", "top"))
	for _, dest := range []string{"imp", "sub/imp"} {
		if dest == "sub/imp" {
			s.mkdir(t, "sub")
		}
		for _, mode := range []string{"rename", "merge"} {
			w := s.do("PUT", treeURL(dest)+"&user=root", bytes.NewReader(arch))
			r := decode(t, w)
			want := `{"path":"` + filepath.Join(s.work, dest) + `","entries":4,"mode":"` + mode + `"}`
			if w.Code != 200 || !r.Success || !planetest.SameJSON(r.Data, []byte(want)) {
				t.Fatalf("import %s (%s): %d %s", dest, mode, w.Code, w.Body)
			}
		}
		s.owned(t, dest, dest+"/d", dest+"/d/f.txt", dest+"/d/l", dest+"/top.txt")
		if got := readFile(t, filepath.Join(s.work, dest, "d/l")); got != "hello" {
			t.Errorf("%s/d/l: %q", dest, got)
		}
	}

	for _, c := range []struct {
		dest   string
		status int
		typ    string
	}{
		{filepath.Join(s.outDir, "imp"), 500, "read_only_filesystem"}, // the view's /var: on its read-only root
		{"to-outside", 400, "invalid_target"},                         // a link, to nothing in the view: not replaced
		{"to-outside/imp", 404, "not_found"},                          // through the link: no such directory in the view
	} {
		w := s.do("PUT", treeURL(c.dest), bytes.NewReader(arch))
		if m := dataMap(t, decode(t, w)); w.Code != c.status || m["error_type"] != c.typ {
			t.Errorf("import %s: %d %s", c.dest, w.Code, w.Body)
		}
	}
	s.outsideUntouched(t)
	if fi, err := os.Lstat(filepath.Join(s.work, "to-outside")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("to-outside is no longer the link: %v %v", fi, err)
	}
	if left := staged(t, s.work); len(left) != 0 {
		t.Errorf("leftovers %v", left)
	}

	// Export.
	w := s.do("GET", treeURL(s.work), nil)
	if w.Code != 200 {
		t.Fatalf("export: %d %s", w.Code, w.Body)
	}
	got := map[string]string{}
	tr := tar.NewReader(w.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = h.Linkname + string(b)
	}
	for name, want := range map[string]string{"to-shadow": "/etc/shadow", "to-secret": s.secret, "to-outside": s.outDir, "imp/top.txt": "top"} {
		if got[name] != want {
			t.Errorf("export %s: %q", name, got[name])
		}
	}
	for _, p := range []string{"to-outside", s.outDir, "/root"} {
		w := s.do("GET", treeURL(p), nil)
		want := errObject("tree", "Failed to transfer tree: No such file or directory (os error 2)", p, 2, "ENOENT", "not_found", "FileNotFoundError")
		if r := decode(t, w); w.Code != 404 || !planetest.SameJSON(r.Data, []byte(want)) {
			t.Errorf("export %s: %d %s", p, w.Code, w.Body)
		}
	}
	err := s.p.Engine().ExportTree(t.Context(), "/etc", io.Discard)
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("export /etc: %v", err)
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("exported %v", names)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
