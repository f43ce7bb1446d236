package transfer

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTreeImport feeds arbitrary bytes to the tar importer, in merge and
// rename mode: it must never panic, and after each input nothing may
// exist outside the destination but the untouched sentinel, no staged
// file may remain, and every symlink written must point inside.
func FuzzTreeImport(f *testing.F) {
	f.Add(tarball(f, file("a", "x"), entry{name: "d/", typ: tar.TypeDir}, file("d/b", "y")))
	f.Add(tarball(f, entry{name: "l", typ: tar.TypeSymlink, linkname: "../box"}, file("l/x", "x")))
	f.Add(tarball(f, entry{name: "l", typ: tar.TypeSymlink, linkname: "d"}, entry{name: "d/", typ: tar.TypeDir}, file("l/x", "x")))
	f.Add(tarball(f, file("a", "x"), entry{name: "h", typ: tar.TypeLink, linkname: "a"}))
	f.Add(tarball(f, entry{name: "h", typ: tar.TypeLink, linkname: "../sentinel"}))
	f.Add(tarball(f, file("../x", "x")))
	f.Add([]byte("garbage"))
	base := f.TempDir()
	p := New(Config{Workspace: base, MaxTreeEntries: 64, MaxTreeBytes: 1 << 20, MaxTreeBody: 4 << 20})
	n := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		n++
		box := filepath.Join(base, "box", strings.Repeat("b", n%3+1))
		_ = os.RemoveAll(filepath.Join(base, "box"))
		writeFile(t, filepath.Join(box, "sentinel"), "s", 0o644)
		for _, merge := range []bool{false, true} {
			dest := filepath.Join(box, "dest")
			if merge {
				_ = os.MkdirAll(dest, 0o755)
			}
			_, _ = p.Engine().ImportTree(t.Context(), dest, "", bytes.NewReader(data))
			checkConfined(t, box, dest)
		}
	})
}

func checkConfined(t *testing.T, box, dest string) {
	t.Helper()
	err := filepath.WalkDir(box, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".aiod-") {
			t.Fatalf("staged leftover %s", p)
		}
		switch {
		case p == box || p == filepath.Join(box, "sentinel"):
			return nil
		case p != dest && !strings.HasPrefix(p, dest+string(filepath.Separator)):
			t.Fatalf("%s written outside %s", p, dest)
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			resolved := filepath.Join(filepath.Dir(p), target)
			if filepath.IsAbs(target) || (resolved != dest && !strings.HasPrefix(resolved, dest+string(filepath.Separator))) {
				t.Fatalf("symlink %s -> %s points outside", p, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(box, "sentinel")); got != "s" {
		t.Fatalf("sentinel changed: %q", got)
	}
}
