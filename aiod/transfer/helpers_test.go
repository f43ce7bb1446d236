package transfer

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// fixture is a plane mounted on a mux, with a workspace of its own.
type fixture struct {
	t    *testing.T
	p    *Plane
	mux  *http.ServeMux
	work string
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	p := New(cfg)
	mux := http.NewServeMux()
	p.Mount(mux)
	t.Cleanup(func() { _ = p.Close(t.Context()) })
	return &fixture{t: t, p: p, mux: mux, work: cfg.Workspace}
}

// do serves one request in-process; header is name, value pairs.
func (f *fixture) do(method, target string, body io.Reader, header ...string) *httptest.ResponseRecorder {
	f.t.Helper()
	r := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	return w
}

// reply is a decoded envelope with its data left raw.
type reply struct {
	api.Reply
}

func decode(t *testing.T, w *httptest.ResponseRecorder) reply {
	t.Helper()
	var r reply
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return r
}

// dataMap is the envelope's data as a map, to check exact key sets.
func dataMap(t *testing.T, r reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	return m
}

// keys is m's key set, sorted by the caller's expectations.
func wantKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	if len(m) != len(keys) {
		t.Fatalf("data keys = %v, want %v", m, keys)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Fatalf("data %v lacks %q", m, k)
		}
	}
}

// form is a multipart body: fields in order; a field named "file" is the
// file part, its value the content, with filename.
func form(t *testing.T, filename string, fields ...[2]string) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		var w io.Writer
		var err error
		if f[0] == "file" {
			w, err = mw.CreateFormFile("file", filename)
		} else {
			w, err = mw.CreateFormField(f[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, f[1])
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, mw.FormDataContentType()
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// staged lists the staging leftovers (.aiod-*.part) under dir.
func staged(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".aiod-") && strings.HasSuffix(d.Name(), ".part") {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// checkOwner runs a creating request as an unknown user (400) and, under
// root, as nobody, whose account must then own every path (relative to
// the workspace).
func checkOwner(t *testing.T, f *fixture, as func(user string) *httptest.ResponseRecorder, paths ...string) {
	t.Helper()
	w := as("no-such-user-xyz")
	if r := decode(t, w); w.Code != 400 || r.Message != "no such user: no-such-user-xyz" || dataMap(t, r)["error_type"] != fserr.BadRequest {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no nobody account")
	}
	if w := as("nobody"); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for _, name := range paths {
		fi, err := os.Lstat(filepath.Join(f.work, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)); got != nobody.Uid {
			t.Fatalf("%s owned by %s, want %s", name, got, nobody.Uid)
		}
	}
}
