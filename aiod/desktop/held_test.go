package desktop

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// TestHeldInputReleasedAtStop: a Shift and a left button that clients
// pressed (KEY_DOWN, MOUSE_DOWN) and never released are let go when the
// worker stops, so they do not stick on the display; what was released
// is not pressed again.
func TestHeldInputReleasedAtStop(t *testing.T) {
	if _, err := exec.LookPath("xdotool"); err != nil {
		t.Skip("xdotool not installed (Debian package xdotool)")
	}
	wk, srv := testWorker(t, 320, 200)
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v2/computer/actions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", body, resp.StatusCode)
		}
	}
	c, err := xgb.NewConnDisplay(wk.displayName)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := xproto.Setup(c).DefaultScreen(c).Root
	mask := func() uint16 {
		t.Helper()
		r, err := xproto.QueryPointer(c, root).Reply()
		if err != nil {
			t.Fatal(err)
		}
		return r.Mask
	}
	post(`{"action_type":"KEY_DOWN","key":"shift"}`)
	post(`{"action_type":"MOUSE_DOWN","button":"left"}`)
	post(`{"action_type":"KEY_DOWN","key":"ctrl"}`)
	post(`{"action_type":"KEY_UP","key":"ctrl"}`)
	if m := mask(); m&xproto.ModMaskShift == 0 || m&xproto.KeyButMaskButton1 == 0 {
		t.Fatalf("mask %#x before the stop: want Shift and Button1 held", m)
	}
	srv.Close()
	wk.close()
	if m := mask(); m&(xproto.ModMaskShift|xproto.ModMaskControl|xproto.KeyButMaskButton1) != 0 {
		t.Errorf("mask %#x after the stop: Shift, Control and Button1 should all be up", m)
	}
	if keys, btns := wk.held.take(); len(keys)+len(btns) != 0 {
		t.Errorf("still held after the stop: %v %v", keys, btns)
	}
}

// TestWindowActionTargets: WINDOW_ACTIVATE and WINDOW_MINIMIZE act on
// windows only: the root window, a pixmap and an unknown id are 404.
func TestWindowActionTargets(t *testing.T) {
	wk, srv := testWorker(t, 320, 200)
	c, err := xgb.NewConnDisplay(wk.displayName)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	scr := xproto.Setup(c).DefaultScreen(c)
	pix, err := xproto.NewPixmapId(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.CreatePixmapChecked(c, scr.RootDepth, pix, xproto.Drawable(scr.Root), 8, 8).Check(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{uint32(scr.Root), uint32(pix), 0x7ffffff} {
		for _, typ := range []string{"WINDOW_ACTIVATE", "WINDOW_MINIMIZE"} {
			body := fmt.Sprintf(`{"action_type":%q,"window_id":"%d"}`, typ, id)
			resp, err := http.Post(srv.URL+"/v2/computer/actions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s: %d, want 404", body, resp.StatusCode)
			}
		}
	}
}
