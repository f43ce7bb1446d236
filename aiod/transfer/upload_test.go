package transfer

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

func TestUploadNewPath(t *testing.T) {
	f := newFixture(t, Config{})
	target := filepath.Join(f.work, "a", "b", "data.csv")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	body, ct := form(t, "ignored.csv", [2]string{"path", target}, [2]string{"file", "a,b\n1,2\n"})
	w := f.do("POST", "/v2/fs/upload", body, "Content-Type", ct)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	r := decode(t, w)
	m := dataMap(t, r)
	wantKeys(t, m, "file_path", "file_size", "success")
	if !r.Success || r.Message != "Operation successful" || m["file_path"] != target || m["file_size"] != 8.0 || m["success"] != true {
		t.Fatalf("reply %+v data %v", r, m)
	}
	if got := readFile(t, target); got != "a,b\n1,2\n" {
		t.Fatalf("content %q", got)
	}
	if s := staged(t, f.work); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}
}

func TestUploadOverExisting(t *testing.T) {
	f := newFixture(t, Config{})
	target := filepath.Join(f.work, "x.bin")
	writeFile(t, target, "old content", 0o600)
	body, ct := form(t, "x.bin", [2]string{"path", "x.bin"}, [2]string{"file", "new"})
	w := f.do("POST", "/v1/file/upload", body, "Content-Type", ct)
	if r := decode(t, w); w.Code != 200 || !r.Success {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := readFile(t, target); got != "new" {
		t.Fatalf("content %q", got)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want the replaced file's 0600", fi.Mode())
	}
}

func TestUploadTargets(t *testing.T) {
	f := newFixture(t, Config{})
	dir := filepath.Join(f.work, "dir")
	for _, d := range []string{dir, filepath.Join(f.work, "late"), filepath.Join(f.work, "q"), filepath.Join(f.work, "new")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, query string
		fields      [][2]string
		want        string
	}{
		{"file before path", "", [][2]string{{"file", "1"}, {"path", "late/one.txt"}}, "late/one.txt"},
		{"path in query", "?path=q/two.txt", [][2]string{{"file", "1"}}, "q/two.txt"},
		{"field beats query", "?path=q/no.txt", [][2]string{{"path", "three.txt"}, {"file", "1"}}, "three.txt"},
		{"existing directory", "", [][2]string{{"path", dir}, {"file", "1"}}, "dir/up.txt"},
		{"trailing slash", "", [][2]string{{"path", "new/"}, {"file", "1"}}, "new/up.txt"},
		{"no path", "", [][2]string{{"file", "1"}}, "up.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := form(t, "up.txt", c.fields...)
			w := f.do("POST", "/v2/fs/upload"+c.query, body, "Content-Type", ct)
			want := filepath.Join(f.work, c.want)
			if m := dataMap(t, decode(t, w)); w.Code != 200 || m["file_path"] != want {
				t.Fatalf("%d %s, want %s", w.Code, w.Body, want)
			}
			if readFile(t, want) != "1" {
				t.Fatal("content")
			}
		})
	}
	if s := staged(t, f.work); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}
}

func TestUploadFailures(t *testing.T) {
	f := newFixture(t, Config{})
	writeFile(t, filepath.Join(f.work, "plain"), "x", 0o644)
	cases := []struct {
		name, route, path string
		status            int
		errorType         string
	}{
		{"parent is a file v2", "/v2/fs/upload", "plain/sub/f", 400, fserr.InvalidTarget},
		{"parent is a file v1", "/v1/file/upload", "plain/sub/f", 200, fserr.InvalidTarget},
		{"NUL in path", "/v2/fs/upload", "a\x00b", 400, fserr.InvalidPath},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := form(t, "f", [2]string{"path", c.path}, [2]string{"file", "data"})
			w := f.do("POST", c.route, body, "Content-Type", ct)
			r := decode(t, w)
			m := dataMap(t, r)
			if w.Code != c.status || r.Success || m["error_type"] != c.errorType || m["operation"] != "upload" || m["path"] != c.path {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		})
	}
	if got := readFile(t, filepath.Join(f.work, "plain")); got != "x" {
		t.Fatalf("plain changed: %q", got)
	}
	if s := staged(t, f.work); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}

	body, ct := form(t, "", [2]string{"path", f.work}, [2]string{"file", "x"})
	w := f.do("POST", "/v2/fs/upload", body, "Content-Type", ct)
	if m := dataMap(t, decode(t, w)); w.Code != 400 || m["errno_name"] != "EISDIR" {
		t.Fatalf("directory without a file name: %d %s", w.Code, w.Body)
	}
	body, ct = form(t, "", [2]string{"path", "p"})
	w = f.do("POST", "/v2/fs/upload", body, "Content-Type", ct)
	if r := decode(t, w); w.Code != 422 || len(r.Errors) != 1 || r.Errors[0].Message != "missing field `file`" {
		t.Fatalf("no file part: %d %s", w.Code, w.Body)
	}
	w = f.do("POST", "/v2/fs/upload", strings.NewReader("{}"), "Content-Type", "application/json")
	if m := dataMap(t, decode(t, w)); w.Code != 400 || m["error_type"] != fserr.BadRequest {
		t.Fatalf("not multipart: %d %s", w.Code, w.Body)
	}
}

func TestUploadDisconnectLeavesTargetIntact(t *testing.T) {
	f := newFixture(t, Config{})
	target := filepath.Join(f.work, "keep.txt")
	writeFile(t, target, "original", 0o644)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		f.mux.ServeHTTP(w, r)
	}))
	defer srv.Close()

	const boundary = "XBOUNDARY"
	head := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\n%s\r\n"+
		"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"keep.txt\"\r\n\r\n", boundary, target, boundary)
	chunk := bytes.Repeat([]byte("z"), 3<<20)
	conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v2/fs/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n%s",
		boundary, 64<<20, head)
	_, _ = conn.Write(chunk)
	// Wait until the server staged something, then vanish mid-body.
	deadline := time.Now().Add(5 * time.Second)
	for len(staged(t, f.work)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if len(staged(t, f.work)) == 0 {
		t.Fatal("upload never staged")
	}
	conn.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not finish")
	}
	if s := staged(t, f.work); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}
	if got := readFile(t, target); got != "original" {
		t.Fatalf("target changed: %q", got)
	}
}

func TestUploadUser(t *testing.T) {
	f := newFixture(t, Config{})
	if err := os.Mkdir(filepath.Join(f.work, "owned"), 0o755); err != nil {
		t.Fatal(err)
	}
	checkOwner(t, f, func(user string) *httptest.ResponseRecorder {
		body, ct := form(t, "f", [2]string{"path", "owned/u.txt"}, [2]string{"file", "x"})
		return f.do("POST", "/v2/fs/upload?user="+user, body, "Content-Type", ct)
	}, "owned/u.txt")
}

func TestUploadEngine(t *testing.T) {
	f := newFixture(t, Config{})
	if err := os.Mkdir(filepath.Join(f.work, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := f.p.Engine().Upload(t.Context(), "e/n.txt", "", strings.NewReader("engine"))
	if err != nil || res.FilePath != filepath.Join(f.work, "e/n.txt") || res.FileSize != 6 || !res.Success {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = f.p.Engine().Upload(t.Context(), "", "", strings.NewReader("x"))
	if fe, ok := err.(*fserr.Error); !ok || fe.ErrorType != fserr.InvalidPath {
		t.Fatalf("empty path: %v", err)
	}
}

func TestCloseRemovesStaged(t *testing.T) {
	f := newFixture(t, Config{})
	name := filepath.Join(f.work, stageName(".aiod-upload-"))
	writeFile(t, name, "x", 0o644)
	f.p.Engine().track(name)
	if err := f.p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("staged file survived Close: %v", err)
	}
}

// A file part that comes before the path is staged in the workspace; when
// the target is on another filesystem it is copied across, not lost.
func TestUploadLatePathAcrossFilesystems(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "transfer-test-")
	if err != nil {
		t.Skip("no /dev/shm")
	}
	defer os.RemoveAll(shm)
	other := t.TempDir()
	var a, b syscall.Stat_t
	if syscall.Stat(shm, &a) != nil || syscall.Stat(other, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm and the temp dir share a filesystem")
	}
	f := newFixture(t, Config{Workspace: shm})
	target := filepath.Join(other, "across.txt")
	body, ct := form(t, "x", [2]string{"file", "payload"}, [2]string{"path", target})
	w := f.do("POST", "/v2/fs/upload", body, "Content-Type", ct)
	if m := dataMap(t, decode(t, w)); w.Code != 200 || m["file_path"] != target || m["file_size"] != 7.0 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if readFile(t, target) != "payload" {
		t.Fatal("content")
	}
	if s := append(staged(t, shm), staged(t, other)...); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}
}

// TestUploadMissingDestinationDir: an upload creates no directories; a
// missing destination directory is not_found, 404 on v2 (as the OpenAPI
// declares) and 200 success:false on v1, whether the path comes before
// the file part, after it (checked at commit), in the query, or names a
// directory with a trailing slash. Nothing is left behind.
func TestUploadMissingDestinationDir(t *testing.T) {
	f := newFixture(t, Config{})
	const msg = "Failed to upload file: Destination directory not found"
	cases := []struct {
		name, route, query string
		fields             [][2]string
		path               string
		status             int
	}{
		{"v2 path first", "/v2/fs/upload", "", [][2]string{{"path", "/nonexist/x/y"}, {"file", "d"}}, "/nonexist/x/y", 404},
		{"v1 path first", "/v1/file/upload", "", [][2]string{{"path", "/nonexist/x/y"}, {"file", "d"}}, "/nonexist/x/y", 200},
		{"v2 file first", "/v2/fs/upload", "", [][2]string{{"file", "d"}, {"path", "no/such/dir/f"}}, "no/such/dir/f", 404},
		{"v1 file first", "/v1/file/upload", "", [][2]string{{"file", "d"}, {"path", "no/such/dir/f"}}, "no/such/dir/f", 200},
		{"v2 query", "/v2/fs/upload", "?path=missing%2Ff", [][2]string{{"file", "d"}}, "missing/f", 404},
		{"v2 trailing slash", "/v2/fs/upload", "", [][2]string{{"path", "absent/"}, {"file", "d"}}, "absent/", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := form(t, "up.txt", c.fields...)
			w := f.do("POST", c.route+c.query, body, "Content-Type", ct)
			r := decode(t, w)
			m := dataMap(t, r)
			if w.Code != c.status || r.Success || r.Message != msg || m["message"] != msg || m["error_type"] != fserr.NotFound ||
				m["errno_name"] != "ENOENT" || m["operation"] != "upload" || m["path"] != c.path {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		})
	}
	for _, d := range []string{"/nonexist", filepath.Join(f.work, "no"), filepath.Join(f.work, "missing"), filepath.Join(f.work, "absent")} {
		if _, err := os.Lstat(d); err == nil {
			t.Errorf("%s was created", d)
		}
	}
	if s := staged(t, f.work); len(s) != 0 {
		t.Fatalf("leftovers %v", s)
	}
	_, err := f.p.Engine().Upload(t.Context(), "gone/n.txt", "", strings.NewReader("x"))
	if fe, ok := err.(*fserr.Error); !ok || fe.ErrorType != fserr.NotFound || fe.Message != msg {
		t.Fatalf("engine: %v", err)
	}
}
