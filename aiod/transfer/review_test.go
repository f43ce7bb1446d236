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
	"syscall"
	"testing"
	"time"
)

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
