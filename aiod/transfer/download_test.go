package transfer

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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
