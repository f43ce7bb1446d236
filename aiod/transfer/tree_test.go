package transfer

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// entry is one archive member: content for a file, Linkname for links.
type entry struct {
	name     string
	typ      byte
	content  string
	linkname string
	mode     int64
}

func tarball(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.linkname, Mode: mode}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.content); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func file(name, content string) entry { return entry{name: name, typ: tar.TypeReg, content: content} }

func treeURL(dir string) string { return "/v2/fs/tree?path=" + url.QueryEscape(dir) }

// snapshot maps every path under dir to its kind and content or target.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			m[rel] = "dir " + fi.Mode().Perm().String()
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "link " + target
		default:
			b, _ := os.ReadFile(p)
			m[rel] = fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameTree(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("tree = %v\nwant %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q, want %q\ntree %v", k, got[k], v, got)
		}
	}
}

func TestTreeRoundTrip(t *testing.T) {
	f := newFixture(t, Config{})
	src := filepath.Join(f.work, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "alpha", 0o600)
	writeFile(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\n", 0o700)
	writeFile(t, filepath.Join(src, "deep", "er", "c"), "c", 0o644)
	if err := os.Symlink("../a.txt", filepath.Join(src, "bin", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	w := f.do("GET", treeURL(src), nil)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-tar" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	archive := w.Body.Bytes()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "src") {
			t.Fatalf("member name %q is not relative to the directory", h.Name)
		}
	}

	dest := filepath.Join(f.work, "out", "copy")
	w = f.do("PUT", treeURL(dest), bytes.NewReader(archive), "Content-Type", "application/x-tar")
	r := decode(t, w)
	m := dataMap(t, r)
	wantKeys(t, m, "path", "entries", "mode")
	if w.Code != 200 || m["mode"] != "rename" || m["path"] != dest || m["entries"] != 8.0 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	want := map[string]string{
		"a.txt": "-rw-r--r-- alpha", "bin": "dir -rwxr-xr-x", "bin/run.sh": "-rwxr-xr-x #!/bin/sh\n",
		"bin/link": "link ../a.txt", "deep": "dir -rwxr-xr-x", "deep/er": "dir -rwxr-xr-x",
		"deep/er/c": "-rw-r--r-- c", "empty": "dir -rwxr-xr-x",
	}
	sameTree(t, snapshot(t, dest), want)

	// merge: overlay onto the existing tree; what the archive lacks stays.
	writeFile(t, filepath.Join(dest, "local.txt"), "mine", 0o644)
	patch := tarball(t, file("a.txt", "beta"), file("new/n.txt", "n"), entry{name: "deep/", typ: tar.TypeDir})
	w = f.do("PUT", treeURL(dest), bytes.NewReader(patch))
	if m := dataMap(t, decode(t, w)); w.Code != 200 || m["mode"] != "merge" || m["entries"] != 3.0 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	want["a.txt"] = "-rw-r--r-- beta"
	want["local.txt"] = "-rw-r--r-- mine"
	want["new"] = "dir -rwxr-xr-x"
	want["new/n.txt"] = "-rw-r--r-- n"
	sameTree(t, snapshot(t, dest), want)
	if s := staged(t, f.work); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}
}

func TestTreeRejectsAttacks(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
	}{
		{"absolute", []entry{file("/tmp/evil", "x")}},
		{"dotdot", []entry{file("../x", "x")}},
		{"inner dotdot", []entry{file("a/../../x", "x")}},
		{"symlink escaping then a file through it", []entry{
			{name: "l", typ: tar.TypeSymlink, linkname: "../outside"}, file("l/x", "x")}},
		{"absolute symlink", []entry{{name: "l", typ: tar.TypeSymlink, linkname: "/etc"}}},
		{"symlink down then up", []entry{{name: "l", typ: tar.TypeSymlink, linkname: "sub/../.."}}},
		{"in-tree symlink then a file through it", []entry{
			{name: "sub/", typ: tar.TypeDir}, {name: "l", typ: tar.TypeSymlink, linkname: "sub"}, file("l/x", "x")}},
		{"hardlink escaping", []entry{{name: "h", typ: tar.TypeLink, linkname: "../outside/secret"}}},
		{"hardlink absolute", []entry{{name: "h", typ: tar.TypeLink, linkname: "/etc/passwd"}}},
		{"hardlink through symlink", []entry{
			{name: "l", typ: tar.TypeSymlink, linkname: "."}, {name: "h", typ: tar.TypeLink, linkname: "l"}}},
		{"file over directory", []entry{{name: "d/", typ: tar.TypeDir}, file("d", "x")}},
	}
	for _, mode := range []string{"rename", "merge"} {
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				f := newFixture(t, Config{})
				outside := filepath.Join(f.work, "outside")
				writeFile(t, filepath.Join(outside, "secret"), "s", 0o644)
				dest := filepath.Join(f.work, "dest")
				if mode == "merge" {
					if err := os.Mkdir(dest, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				w := f.do("PUT", treeURL(dest), bytes.NewReader(tarball(t, c.entries...)))
				r := decode(t, w)
				m := dataMap(t, r)
				if w.Code != 400 || m["error_type"] != fserr.BadRequest || m["operation"] != "tree" || m["path"] != dest {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				sameTree(t, snapshot(t, outside), map[string]string{"secret": "-rw-r--r-- s"})
				if _, err := os.Stat(filepath.Join(f.work, "x")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatal("a file landed outside the destination")
				}
				if _, err := os.Lstat(dest); mode == "rename" && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal("rename mode left a partial destination")
				}
				if s := staged(t, f.work); len(s) != 0 {
					t.Fatalf("leftovers %v", s)
				}
			})
		}
	}
}

func TestTreeLimits(t *testing.T) {
	f := newFixture(t, Config{MaxTreeEntries: 3, MaxTreeBytes: 10, MaxTreeBody: 8 << 10})
	cases := []struct {
		name string
		body []byte
	}{
		{"entries", tarball(t, file("1", ""), file("2", ""), file("3", ""), file("4", ""))},
		{"bytes", tarball(t, file("1", "123456"), file("2", "123456"))},
		{"body", tarball(t, entry{name: "big", typ: tar.TypeReg, content: strings.Repeat("x", 9<<10)})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := filepath.Join(f.work, c.name)
			w := f.do("PUT", treeURL(dest), bytes.NewReader(c.body))
			if r := decode(t, w); w.Code != 413 || dataMap(t, r)["operation"] != "tree" {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if _, err := os.Lstat(dest); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("partial destination")
			}
		})
	}
	// A body whose declared length is over the limit is refused unread.
	r := strings.NewReader(strings.Repeat("x", 9<<10))
	w := f.do("PUT", treeURL(filepath.Join(f.work, "declared")), r)
	if w.Code != 413 {
		t.Fatalf("declared: %d %s", w.Code, w.Body)
	}
	// The engine reports the limit as ErrTooLarge.
	_, err := f.p.Engine().ImportTree(t.Context(), "engine", "", bytes.NewReader(cases[0].body))
	var fe *fserr.Error
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &fe) || fe.Operation != "tree" {
		t.Fatalf("engine: %v", err)
	}
}

func TestTreeBadInput(t *testing.T) {
	f := newFixture(t, Config{})
	writeFile(t, filepath.Join(f.work, "plain"), "x", 0o644)
	w := f.do("PUT", treeURL("garbage"), strings.NewReader(strings.Repeat("not a tar ", 100)))
	if r := decode(t, w); w.Code != 400 || !strings.HasPrefix(r.Message, "Failed to transfer tree: invalid tar archive") {
		t.Fatalf("garbage: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		method, path string
		status       int
		errorType    string
	}{
		{"GET", "missing", 404, fserr.NotFound},
		{"GET", "plain", 400, fserr.InvalidTarget},
		{"PUT", "plain", 400, fserr.InvalidTarget},
	} {
		w := f.do(c.method, treeURL(c.path), bytes.NewReader(tarball(t)))
		if m := dataMap(t, decode(t, w)); w.Code != c.status || m["error_type"] != c.errorType || m["path"] != c.path {
			t.Fatalf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}
	if w := f.do("PUT", "/v2/fs/tree", nil); w.Code != 422 {
		t.Fatalf("no path: %d", w.Code)
	}
	// Device and FIFO members are skipped, not written and not counted.
	w = f.do("PUT", treeURL("dev"), bytes.NewReader(tarball(t,
		entry{name: "fifo", typ: tar.TypeFifo}, entry{name: "null", typ: tar.TypeChar}, file("ok", "1"))))
	if m := dataMap(t, decode(t, w)); w.Code != 200 || m["entries"] != 1.0 {
		t.Fatalf("devices: %d %s", w.Code, w.Body)
	}
	sameTree(t, snapshot(t, filepath.Join(f.work, "dev")), map[string]string{"ok": "-rw-r--r-- 1"})
}

func TestTreeOwner(t *testing.T) {
	f := newFixture(t, Config{})
	archive := tarball(t, file("d/f", "x"), entry{name: "l", typ: tar.TypeSymlink, linkname: "d/f"})
	checkOwner(t, f, func(user string) *httptest.ResponseRecorder {
		return f.do("PUT", treeURL("t")+"&user="+user, bytes.NewReader(archive))
	}, "t", "t/d", "t/d/f", "t/l")
}

func TestSymlinkInside(t *testing.T) {
	for _, c := range []struct {
		name, target string
		ok           bool
	}{
		{"l", "a", true}, {"l", ".", true}, {"l", "a/b/./c", true}, {"d/l", "../a", true},
		{"d/e/l", "../../a", true}, {"l", "..", false}, {"d/l", "../..", false},
		{"l", "a/../b", false}, {"l", "/abs", false}, {"l", "", false}, {"d/l", "x/../../..", false},
	} {
		if got := symlinkInside(c.name, c.target); got != c.ok {
			t.Errorf("symlinkInside(%q, %q) = %v", c.name, c.target, got)
		}
	}
}
