package aiod

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startServer serves a daemon through the server aiod itself runs.
func startServer(t *testing.T, cfg Config) string {
	t.Helper()
	d, err := New(pinPorts(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(d.Handler())
	ts.Config = newServer(d.Handler())
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// pinPorts gives a test daemon's browser and computer-use endpoints,
// when the test leaves them to the defaults (127.0.0.1:9222 and :18100),
// a loopback port where nothing listens: a Chromium or a worker the
// user runs on a default port must not change what a test sees.
func pinPorts(t *testing.T, cfg Config) Config {
	t.Helper()
	if cfg.CDPEndpoint == "" {
		cfg.CDPEndpoint = "http://" + closedAddr(t)
	}
	if cfg.ComputerUseURL == "" {
		cfg.ComputerUseURL = "http://" + closedAddr(t)
	}
	return cfg
}

// closedAddr is a loopback address where nothing listens: a port the
// kernel just gave out and that was closed again.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestServerBoundsHeaders: the server aiod runs bounds the headers by
// time (the body is bounded by progress).
func TestServerBoundsHeaders(t *testing.T) {
	hs := newServer(http.NotFoundHandler())
	if hs.ReadHeaderTimeout <= 0 || hs.ReadHeaderTimeout > 30*time.Second {
		t.Errorf("ReadHeaderTimeout = %v", hs.ReadHeaderTimeout)
	}
	if hs.ReadTimeout != 0 || hs.WriteTimeout != 0 {
		t.Errorf("total-time bounds would cut long uploads and streams: %v %v", hs.ReadTimeout, hs.WriteTimeout)
	}
}

// TestStalledBodyCut: a client that sends its headers and half a body,
// then nothing, has its connection closed once the body has made no
// progress for BodyIdle, on a JSON route and on an upload.
func TestStalledBodyCut(t *testing.T) {
	dir := t.TempDir()
	base := startServer(t, Config{Workspace: dir, BodyIdle: 300 * time.Millisecond})
	u, _ := url.Parse(base)
	for _, tc := range []struct{ name, head, part string }{
		{"json", "POST /v2/commands HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", `{"command":"echo `},
		{"upload", "POST /v2/fs/upload?path=" + url.QueryEscape(filepath.Join(dir, "f")) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
			"Content-Type: multipart/form-data; boundary=B\r\nContent-Length: 100000\r\n\r\n",
			"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nhalf a file"},
		{"chunked", "POST /v2/commands HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\n{\"com\r\n"},
		// refused before the body is read: the unread rest must not hold
		// the connection either
		{"host refused", "POST /v2/commands HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", `{"command":"echo `},
		{"not json", "POST /v2/commands HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n", `{"command":"echo `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The failure bound: far above BodyIdle, far below forever.
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tc.head+tc.part); err != nil {
				t.Fatal(err)
			}
			// Whatever the daemon answers, the connection must end.
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the stalled body's connection is still open after 10 s")
			}
		})
	}
}

// slowReader yields size bytes in chunks with a pause between them
// shorter than BodyIdle: progress, over a total time far above it.
type slowReader struct {
	left, chunk int
	pause       time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause) // the client's pace, not synchronisation
	n := min(len(p), s.chunk, s.left)
	for i := range p[:n] {
		p[i] = 'a'
	}
	s.left -= n
	return n, nil
}

// TestSlowUploadProgresses: an upload of a few MB whose total time is
// many times BodyIdle, but that never stalls, succeeds; so does a sync
// command that runs longer than BodyIdle after its body was read.
func TestSlowUploadProgresses(t *testing.T) {
	dir := t.TempDir()
	base := startServer(t, Config{Workspace: dir, BodyIdle: 300 * time.Millisecond})
	const size = 3 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, _ := mw.CreateFormFile("file", "big")
		_, err := io.CopyBuffer(part, &slowReader{left: size, chunk: 128 << 10, pause: 60 * time.Millisecond}, make([]byte, 128<<10))
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	target := filepath.Join(dir, "big")
	req, _ := http.NewRequest("POST", base+"/v2/fs/upload?path="+url.QueryEscape(target), pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"success":true`)) {
		t.Fatalf("upload after %v: %d %s", time.Since(start), resp.StatusCode, body)
	}
	if fi, err := os.Stat(target); err != nil || fi.Size() != size {
		t.Fatalf("uploaded file: %v %v", fi, err)
	}
	// The premise: the upload outlasted BodyIdle several times over, so a
	// deadline on the whole body (not on its progress) would have cut it.
	// The client's pauses alone add up to more (24 chunks, 60 ms apart),
	// so this holds however slow the machine: a lower bound only.
	if took := time.Since(start); took < 3*300*time.Millisecond {
		t.Fatalf("the upload took only %v, under 3 × BodyIdle: the test proves nothing", took)
	}

	// The deadline does not outlive the body: a handler that runs past
	// BodyIdle after reading it is not cut.
	resp, err = http.Post(base+"/v2/commands", "application/json", bytes.NewReader([]byte(`{"command":"sleep 1; echo done"}`)))
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Success bool
		Data    struct{ Stdout string }
	}
	err = json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&env)
	resp.Body.Close()
	if err != nil || !env.Success || env.Data.Stdout != "done\n" {
		t.Fatalf("a command longer than BodyIdle: %v %+v", err, env)
	}
}
