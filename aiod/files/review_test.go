package files

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// deadline runs fn and fails the test if it has not returned in a few
// seconds: an operation blocked in open(2) on a FIFO never would.
func deadline(t *testing.T, what string, fn func() envelope) envelope {
	t.Helper()
	done := make(chan envelope, 1)
	go func() { done <- fn() }()
	select {
	case e := <-done:
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still blocked after 5s", what)
		return envelope{}
	}
}

// mkfifo makes a FIFO and, at cleanup, opens it read-write (which never
// blocks) so that an operation wrongly blocked on it is released.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
			time.Sleep(10 * time.Millisecond)
			f.Close()
		}
	})
}

// TestNonRegularNeverBlocks: every operation that opens a file's content
// refuses a FIFO or a socket at once, invalid_target "<phrase>: not a
// regular file", 400 on v2 and 200 success:false on v1.
func TestNonRegularNeverBlocks(t *testing.T) {
	f := newFixture(t)
	fifo := filepath.Join(f.dir, "fifo")
	mkfifo(t, fifo)
	// A short name: a socket path must fit in sun_path.
	sockDir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	link := filepath.Join(f.dir, "fifo-link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{fifo, sock, link} {
		cases := []struct {
			method, target string
			body           any
			v1             bool
			phrase         string
		}{
			{"GET", "/v2/fs/read?path=" + q(p), nil, false, "Failed to read file"},
			{"POST", "/v1/file/read", map[string]any{"file": p}, true, "Failed to read file"},
			{"POST", "/v1/file/search", map[string]any{"file": p, "regex": "x"}, true, "Failed to search file"},
			{"POST", "/v1/file/replace", map[string]any{"file": p, "old_str": "a", "new_str": "b"}, true, "Failed to replace in file"},
			{"POST", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": p, "old_str": "a", "new_str": "b"}, false, "Failed to edit file"},
			{"POST", "/v2/fs/edit", map[string]any{"command": "insert", "path": p, "insert_line": 0, "new_str": "b"}, false, "Failed to edit file"},
			{"POST", "/v1/file/str_replace_editor", map[string]any{"command": "view", "path": p}, true, "Failed to edit file"},
			{"POST", "/v1/file/str_replace_editor", map[string]any{"command": "create", "path": p, "file_text": "x"}, true, "Failed to edit file"},
			{"POST", "/v2/fs/write", map[string]any{"path": p, "content": "x"}, false, "Failed to write file"},
			{"POST", "/v2/fs/write", map[string]any{"path": p, "content": "x", "append": true}, false, "Failed to write file"},
			{"POST", "/v1/file/write", map[string]any{"file": p, "content": "x", "append": true}, true, "Failed to write file"},
			{"POST", "/v2/fs/copy", map[string]any{"source": p, "destination": filepath.Join(f.dir, "copy")}, false, "Failed to copy path"},
			{"POST", "/v2/fs/grep", map[string]any{"path": p, "pattern": "x"}, false, "Failed to grep files"},
			{"POST", "/v1/file/grep", map[string]any{"path": p, "pattern": "x"}, true, "Failed to grep files"},
		}
		for _, c := range cases {
			if p == link && c.target == "/v2/fs/copy" {
				continue // a link is copied as a link
			}
			what := c.method + " " + c.target + " " + filepath.Base(p)
			e := deadline(t, what, func() envelope { return f.do(c.method, c.target, c.body) })
			want := 400
			if c.v1 {
				want = 200
			}
			if e.status != want || e.Success {
				t.Errorf("%s: status %d success %v, want %d: %s", what, e.status, e.Success, want, e.Data)
				continue
			}
			fe := fileErr(t, e)
			if fe.ErrorType != fserr.InvalidTarget || fe.Message != c.phrase+": not a regular file" || e.Message != fe.Message || fe.Path != p {
				t.Errorf("%s: %s", what, e.Data)
			}
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s was replaced: %v %v", p, fi, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "copy")); err == nil {
		t.Error("a copy of a FIFO was made")
	}

	// A FIFO with a reader: the write's open succeeds, fstat refuses it.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, app := range []bool{false, true} {
		e := deadline(t, "write to a read FIFO", func() envelope {
			return f.do("POST", "/v2/fs/write", map[string]any{"path": fifo, "content": "x", "append": app})
		})
		if e.status != 400 || fileErr(t, e).Message != "Failed to write file: not a regular file" {
			t.Errorf("append %v: %d %s", app, e.status, e.Data)
		}
	}

	// A directory walk skips the FIFO and the socket's kind alike.
	f.write("g/a.txt", "x\n")
	mkfifo(t, filepath.Join(f.dir, "g/pipe"))
	e := deadline(t, "grep dir", func() envelope {
		return f.do("POST", "/v2/fs/grep", map[string]any{"path": filepath.Join(f.dir, "g"), "pattern": "x"})
	})
	if d := e.data(t); e.status != 200 || d["match_count"] != 1.0 || d["files_searched"] != 1.0 {
		t.Errorf("grep dir: %d %v", e.status, d)
	}
	e = deadline(t, "copy dir", func() envelope {
		return f.do("POST", "/v2/fs/copy", map[string]any{"source": filepath.Join(f.dir, "g"), "destination": filepath.Join(f.dir, "g2")})
	})
	if d := e.data(t); e.status != 200 || d["files_copied"] != 1.0 {
		t.Errorf("copy dir: %d %v", e.status, d)
	}
}

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

// TestDeleteRootRefused: "/" and every path resolving to it are refused
// before anything is removed. Only non-recursive deletes are tried, so a
// broken check could not remove anything.
func TestDeleteRootRefused(t *testing.T) {
	f := newFixture(t)
	rootLink := filepath.Join(f.dir, "rootlink")
	if err := os.Symlink("/", rootLink); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(f.dir, "/")
	for _, p := range []string{"/", "//", "/..", "/tmp/..", rel, rootLink + "/"} {
		e := f.do("POST", "/v2/fs/delete", map[string]any{"path": p})
		fe := fileErr(t, e)
		if e.status != 400 || fe.ErrorType != fserr.InvalidTarget || fe.Message != "Failed to delete path: refusing to delete /" ||
			fe.Retryable || fe.Path != p {
			t.Errorf("delete %q: %d %s", p, e.status, e.Data)
		}
		e = f.do("POST", "/v1/file/delete", map[string]any{"path": p})
		if e.status != 200 || e.Success || fileErr(t, e).ErrorType != fserr.InvalidTarget {
			t.Errorf("v1 delete %q: %d %s", p, e.status, e.Data)
		}
	}
	// The link to the root itself is an ordinary link: removed, not
	// followed.
	e := f.do("POST", "/v2/fs/delete", map[string]any{"path": rootLink})
	if e.status != 200 {
		t.Fatalf("delete link: %d %s", e.status, e.Data)
	}
	if _, err := os.Lstat(rootLink); err == nil {
		t.Error("link to / not removed")
	}
	if _, err := os.Stat("/"); err != nil {
		t.Fatal(err)
	}
}

// TestSearchFileWording: /v1/file/search is a search in one file.
func TestSearchFileWording(t *testing.T) {
	f := newFixture(t)
	e := f.do("POST", "/v1/file/search", map[string]any{"file": filepath.Join(f.dir, "missing.txt"), "regex": "x"})
	if fe := fileErr(t, e); fe.Message != "Failed to search file: No such file or directory (os error 2)" || fe.Operation != "search" {
		t.Errorf("%s", e.Data)
	}
	e = f.do("GET", "/v2/fs/search?path="+q(filepath.Join(f.dir, "missing"))+"&pattern=*", nil)
	if fe := fileErr(t, e); e.status != 404 || fe.Message != "Failed to find files: No such file or directory (os error 2)" || fe.Operation != "find" {
		t.Errorf("%d %s", e.status, e.Data)
	}
}

// TestGrepMaxResultsZeroAndBinary: max_results 0 is the default (500),
// and binary files are skipped whatever the pattern, the empty one too.
func TestGrepMaxResultsZeroAndBinary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("many.txt", strings.Repeat("hit\n", 600))
	write("bin.dat", "hit\x00\x01\nhit\n")
	write("text.txt", "plain\n")
	e := NewEngine(Config{Workspace: dir})
	ctx := context.Background()
	zero := uint64(0)
	r, ferr := e.Grep(ctx, FileGrepRequest{Path: dir, Pattern: "hit", MaxResults: &zero})
	if ferr != nil || r.MatchCount != DefaultMaxResults || !r.Truncated {
		t.Fatalf("max_results 0: %v %v", r, ferr)
	}
	r, ferr = e.Grep(ctx, FileGrepRequest{Path: filepath.Join(dir, "text.txt"), Pattern: "plain", MaxResults: &zero})
	if ferr != nil || r.MatchCount != 1 || r.Truncated {
		t.Fatalf("max_results 0, one match: %v %v", r, ferr)
	}
	for _, req := range []FileGrepRequest{
		{Path: dir, Pattern: ""},
		{Path: dir, Pattern: "", FixedStrings: true},
		{Path: dir, Pattern: "", Multiline: true},
		{Path: dir, Pattern: "hit", Include: []string{"*.dat"}},
		{Path: filepath.Join(dir, "bin.dat"), Pattern: ""},
	} {
		r, ferr := e.Grep(ctx, req)
		if ferr != nil {
			t.Fatal(ferr)
		}
		for _, m := range r.Matches {
			if strings.HasSuffix(m.File, "bin.dat") {
				t.Errorf("%+v matched the binary file: %+v", req, m)
			}
		}
	}
}

// TestPatternErrorWording: a malformed regex or glob is a bad_request
// naming the pattern and what is wrong, without Go's "error parsing
// regexp" text.
func TestPatternErrorWording(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "x\n")
	file := filepath.Join(f.dir, "a.txt")
	tests := []struct {
		method, target string
		body           any
		msg            string
	}{
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "(unclosed"},
			`Failed to grep files: invalid regex "(unclosed": missing closing )`},
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "a)", "case_insensitive": true},
			`Failed to grep files: invalid regex "a)": unexpected )`},
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": `a\q`},
			"Failed to grep files: invalid regex \"a\\\\q\": invalid escape sequence: `\\q`"},
		{"POST", "/v1/file/search", map[string]any{"file": file, "regex": "(unclosed"},
			`Failed to search file: invalid regex "(unclosed": missing closing )`},
		{"POST", "/v1/file/search", map[string]any{"file": file, "regex": "x{2,1}"},
			"Failed to search file: invalid regex \"x{2,1}\": invalid repeat count: `{2,1}`"},
		{"GET", "/v2/fs/search?path=" + q(f.dir) + "&pattern=" + q("[abc"), nil,
			`Failed to find files: invalid glob "[abc": unclosed character class`},
		{"POST", "/v1/file/glob", map[string]any{"path": f.dir, "pattern": "{a,b"},
			`Failed to glob files: invalid glob "{a,b": unclosed alternation`},
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "x", "include": []string{"[z-a]"}},
			"Failed to grep files: invalid glob \"[z-a]\": invalid character class range: `z-a`"},
	}
	for _, tt := range tests {
		e := f.do(tt.method, tt.target, tt.body)
		fe := fileErr(t, e)
		if e.Success || fe.ErrorType != fserr.BadRequest || fe.Message != tt.msg || strings.Contains(fe.Message, "error parsing") {
			t.Errorf("%s %v: %q, want %q", tt.target, tt.body, fe.Message, tt.msg)
		}
	}
}
