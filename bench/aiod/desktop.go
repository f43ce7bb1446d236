package main

// This file is -planes browser,desktop: the browser plane's screenshot
// beside Page.captureScreenshot sent straight over CDP, the computer-use
// plane's screenshot beside a direct X client's capture, a CLICK round
// trip, and the daemon's idle RSS with the browser attached (the
// browser's own memory reported apart). It starts and stops what it uses
// on 127.0.0.1: Xvfb, a headful Chromium on it showing a fixture page,
// the computer-use worker (`aiod computer-use`) and an aiod reaching both.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
)

// The display the desktop part runs: the size of a laptop screen.
const deskW, deskH = 1280, 800

// deskPage is the page Chromium shows: some text, a panel and a large
// button, so that screenshots carry real content.
const deskPage = `<!doctype html><html><head><meta charset="utf-8"><title>aiod bench</title>
<style>body{margin:0;font-family:"Liberation Sans",Arial,sans-serif;background:#f4f6fb;color:#1d2433}
main{max-width:960px;margin:40px auto;display:flex;flex-direction:column;gap:20px}
h1{font-size:36px;margin:0}p{font-size:18px;line-height:1.5;color:#5a6478}
.panel{background:#fff;border-radius:16px;padding:24px;box-shadow:0 4px 16px rgba(0,0,0,.08)}
button{height:160px;font-size:36px;border:0;border-radius:20px;background:#2f6fed;color:#fff}</style></head>
<body><main><h1>aiod bench</h1>
<div class="panel"><p>The browser plane and the computer-use plane are measured against direct clients of the
same browser and the same X server, in the same run.</p><p>Lorem ipsum dolor sit amet, consectetur adipiscing
elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.</p></div>
<button>A button</button></main></body></html>`

// desk is what the part runs; stop ends all of it.
type desk struct {
	display string
	xvfb    *exec.Cmd
	chrome  *exec.Cmd
	cdp     string // http://127.0.0.1:PORT
	worker  *exec.Cmd
	wurl    string
	aiod    *exec.Cmd
	base    string
	page    *http.Server
}

func (d *desk) stop() {
	if d.aiod != nil {
		procs.Stop(d.aiod)
	}
	if d.worker != nil {
		procs.Stop(d.worker)
	}
	if d.chrome != nil {
		// Chromium's helpers share its process group.
		_ = syscall.Kill(-d.chrome.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.chrome.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		_ = syscall.Kill(-d.chrome.Process.Pid, syscall.SIGKILL)
		<-done
	}
	if d.xvfb != nil {
		procs.Stop(d.xvfb)
	}
	if d.page != nil {
		_ = d.page.Close()
	}
}

// startDesk starts Xvfb, a page server, Chromium on the display, the
// worker and an aiod reaching both.
func startDesk(bin, tmp string) *desk {
	d := &desk{}
	var err error
	fail := func(err error) {
		d.stop()
		check(err)
	}

	// Xvfb on a display it picks itself.
	r, w, err := os.Pipe()
	check(err)
	d.xvfb = exec.Command("Xvfb", "-screen", "0", fmt.Sprintf("%dx%dx24", deskW, deskH), "-nolisten", "tcp", "-displayfd", "3")
	d.xvfb.ExtraFiles = []*os.File{w}
	if err := d.xvfb.Start(); err != nil {
		w.Close()
		r.Close()
		check(fmt.Errorf("starting Xvfb (Debian package xvfb): %w", err))
	}
	w.Close()
	got := make(chan string, 1)
	go func() {
		defer r.Close()
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if _, err := strconv.Atoi(n); err != nil {
			fail(fmt.Errorf("xvfb reported no display number (%q)", n))
		}
		d.display = ":" + n
	case <-time.After(20 * time.Second):
		fail(errors.New("xvfb did not report its display within 20 s"))
	}

	// The page.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	d.page = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(rw, deskPage)
	})}
	go func() { _ = d.page.Serve(l) }()

	// Chromium, headful on the display, its DevTools port on loopback.
	port := freePort()
	d.cdp = "http://127.0.0.1:" + strconv.Itoa(port)
	prof := filepath.Join(tmp, "chromium")
	d.chrome = exec.Command("chromium", "--no-sandbox", "--test-type", "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port="+strconv.Itoa(port), "--user-data-dir="+filepath.Join(prof, "profile"),
		"--window-position=0,0", fmt.Sprintf("--window-size=%d,%d", deskW, deskH), "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--password-store=basic",
		"--use-mock-keychain", "http://"+l.Addr().String()+"/")
	d.chrome.Env = append(os.Environ(), "DISPLAY="+d.display, "TMPDIR="+prof)
	d.chrome.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	check(os.MkdirAll(prof, 0o755))
	if err := d.chrome.Start(); err != nil {
		d.chrome = nil
		fail(fmt.Errorf("chromium (Debian package chromium): %w", err))
	}
	if err := waitHTTP(d.cdp+"/json/version", 30*time.Second); err != nil {
		fail(fmt.Errorf("chromium's DevTools port: %w", err))
	}

	// The worker.
	waddr := "127.0.0.1:" + strconv.Itoa(freePort())
	d.wurl = "http://" + waddr
	d.worker = exec.Command(bin, "computer-use")
	d.worker.Env = append(os.Environ(), "DISPLAY="+d.display, "AIO_COMPUTER_USE_LISTEN="+waddr, "AIO_API_KEY=")
	d.worker.Stdout, d.worker.Stderr = os.Stderr, os.Stderr
	if err := d.worker.Start(); err != nil {
		d.worker = nil
		fail(err)
	}
	if err := waitHTTP(d.wurl+"/healthz", 15*time.Second); err != nil {
		fail(fmt.Errorf("the computer-use worker: %w", err))
	}

	// aiod, attached to both.
	ws := filepath.Join(tmp, "desk-ws")
	check(os.MkdirAll(ws, 0o755))
	d.aiod = exec.Command(bin, "--port", "0", "--workspace", ws, "--log-level", "warn")
	d.aiod.Env = append(os.Environ(), "BROWSER_REMOTE_DEBUGGING_HOST=127.0.0.1", "BROWSER_REMOTE_DEBUGGING_PORT="+strconv.Itoa(port),
		"AIO_COMPUTER_USE_URL="+d.wurl, "AIO_API_KEY=")
	if d.base, err = procs.Start(d.aiod); err != nil {
		d.aiod = nil
		fail(err)
	}
	return d
}

// waitHTTP polls u until it answers 200 or d passes.
func waitHTTP(u string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", u, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getBytes GETs u and returns its body; anything but 200 is an error.
func getBytes(u string) ([]byte, error) {
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %d %.200s", u, resp.StatusCode, b)
	}
	return b, err
}

// cdpClient is a minimal DevTools client on one target's WebSocket.
type cdpClient struct {
	c  *websocket.Conn
	id int
}

// dialPage connects to the first page target of the browser at cdp (the
// one the plane's screenshot captures).
func dialPage(cdp string) (*cdpClient, error) {
	resp, err := client.Get(cdp + "/json/list")
	if err != nil {
		return nil, err
	}
	var targets []struct{ Type, WebSocketDebuggerURL string }
	err = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if t.Type == "page" {
			c, _, err := websocket.DefaultDialer.Dial(t.WebSocketDebuggerURL, nil)
			if err != nil {
				return nil, err
			}
			return &cdpClient{c: c}, nil
		}
	}
	return nil, errors.New("no page target")
}

// call sends one method and decodes its result into v (10 s limit).
func (c *cdpClient) call(method string, params, v any) error {
	c.id++
	_ = c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.c.WriteJSON(map[string]any{"id": c.id, "method": method, "params": params}); err != nil {
		return err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := c.c.ReadJSON(&m); err != nil {
			return err
		}
		if m.ID != c.id {
			continue // an event
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error)
		}
		return json.Unmarshal(m.Result, v)
	}
}

// xShot captures the root window of the display with GetImage and
// encodes it as PNG with the worker's settings (png.BestSpeed): the
// direct X client the desktop plane's screenshot is compared with.
type xShot struct {
	c    *xgb.Conn
	root xproto.Window
	w, h uint16
	enc  png.Encoder
}

func newXShot(display string) (*xShot, error) {
	xgb.Logger = log.New(io.Discard, "", 0) // it warns of a missing ~/.Xauthority; Xvfb needs none
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, err
	}
	s := xproto.Setup(c).DefaultScreen(c)
	return &xShot{c: c, root: s.Root, w: s.WidthInPixels, h: s.HeightInPixels, enc: png.Encoder{CompressionLevel: png.BestSpeed}}, nil
}

// grab is the capture alone: the root window's pixels (BGRX) with
// GetImage, as xwd reads them, nothing encoded.
func (x *xShot) grab() (*xproto.GetImageReply, error) {
	r, err := xproto.GetImage(x.c, xproto.ImageFormatZPixmap, xproto.Drawable(x.root), 0, 0, x.w, x.h, 0xffffffff).Reply()
	if err == nil && len(r.Data) < int(x.w)*int(x.h)*4 {
		err = fmt.Errorf("GetImage gave %d bytes for %dx%d", len(r.Data), x.w, x.h)
	}
	return r, err
}

func (x *xShot) capture() ([]byte, error) {
	r, err := x.grab()
	if err != nil {
		return nil, err
	}
	img := image.NewRGBA(image.Rect(0, 0, int(x.w), int(x.h)))
	// 24-bit depth comes as 32 bits per pixel, BGRX, little-endian.
	src, dst := r.Data, img.Pix
	for i := 0; i+3 < len(src) && i+3 < len(dst); i += 4 {
		dst[i], dst[i+1], dst[i+2], dst[i+3] = src[i+2], src[i+1], src[i], 0xff
	}
	var buf bytes.Buffer
	if err := x.enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// treeMemory sums VmRSS and Pss (smaps_rollup) over the processes of
// process group pgid, in MiB, and counts them.
func treeMemory(pgid int) (rssMiB, pssMiB float64, n int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		n++
		rssMiB += procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
		pssMiB += procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:")
	}
	return rssMiB, pssMiB, n
}

// procField is the kB value of the line starting with key in file, in
// MiB.
func procField(file, key string) float64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			if f := strings.Fields(v); len(f) > 0 {
				kb, _ := strconv.Atoi(f[0])
				return float64(kb) / 1024
			}
		}
	}
	return 0
}

// benchDesk runs the browser and desktop parts that want names, shots
// screenshots and clicks per path.
func benchDesk(bin, tmp string, shots int, want map[string]bool) {
	d := startDesk(bin, tmp)
	defer d.stop()
	time.Sleep(2 * time.Second) // the page has painted; the window is up
	rssAttached := rss(d.aiod.Process.Pid)

	if want["browser"] {
		page, err := dialPage(d.cdp)
		check(err)
		defer page.c.Close()
		viaPlane := func() error {
			b, err := getBytes(d.base + "/v2/browser/screenshot")
			if err == nil && !bytes.HasPrefix(b, []byte("\x89PNG")) {
				err = fmt.Errorf("the plane's screenshot is not a PNG (%d bytes)", len(b))
			}
			return err
		}
		direct := func() error {
			var r struct {
				Data string `json:"data"`
			}
			if err := page.call("Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
				return err
			}
			b, err := base64.StdEncoding.DecodeString(r.Data)
			if err == nil && !bytes.HasPrefix(b, []byte("\x89PNG")) {
				err = errors.New("captureScreenshot gave no PNG")
			}
			return err
		}
		s, err := lat.Interleave(shots, 10, direct, viaPlane)
		check(err)
		b, p := s[0], s[1]
		fmt.Printf("### Browser: a PNG screenshot of the same page (headful Chromium %dx%d on Xvfb; %d shots each, interleaved in blocks of 10)\n\n", deskW, deskH, shots)
		fmt.Println("| path | p50 | p99 |")
		fmt.Println("|---|---:|---:|")
		fmt.Printf("| Page.captureScreenshot straight over CDP (a WebSocket client in the bench, base64 decoded) | %s | %s |\n", lat.US(b.P50()), lat.US(b.P99()))
		fmt.Printf("| GET /v2/browser/screenshot through aiod | %s | %s |\n", lat.US(p.P50()), lat.US(p.P99()))
		fmt.Printf("\n- p50 ratio %.2fx (target <= 1.2x); p99 ratio %.2fx\n\n", float64(p.P50())/float64(b.P50()), float64(p.P99())/float64(b.P99()))
	}

	if want["desktop"] {
		xs, err := newXShot(d.display)
		check(err)
		defer xs.c.Close()
		viaPlane := func() error {
			b, err := getBytes(d.base + "/v2/computer/screenshot")
			if err == nil && !bytes.HasPrefix(b, []byte("\x89PNG")) {
				err = fmt.Errorf("the plane's screenshot is not a PNG (%d bytes)", len(b))
			}
			return err
		}
		direct := func() error { _, err := xs.capture(); return err }
		raw := func() error { _, err := xs.grab(); return err }
		s, err := lat.Interleave(shots, 10, direct, viaPlane, raw)
		check(err)
		b, p, g := s[0], s[1], s[2]
		fmt.Printf("### Desktop: a PNG screenshot of the whole %dx%d display (Xvfb, Chromium on it; %d shots per path, interleaved in blocks of 10)\n\n", deskW, deskH, shots)
		fmt.Println("| path | p50 | p99 |")
		fmt.Println("|---|---:|---:|")
		fmt.Printf("| direct X client in the bench: GetImage of the root window + PNG encode (BestSpeed, as the worker) | %s | %s |\n", lat.US(b.P50()), lat.US(b.P99()))
		fmt.Printf("| GET /v2/computer/screenshot through aiod (to the worker) | %s | %s |\n", lat.US(p.P50()), lat.US(p.P99()))
		fmt.Printf("| (floor) direct GetImage alone, nothing encoded (xwd's read) | %s | %s |\n", lat.US(g.P50()), lat.US(g.P99()))
		fmt.Printf("\n- p50 ratio %.2fx against the direct capture + PNG (target <= 1.5x), %.2fx against GetImage alone; p99 ratio %.2fx\n\n",
			float64(p.P50())/float64(b.P50()), float64(p.P50())/float64(g.P50()), float64(p.P99())/float64(b.P99()))

		// A click on the page's background, left of its content: no
		// navigation, nothing the page reacts to.
		click := map[string]any{"action_type": "CLICK", "x": 40, "y": deskH - 40}
		act := func(base string) func() error {
			return func() error {
				data, err := postJSON(base+"/v2/computer/actions", click)
				if err == nil && data["status"] != "success" {
					err = fmt.Errorf("CLICK: %v", data)
				}
				return err
			}
		}
		clicks := max(shots, 200)
		s, err = lat.Interleave(clicks, 20, act(d.wurl), act(d.base))
		check(err)
		w, a := s[0], s[1]
		fmt.Printf("### Desktop: a CLICK action round trip (%d each, interleaved in blocks of 20)\n\n", clicks)
		fmt.Println("| path | p50 | p99 |")
		fmt.Println("|---|---:|---:|")
		fmt.Printf("| POST /v2/computer/actions to the worker directly | %s | %s |\n", lat.US(w.P50()), lat.US(w.P99()))
		fmt.Printf("| POST /v2/computer/actions through aiod | %s | %s |\n", lat.US(a.P50()), lat.US(a.P99()))
		fmt.Printf("\n- through aiod p99 %s (target < 50 ms)\n\n", lat.US(a.P99()))
	}

	time.Sleep(2 * time.Second)
	busy := rss(d.aiod.Process.Pid)
	time.Sleep(8 * time.Second)
	idle := rss(d.aiod.Process.Pid)
	bRSS, bPSS, n := treeMemory(d.chrome.Process.Pid)
	wRSS := rss(d.worker.Process.Pid)
	fmt.Printf("### Idle RSS with the browser attached (target: aiod < 25 MiB)\n\n")
	fmt.Printf("- aiod (VmRSS): attached, before any request: %.1f MiB; after the runs above, idle 2 s: %.1f MiB; idle 10 s: %.1f MiB\n", rssAttached, busy, idle)
	fmt.Printf("- the browser, apart: %d Chromium processes (headful, one tab): VmRSS summed %.0f MiB (shared pages counted in each), Pss summed %.0f MiB\n", n, bRSS, bPSS)
	fmt.Printf("- the computer-use worker, apart: VmRSS %.1f MiB\n\n", wRSS)
}
