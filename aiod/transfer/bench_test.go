package transfer

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The benchmarks compare the plane with the plainest net/http server that
// does the same job (http.ServeContent; multipart into os.Create with
// io.Copy), over loopback TCP, at 1 MiB and 64 MiB.

var benchSizes = []int{1 << 20, 64 << 20}

func sizeName(n int) string { return fmt.Sprintf("%dMiB", n>>20) }

// benchServers starts the plane and the baseline on their own servers.
func benchServers(b *testing.B) (dir string, servers map[string]*httptest.Server) {
	dir = b.TempDir()
	p := New(Config{Workspace: dir})
	mux := http.NewServeMux()
	p.Mount(mux)
	base := http.NewServeMux()
	base.HandleFunc("GET /download", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(r.URL.Query().Get("path"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
	})
	base.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		part, err := mr.NextPart()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f, err := os.Create(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, part); err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	servers = map[string]*httptest.Server{"aiod": httptest.NewServer(mux), "nethttp": httptest.NewServer(base)}
	b.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	return dir, servers
}

var benchClient = &http.Client{Timeout: time.Minute}

func BenchmarkDownload(b *testing.B) {
	dir, servers := benchServers(b)
	routes := map[string]string{"aiod": "/v2/fs/download", "nethttp": "/download"}
	for _, size := range benchSizes {
		name := filepath.Join(dir, sizeName(size)+".bin")
		if err := os.WriteFile(name, bytes.Repeat([]byte{7}, size), 0o644); err != nil {
			b.Fatal(err)
		}
		for _, impl := range []string{"aiod", "nethttp"} {
			u := servers[impl].URL + routes[impl] + "?path=" + url.QueryEscape(name)
			b.Run(impl+"/"+sizeName(size), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					resp, err := benchClient.Get(u)
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || n != int64(size) {
						b.Fatalf("%d bytes, %v", n, err)
					}
				}
			})
		}
	}
}

func BenchmarkUpload(b *testing.B) {
	dir, servers := benchServers(b)
	routes := map[string]string{"aiod": "/v2/fs/upload", "nethttp": "/upload"}
	for _, size := range benchSizes {
		body, ct := form(&testing.T{}, "up.bin", [2]string{"file", string(bytes.Repeat([]byte{7}, size))})
		payload := body.Bytes()
		for _, impl := range []string{"aiod", "nethttp"} {
			u := servers[impl].URL + routes[impl] + "?path=" + url.QueryEscape(filepath.Join(dir, impl+".bin"))
			b.Run(impl+"/"+sizeName(size), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					resp, err := benchClient.Post(u, ct, bytes.NewReader(payload))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		}
	}
}
