package files

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// TestCharDeviceWrites: writing or appending to an existing character
// device is allowed and writes in place; reading one is refused.
func TestCharDeviceWrites(t *testing.T) {
	e := NewEngine(Config{Workspace: t.TempDir()})
	ctx := context.Background()
	for _, app := range []bool{false, true} {
		res, ferr := e.Write(ctx, FsWriteRequest{Path: "/dev/null", Content: "discarded", Append: app})
		if ferr != nil || *res.BytesWritten != 9 {
			t.Errorf("write /dev/null append=%v: %v %v", app, res, ferr)
		}
	}
	if fi, err := os.Lstat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v %v", fi, err)
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		_, ferr := e.Write(ctx, FsWriteRequest{Path: "/dev/full", Content: "x", Append: true})
		if ferr == nil || ferr.ErrorType != fserr.NoSpaceLeft {
			t.Errorf("write /dev/full: %v", ferr)
		}
	}
	_, ferr := e.Read(ctx, FsReadQuery{Path: "/dev/null"})
	if ferr == nil || ferr.ErrorType != fserr.InvalidTarget || ferr.Message != "Failed to read file: not a regular file" {
		t.Errorf("read /dev/null: %v", ferr)
	}
}

// TestWriteThroughSymlinks: a write follows a chain of links to its end,
// whether the final target exists or not, and the links stay links.
func TestWriteThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	e := NewEngine(Config{Workspace: dir})
	ctx := context.Background()
	symlink := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	isLink := func(name string) {
		t.Helper()
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v %v", name, fi, err)
		}
	}
	content := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// Dangling, absolute: the target and its parents are created.
	symlink(filepath.Join(dir, "nodir/x"), "dang")
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "dang", Content: "via dangling"}); ferr != nil {
		t.Fatal(ferr)
	}
	isLink("dang")
	if got := content("nodir/x"); got != "via dangling" {
		t.Errorf("nodir/x = %q", got)
	}

	// Existing target: written through, mode kept.
	if err := os.WriteFile(filepath.Join(dir, "real.txt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	symlink("real.txt", "live")
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "live", Content: "new"}); ferr != nil {
		t.Fatal(ferr)
	}
	isLink("live")
	if fi, _ := os.Stat(filepath.Join(dir, "real.txt")); content("real.txt") != "new" || fi.Mode().Perm() != 0o600 {
		t.Errorf("real.txt = %q %v", content("real.txt"), fi.Mode())
	}

	// A chain of relative links, dangling at its end, from a subdirectory.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink("../chain2", "sub/chain1")
	symlink("deep/er/end.txt", "chain2")
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "sub/chain1", Content: "a"}); ferr != nil {
		t.Fatal(ferr)
	}
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "sub/chain1", Content: "b", Append: true}); ferr != nil {
		t.Fatal(ferr)
	}
	isLink("sub/chain1")
	isLink("chain2")
	if got := content("deep/er/end.txt"); got != "ab" {
		t.Errorf("end.txt = %q", got)
	}

	// Append through a dangling link creates the target too.
	symlink("app/dir/log", "applink")
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "applink", Content: "1", Append: true}); ferr != nil {
		t.Fatal(ferr)
	}
	isLink("applink")
	if got := content("app/dir/log"); got != "1" {
		t.Errorf("app/dir/log = %q", got)
	}

	// Editor create through a dangling link.
	symlink("made/by/create", "clink")
	text := "created"
	if _, ferr := e.Edit(ctx, FsEditRequest{Command: CmdCreate, Path: "clink", FileText: &text}); ferr != nil {
		t.Fatal(ferr)
	}
	isLink("clink")
	if got := content("made/by/create"); got != "created" {
		t.Errorf("made/by/create = %q", got)
	}

	// A loop is ELOOP, invalid_path, and changes nothing.
	symlink("loop2", "loop1")
	symlink("loop1", "loop2")
	_, ferr := e.Write(ctx, FsWriteRequest{Path: "loop1", Content: "x"})
	if ferr == nil || ferr.ErrorType != fserr.InvalidPath || deref(ferr.ErrnoName) != "ELOOP" || ferr.Status() != 400 {
		t.Errorf("loop: %v", ferr)
	}
	isLink("loop1")
	isLink("loop2")

	// 40 links are followed, 41 are too many.
	symlink("target40", "l40")
	for i := 39; i >= 0; i-- {
		symlink("l"+strconv.Itoa(i+1), "l"+strconv.Itoa(i))
	}
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "l1", Content: "40"}); ferr != nil {
		t.Errorf("40 links: %v", ferr)
	}
	if _, ferr := e.Write(ctx, FsWriteRequest{Path: "l0", Content: "41"}); ferr == nil || deref(ferr.ErrnoName) != "ELOOP" {
		t.Errorf("41 links: %v", ferr)
	}
}

// TestWriteBreaksHardLink pins the documented cost of an atomic replace:
// the written name gets a new inode, the hard link keeps the old content.
func TestWriteBreaksHardLink(t *testing.T) {
	dir := t.TempDir()
	e := NewEngine(Config{Workspace: dir})
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	if _, ferr := e.Write(context.Background(), FsWriteRequest{Path: a, Content: "new"}); ferr != nil {
		t.Fatal(ferr)
	}
	ga, _ := os.ReadFile(a)
	gb, _ := os.ReadFile(b)
	if string(ga) != "new" || string(gb) != "old" {
		t.Errorf("a=%q b=%q", ga, gb)
	}
	// Append writes in place and keeps the link.
	if err := os.Link(a, filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if _, ferr := e.Write(context.Background(), FsWriteRequest{Path: a, Content: "+", Append: true}); ferr != nil {
		t.Fatal(ferr)
	}
	if gc, _ := os.ReadFile(filepath.Join(dir, "c")); string(gc) != "new+" {
		t.Errorf("c=%q", gc)
	}
}
