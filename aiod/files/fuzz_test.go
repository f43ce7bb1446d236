package files

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResolve: resolution never panics, refuses exactly the empty and
// NUL-holding paths, and keeps absolute paths as given.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "a", "/abs", "../up", "a\x00b", "./x/../y", "//double"} {
		f.Add(s)
	}
	e := NewEngine(Config{Workspace: "/work/space"})
	f.Fuzz(func(t *testing.T, p string) {
		abs, ferr := e.Resolve("read", p)
		if bad := p == "" || strings.ContainsRune(p, 0); bad != (ferr != nil) {
			t.Fatalf("%q: error %v", p, ferr)
		}
		if ferr != nil {
			if ferr.Path != p || ferr.ErrorType != "invalid_path" || ferr.Errno != nil {
				t.Fatalf("%q: %+v", p, ferr)
			}
			return
		}
		if filepath.IsAbs(p) && abs != p || !filepath.IsAbs(abs) {
			t.Fatalf("%q → %q", p, abs)
		}
	})
}

// FuzzEdit: str_replace never panics; when it succeeds the file is the
// content with the anchor replaced, and undo restores the original.
func FuzzEdit(f *testing.F) {
	f.Add("a b a", "a", "c", "")
	f.Add("line\nline\n", "line", "", "LAST")
	f.Add("x", "", "y", "ALL")
	f.Add("héllo\r\n", "é", "e", "first")
	dir := f.TempDir()
	e := NewEngine(Config{Workspace: dir})
	p := filepath.Join(dir, "f.txt")
	f.Fuzz(func(t *testing.T, content, old, repl, mode string) {
		if !utf8.ValidString(content + old + repl) {
			t.Skip("JSON strings are UTF-8")
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		req := FsEditRequest{Command: CmdStrReplace, Path: p, OldStr: &old, NewStr: &repl}
		if mode != "" {
			req.ReplaceMode = &mode
		}
		res, ferr := e.Edit(context.Background(), req)
		if ferr != nil {
			if b, _ := os.ReadFile(p); string(b) != content {
				t.Fatalf("failed edit changed the file")
			}
			return
		}
		var want string
		switch strings.ToUpper(mode) {
		case "ALL":
			want = strings.ReplaceAll(content, old, repl)
		case "LAST":
			i := strings.LastIndex(content, old)
			want = content[:i] + repl + content[i+len(old):]
		default:
			want = strings.Replace(content, old, repl, 1)
		}
		if b, _ := os.ReadFile(p); string(b) != want || *res.NewContent != want || *res.OldContent != content {
			t.Fatalf("content %q, want %q", b, want)
		}
		if _, ferr := e.Edit(context.Background(), FsEditRequest{Command: CmdUndoEdit, Path: p}); ferr != nil {
			t.Fatal(ferr)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Fatalf("undo gave %q", b)
		}
	})
}
