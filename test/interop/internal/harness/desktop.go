package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ChromiumBrowser is a Debian chromium started by [Chromium] with its
// DevTools port (CDP) on a random 127.0.0.1 port and a private profile in
// a temporary folder. It is stopped, with every process it started, at
// the end of the test that started it.
type ChromiumBrowser struct {
	port int
	proc *daemon
}

// ChromiumOptions tune [Chromium].
type ChromiumOptions struct {
	// Display, if set, runs Chromium headful on that X display (see
	// [Xvfb]); otherwise it runs headless.
	Display string
	// Args are added to the command line (a start page, say).
	Args []string
}

// Chromium starts Debian's chromium as the digest of aiod's browser plane
// describes (headless unless o.Display is set, --remote-debugging-address
// 127.0.0.1, a 1280x720 window, no first-run work) and waits up to 30 s
// until GET /json/version answers. A missing chromium skips the test, or
// fails it under [RequirePeers].
func Chromium(t testing.TB, o ChromiumOptions) *ChromiumBrowser {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		MissingPeer(t, "chromium (Debian package chromium)")
	}
	dir := t.TempDir()
	var b *ChromiumBrowser
	for range 3 { // a port found free can be taken before chromium binds it
		port := freePort(t, false)
		args := []string{
			"--no-sandbox", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=" + strconv.Itoa(port),
			"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1280,720",
			"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--password-store=basic", "--use-mock-keychain",
		}
		if o.Display == "" {
			args = append(args, "--headless=new")
		}
		args = append(args, o.Args...)
		if len(o.Args) == 0 {
			args = append(args, "about:blank")
		}
		cmd := exec.Command(bin, args...)
		// TMPDIR keeps the temporary folders Chromium makes
		// (org.chromium.Chromium.*) inside the test's, which is removed.
		cmd.Env = append(os.Environ(), "DISPLAY="+o.Display, "TMPDIR="+dir)
		d, err := startDaemon("chromium", cmd, filepath.Join(dir, "chromium.log"))
		if err != nil {
			t.Fatal(err)
		}
		b = &ChromiumBrowser{port: port, proc: d}
		if err = b.awaitCDP(30 * time.Second); err == nil {
			break
		}
		d.kill()
		if !strings.Contains(d.logs(), "bind") {
			t.Fatalf("chromium did not open its DevTools port: %v\n%s", err, d.logs())
		}
		b = nil
	}
	if b == nil {
		t.Fatal("chromium could not bind a DevTools port in 3 tries")
	}
	t.Cleanup(b.Stop)
	return b
}

// awaitCDP polls /json/version until it answers or d passes.
func (b *ChromiumBrowser) awaitCDP(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, err := b.versionInfo(); err == nil {
			return nil
		} else if b.proc.done() || time.Now().After(deadline) {
			return fmt.Errorf("no DevTools answer on port %d: %w", b.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *ChromiumBrowser) versionInfo() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.URL()+"/json/version", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	if v["webSocketDebuggerUrl"] == "" {
		return nil, fmt.Errorf("no webSocketDebuggerUrl in /json/version")
	}
	return v, nil
}

// Port is the DevTools port.
func (b *ChromiumBrowser) Port() int { return b.port }

// URL is the DevTools HTTP endpoint, http://127.0.0.1:PORT.
func (b *ChromiumBrowser) URL() string { return "http://127.0.0.1:" + strconv.Itoa(b.port) }

// Version is Chromium's GET /json/version (Browser, User-Agent,
// webSocketDebuggerUrl, ...).
func (b *ChromiumBrowser) Version(t testing.TB) map[string]string {
	t.Helper()
	v, err := b.versionInfo()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// PID is the browser process's id (its children share its process
// group).
func (b *ChromiumBrowser) PID() int { return b.proc.cmd.Process.Pid }

// Logs is what Chromium wrote to its standard output and error.
func (b *ChromiumBrowser) Logs() string { return b.proc.logs() }

// Stop ends the browser (SIGTERM, then SIGKILL to its whole process group
// after 5 s) and any process of its group still left. A browser that
// crashed before is not an error here: tests that care check the plane.
func (b *ChromiumBrowser) Stop() {
	_ = b.proc.stop(5 * time.Second)
	pgid := b.proc.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// The renderers and helpers are not our children: wait (briefly) until
	// the init process has reaped them, so none outlives the test.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return
		}
	}
}

// XServer is an Xvfb display started by [Xvfb], stopped at the end of
// the test that started it.
type XServer struct {
	display string
	proc    *daemon
	wm      *daemon
}

// Xvfb starts an X server (Debian's Xvfb) of width×height×24 that
// listens on no TCP port, on a display number it picks itself
// (-displayfd), and waits until it is ready. A missing Xvfb skips the
// test, or fails it under [RequirePeers]. It runs with -noreset: by
// default an X server resets when its last client leaves, and a client
// that connects meanwhile (openbox right after a probe with xdotool, on
// a loaded machine) is refused.
func Xvfb(t testing.TB, width, height int) *XServer {
	t.Helper()
	bin, err := exec.LookPath("Xvfb")
	if err != nil {
		MissingPeer(t, "Xvfb (Debian package xvfb)")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "-screen", "0", fmt.Sprintf("%dx%dx24", width, height), "-nolisten", "tcp", "-noreset", "-displayfd", "3")
	cmd.ExtraFiles = []*os.File{w}
	d, err := startDaemon("Xvfb", cmd, filepath.Join(t.TempDir(), "xvfb.log"))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	x := &XServer{proc: d}
	t.Cleanup(x.Stop)
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if _, err := strconv.Atoi(n); err != nil {
			t.Fatalf("Xvfb reported no display number (%q):\n%s", n, d.logs())
		}
		x.display = ":" + n
	case <-time.After(20 * time.Second):
		t.Fatalf("Xvfb did not report its display within 20 s:\n%s", d.logs())
	}
	return x
}

// Display is the DISPLAY value, ":N".
func (x *XServer) Display() string { return x.display }

// WindowManager starts openbox on the display (xdotool's windowactivate
// needs an EWMH window manager) and waits until it manages the screen.
// A missing openbox skips the test, or fails it under [RequirePeers].
func (x *XServer) WindowManager(t testing.TB) {
	t.Helper()
	bin, err := exec.LookPath("openbox")
	if err != nil {
		MissingPeer(t, "openbox (Debian package openbox)")
	}
	cmd := exec.Command(bin, "--sm-disable")
	cmd.Env = append(os.Environ(), "DISPLAY="+x.display)
	d, err := startDaemon("openbox", cmd, filepath.Join(t.TempDir(), "openbox.log"))
	if err != nil {
		t.Fatal(err)
	}
	x.wm = d
	deadline := time.Now().Add(10 * time.Second)
	for {
		// An EWMH window manager sets _NET_SUPPORTING_WM_CHECK on the root.
		out, _ := x.Command(t, "xprop", "-root", "_NET_SUPPORTING_WM_CHECK")
		if strings.Contains(out, "window id") {
			return
		}
		if d.done() || time.Now().After(deadline) {
			t.Fatalf("openbox did not start on %s:\n%s", x.display, d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Command runs a program on the display (xdotool, xclip, xprop, ...)
// with a 10 s limit and returns its standard output.
func (x *XServer) Command(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+x.display)
	out, err := cmd.Output()
	return string(out), err
}

// Stop ends the window manager and the X server.
func (x *XServer) Stop() {
	if x.wm != nil {
		_ = x.wm.stop(5 * time.Second)
	}
	_ = x.proc.stop(5 * time.Second)
}

// ComputerUseWorker starts the computer-use worker (`aiod computer-use`)
// on display, listening on a port of its own choosing on 127.0.0.1 (the
// address its first log line names: no port is picked before the worker
// binds it), with AIO_API_KEY unset unless env sets it; env adds
// variables. It returns once the worker has logged its address (it
// listens from then on); the process is stopped at cleanup.
func ComputerUseWorker(t testing.TB, display string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(Bin(t, "aiod"), "computer-use")
	cmd.Env = append(os.Environ(), append([]string{"DISPLAY=" + display, "AIO_COMPUTER_USE_LISTEN=127.0.0.1:0", "AIO_API_KEY="}, env...)...)
	return Run(t, cmd, true)
}
