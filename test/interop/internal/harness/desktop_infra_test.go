package harness

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// groupGone reports whether no process of the process group pgid is left.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// TestChromium: a headless Chromium answers on its DevTools port with a
// page target, and stopping it leaves no process of its group behind.
func TestChromium(t *testing.T) {
	b := Chromium(t, ChromiumOptions{})
	v := b.Version(t)
	if !strings.Contains(v["User-Agent"], "HeadlessChrome") || !strings.HasPrefix(v["webSocketDebuggerUrl"], "ws://127.0.0.1:") {
		t.Fatalf("/json/version: %v", v)
	}
	resp, err := http.Get(b.URL() + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	var targets []struct{ Type, URL string }
	err = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	for _, tg := range targets {
		if tg.Type == "page" {
			pages++
		}
	}
	if pages == 0 {
		t.Fatalf("no page target: %+v", targets)
	}
	pgid := b.PID()
	b.Stop()
	if !groupGone(pgid) {
		t.Fatal("processes of Chromium's group are left after Stop")
	}
}

// TestXvfb: an X display of the asked size with a window manager, and a
// headful Chromium window on it that xdotool finds; all gone after Stop.
func TestXvfb(t *testing.T) {
	x := Xvfb(t, 1024, 768)
	if out, err := x.Command(t, "xdotool", "getdisplaygeometry"); err != nil || strings.TrimSpace(out) != "1024 768" {
		t.Fatalf("xdotool getdisplaygeometry on %s: %q %v", x.Display(), out, err)
	}
	x.WindowManager(t)
	b := Chromium(t, ChromiumOptions{Display: x.Display()})
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := x.Command(t, "xdotool", "search", "--onlyvisible", "--name", "Chromium")
		if strings.TrimSpace(out) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no visible Chromium window on %s; chromium logs:\n%s", x.Display(), b.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Stop()
	pgid := x.proc.cmd.Process.Pid
	x.Stop()
	if !groupGone(pgid) {
		t.Fatal("Xvfb's process group is left after Stop")
	}
}
