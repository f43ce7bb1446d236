package aiod

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fileErr is the structured file error as the published API defines it
// (FileOperationError), decoded on its own so the test shares no type with
// the daemon.
type fileErr struct {
	Errno         *int    `json:"errno"`
	ErrnoName     *string `json:"errno_name"`
	ErrorType     string  `json:"error_type"`
	ExceptionType *string `json:"exception_type"`
	Message       string  `json:"message"`
	Operation     string  `json:"operation"`
	Path          string  `json:"path"`
	Retryable     bool    `json:"retryable"`
}

// expectFileErr checks a failed file answer: the status, success false,
// message = data.message, and the error_type.
func expectFileErr(t *testing.T, what string, code int, e envelope, status int, errType string) fileErr {
	t.Helper()
	var fe fileErr
	_ = json.Unmarshal(e.Data, &fe)
	if code != status || e.Success || fe.ErrorType != errType || fe.Message != e.Message || fe.Message == "" || fe.Operation == "" {
		t.Errorf("%s: got %d %s, want %d %s", what, code, e.raw, status, errType)
	}
	return fe
}

func q(v string) string { return url.QueryEscape(v) }

// TestAiodFiles checks the files plane on the real binary: requirements
// 8-12 and 32-39 of the spec and each error_type on v2 and v1.
func TestAiodFiles(t *testing.T) {
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws)
	a := &aio{t: t, base: d.URL}
	p := func(name string) string { return filepath.Join(ws, name) }

	t.Run("422 shapes on query and body", func(t *testing.T) {
		code, e := a.call("GET", "/v2/fs/read", "/v2/fs/read", nil)
		if code != 422 || len(e.Errors) != 1 || strings.Join(e.Errors[0].Location, ",") != "query,path" || e.Errors[0].Type != "value_error.missing" {
			t.Errorf("no path: %d %s", code, e.raw)
		}
		code, e = a.call("GET", "/v2/fs/read", "/v2/fs/read?path=/x&start_line=abc", nil)
		if code != 422 || len(e.Errors) != 1 || strings.Join(e.Errors[0].Location, ",") != "query" || e.Errors[0].Message != "invalid digit found in string" {
			t.Errorf("start_line=abc: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/fs/write", "/v2/fs/write", `{"path":"/tmp/x","content":5}`)
		if code != 422 || len(e.Errors) != 1 || e.Errors[0].Message != "invalid type: integer `5`, expected a string at line 1 column 28" {
			t.Errorf("content 5: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v1/file/read", "/v1/file/read", `{}`)
		if code != 422 || len(e.Errors) != 1 || strings.Join(e.Errors[0].Location, ",") != "body,file" {
			t.Errorf("v1 no file: %d %s", code, e.raw)
		}
		big := `{"path":"/tmp/x","content":"` + strings.Repeat("a", 2<<20) + `"}`
		resp, _ := a.raw("POST", "/v2/fs/write", big)
		if resp.StatusCode != 413 {
			t.Errorf("2 MiB body: %d", resp.StatusCode)
		}
	})

	t.Run("missing file: v1 200, v2 404, identical data", func(t *testing.T) {
		missing := p("nope/missing.txt")
		code1, e1 := a.call("POST", "/v1/file/read", "/v1/file/read", map[string]any{"file": missing})
		code2, e2 := a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(missing), nil)
		msg := "Failed to read file: No such file or directory (os error 2)"
		want := fmt.Sprintf(`{"errno":2,"errno_name":"ENOENT","error_type":"not_found","exception_type":"FileNotFoundError","message":%q,"operation":"read","path":%q,"retryable":false}`, msg, missing)
		if code1 != 200 || e1.Success || e1.Message != msg || string(e1.Data) != want {
			t.Errorf("v1: %d %s", code1, e1.raw)
		}
		if code2 != 404 || e2.Success || e2.Message != msg || !bytes.Equal(e1.Data, e2.Data) {
			t.Errorf("v2: %d %s", code2, e2.raw)
		}
	})

	t.Run("write, read, ranges, encodings", func(t *testing.T) {
		f := p("deep/er/notes.txt")
		code, e := a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": f, "content": "l0\nl1\nl2\nl3\n"})
		if m := e.obj(); code != 200 || m["file"] != f || m["bytes_written"] != 12.0 {
			t.Fatalf("write: %d %s", code, e.raw)
		}
		_, e = a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(f)+"&start_line=1&end_line=3", nil)
		if m := e.obj(); m["content"] != "l1\nl2" || m["file"] != f { // lines joined, as aiod's
			t.Errorf("range: %s", e.raw)
		}
		a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": f, "content": "l4", "append": true, "trailing_newline": true})
		if b, _ := os.ReadFile(f); string(b) != "l0\nl1\nl2\nl3\nl4\n" {
			t.Errorf("append: %q", b)
		}
		a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": p("bin.dat"), "content": "AAEC/w==", "encoding": "base64"})
		if b, _ := os.ReadFile(p("bin.dat")); !bytes.Equal(b, []byte{0, 1, 2, 255}) {
			t.Errorf("base64: %v", b)
		}
		code, e = a.call("POST", "/v1/file/write", "/v1/file/write", map[string]any{"file": p("v1.txt"), "content": "v1"})
		if code != 200 || !e.Success || e.obj()["file"] != p("v1.txt") {
			t.Errorf("v1 write: %d %s", code, e.raw)
		}
		_, e = a.call("POST", "/v1/file/read", "/v1/file/read", map[string]any{"file": p("v1.txt")})
		if e.obj()["content"] != "v1" {
			t.Errorf("v1 read: %s", e.raw)
		}
	})

	t.Run("a failed write leaves the old file intact", func(t *testing.T) {
		f := p("keep.txt")
		os.WriteFile(f, []byte("precious"), 0o644)
		code, e := a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": f, "content": "!!not base64!!", "encoding": "base64"})
		if code == 200 || e.Success {
			t.Errorf("bad base64 accepted: %d %s", code, e.raw)
		}
		if b, _ := os.ReadFile(f); string(b) != "precious" {
			t.Errorf("old content lost: %q", b)
		}
		ents, _ := os.ReadDir(ws)
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name(), ".part") {
				t.Errorf("staged file left: %s", ent.Name())
			}
		}
	})

	t.Run("error types on v2 and v1", func(t *testing.T) {
		dir := p("adir")
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		os.WriteFile(filepath.Join(dir, "sub", "x"), []byte("x"), 0o644)
		os.WriteFile(p("latin1.txt"), []byte("caf\xe9"), 0o644)
		os.WriteFile(p("exists.txt"), []byte("e"), 0o644)

		code, e := a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(dir), nil)
		fe := expectFileErr(t, "read a directory", code, e, 400, "invalid_target")
		if fe.ErrnoName == nil || *fe.ErrnoName != "EISDIR" || fe.Retryable {
			t.Errorf("EISDIR: %s", e.raw)
		}
		code, e = a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(p("latin1.txt")), nil)
		expectFileErr(t, "non-UTF-8", code, e, 422, "decode_error")
		os.WriteFile(p("big.txt"), bytes.Repeat([]byte("0123456789abcdef"), 1<<20+1), 0o644)
		code, e = a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(p("big.txt")), nil)
		if fe := expectFileErr(t, "over 16 MiB", code, e, 400, "bad_request"); !strings.Contains(fe.Message, "file exceeds the 16 MiB buffered text limit") {
			t.Errorf("16 MiB: %s", fe.Message)
		}
		code, e = a.call("POST", "/v2/fs/copy", "/v2/fs/copy", map[string]any{"source": p("latin1.txt"), "destination": p("exists.txt")})
		expectFileErr(t, "copy onto existing", code, e, 409, "already_exists")
		code, e = a.call("POST", "/v2/fs/move", "/v2/fs/move", map[string]any{"source": p("latin1.txt"), "destination": p("exists.txt")})
		expectFileErr(t, "move onto existing", code, e, 409, "already_exists")
		code, e = a.call("POST", "/v2/fs/mkdir", "/v2/fs/mkdir", map[string]any{"path": dir})
		expectFileErr(t, "mkdir existing", code, e, 409, "already_exists")
		if code, e := a.call("POST", "/v2/fs/mkdir", "/v2/fs/mkdir", map[string]any{"path": dir, "parents": true}); code != 200 || !e.Success {
			t.Errorf("mkdir -p existing: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/fs/mkdir", "/v2/fs/mkdir", map[string]any{"path": p("no/parent/here")})
		expectFileErr(t, "mkdir without parent", code, e, 404, "not_found")
		code, e = a.call("POST", "/v2/fs/delete", "/v2/fs/delete", map[string]any{"path": dir})
		fe = expectFileErr(t, "delete non-empty", code, e, 400, "invalid_target")
		if fe.ErrnoName == nil || *fe.ErrnoName != "ENOTEMPTY" {
			t.Errorf("ENOTEMPTY: %s", e.raw)
		}
		code, e = a.call("GET", "/v2/fs/stat", "/v2/fs/stat?path="+q(p(strings.Repeat("n", 300))), nil)
		expectFileErr(t, "name too long", code, e, 400, "invalid_path")
		code, e = a.call("GET", "/v2/fs/stat", "/v2/fs/stat?path=%2Ftmp%2Fa%00b", nil)
		fe = expectFileErr(t, "NUL in path", code, e, 400, "invalid_path")
		if fe.Errno != nil || fe.Retryable {
			t.Errorf("NUL: %s", e.raw)
		}
		code, e = a.call("POST", "/v2/fs/grep", "/v2/fs/grep", map[string]any{"path": ws, "pattern": "(unclosed"})
		expectFileErr(t, "bad regex", code, e, 400, "bad_request")
		code, e = a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": "/dev/full", "content": "x", "append": true})
		expectFileErr(t, "ENOSPC", code, e, 507, "no_space_left")
		code, e = a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(fmt.Sprintf("/proc/%d/mem", d.Cmd().Process.Pid)), nil)
		expectFileErr(t, "EIO", code, e, 500, "io_error")

		fifo := p("fifo")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		code, e = a.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(fifo), nil) // must not hang in open()
		expectFileErr(t, "read a FIFO", code, e, 400, "invalid_target")
		code, e = a.call("POST", "/v1/file/search", "/v1/file/search", map[string]any{"file": fifo, "regex": "x"})
		expectFileErr(t, "v1 search a FIFO", code, e, 200, "invalid_target")
		code, e = a.call("POST", "/v2/fs/delete", "/v2/fs/delete", map[string]any{"path": "/", "recursive": true})
		if fe := expectFileErr(t, "delete /", code, e, 400, "invalid_target"); fe.Message != "Failed to delete path: refusing to delete /" {
			t.Errorf("delete /: %s", fe.Message)
		}

		// A transient cause is the one retryable error: ETXTBSY, writing
		// in place into a running executable.
		busy := p("busybin")
		sleepBin, _ := exec.LookPath("sleep")
		src, _ := os.ReadFile(sleepBin)
		os.WriteFile(busy, src, 0o755)
		run := exec.Command(busy, "30")
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { run.Process.Kill(); run.Wait() }()
		code, e = a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": busy, "content": "x", "append": true})
		fe = expectFileErr(t, "ETXTBSY", code, e, 500, "busy")
		if !fe.Retryable || fe.ErrnoName == nil || *fe.ErrnoName != "ETXTBSY" {
			t.Errorf("ETXTBSY not retryable: %s", e.raw)
		}

		// v1: the same failures answer 200 with success false.
		for _, c := range []struct {
			tmpl string
			body map[string]any
			typ  string
		}{
			{"/v1/file/read", map[string]any{"file": dir}, "invalid_target"},
			{"/v1/file/read", map[string]any{"file": p("latin1.txt")}, "decode_error"},
			{"/v1/file/copy", map[string]any{"source": p("latin1.txt"), "destination": p("exists.txt")}, "already_exists"},
			{"/v1/file/mkdir", map[string]any{"path": dir}, "already_exists"},
			{"/v1/file/delete", map[string]any{"path": dir}, "invalid_target"},
			{"/v1/file/stat", map[string]any{"path": p(strings.Repeat("n", 300))}, "invalid_path"},
			{"/v1/file/grep", map[string]any{"path": ws, "pattern": "(unclosed"}, "bad_request"},
			{"/v1/file/write", map[string]any{"file": "/dev/full", "content": "x", "append": true}, "no_space_left"},
			{"/v1/file/list", map[string]any{"path": p("nope")}, "not_found"},
		} {
			code, e := a.call("POST", c.tmpl, c.tmpl, c.body)
			expectFileErr(t, "v1 "+c.tmpl, code, e, 200, c.typ)
		}
	})

	t.Run("read_only_filesystem", func(t *testing.T) {
		ro := p("ro")
		os.MkdirAll(ro, 0o755)
		if err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro).Run(); err != nil {
			t.Skipf("cannot mount a read-only tmpfs here (%v): EROFS is covered by aiod/internal/fserr's unit test", err)
		}
		defer exec.Command("umount", ro).Run()
		code, e := a.call("POST", "/v2/fs/write", "/v2/fs/write", map[string]any{"path": filepath.Join(ro, "x"), "content": "x"})
		fe := expectFileErr(t, "v2 EROFS", code, e, 500, "read_only_filesystem")
		if fe.ErrnoName == nil || *fe.ErrnoName != "EROFS" || fe.Retryable {
			t.Errorf("EROFS: %s", e.raw)
		}
		code, e = a.call("POST", "/v1/file/mkdir", "/v1/file/mkdir", map[string]any{"path": filepath.Join(ro, "d")})
		expectFileErr(t, "v1 EROFS", code, e, 200, "read_only_filesystem")
	})

	t.Run("permission_denied", func(t *testing.T) {
		secret := p("secret")
		os.MkdirAll(secret, 0o700)
		os.WriteFile(filepath.Join(secret, "f"), []byte("s"), 0o600)
		b := a
		if os.Geteuid() == 0 {
			// root reads everything: ask a daemon running as nobody.
			// The binary lives in a directory only root can enter: copy it
			// where nobody can run it.
			dir, err := os.MkdirTemp("", "aiod-nobody-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			os.Chmod(dir, 0o755)
			src, _ := os.ReadFile(harness.Bin(t, "aiod"))
			bin := filepath.Join(dir, "aiod")
			if err := os.WriteFile(bin, src, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "--port", "0", "--workspace", "/tmp")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			nobody := harness.Run(t, cmd, true)
			b = &aio{t: t, base: nobody.URL}
		} else {
			os.Chmod(secret, 0o000)
			defer os.Chmod(secret, 0o700)
		}
		code, e := b.call("GET", "/v2/fs/read", "/v2/fs/read?path="+q(filepath.Join(secret, "f")), nil)
		fe := expectFileErr(t, "v2 EACCES", code, e, 403, "permission_denied")
		if fe.ErrnoName == nil || *fe.ErrnoName != "EACCES" || fe.ExceptionType == nil || *fe.ExceptionType != "PermissionError" {
			t.Errorf("EACCES: %s", e.raw)
		}
		code, e = b.call("POST", "/v1/file/read", "/v1/file/read", map[string]any{"file": filepath.Join(secret, "f")})
		expectFileErr(t, "v1 EACCES", code, e, 200, "permission_denied")
	})

	t.Run("edit", func(t *testing.T) {
		f := p("edit.py")
		os.WriteFile(f, []byte("a = 1\nb = 1\n"), 0o644)
		code, e := a.call("POST", "/v2/fs/edit", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": f, "old_str": "zzz", "new_str": "y"})
		if code != 400 || e.Message != "old_str not found in file" {
			t.Errorf("absent anchor: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/fs/edit", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": f, "old_str": "= 1", "new_str": "= 2"})
		if code != 400 || e.Message != "old_str has multiple occurrences; replace_mode is required" {
			t.Errorf("two matches: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/fs/edit", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": f, "old_str": "= 1", "new_str": "= 2", "replace_mode": "LAST"})
		if m := e.obj(); code != 200 || m["old_content"] != "a = 1\nb = 1\n" || m["new_content"] != "a = 1\nb = 2\n" || m["prev_exist"] != true {
			t.Errorf("LAST: %d %s", code, e.raw)
		}
		a.call("POST", "/v2/fs/edit", "/v2/fs/edit", map[string]any{"command": "undo_edit", "path": f})
		if b, _ := os.ReadFile(f); string(b) != "a = 1\nb = 1\n" {
			t.Errorf("undo: %q", b)
		}
		for _, cmd := range []string{"view", "create"} {
			code, e := a.call("POST", "/v2/fs/edit", "/v2/fs/edit", map[string]any{"command": cmd, "path": f})
			if code != 400 || !strings.Contains(e.Message, "/v2/fs/") {
				t.Errorf("%s: %d %s", cmd, code, e.raw)
			}
		}
		code, e = a.call("POST", "/v1/file/str_replace_editor", "/v1/file/str_replace_editor", map[string]any{"command": "create", "path": p("new.txt"), "file_text": "made\n"})
		if b, _ := os.ReadFile(p("new.txt")); code != 200 || !e.Success || string(b) != "made\n" {
			t.Errorf("v1 create: %d %s", code, e.raw)
		}
	})

	t.Run("stat, list, search, grep, copy, move, delete", func(t *testing.T) {
		tree := p("tree")
		os.MkdirAll(filepath.Join(tree, "pkg"), 0o755)
		os.WriteFile(filepath.Join(tree, "main.py"), []byte("import os\nprint(os.argv)\n"), 0o644)
		os.WriteFile(filepath.Join(tree, "pkg", "util.py"), []byte("def f():\n    return 'argv'\n"), 0o644)
		os.WriteFile(filepath.Join(tree, ".hidden"), []byte("h"), 0o644)
		code, e := a.call("GET", "/v2/fs/stat", "/v2/fs/stat?path="+q(filepath.Join(tree, "main.py")), nil)
		if m := e.obj(); code != 200 || m["size"] != 25.0 || m["is_directory"] != false || m["permissions"] == nil {
			t.Errorf("stat: %d %s", code, e.raw)
		}
		code, e = a.call("GET", "/v2/fs/list", "/v2/fs/list?path="+q(tree)+"&recursive=true", nil)
		if m := e.obj(); code != 200 || m["total_count"] != 4.0 || m["file_count"] != 3.0 || m["directory_count"] != 1.0 || m["truncated"] != false {
			t.Errorf("list: %d %s", code, e.raw)
		}
		code, e = a.call("GET", "/v2/fs/search", "/v2/fs/search?path="+q(tree)+"&pattern="+q("**/*.py"), nil)
		if code != 200 || !bytes.Contains(e.Data, []byte("util.py")) || !bytes.Contains(e.Data, []byte("main.py")) {
			t.Errorf("search: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/fs/grep", "/v2/fs/grep", map[string]any{"path": tree, "pattern": "argv", "recursive": true, "context_before": 1})
		m := e.obj()
		if code != 200 || m["match_count"] != 2.0 || m["truncated"] != false {
			t.Fatalf("grep: %d %s", code, e.raw)
		}
		first := m["matches"].([]any)[0].(map[string]any)
		if first["file"] != filepath.Join(tree, "main.py") || first["line_number"] != 2.0 || first["line_content"] != "print(os.argv)" {
			t.Errorf("grep match: %v", first)
		}
		code, e = a.call("POST", "/v2/fs/copy", "/v2/fs/copy", map[string]any{"source": tree, "destination": p("tree2")})
		if m := e.obj(); code != 200 || m["files_copied"] != 3.0 {
			t.Errorf("copy tree: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/fs/move", "/v2/fs/move", map[string]any{"source": p("tree2"), "destination": p("tree3")})
		if _, err := os.Stat(p("tree3/pkg/util.py")); code != 200 || err != nil {
			t.Errorf("move: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v1/file/move", "/v1/file/move", map[string]any{"source": p("tree3"), "destination": p("tree4")})
		if code != 200 || !e.Success {
			t.Errorf("v1 move: %d %s", code, e.raw)
		}
		a.call("POST", "/v1/file/copy", "/v1/file/copy", map[string]any{"source": p("tree4"), "destination": p("tree3")})
		a.call("POST", "/v1/file/delete", "/v1/file/delete", map[string]any{"path": p("tree4"), "recursive": true})
		a.call("POST", "/v1/file/mkdir", "/v1/file/mkdir", map[string]any{"path": p("tree5/a/b"), "parents": true})
		code, e = a.call("POST", "/v2/fs/delete", "/v2/fs/delete", map[string]any{"path": p("tree3"), "recursive": true})
		if m := e.obj(); code != 200 || m["is_directory"] != true {
			t.Errorf("delete: %d %s", code, e.raw)
		}
		for _, c := range []struct {
			tmpl string
			body map[string]any
			want string
		}{
			{"/v1/file/list", map[string]any{"path": tree}, "main.py"},
			{"/v1/file/find", map[string]any{"path": tree, "glob": "*.py"}, "util.py"},
			{"/v1/file/glob", map[string]any{"path": tree, "pattern": "**/*.py"}, "util.py"},
			{"/v1/file/grep", map[string]any{"path": tree, "pattern": "argv", "recursive": true}, "print(os.argv)"},
			{"/v1/file/search", map[string]any{"file": filepath.Join(tree, "main.py"), "regex": "argv"}, "line_numbers"},
			{"/v1/file/replace", map[string]any{"file": filepath.Join(tree, "main.py"), "old_str": "argv", "new_str": "environ"}, "replaced_count"},
			{"/v1/file/stat", map[string]any{"path": tree}, `"is_directory":true`},
		} {
			code, e := a.call("POST", c.tmpl, c.tmpl, c.body)
			if code != 200 || !e.Success || !bytes.Contains(e.Data, []byte(c.want)) {
				t.Errorf("%s: %d %s", c.tmpl, code, e.raw)
			}
		}
	})

	t.Run("upload, download, ranges, change_policy", func(t *testing.T) {
		target := p("up/loaded.bin")
		os.MkdirAll(p("up"), 0o755) // unlike write, upload does not create directories
		payload := bytes.Repeat([]byte("0123456789"), 100000)
		upload := func(path string, data []byte, cut bool) (int, []byte) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			mw.WriteField("path", path)
			part, _ := mw.CreateFormFile("file", filepath.Base(path))
			part.Write(data)
			mw.Close()
			body := buf.Bytes()
			if cut {
				body = body[:len(body)/2]
			}
			resp, out := a.raw("POST", "/v2/fs/upload?path="+q(path), body, "Content-Type", mw.FormDataContentType())
			return resp.StatusCode, out
		}
		code, out := upload(target, payload, false)
		if code != 200 || !bytes.Contains(out, []byte(fmt.Sprintf(`"file_size":%d`, len(payload)))) {
			t.Fatalf("upload: %d %s", code, out)
		}
		a.contract("POST", "/v2/fs/upload", code, out)
		if b, _ := os.ReadFile(target); !bytes.Equal(b, payload) {
			t.Error("uploaded bytes differ")
		}
		code, out = upload(p("no-such-dir/x.bin"), payload, false)
		if code != 404 || !bytes.Contains(out, []byte(`"error_type":"not_found"`)) {
			t.Errorf("upload into a missing directory: %d %s", code, out)
		}
		code, _ = upload(target, []byte("replacement"), true)
		if b, _ := os.ReadFile(target); code == 200 || !bytes.Equal(b, payload) {
			t.Errorf("a truncated upload (%d) changed the target", code)
		}
		ents, _ := os.ReadDir(filepath.Dir(target))
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name(), ".part") {
				t.Errorf("staged upload left: %s", ent.Name())
			}
		}

		resp, body := a.raw("GET", "/v2/fs/download?path="+q(target), nil)
		a.contract("GET", "/v2/fs/download", resp.StatusCode, nil)
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != 200 || !bytes.Equal(body, payload) || etag == "" || resp.Header.Get("Last-Modified") == "" || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("download: %d %v", resp.StatusCode, resp.Header)
		}
		resp, body = a.raw("GET", "/v2/fs/download?path="+q(target), nil, "Range", "bytes=10-19")
		if resp.StatusCode != 206 || string(body) != "0123456789" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", len(payload)) {
			t.Errorf("range: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		resp, _ = a.raw("GET", "/v2/fs/download?path="+q(target), nil, "Range", "bytes=99999999-")
		if resp.StatusCode != 416 {
			t.Errorf("bad range: %d", resp.StatusCode)
		}
		resp, _ = a.raw("HEAD", "/v1/file/download?path="+q(target), nil)
		a.contract("HEAD", "/v1/file/download", resp.StatusCode, nil)
		resp, body = a.raw("HEAD", "/v2/fs/download?path="+q(target), nil)
		if resp.StatusCode != 200 || len(body) != 0 || resp.ContentLength != int64(len(payload)) {
			t.Errorf("HEAD: %d %d", resp.StatusCode, resp.ContentLength)
		}
		resp, _ = a.raw("GET", "/v2/fs/download?path="+q(p("missing.bin")), nil)
		if resp.StatusCode != 404 {
			t.Errorf("missing: %d", resp.StatusCode)
		}
		os.WriteFile(target, []byte("changed"), 0o644)
		resp, _ = a.raw("GET", "/v2/fs/download?path="+q(target)+"&change_policy=abort", nil, "If-Range", etag, "Range", "bytes=0-")
		if resp.StatusCode != 409 {
			t.Errorf("abort on a changed file: %d", resp.StatusCode)
		}
		resp, body = a.raw("GET", "/v1/file/download?path="+q(target), nil)
		if resp.StatusCode != 200 || string(body) != "changed" {
			t.Errorf("v1 download: %d %q", resp.StatusCode, body)
		}
		a.contract("GET", "/v1/file/download", resp.StatusCode, nil)
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.WriteField("path", p("up/v1.bin"))
		part, _ := mw.CreateFormFile("file", "v1.bin")
		part.Write([]byte("v1 upload"))
		mw.Close()
		resp, out = a.raw("POST", "/v1/file/upload", buf.Bytes(), "Content-Type", mw.FormDataContentType())
		if b, _ := os.ReadFile(p("up/v1.bin")); resp.StatusCode != 200 || string(b) != "v1 upload" {
			t.Errorf("v1 upload: %d %s", resp.StatusCode, out)
		}
		a.contract("POST", "/v1/file/upload", resp.StatusCode, out)
	})

	t.Run("tree out and in; tar attacks refused", func(t *testing.T) {
		src := p("tsrc")
		os.MkdirAll(filepath.Join(src, "a/b"), 0o755)
		os.WriteFile(filepath.Join(src, "a/b/c.txt"), []byte("c"), 0o644)
		resp, tarball := a.raw("GET", "/v2/fs/tree?path="+q(src), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("tree out: %d", resp.StatusCode)
		}
		a.contract("GET", "/v2/fs/tree", resp.StatusCode, nil)
		resp, out := a.raw("PUT", "/v2/fs/tree?path="+q(p("tdst")), tarball, "Content-Type", "application/x-tar")
		if b, _ := os.ReadFile(p("tdst/a/b/c.txt")); resp.StatusCode != 200 || string(b) != "c" || !bytes.Contains(out, []byte(`"mode":"rename"`)) {
			t.Errorf("tree in: %d %s", resp.StatusCode, out)
		}
		a.contract("PUT", "/v2/fs/tree", resp.StatusCode, out)
		resp, out = a.raw("PUT", "/v2/fs/tree?path="+q(p("tdst")), tarball, "Content-Type", "application/x-tar")
		if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"mode":"merge"`)) {
			t.Errorf("tree merge: %d %s", resp.StatusCode, out)
		}
		outside := filepath.Join(filepath.Dir(ws), "escaped-"+filepath.Base(ws))
		for name, members := range map[string][]tar.Header{
			"absolute": {{Name: outside, Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
			"dotdot":   {{Name: "../" + filepath.Base(outside), Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
			"symlink":  {{Name: "l", Typeflag: tar.TypeSymlink, Linkname: filepath.Dir(outside), Mode: 0o777}, {Name: "l/" + filepath.Base(outside), Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
			"hardlink": {{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../../../etc/passwd", Mode: 0o644}},
		} {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range members {
				tw.WriteHeader(&h)
				if h.Size > 0 {
					tw.Write([]byte("x"))
				}
			}
			tw.Close()
			resp, out := a.raw("PUT", "/v2/fs/tree?path="+q(p("attack-"+name)), buf.Bytes(), "Content-Type", "application/x-tar")
			if resp.StatusCode != 400 {
				t.Errorf("%s: %d %s", name, resp.StatusCode, out)
			}
			if _, err := os.Lstat(outside); err == nil {
				t.Errorf("%s: wrote outside the destination", name)
				os.Remove(outside)
			}
		}
	})
	_ = io.Discard
	_ = http.MethodGet
}
