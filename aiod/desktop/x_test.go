package desktop

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"
)

// testXvfb starts an Xvfb of w×h×24 on a free display for the test and
// returns its DISPLAY; it is stopped at cleanup. No Xvfb skips the test.
func testXvfb(tb testing.TB, w, h int) string {
	tb.Helper()
	name, _ := testXvfbProc(tb, w, h)
	return name
}

// testXvfbProc is testXvfb that also returns the X server's process.
// The server never resets (-noreset): tests connect and leave, and a
// connection made while the server resets is refused.
func testXvfbProc(tb testing.TB, w, h int) (string, *os.Process) {
	tb.Helper()
	bin, err := exec.LookPath("Xvfb")
	if err != nil {
		tb.Skip("Xvfb not installed (Debian package xvfb)")
	}
	r, wr, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "-screen", "0", fmt.Sprintf("%dx%dx24", w, h), "-nolisten", "tcp", "-noreset", "-displayfd", "3")
	cmd.ExtraFiles = []*os.File{wr}
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	wr.Close()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a test may have stopped it
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if n == "" {
			tb.Fatal("Xvfb reported no display")
		}
		return ":" + n, cmd.Process
	case <-time.After(20 * time.Second):
		tb.Fatal("Xvfb did not start")
	}
	return "", nil
}

// testWorker is a worker on a fresh Xvfb, its handler served by
// httptest.
func testWorker(tb testing.TB, w, h int) (*worker, *httptest.Server) {
	tb.Helper()
	name := testXvfb(tb, w, h)
	wk := newWorker(name, "", "", slog.New(slog.DiscardHandler))
	if err := wk.x.connect(); err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(wk.handler(time.Second))
	tb.Cleanup(func() { srv.Close(); wk.close() })
	return wk, srv
}

// paint fills the root window with a pattern (a gradient with stripes),
// so that captures compress like a real desktop rather than a black one.
func paint(tb testing.TB, x *xconn, w, h int) {
	tb.Helper()
	gc, err := xproto.NewGcontextId(x.c)
	if err != nil {
		tb.Fatal(err)
	}
	if err := xproto.CreateGCChecked(x.c, gc, xproto.Drawable(x.root), 0, nil).Check(); err != nil {
		tb.Fatal(err)
	}
	rows := 32 // 1280×32×4 = 160 KiB per request, under the 256 KiB limit
	buf := make([]byte, w*rows*4)
	for y0 := 0; y0 < h; y0 += rows {
		n := min(rows, h-y0)
		for y := range n {
			for px := range w {
				i := (y*w + px) * 4
				buf[i] = byte(px * 255 / w)
				buf[i+1] = byte((y0 + y) * 255 / h)
				buf[i+2] = byte((px / 40) % 2 * 200)
			}
		}
		if err := xproto.PutImageChecked(x.c, xproto.ImageFormatZPixmap, xproto.Drawable(x.root), gc,
			uint16(w), uint16(n), 0, int16(y0), 0, 24, buf[:w*n*4]).Check(); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestScreenshot(t *testing.T) {
	wk, srv := testWorker(t, 640, 480)
	x, _ := wk.x.get()
	paint(t, x, 640, 480)
	resp, err := http.Get(srv.URL + "/v2/computer/screenshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%d %q: %v", resp.StatusCode, b[:min(len(b), 200)], err)
	}
	if img.Bounds().Dx() != 640 || img.Bounds().Dy() != 480 || resp.Header.Get("X-Image-Width") != "640" || resp.Header.Get("X-Screen-Height") != "480" {
		t.Errorf("size %v, headers %v", img.Bounds(), resp.Header)
	}
	// the pattern's colours come back in order (BGRX read as RGB)
	for _, p := range []struct{ x, y, r, g, b int }{{639, 479, 200, 254, 254}, {0, 0, 0, 0, 0}, {40, 0, 200, 0, 15}} {
		r, g, bl, a := img.At(p.x, p.y).RGBA()
		if int(r>>8) != p.r || int(g>>8) != p.g || int(bl>>8) != p.b || a != 0xffff {
			t.Errorf("pixel (%d,%d) = %d %d %d %d, want %d %d %d opaque", p.x, p.y, r>>8, g>>8, bl>>8, a>>8, p.r, p.g, p.b)
		}
	}
}

// BenchmarkGetImage is the baseline: a direct X client reading the whole
// root (ZPixmap), what xwd does, without any encoding.
func BenchmarkGetImage(b *testing.B) {
	wk, _ := testWorker(b, 1280, 800)
	x, _ := wk.x.get()
	paint(b, x, 1280, 800)
	b.ResetTimer()
	for b.Loop() {
		if _, err := xproto.GetImage(x.c, xproto.ImageFormatZPixmap, xproto.Drawable(x.root), 0, 0, 1280, 800, 0xffffffff).Reply(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScreenshot is what GET screenshot does: capture and encode.
func BenchmarkScreenshot(b *testing.B) {
	wk, _ := testWorker(b, 1280, 800)
	x, _ := wk.x.get()
	paint(b, x, 1280, 800)
	b.ResetTimer()
	for b.Loop() {
		s, err := wk.shot()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(s.buf.Len()))
		s.release()
	}
}

// BenchmarkScreenshotHTTP is GET screenshot over loopback HTTP.
func BenchmarkScreenshotHTTP(b *testing.B) {
	wk, srv := testWorker(b, 1280, 800)
	x, _ := wk.x.get()
	paint(b, x, 1280, 800)
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Get(srv.URL + "/v2/computer/screenshot")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestClickRoundTrip checks the latency target: a CLICK action's HTTP
// round trip has p99 under 50 ms.
func TestClickRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	_, srv := testWorker(t, 1280, 800)
	var d []time.Duration
	for i := range 200 {
		body := `{"action_type":"CLICK","x":` + strconv.Itoa(100+i) + `,"y":200}`
		start := time.Now()
		resp, err := http.Post(srv.URL+"/v2/computer/actions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		d = append(d, time.Since(start))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	p50, p99 := d[len(d)/2], d[len(d)*99/100]
	t.Logf("click round trip: p50 %v, p99 %v", p50, p99)
	if p99 > 50*time.Millisecond {
		t.Errorf("p99 %v, want < 50 ms", p99)
	}
}

// TestMissingTools: a program that is not installed is named in
// /capabilities' missing[] and its routes answer 503 with the Debian
// package; pointer actions still work.
func TestMissingTools(t *testing.T) {
	wk, srv := testWorker(t, 320, 200)
	wk.xdotool.path, wk.xclip.path, wk.ffmpeg.path = "", "", ""
	for _, tc := range []struct {
		method, path, body, msg string
	}{
		{"POST", "/v2/computer/actions", `{"action_type":"PRESS","key":"a"}`, "xdotool is not installed (Debian package xdotool)"},
		{"POST", "/v2/computer/actions", `{"action_type":"SET_CLIPBOARD","text":"a"}`, "xclip is not installed (Debian package xclip)"},
		{"GET", "/v2/computer/clipboard", "", "xclip is not installed (Debian package xclip)"},
		{"POST", "/v2/computer/record", `{"action":"start"}`, "ffmpeg is not installed (Debian package ffmpeg)"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || !strings.Contains(string(b), `"message":"`+tc.msg+`"`) || !strings.Contains(string(b), `"hint":"apt-get install `) {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, b)
		}
	}
	c := wk.capabilities()
	if c.Status != "degraded" || strings.Join(c.Missing, ",") != "xdotool,xclip,ffmpeg" || c.Actions || c.Clipboard || c.Recording || !c.Screenshot {
		t.Errorf("capabilities: %+v", c)
	}
	resp, err := http.Post(srv.URL+"/v2/computer/actions", "application/json", strings.NewReader(`{"action_type":"CLICK","x":3,"y":4}`))
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("CLICK without xdotool: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

// TestReconnect: a connection that breaks is dropped and the next
// request dials the display again.
func TestReconnect(t *testing.T) {
	wk, srv := testWorker(t, 320, 200)
	// another client keeps the server from resetting when the worker's
	// connection closes (a dial during the reset is refused)
	other, err := dialX(wk.displayName)
	if err != nil {
		t.Fatal(err)
	}
	defer other.c.Close()
	x, _ := wk.x.get()
	x.c.Close()
	<-x.dead
	resp, err := http.Get(srv.URL + "/v2/computer/cursor")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("cursor after the connection broke: %d", resp.StatusCode)
	}
	if y, _ := wk.x.get(); y == x {
		t.Error("the broken connection was kept")
	}
}

// TestStoppedServer: with the X server stopped (SIGSTOP), the routes
// answer within a few seconds (503, capabilities absent) instead of
// hanging, input sent meanwhile never runs when the server resumes, and
// the worker reconnects once it does.
func TestStoppedServer(t *testing.T) {
	name, proc := testXvfbProc(t, 320, 200)
	wk := newWorker(name, "", "", slog.New(slog.DiscardHandler))
	if err := wk.x.connect(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wk.handler(time.Second))
	defer func() { srv.Close(); wk.close() }()
	do := func(method, path, body string) (int, string, time.Duration) {
		t.Helper()
		start := time.Now()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	if code, b, _ := do("POST", "/v2/computer/actions", `{"action_type":"MOVE_TO","x":10,"y":10}`); code != 200 {
		t.Fatal(code, b)
	}
	// another client keeps the server from resetting (and centring the
	// pointer) when the worker's connection closes
	other, err := dialX(name)
	if err != nil {
		t.Fatal(err)
	}
	defer other.c.Close()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = proc.Signal(syscall.SIGCONT)
		}
	}()
	for _, r := range []struct{ method, path, body, want string }{
		{"POST", "/v2/computer/actions", `{"action_type":"MOVE_TO","x":77,"y":77}`, "503"},
		{"GET", "/capabilities", "", `"status":"absent"`},
		{"GET", "/v2/computer/cursor", "", "503"},
		{"GET", "/v2/computer/screenshot", "", "503"},
		{"POST", "/v2/computer/actions", `{"action_type":"CLICK","x":70,"y":70}`, "503"},
	} {
		code, b, took := do(r.method, r.path, r.body)
		t.Logf("%s %s: %d after %v", r.method, r.path, code, took.Round(time.Millisecond))
		if got := strconv.Itoa(code) + " " + b; !strings.Contains(got, r.want) || took > 7*time.Second {
			t.Errorf("%s %s with the server stopped: %s after %v", r.method, r.path, got, took)
		}
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	var last string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, b, _ := do("GET", "/v2/computer/cursor", "")
		if code == 200 {
			last = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect after SIGCONT: %d %s", code, b)
		}
	}
	if !strings.Contains(last, `"data":{"x":10,"y":10}`) {
		t.Errorf("input sent while the server was stopped ran when it resumed: %s", last)
	}
}

// TestDialInFlight: against a server that accepts but never answers the
// handshake, concurrent requests share one dial and fail within the dial
// timeout; while that handshake still hangs, requests fail at once and
// no second one starts (each used to leave a socket behind); once it
// ends, the next request dials again.
func TestDialInFlight(t *testing.T) {
	dir, err := os.MkdirTemp("", "xd") // short: a socket path has a small limit
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("unix", filepath.Join(dir, "s:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	d := &display{name: filepath.Join(dir, "s") + ":0"}
	defer d.close()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := d.get()
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, errNoDisplay) {
			t.Errorf("get = %v, want errNoDisplay", err)
		}
	}
	if took := time.Since(start); took > dialTimeout+2*time.Second {
		t.Errorf("the requests took %v", took)
	}
	var first net.Conn
	select {
	case first = <-accepted:
	case <-time.After(time.Second):
		t.Fatal("no dial reached the server")
	}
	time.Sleep(retryPause + 100*time.Millisecond)
	start = time.Now()
	if _, err := d.get(); !errors.Is(err, errNoDisplay) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("get while the handshake hangs = %v after %v, want errNoDisplay at once", err, time.Since(start))
	}
	select {
	case <-accepted:
		t.Fatal("a second handshake started while the first one hangs")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close() // the handshake fails: its goroutine ends
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d.mu.Lock()
		idle := d.dial == nil
		d.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the handshake did not end when its socket closed")
		}
	}
	time.Sleep(retryPause + 100*time.Millisecond)
	go func() { _, _ = d.get() }()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("no new dial once the hung handshake ended")
	}
}
