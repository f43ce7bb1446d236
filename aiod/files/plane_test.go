package files

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// envelope is a decoded answer.
type envelope struct {
	status  int
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Errors  []struct {
		Location []string `json:"location"`
		Message  string   `json:"message"`
		Type     string   `json:"type"`
	} `json:"errors"`
}

func (e envelope) data(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("data %s: %v", e.Data, err)
	}
	return m
}

// fixture is a mounted plane over a fresh workspace.
type fixture struct {
	t   *testing.T
	dir string
	mux *http.ServeMux
	p   *Plane
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	p := New(Config{Workspace: dir})
	mux := http.NewServeMux()
	p.Mount(mux)
	t.Cleanup(func() { _ = p.Close(t.Context()) })
	return &fixture{t: t, dir: dir, mux: mux, p: p}
}

// do sends a request; a non-string body is encoded as JSON.
func (f *fixture) do(method, target string, body any) envelope {
	f.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req := httptest.NewRequest(method, target, rd)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	var e envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		f.t.Fatalf("%s %s: body %q: %v", method, target, rec.Body.String(), err)
	}
	e.status = rec.Code
	return e
}

// write puts a file under the workspace and returns its path.
func (f *fixture) write(rel, content string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) read(p string) string {
	f.t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func q(s string) string { return strings.ReplaceAll(s, "/", "%2F") }

func TestRouteSuccessShapes(t *testing.T) {
	f := newFixture(t)
	src := f.write("src/app.py", "import sys\n\ndef main():\n    print('hello')\n")
	f.write("src/util.py", "X = 1\n")
	dir := filepath.Join(f.dir, "src")
	tests := []struct {
		method, target string
		body           any
		keys           string
	}{
		{"GET", "/v2/fs/read?path=" + q(src), nil, "content file"},
		{"POST", "/v2/fs/write", map[string]any{"path": filepath.Join(f.dir, "w/new.txt"), "content": "hi"}, "bytes_written file"},
		{"POST", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": src, "old_str": "hello", "new_str": "bye"},
			"error metadata new_content old_content output path prev_exist"},
		{"GET", "/v2/fs/stat?path=" + q(src), nil, "is_directory is_symlink modified_time path permissions size"},
		{"GET", "/v2/fs/list?path=" + q(dir), nil, "directory_count file_count files path total_count truncated"},
		{"GET", "/v2/fs/search?path=" + q(dir) + "&pattern=" + q("**/*.py"), nil, "files path truncated"},
		{"POST", "/v2/fs/grep", map[string]any{"path": dir, "pattern": "X"},
			"files_matched files_searched match_count matches path pattern truncated"},
		{"POST", "/v2/fs/mkdir", map[string]any{"path": filepath.Join(f.dir, "m/n"), "parents": true}, "created path"},
		{"POST", "/v2/fs/copy", map[string]any{"source": dir, "destination": filepath.Join(f.dir, "copy")},
			"bytes_copied destination files_copied source"},
		{"POST", "/v2/fs/move", map[string]any{"source": filepath.Join(f.dir, "copy"), "destination": filepath.Join(f.dir, "moved")},
			"destination source"},
		{"POST", "/v2/fs/delete", map[string]any{"path": filepath.Join(f.dir, "moved"), "recursive": true}, "is_directory path"},
		{"POST", "/v1/file/read", map[string]any{"file": src}, "content file"},
		{"POST", "/v1/file/write", map[string]any{"file": filepath.Join(f.dir, "v1.txt"), "content": "a b a"}, "bytes_written file"},
		{"POST", "/v1/file/replace", map[string]any{"file": filepath.Join(f.dir, "v1.txt"), "old_str": "a", "new_str": "c"}, "file replaced_count"},
		{"POST", "/v1/file/search", map[string]any{"file": src, "regex": "def"}, "file line_numbers matches"},
		{"POST", "/v1/file/find", map[string]any{"path": dir, "glob": "*.py"}, "files path truncated"},
		{"POST", "/v1/file/glob", map[string]any{"path": dir, "pattern": "*.py"}, "files path pattern total_count truncated"},
		{"POST", "/v1/file/grep", map[string]any{"path": dir, "pattern": "X"},
			"files_matched files_searched match_count matches path pattern truncated"},
		{"POST", "/v1/file/list", map[string]any{"path": dir}, "directory_count file_count files path total_count truncated"},
		{"POST", "/v1/file/str_replace_editor", map[string]any{"command": "view", "path": src},
			"error metadata new_content old_content output path prev_exist"},
		{"POST", "/v1/file/stat", map[string]any{"path": src}, "is_directory is_symlink modified_time path permissions size"},
		{"POST", "/v1/file/mkdir", map[string]any{"path": filepath.Join(f.dir, "v1dir")}, "created path"},
		{"POST", "/v1/file/copy", map[string]any{"source": src, "destination": filepath.Join(f.dir, "v1copy.py")},
			"bytes_copied destination files_copied source"},
		{"POST", "/v1/file/move", map[string]any{"source": filepath.Join(f.dir, "v1copy.py"), "destination": filepath.Join(f.dir, "v1moved.py")},
			"destination source"},
		{"POST", "/v1/file/delete", map[string]any{"path": filepath.Join(f.dir, "v1moved.py")}, "is_directory path"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+strings.SplitN(tt.target, "?", 2)[0], func(t *testing.T) {
			e := f.do(tt.method, tt.target, tt.body)
			if e.status != 200 || !e.Success || e.Message != "Operation successful" {
				t.Fatalf("got %d %v %q %s", e.status, e.Success, e.Message, e.Data)
			}
			if got := strings.Join(keys(e.data(t)), " "); got != tt.keys {
				t.Errorf("data keys %q, want %q", got, tt.keys)
			}
		})
	}
}

func TestResultValues(t *testing.T) {
	f := newFixture(t)
	src := f.write("d/a.txt", "zero\none\ntwo\nthree\n")
	f.write("d/.hidden", "h")
	f.write("d/sub/b.md", "bbb")
	d := f.do("GET", "/v2/fs/read?path="+q(src)+"&start_line=1&end_line=3", nil).data(t)
	if d["content"] != "one\ntwo" || d["file"] != src {
		t.Errorf("read range: %v", d)
	}
	d = f.do("GET", "/v2/fs/read?path="+q(src)+"&start_line=3", nil).data(t)
	if d["content"] != "three" {
		t.Errorf("read from 3: %v", d)
	}
	d = f.do("POST", "/v2/fs/write", map[string]any{"path": "rel/x.bin", "content": "aGk=", "encoding": "base64"}).data(t)
	if d["bytes_written"] != 2.0 || f.read(filepath.Join(f.dir, "rel/x.bin")) != "hi" || d["file"] != "rel/x.bin" {
		t.Errorf("base64 write relative: %v", d)
	}
	f.do("POST", "/v2/fs/write", map[string]any{"path": "rel/x.bin", "content": "ÿ!", "encoding": "raw", "append": true})
	if got := f.read(filepath.Join(f.dir, "rel/x.bin")); got != "hi\xff!" {
		t.Errorf("raw append: %q", got)
	}
	f.do("POST", "/v2/fs/write", map[string]any{"path": "nl.txt", "content": "x", "leading_newline": true, "trailing_newline": true})
	if got := f.read(filepath.Join(f.dir, "nl.txt")); got != "\nx\n" {
		t.Errorf("newlines: %q", got)
	}
	d = f.do("GET", "/v2/fs/stat?path="+q(src), nil).data(t)
	if d["permissions"] != "644" || d["size"] != 19.0 || d["is_directory"] != false {
		t.Errorf("stat: %v", d)
	}
	link := filepath.Join(f.dir, "d/link")
	if err := os.Symlink(filepath.Join(f.dir, "d/sub"), link); err != nil {
		t.Fatal(err)
	}
	d = f.do("GET", "/v2/fs/stat?path="+q(link)+"&follow_symlinks=false", nil).data(t)
	if d["is_symlink"] != true || d["is_directory"] != false {
		t.Errorf("stat link: %v", d)
	}
	d = f.do("GET", "/v2/fs/list?path="+q(filepath.Join(f.dir, "d"))+"&recursive=true", nil).data(t)
	var names []string
	for _, e := range d["files"].([]any) {
		m := e.(map[string]any)
		names = append(names, m["name"].(string))
		if _, ok := m["is_hidden"]; ok != (m["name"] == ".hidden") {
			t.Errorf("is_hidden on %v", m)
		}
		if m["name"] == "link" && m["is_directory"] != true {
			t.Errorf("link to dir: %v", m)
		}
	}
	if got := strings.Join(names, ","); got != ".hidden,a.txt,link,sub,b.md" {
		t.Errorf("list order %s", got)
	}
	if d["file_count"] != 3.0 || d["directory_count"] != 2.0 || d["total_count"] != 5.0 || d["truncated"] != false {
		t.Errorf("list counts %v", d)
	}
	d = f.do("GET", "/v2/fs/list?path="+q(filepath.Join(f.dir, "d"))+"&show_hidden=false", nil).data(t)
	if d["total_count"] != 3.0 {
		t.Errorf("list without hidden %v", d)
	}
	d = f.do("GET", "/v2/fs/search?path="+q(f.dir)+"&pattern="+q("**/*.md"), nil).data(t)
	if !reflect.DeepEqual(d["files"], []any{filepath.Join(f.dir, "d/sub/b.md")}) {
		t.Errorf("search %v", d)
	}
	d = f.do("POST", "/v1/file/search", map[string]any{"file": src, "regex": "^t"}).data(t)
	if !reflect.DeepEqual(d["line_numbers"], []any{2.0, 3.0}) || !reflect.DeepEqual(d["matches"], []any{"two", "three"}) {
		t.Errorf("v1 search %v", d)
	}
	d = f.do("POST", "/v1/file/list", map[string]any{"path": filepath.Join(f.dir, "d"), "include_size": false, "include_permissions": true, "sort_by": "name", "sort_desc": true}).data(t)
	first := d["files"].([]any)[0].(map[string]any)
	if first["name"] != "sub" || first["size"] != nil || first["permissions"] == nil {
		t.Errorf("v1 list %v", first)
	}
	d = f.do("POST", "/v1/file/glob", map[string]any{"path": f.dir, "pattern": "**/*", "files_only": true, "max_results": 2}).data(t)
	if d["total_count"] != 2.0 || d["truncated"] != true {
		t.Errorf("v1 glob %v", d)
	}
	d = f.do("POST", "/v2/fs/copy", map[string]any{"source": filepath.Join(f.dir, "d"), "destination": filepath.Join(f.dir, "e")}).data(t)
	if d["files_copied"] != 3.0 || d["bytes_copied"] != 23.0 {
		t.Errorf("copy %v", d)
	}
	d = f.do("POST", "/v2/fs/mkdir", map[string]any{"path": filepath.Join(f.dir, "e"), "parents": true}).data(t)
	if d["created"] != false {
		t.Errorf("mkdir existing with parents %v", d)
	}
}

// fileErr is the error object of a failed answer.
func fileErr(t *testing.T, e envelope) fserr.Error {
	t.Helper()
	var fe fserr.Error
	if err := json.Unmarshal(e.Data, &fe); err != nil {
		t.Fatal(err)
	}
	return fe
}

func TestErrorTaxonomy(t *testing.T) {
	f := newFixture(t)
	file := f.write("f.txt", "x")
	f.write("full/a", "a")
	bin := f.write("bin.dat", "\xff\xfe")
	dirQ := q(f.dir)
	tests := []struct {
		name         string
		v2m, v2t     string
		v2body       any
		v1t          string
		v1body       any
		status       int
		typ, errname string
		msg          string
	}{
		{"not_found", "GET", "/v2/fs/read?path=%2Fnope%2Fmissing.txt", nil, "/v1/file/read", map[string]any{"file": "/nope/missing.txt"},
			404, fserr.NotFound, "ENOENT", "Failed to read file: No such file or directory (os error 2)"},
		{"invalid_target read dir", "GET", "/v2/fs/read?path=" + dirQ, nil, "/v1/file/read", map[string]any{"file": f.dir},
			400, fserr.InvalidTarget, "EISDIR", "Failed to read file: Is a directory (os error 21)"},
		{"invalid_target not empty", "POST", "/v2/fs/delete", map[string]any{"path": filepath.Join(f.dir, "full")}, "/v1/file/delete",
			map[string]any{"path": filepath.Join(f.dir, "full")}, 400, fserr.InvalidTarget, "ENOTEMPTY", "Failed to delete path: Directory not empty (os error 39)"},
		{"already_exists mkdir", "POST", "/v2/fs/mkdir", map[string]any{"path": f.dir}, "/v1/file/mkdir", map[string]any{"path": f.dir},
			409, fserr.AlreadyExists, "EEXIST", "Failed to create directory: File exists (os error 17)"},
		{"already_exists copy", "POST", "/v2/fs/copy", map[string]any{"source": file, "destination": bin}, "/v1/file/copy",
			map[string]any{"source": file, "destination": bin}, 409, fserr.AlreadyExists, "EEXIST", "Failed to copy path: File exists (os error 17)"},
		{"already_exists move", "POST", "/v2/fs/move", map[string]any{"source": file, "destination": bin}, "/v1/file/move",
			map[string]any{"source": file, "destination": bin}, 409, fserr.AlreadyExists, "EEXIST", "Failed to move path: File exists (os error 17)"},
		{"not_found mkdir parent", "POST", "/v2/fs/mkdir", map[string]any{"path": filepath.Join(f.dir, "a/b")}, "/v1/file/mkdir",
			map[string]any{"path": filepath.Join(f.dir, "a/b")}, 404, fserr.NotFound, "ENOENT", "Failed to create directory: No such file or directory (os error 2)"},
		{"invalid_path empty", "GET", "/v2/fs/stat?path=", nil, "/v1/file/stat", map[string]any{"path": ""},
			400, fserr.InvalidPath, "", "Failed to stat path: path is empty"},
		{"invalid_path nul", "POST", "/v2/fs/delete", map[string]any{"path": "a\x00b"}, "/v1/file/delete", map[string]any{"path": "a\x00b"},
			400, fserr.InvalidPath, "", "Failed to delete path: file name contained an unexpected NUL byte"},
		{"bad_request regex", "POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "("}, "/v1/file/grep",
			map[string]any{"path": f.dir, "pattern": "("}, 400, fserr.BadRequest, "", ""},
		{"bad_request user", "GET", "/v2/fs/stat?user=no_such_user_zz&path=" + dirQ, nil, "", nil,
			400, fserr.BadRequest, "", "no such user: no_such_user_zz"},
		{"decode_error", "GET", "/v2/fs/read?path=" + q(bin), nil, "/v1/file/read", map[string]any{"file": bin},
			422, fserr.DecodeError, "", "Failed to read file: stream did not contain valid UTF-8"},
		{"invalid_target list file", "GET", "/v2/fs/list?path=" + q(file), nil, "/v1/file/list", map[string]any{"path": file},
			400, fserr.InvalidTarget, "ENOTDIR", "Failed to list directory: Not a directory (os error 20)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e2 := f.do(tt.v2m, tt.v2t, tt.v2body)
			if e2.status != tt.status || e2.Success {
				t.Fatalf("v2 status %d success %v, want %d: %s", e2.status, e2.Success, tt.status, e2.Data)
			}
			fe := fileErr(t, e2)
			if fe.ErrorType != tt.typ || deref(fe.ErrnoName) != tt.errname || (tt.msg != "" && fe.Message != tt.msg) || e2.Message != fe.Message || fe.Retryable {
				t.Errorf("v2 error %s", e2.Data)
			}
			if tt.v1t == "" {
				return
			}
			e1 := f.do("POST", tt.v1t, tt.v1body)
			if e1.status != 200 || e1.Success {
				t.Fatalf("v1 status %d success %v", e1.status, e1.Success)
			}
			if !bytes.Equal(e1.Data, e2.Data) {
				t.Errorf("v1 data %s, v2 data %s", e1.Data, e2.Data)
			}
		})
	}
}

// The structured file error of a permission failure (not producible as
// root on a plain file) maps to 403 on v2 and 200 on v1.
func TestPermissionDeniedMapping(t *testing.T) {
	deny := func(_ context.Context, req FsStatQuery) (*FileStatResult, *fserr.Error) {
		return nil, fserr.From("stat", req.Path, &os.PathError{Op: "stat", Path: "/x", Err: syscall.EACCES})
	}
	p := New(Config{})
	mux := http.NewServeMux()
	mux.Handle("GET /v2/fs/stat", v2(p, true, nil, deny))
	mux.Handle("POST /v1/file/stat", v1(p, nil, same[FsStatQuery], deny))
	f := &fixture{t: t, mux: mux}
	e2 := f.do("GET", "/v2/fs/stat?path=%2Fsecret", nil)
	e1 := f.do("POST", "/v1/file/stat", map[string]any{"path": "/secret"})
	fe := fileErr(t, e2)
	if e2.status != 403 || fe.ErrorType != fserr.PermissionDenied || deref(fe.ExceptionType) != "PermissionError" ||
		fe.Message != "Failed to stat path: Permission denied (os error 13)" || fe.Path != "/secret" {
		t.Errorf("v2 %d %s", e2.status, e2.Data)
	}
	if e1.status != 200 || e1.Success || !bytes.Equal(e1.Data, e2.Data) {
		t.Errorf("v1 %d %s", e1.status, e1.Data)
	}
}

func TestValidation422(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		method, target string
		body           any
		loc            []string
		msg            string
	}{
		{"GET", "/v2/fs/read", nil, []string{"query", "path"}, "missing field `path`"},
		{"GET", "/v2/fs/read?path=%2Fx&start_line=abc", nil, []string{"query"}, "invalid digit found in string"},
		{"POST", "/v2/fs/write", `{"path":"/tmp/x","content":"a","bogus":1}`, []string{"body"},
			"unknown field `bogus`, expected one of `path`, `content`, `encoding`, `append`, `leading_newline`, `trailing_newline` at line 1 column 38"},
		{"POST", "/v2/fs/write", `{"bogus":1}`, []string{"body"},
			"unknown field `bogus`, expected one of `path`, `content`, `encoding`, `append`, `leading_newline`, `trailing_newline` at line 1 column 8"},
		{"POST", "/v2/fs/write", `{"path":"/tmp/x","content":"a","encoding":"utf8"}`, []string{"body", "encoding"},
			"unknown variant `utf8`, expected one of `utf-8`, `base64`, `raw` at line 1 column 48"},
		{"POST", "/v1/file/write", `{"content":"a"}`, []string{"body", "file"}, "missing field `file` at line 1 column 15"},
		{"POST", "/v1/file/str_replace_editor", `{"command":"view","path":"/x","view_range":"a"}`, []string{"body", "view_range"}, ""},
		{"POST", "/v2/fs/grep", `{"path":"/x"}`, []string{"body", "pattern"}, "missing field `pattern` at line 1 column 13"},
	}
	for _, tt := range tests {
		e := f.do(tt.method, tt.target, tt.body)
		if e.status != 422 || len(e.Errors) != 1 || !reflect.DeepEqual(e.Errors[0].Location, tt.loc) ||
			(tt.msg != "" && e.Errors[0].Message != tt.msg) {
			t.Errorf("%s %s: %d %+v", tt.method, tt.target, e.status, e.Errors)
		}
	}
}

func TestAtomicWrite(t *testing.T) {
	f := newFixture(t)
	p := f.write("keep.txt", "old")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	e := f.do("POST", "/v2/fs/write", map[string]any{"path": p, "content": "!!!", "encoding": "base64"})
	if e.status != 400 || fileErr(t, e).ErrorType != fserr.BadRequest || f.read(p) != "old" {
		t.Errorf("bad base64: %d %s, file %q", e.status, e.Data, f.read(p))
	}
	e = f.do("POST", "/v2/fs/write", map[string]any{"path": p, "content": "Ā", "encoding": "raw"})
	if e.status != 400 || f.read(p) != "old" {
		t.Errorf("raw > 255: %d %s", e.status, e.Data)
	}
	saved := openTemp
	openTemp = func(string) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: "x", Err: syscall.ENOSPC}
	}
	e = f.do("POST", "/v2/fs/write", map[string]any{"path": p, "content": "new"})
	openTemp = saved
	if e.status != 507 || fileErr(t, e).ErrorType != fserr.NoSpaceLeft || f.read(p) != "old" {
		t.Errorf("staging failure: %d %s, file %q", e.status, e.Data, f.read(p))
	}
	if e = f.do("POST", "/v2/fs/write", map[string]any{"path": p, "content": "new"}); e.status != 200 || f.read(p) != "new" {
		t.Fatalf("write: %d %s", e.status, e.Data)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v not kept", fi.Mode())
	}
	ents, _ := os.ReadDir(f.dir)
	for _, d := range ents {
		if strings.HasSuffix(d.Name(), ".part") {
			t.Errorf("staging file left: %s", d.Name())
		}
	}
	e = f.do("POST", "/v2/fs/write", map[string]any{"path": f.dir, "content": "x"})
	if fe := fileErr(t, e); e.status != 400 || deref(fe.ErrnoName) != "EISDIR" {
		t.Errorf("write onto dir: %d %s", e.status, e.Data)
	}
}

func TestReadLimit(t *testing.T) {
	f := newFixture(t)
	p := f.write("big.txt", strings.Repeat("a", MaxTextBytes+1))
	e := f.do("GET", "/v2/fs/read?path="+q(p), nil)
	if fe := fileErr(t, e); e.status != 400 || fe.Message != "file exceeds the 16 MiB buffered text limit" || fe.ErrorType != fserr.BadRequest {
		t.Errorf("%d %s", e.status, e.Data)
	}
	if err := os.Truncate(p, MaxTextBytes); err != nil {
		t.Fatal(err)
	}
	if e = f.do("GET", "/v2/fs/read?path="+q(p), nil); e.status != 200 {
		t.Errorf("exactly 16 MiB: %d", e.status)
	}
}

func TestOwnership(t *testing.T) {
	f := newFixture(t)
	e := f.do("POST", "/v2/fs/write?user=nobody", map[string]any{"path": "own/x.txt", "content": "x"})
	if os.Geteuid() != 0 {
		if e.status != 400 || !strings.HasPrefix(fileErr(t, e).Message, "cannot run as nobody: aiod is running as uid ") {
			t.Errorf("non-root: %d %s", e.status, e.Data)
		}
		return
	}
	if e.status != 200 {
		t.Fatalf("%d %s", e.status, e.Data)
	}
	// A replace keeps the owner the file already has.
	f.do("POST", "/v2/fs/write", map[string]any{"path": "own/x.txt", "content": "z"})
	for _, p := range []string{"own", "own/x.txt"} {
		fi, err := os.Stat(filepath.Join(f.dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid == 0 {
			t.Errorf("%s still owned by root", p)
		}
	}
	e = f.do("POST", "/v1/file/write", map[string]any{"file": "own/y.txt", "content": "y", "sudo": true})
	fi, _ := os.Stat(filepath.Join(f.dir, "own/y.txt"))
	if e.status != 200 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("sudo write: %d %s", e.status, e.Data)
	}
}

func TestEdit(t *testing.T) {
	f := newFixture(t)
	p := f.write("e.py", "a = 1\nb = 2\na = 1\n")
	edit := func(body map[string]any) envelope {
		body["path"] = p
		return f.do("POST", "/v2/fs/edit", body)
	}
	tests := []struct {
		body    map[string]any
		status  int
		msg     string
		content string
	}{
		{map[string]any{"command": "str_replace", "old_str": "zzz", "new_str": "y"}, 400, "old_str not found in file", ""},
		{map[string]any{"command": "str_replace", "old_str": "a = 1", "new_str": "y"}, 400, "old_str has multiple occurrences; replace_mode is required", ""},
		{map[string]any{"command": "view"}, 400, "command `view` is not supported on POST /v2/fs/edit; use GET /v2/fs/read", ""},
		{map[string]any{"command": "create"}, 400, "command `create` is not supported on POST /v2/fs/edit; use POST /v2/fs/write", ""},
		{map[string]any{"command": "bogus"}, 400, "", ""},
		{map[string]any{"command": "str_replace", "old_str": "a = 1", "new_str": "A", "replace_mode": "LAST"}, 200, "", "a = 1\nb = 2\nA\n"},
		{map[string]any{"command": "str_replace", "old_str": "b = 2", "new_str": "B"}, 200, "", "a = 1\nB\nA\n"},
		{map[string]any{"command": "insert", "insert_line": 0, "new_str": "top"}, 200, "", "top\na = 1\nB\nA\n"},
		{map[string]any{"command": "insert", "insert_line": 99, "new_str": "x"}, 400, "", ""},
		{map[string]any{"command": "undo_edit"}, 200, "", "a = 1\nB\nA\n"},
		{map[string]any{"command": "undo_edit"}, 200, "", "a = 1\nb = 2\nA\n"},
		{map[string]any{"command": "undo_edit"}, 200, "", "a = 1\nb = 2\na = 1\n"},
		{map[string]any{"command": "undo_edit"}, 400, "No edit history found for " + p + ".", ""},
		{map[string]any{"command": "str_replace", "old_str": "a = 1", "new_str": "Z", "replace_mode": "ALL"}, 200, "", "Z\nb = 2\nZ\n"},
	}
	for i, tt := range tests {
		e := edit(tt.body)
		if e.status != tt.status || (tt.msg != "" && e.Message != tt.msg) {
			t.Errorf("%d %v: %d %q", i, tt.body, e.status, e.Message)
		}
		if tt.status == 200 {
			d := e.data(t)
			if d["new_content"] != tt.content || f.read(p) != tt.content || d["prev_exist"] != true || d["error"] != nil {
				t.Errorf("%d: data %v, file %q", i, d, f.read(p))
			}
		} else if fe := fileErr(t, e); fe.ErrorType != fserr.BadRequest || fe.Operation != "edit" {
			t.Errorf("%d: %s", i, e.Data)
		}
	}
	e := edit(map[string]any{"command": "str_replace", "old_str": "b = 2", "new_str": "two"})
	want := "The file " + p + " has been edited. Here's the result of running `cat -n` on a snippet of " + p +
		":\n     1\tZ\n     2\ttwo\n     3\tZ\n     4\t\nReview the changes and make sure they are as expected. Edit the file again if necessary."
	if out := e.data(t)["output"]; out != want {
		t.Errorf("output %q", out)
	}
	e = f.do("POST", "/v1/file/str_replace_editor", map[string]any{"command": "create", "path": filepath.Join(f.dir, "n/new.txt"), "file_text": "x\ny"})
	if d := e.data(t); e.status != 200 || d["prev_exist"] != false || f.read(filepath.Join(f.dir, "n/new.txt")) != "x\ny" {
		t.Errorf("v1 create %v", d)
	}
	e = f.do("POST", "/v1/file/str_replace_editor", map[string]any{"command": "view", "path": filepath.Join(f.dir, "n/new.txt"), "view_range": []int{2, -1}})
	if out := e.data(t)["output"]; out != "Here's the result of running `cat -n` on "+filepath.Join(f.dir, "n/new.txt")+":\n     2\ty\n" {
		t.Errorf("v1 view %q", out)
	}
	e = f.do("POST", "/v1/file/str_replace_editor", map[string]any{"command": "str_replace", "path": p, "old_str": "nope"})
	if e.status != 200 || e.Success || e.Message != "old_str not found in file" {
		t.Errorf("v1 edit failure %d %v %q", e.status, e.Success, e.Message)
	}
}

func TestListCap(t *testing.T) {
	f := newFixture(t)
	d := filepath.Join(f.dir, "many")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range ListCap + 5 {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%06d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := f.do("GET", "/v2/fs/list?path="+q(d), nil).data(t)
	if data["total_count"] != float64(ListCap) || data["truncated"] != true || len(data["files"].([]any)) != ListCap {
		t.Errorf("list cap: total %v truncated %v", data["total_count"], data["truncated"])
	}
	data = f.do("GET", "/v2/fs/search?path="+q(d)+"&pattern=f*", nil).data(t)
	if len(data["files"].([]any)) != ListCap || data["truncated"] != true {
		t.Errorf("search cap: truncated %v", data["truncated"])
	}
}
