package a2c

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// baPage is the fixture page: a title, a line of text and a button that
// fills most of the window; a click turns it green and changes the text.
const baPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>aiod desktop</title>
<style>
html,body{margin:0;height:100%;font-family:"Liberation Sans",Arial,sans-serif;background:#f4f6fb;color:#1d2433}
main{display:flex;flex-direction:column;align-items:center;justify-content:center;height:100%;gap:28px}
h1{font-size:40px;margin:0;font-weight:600}
p{margin:0;font-size:20px;color:#5a6478}
button{width:70vw;height:45vh;font-size:44px;border:0;border-radius:24px;background:#2f6fed;color:#fff;cursor:pointer;box-shadow:0 8px 24px rgba(47,111,237,.35)}
body.clicked button{background:#17a34a;box-shadow:0 8px 24px rgba(23,163,74,.35)}
</style></head>
<body><main>
<h1>aiod desktop</h1>
<p id="status">An Agent drives this page through the sandbox's GUI tools.</p>
<button id="go" onclick="document.body.classList.add('clicked');document.getElementById('status').textContent='Clicked by the Agent';this.textContent='Done'">Click me</button>
</main></body></html>`

// baEval evaluates expr (by value) in the first page target of the
// browser at cdp, over its own WebSocket, and decodes the value into v.
func baEval(t *testing.T, cdp, expr string, v any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cdp+"/json/list", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	var targets []struct{ Type, URL, WebSocketDebuggerURL string }
	err = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	if err != nil {
		return err
	}
	ws := ""
	for _, tg := range targets {
		if tg.Type == "page" && strings.HasPrefix(tg.URL, "http://127.0.0.1") {
			ws = tg.WebSocketDebuggerURL
			break
		}
	}
	if ws == "" {
		return fmt.Errorf("no page of the fixture among %d targets", len(targets))
	}
	c, _, err := websocket.DefaultDialer.DialContext(ctx, ws, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetReadDeadline(deadline)
	_ = c.SetWriteDeadline(deadline)
	if err := c.WriteJSON(map[string]any{"id": 1, "method": "Runtime.evaluate",
		"params": map[string]any{"expression": expr, "returnByValue": true}}); err != nil {
		return err
	}
	for {
		var m struct {
			ID     int `json:"id"`
			Result struct {
				Result struct {
					Value json.RawMessage `json:"value"`
				} `json:"result"`
				ExceptionDetails json.RawMessage `json:"exceptionDetails"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := c.ReadJSON(&m); err != nil {
			return err
		}
		if m.ID != 1 {
			continue
		}
		if m.Error != nil || m.Result.ExceptionDetails != nil {
			return fmt.Errorf("evaluate %q: %s%s", expr, m.Error, m.Result.ExceptionDetails)
		}
		return json.Unmarshal(m.Result.Result.Value, v)
	}
}

// baImage is the one image item of a result, decoded; it fails unless the
// result is exactly one PNG of the display's size.
func baImage(t *testing.T, res *smcp.CallToolResult, w, h int) []byte {
	t.Helper()
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("screenshot: isError %v, %d items: %s", res.IsError, len(res.Content), res.Content)
	}
	var item struct{ Type, Data, MimeType string }
	_ = json.Unmarshal(res.Content[0], &item)
	img, err := base64.StdEncoding.DecodeString(item.Data)
	if item.Type != "image" || item.MimeType != "image/png" || err != nil || len(img) < 24 || !bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot: type %q mimeType %q, %d bytes (%v)", item.Type, item.MimeType, len(img), err)
	}
	if gw, gh := int(binary.BigEndian.Uint32(img[16:20])), int(binary.BigEndian.Uint32(img[20:24])); gw != w || gh != h {
		t.Fatalf("screenshot is %dx%d, want the display's %dx%d", gw, gh, w, h)
	}
	return img
}

// baPixel is the colour of the PNG img at x, y.
func baPixel(t *testing.T, img []byte, x, y int) [3]uint8 {
	t.Helper()
	m, err := png.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	r, g, b, _ := m.At(x, y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

// baNear reports whether c is within a small distance of r, g, b.
func baNear(c [3]uint8, r, g, b uint8) bool {
	d := func(a, b uint8) int { return max(int(a), int(b)) - min(int(a), int(b)) }
	return d(c[0], r) <= 8 && d(c[1], g) <= 8 && d(c[2], b) <= 8
}

// TestBrowserAgentDesktop: an Agent in a2c up's office looks at a desktop
// (Xvfb, openbox, the computer-use worker and a headful Chromium showing
// the fixture page) with sandbox__browser_gui_screenshot, clicks the
// page's button with sandbox__browser_gui_execute_action at coordinates
// read over CDP, and the page changes. The office's tools answer as /mcp
// does: the 1.x action text, isError for a missing action_type, and
// browser_get_info with the browser's own DevTools URL (no /mcp request
// in an office). With A2C_README_SHOT set, the screenshot the Agent got
// after its click is written there (docs/img/desktop.png).
func TestBrowserAgentDesktop(t *testing.T) {
	requireLinux(t)
	const w, h = 1280, 800
	x := harness.Xvfb(t, w, h)
	x.WindowManager(t)
	page := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = rw.Write([]byte(baPage))
	}))
	t.Cleanup(page.Close)
	b := harness.Chromium(t, harness.ChromiumOptions{Display: x.Display(),
		Args: []string{"--test-type", "--window-position=0,0", fmt.Sprintf("--window-size=%d,%d", w, h), page.URL + "/"}})
	worker := harness.ComputerUseWorker(t, x.Display()).URL

	// The page is up and its window fills the screen: the button's centre
	// on the screen is its box's centre plus the window's content offset.
	var at []float64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var g struct {
			Ready                                bool
			SX, SY, OW, OH, IW, IH, SW, SH, X, Y float64
		}
		err := baEval(t, b.URL(), `(() => { const r = document.getElementById('go').getBoundingClientRect();
			return {Ready: document.readyState === 'complete', SX: screenX, SY: screenY, OW: outerWidth, OH: outerHeight,
				IW: innerWidth, IH: innerHeight, SW: screen.width, SH: screen.height, X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`, &g)
		if err == nil && g.Ready && g.OW >= g.SW-8 && g.OH >= g.SH-8 {
			at = []float64{g.SX + (g.OW-g.IW)/2 + g.X, g.SY + (g.OH - g.IH) + g.Y}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fixture page does not fill the screen (%v, %+v):\n%s", err, g, b.Logs())
		}
	}
	t.Logf("the button's centre is at %v on the screen", at)

	t.Setenv("AIO_COMPUTER_USE_URL", worker)
	t.Setenv("BROWSER_REMOTE_DEBUGGING_HOST", "127.0.0.1")
	t.Setenv("BROWSER_REMOTE_DEBUGGING_PORT", strconv.Itoa(b.Port()))
	u := startUp(t)
	a := upAgent(t, u, agent.Options{})
	call := func(tool string, params any) *smcp.CallToolResult {
		t.Helper()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "sandbox", Tool: tool, Params: params, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}

	// The Agent sees the blue button below its label.
	px, py := int(at[0]), int(at[1])+100
	if c := baPixel(t, baImage(t, call("sandbox__browser_gui_screenshot", map[string]any{}), w, h), px, py); !baNear(c, 0x2f, 0x6f, 0xed) {
		t.Fatalf("the screenshot's pixel at %d,%d is %v, not the button's blue", px, py, c)
	}

	res := call("sandbox__browser_gui_execute_action", map[string]any{"action": map[string]any{"action_type": "CLICK", "x": at[0], "y": at[1]}})
	if text := toolText(t, res); res.IsError || text != `{"status":"success","action_performed":"CLICK"}` {
		t.Fatalf("CLICK at %v: %v %s", at, res.IsError, text)
	}
	var status string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := baEval(t, b.URL(), `document.body.classList.contains('clicked') ? document.getElementById('status').textContent : ''`, &status); err == nil && status != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not change after the click at %v", at)
		}
	}
	if status != "Clicked by the Agent" {
		t.Errorf("status line %q", status)
	}

	// ... and then the green one (once Chromium has painted the change).
	var shot []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		shot = baImage(t, call("sandbox__browser_gui_screenshot", map[string]any{}), w, h)
		c := baPixel(t, shot, px, py)
		if baNear(c, 0x17, 0xa3, 0x4a) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the screenshots still show %v at %d,%d, not the clicked button's green", c, px, py)
		}
	}
	if path := os.Getenv("A2C_README_SHOT"); path != "" {
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	res = call("sandbox__browser_gui_execute_action", map[string]any{"action": map[string]any{}})
	if text := toolText(t, res); !res.IsError || text != "action_type is required" {
		t.Errorf("empty action: %v %q", res.IsError, text)
	}
	res = call("sandbox__browser_get_info", map[string]any{})
	var info struct {
		CDPURL string `json:"cdp_url"`
	}
	if text := toolText(t, res); res.IsError || json.Unmarshal([]byte(text), &info) != nil || info.CDPURL != b.Version(t)["webSocketDebuggerUrl"] {
		t.Errorf("browser_get_info: %v %s\nwant cdp_url %s", res.IsError, text, b.Version(t)["webSocketDebuggerUrl"])
	}
}
