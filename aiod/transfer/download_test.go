package transfer

import (
	"archive/tar"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const sample = "0123456789abcdefghij"

// downloadFixture is a fixture with sample in notes.txt.
func downloadFixture(t *testing.T) (*fixture, string) {
	f := newFixture(t, Config{})
	name := filepath.Join(f.work, "notes.txt")
	writeFile(t, name, sample, 0o644)
	return f, "/v2/fs/download?path=" + url.QueryEscape(name)
}

func TestDownloadHeaders(t *testing.T) {
	f, u := downloadFixture(t)
	for _, method := range []string{"GET", "HEAD"} {
		w := f.do(method, u, nil)
		h := w.Header()
		want := map[string]string{
			"Content-Type":        "text/plain; charset=utf-8",
			"Content-Length":      strconv.Itoa(len(sample)),
			"Accept-Ranges":       "bytes",
			"Content-Disposition": `attachment; filename=notes.txt`,
		}
		for k, v := range want {
			if h.Get(k) != v {
				t.Errorf("%s %s = %q, want %q", method, k, h.Get(k), v)
			}
		}
		if w.Code != 200 || h.Get("Etag") == "" || h.Get("Etag")[0] != '"' || h.Get("Last-Modified") == "" {
			t.Fatalf("%s: %d %v", method, w.Code, h)
		}
		wantBody := sample
		if method == "HEAD" {
			wantBody = ""
		}
		if w.Body.String() != wantBody {
			t.Fatalf("%s body %q", method, w.Body)
		}
	}
	writeFile(t, filepath.Join(f.work, "blob"), "x", 0o644)
	if w := f.do("GET", "/v1/file/download?path=blob", nil); w.Header().Get("Content-Type") != "application/octet-stream" || w.Body.String() != "x" {
		t.Fatalf("fallback type: %v %q", w.Header(), w.Body)
	}
}

func TestDownloadRanges(t *testing.T) {
	f, u := downloadFixture(t)
	full := f.do("GET", u, nil)
	etag, lastMod := full.Header().Get("Etag"), full.Header().Get("Last-Modified")
	cases := []struct {
		name               string
		header             []string
		status             int
		contentRange, body string
	}{
		{"range", []string{"Range", "bytes=2-5"}, 206, "bytes 2-5/20", "2345"},
		{"suffix", []string{"Range", "bytes=-3"}, 206, "bytes 17-19/20", "hij"},
		{"unsatisfiable", []string{"Range", "bytes=100-200"}, 416, "bytes */20", ""},
		{"if-range etag match", []string{"Range", "bytes=0-1", "If-Range", etag}, 206, "bytes 0-1/20", "01"},
		{"if-range etag mismatch", []string{"Range", "bytes=0-1", "If-Range", `"stale"`}, 200, "", sample},
		{"if-range date match", []string{"Range", "bytes=0-1", "If-Range", lastMod}, 206, "bytes 0-1/20", "01"},
		{"if-range date mismatch", []string{"Range", "bytes=0-1", "If-Range", "Mon, 02 Jan 2006 15:04:05 GMT"}, 200, "", sample},
		{"if-none-match", []string{"If-None-Match", etag}, 304, "", ""},
		{"if-modified-since", []string{"If-Modified-Since", lastMod}, 304, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := f.do("GET", u, nil, c.header...)
			if w.Code != c.status || w.Header().Get("Content-Range") != c.contentRange {
				t.Fatalf("%d %v", w.Code, w.Header())
			}
			if c.status != 416 && w.Body.String() != c.body {
				t.Fatalf("body %q", w.Body)
			}
		})
	}
}

func TestDownloadFailures(t *testing.T) {
	f := newFixture(t, Config{})
	for _, c := range []struct {
		url    string
		status int
	}{
		{"/v2/fs/download?path=missing.txt", 404},
		{"/v1/file/download?path=missing.txt", 404},
		{"/v2/fs/download?path=" + url.QueryEscape(f.work), 400},
		{"/v2/fs/download?path=%00", 400},
	} {
		for _, method := range []string{"GET", "HEAD"} {
			if w := f.do(method, c.url, nil); w.Code != c.status || w.Body.Len() != 0 {
				t.Errorf("%s %s: %d %q", method, c.url, w.Code, w.Body)
			}
		}
	}
	w := f.do("GET", "/v2/fs/download", nil)
	if r := decode(t, w); w.Code != 422 || r.Errors[0].Location[1] != "path" {
		t.Fatalf("no path: %d %s", w.Code, w.Body)
	}
	w = f.do("GET", "/v2/fs/download?path=x&change_policy=never", nil)
	if r := decode(t, w); w.Code != 422 || r.Errors[0].Message != "unknown variant `never`, expected `ignore` or `abort`" {
		t.Fatalf("bad policy: %d %s", w.Code, w.Body)
	}
}

func TestDownloadAbortOnChangedFile(t *testing.T) {
	f, u := downloadFixture(t)
	first := f.do("GET", u, nil)
	etag := first.Header().Get("Etag")
	name := filepath.Join(f.work, "notes.txt")
	later := time.Now().Add(time.Hour)
	if err := os.WriteFile(name, []byte(sample+"more"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, later, later); err != nil {
		t.Fatal(err)
	}
	abort := u + "&change_policy=abort"
	for _, h := range [][]string{
		{"Range", "bytes=4-", "If-Range", etag},
		{"If-Match", etag},
		{"Range", "bytes=4-", "If-Range", first.Header().Get("Last-Modified")},
	} {
		if w := f.do("GET", abort, nil, h...); w.Code != 409 || w.Body.Len() != 0 {
			t.Fatalf("%v: %d %q", h, w.Code, w.Body)
		}
		if w := f.do("HEAD", abort, nil, h...); w.Code != 409 {
			t.Fatalf("HEAD %v: %d", h, w.Code)
		}
	}
	// ignore (the default) serves the new state whole on a stale If-Range.
	if w := f.do("GET", u, nil, "Range", "bytes=4-", "If-Range", etag); w.Code != 200 || w.Body.String() != sample+"more" {
		t.Fatalf("ignore: %d %q", w.Code, w.Body)
	}
	// abort with a current validator resumes.
	cur := f.do("HEAD", u, nil).Header().Get("Etag")
	if w := f.do("GET", abort, nil, "Range", "bytes=20-", "If-Range", cur); w.Code != 206 || w.Body.String() != "more" {
		t.Fatalf("current: %d %q", w.Code, w.Body)
	}
}

func TestDownloadAbortCutsMidStream(t *testing.T) {
	f := newFixture(t, Config{})
	name := filepath.Join(f.work, "big.bin")
	const size = 32 << 20
	writeFile(t, name, string(bytes.Repeat([]byte{'a'}, size)), 0o644)
	srv := httptest.NewServer(f.mux)
	defer srv.Close()
	ignore := srv.URL + "/v2/fs/download?path=" + url.QueryEscape(name)

	resp, err := http.Get(ignore + "&change_policy=abort")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fh.WriteString("changed")
	fh.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || 4096+n >= size {
		t.Fatalf("transfer not cut: read %d more, err %v", n, err)
	}

	// Without abort the same change goes unnoticed.
	resp2, err := http.Get(ignore)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if n, err := io.Copy(io.Discard, resp2.Body); err != nil || n != size+7 {
		t.Fatalf("ignore: %d %v", n, err)
	}
}

func TestOpenEngine(t *testing.T) {
	f, _ := downloadFixture(t)
	src, err := f.p.Engine().Open("notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Size != int64(len(sample)) || src.Name != "notes.txt" {
		t.Fatalf("%+v", src)
	}
	if ch, err := src.Changed(); ch || err != nil {
		t.Fatalf("changed %v %v", ch, err)
	}
	writeFile(t, filepath.Join(f.work, "notes.txt"), "shorter", 0o644)
	if ch, err := src.Changed(); !ch || err != nil {
		t.Fatalf("changed %v %v", ch, err)
	}
}

// TestDownloadBareErrors: ServeContent's failures are bare statuses like
// every other download failure: no text/plain body, no attachment
// headers; a 416 keeps "Content-Range: bytes */size".
func TestDownloadBareErrors(t *testing.T) {
	f, u := downloadFixture(t)
	etag := f.do("GET", u, nil).Header().Get("Etag")
	cases := []struct {
		name, query  string
		header       []string
		status       int
		contentRange string
	}{
		{"unsatisfiable", "", []string{"Range", "bytes=100-200"}, 416, "bytes */20"},
		{"unsatisfiable abort", "&change_policy=abort", []string{"Range", "bytes=100-200"}, 416, "bytes */20"},
		{"malformed range", "", []string{"Range", "bytes=z-"}, 416, ""},
		{"if-match mismatch", "", []string{"If-Match", `"other"`}, 412, ""},
	}
	for _, c := range cases {
		for _, method := range []string{"GET", "HEAD"} {
			w := f.do(method, u+c.query, nil, c.header...)
			h := w.Header()
			if w.Code != c.status || w.Body.Len() != 0 || h.Get("Content-Range") != c.contentRange ||
				h.Get("Content-Type") != "" || h.Get("Content-Disposition") != "" || h.Get("X-Content-Type-Options") != "" {
				t.Errorf("%s %s: %d %v %q", c.name, method, w.Code, h, w.Body)
			}
		}
	}
	// Success is unchanged, ranges included.
	if w := f.do("GET", u, nil, "Range", "bytes=2-5", "If-Range", etag); w.Code != 206 || w.Body.String() != "2345" {
		t.Fatalf("range: %d %q", w.Code, w.Body)
	}

	// On the wire: an empty 416, and a whole file still served (through
	// the wrapper's ReadFrom).
	srv := httptest.NewServer(f.mux)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+u, nil)
	req.Header.Set("Range", "bytes=100-")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 416 || len(b) != 0 || resp.ContentLength != 0 || resp.Header.Get("Content-Range") != "bytes */20" || resp.Header.Get("Content-Type") != "" {
		t.Fatalf("wire 416: %d %v %q", resp.StatusCode, resp.Header, b)
	}
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	writeFile(t, filepath.Join(f.work, "big.bin"), string(big), 0o644)
	resp, err = http.Get(srv.URL + "/v2/fs/download?path=big.bin")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(b, big) {
		t.Fatalf("wire 200: %d, %d bytes", resp.StatusCode, len(b))
	}
}

// TestDownloadNonRegular: a FIFO or a socket is a bare 400 at once, never
// a read that waits for a writer.
func TestDownloadNonRegular(t *testing.T) {
	f := newFixture(t, Config{})
	fifo := filepath.Join(f.work, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			h.Close()
		}
	})
	sockDir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, p := range []string{fifo, sock} {
		done := make(chan int, 1)
		go func() {
			w := f.do("GET", "/v2/fs/download?path="+url.QueryEscape(p), nil)
			if w.Body.Len() != 0 {
				t.Errorf("%s: body %q", p, w.Body)
			}
			done <- w.Code
		}()
		select {
		case code := <-done:
			if code != 400 {
				t.Errorf("%s: %d, want 400", p, code)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: download blocked", p)
		}
		_, err := f.p.Engine().Open(p)
		if err == nil || err.Error() != "Failed to download file: not a regular file" {
			t.Errorf("%s: Open: %v", p, err)
		}
	}

	// A tree export leaves the FIFO out and does not wait on it.
	writeFile(t, filepath.Join(f.work, "ok.txt"), "1", 0o644)
	done := make(chan []string, 1)
	go func() {
		var buf bytes.Buffer
		if err := f.p.Engine().ExportTree(t.Context(), f.work, &buf); err != nil {
			t.Error(err)
		}
		var names []string
		tr := tar.NewReader(&buf)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			names = append(names, h.Name)
		}
		done <- names
	}()
	select {
	case names := <-done:
		if len(names) != 1 || names[0] != "ok.txt" {
			t.Errorf("exported %v", names)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tree export blocked")
	}
}
