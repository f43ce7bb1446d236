package aiod

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/chromedp/chromedp/remote"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// TestTerminalPage opens the address GET /v1/shell/terminal-url hands
// out in Debian's Chromium, against the aiod binary with a key, as a
// person would: the page asks for the key, the key is typed, and a
// command typed into the terminal runs in the session the address
// names. The emulator's buffer is read through the page, and a
// screenshot is kept (A2C_TERMINAL_SHOT names a file for it).
func TestTerminalPage(t *testing.T) {
	const key = "t3rm-key"
	d := startAiod(t, []string{"AIO_API_KEY=" + key})

	// The page is public (it holds no secret); its socket is not.
	if code, body := get(t, d.URL+"/terminal"); code != 200 || !strings.Contains(body, "terminal/vendor/xterm/xterm.js") {
		t.Fatalf("GET /terminal without the key: %d %s", code, body)
	}
	if code, body := get(t, d.URL+"/v1/shell/ws"); code != 401 {
		t.Fatalf("GET /v1/shell/ws without the key: %d %s", code, body)
	}
	code, body := get(t, d.URL+"/v1/shell/terminal-url", "Authorization", "Bearer "+key)
	var env struct {
		Success bool   `json:"success"`
		Data    string `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &env); code != 200 || err != nil || !env.Success ||
		!strings.HasPrefix(env.Data, d.URL+"/terminal?session_id=") || strings.Contains(env.Data, key) {
		t.Fatalf("terminal-url: %d %s", code, body)
	}
	sid := strings.TrimPrefix(env.Data, d.URL+"/terminal?session_id=")

	b := harness.Chromium(t, harness.ChromiumOptions{})
	actx, acancel := remote.NewAllocator(context.Background(), b.URL())
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\nlogs:\n%s", what, err, d.Logs())
		}
	}
	waitJS := func(what, js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Poll[string](js, chromedp.WithPollingTimeout(20*time.Second),
			chromedp.WithPollingInterval(25*time.Millisecond)))
		if err != nil {
			screen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](termText))
			t.Fatalf("%s: %v\nscreen:\n%s\nlogs:\n%s", what, err, screen, d.Logs())
		}
		return v
	}
	if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride,
		emulation.SetDeviceMetricsOverrideParams{Width: 1000, Height: 600, DeviceScaleFactor: 1}); err != nil {
		t.Fatal(err)
	}

	run("open the page", chromedp.Navigate(env.Data), chromedp.WaitVisible(chromedp.ID("key-input")))
	run("type the key", chromedp.Focus(chromedp.ID("key-input")), chromedp.KeyEvent(key), chromedp.KeyEvent(kb.Enter))
	waitJS("the terminal to show a prompt", `window.aiodTerminal && /\$ *$/.test(`+termText+`.trimEnd()) ? "ok" : ""`)
	// A person types into the emulator: its focused helper textarea takes
	// the text, and Enter is a key press.
	run("type a command", chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")))
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: "echo hi-$((6*7))"}); err != nil {
		t.Fatal(err)
	}
	run("press Enter", chromedp.KeyEvent(kb.Enter))
	screen := waitJS("hi-42 on the screen", `(`+termText+`).split("\n").some(l => l.trim() === "hi-42") ? `+termText+` : ""`)
	if !strings.Contains(screen, "echo hi-$((6*7))") {
		t.Errorf("the typed line is not on the screen:\n%s", screen)
	}
	// The command ran in the session the address names.
	status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`new URLSearchParams(location.search).get("session_id")`))
	if status != sid {
		t.Errorf("the page's session is %q, the address named %q", status, sid)
	}
	code, body = get(t, d.URL+"/v1/shell/sessions", "X-API-Key", key)
	if code != 200 || !strings.Contains(body, `"`+sid+`"`) {
		t.Errorf("sessions: %d %s", code, body)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("A2C_TERMINAL_SHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "terminal.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if http.DetectContentType(shot) != "image/png" {
		t.Errorf("screenshot is not a PNG")
	}

	// The key in the address's fragment (never sent to a server) is
	// taken without asking, and removed from the address at once.
	run("open the page with the key", chromedp.Navigate("about:blank"), chromedp.Navigate(env.Data+"#api_key="+key))
	waitJS("the reattached terminal", `window.aiodTerminal && /hi-42/.test(`+termText+`) ? "ok" : ""`)
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.hash + "|" + document.getElementById("key").hidden`)); v != "|true" {
		t.Errorf("hash and key form after a fragment key: %q", v)
	}
	if strings.Contains(d.Logs(), key) {
		t.Errorf("the key reached the daemon's log:\n%s", d.Logs())
	}
}

// termText is JavaScript reading the emulator's active buffer as text,
// one line per row.
const termText = `(() => { const b = window.aiodTerminal.buffer.active; const out = [];
  for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true));
  return out.join("\n"); })()`
