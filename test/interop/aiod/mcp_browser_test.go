package aiod

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// mbItem is one content item of a tool result.
type mbItem struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

// mbCall posts a tools/call on /mcp (plain path; hdr as for rpc, "Host"
// included) to path ("/mcp" plus a query, say) and returns the result's
// items and isError. Anything but a tool result on HTTP 200 fails.
func mbCall(t *testing.T, base, path, name string, args any, hdr ...string) ([]mbItem, bool) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Result *struct {
			Content []mbItem `json:"content"`
			IsError *bool    `json:"isError"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK || r.Result == nil || r.Result.IsError == nil {
		t.Fatalf("%s: HTTP %d, not a tool result (%v)", name, resp.StatusCode, err)
	}
	return r.Result.Content, *r.Result.IsError
}

// mbText is the single text item of a result.
func mbText(t *testing.T, name string, items []mbItem) string {
	t.Helper()
	if len(items) != 1 || items[0].Type != "text" {
		t.Fatalf("%s: want one text item, got %+v", name, items)
	}
	return items[0].Text
}

// mbDeadURL is a loopback URL where nothing listens.
func mbDeadURL(t *testing.T) string { return "http://127.0.0.1:" + freePort(t) }

// workerDown is the tools' text while the computer-use worker cannot be
// reached: the plane's documented message and hint.
const workerDown = "computer-use worker is not available (start computer-use or set AIO_COMPUTER_USE_URL)"

// TestAiodMCPBrowserBare is R6: with no browser and no worker, the three
// browser tools answer isError results on HTTP 200 with a clear text.
func TestAiodMCPBrowserBare(t *testing.T) {
	cdp, _ := url.Parse(mbDeadURL(t))
	d := startAiod(t, []string{"BROWSER_REMOTE_DEBUGGING_HOST=127.0.0.1", "BROWSER_REMOTE_DEBUGGING_PORT=" + cdp.Port(),
		"AIO_COMPUTER_USE_URL=" + mbDeadURL(t), "DISPLAY="})
	items, isErr := mbCall(t, d.URL, "/mcp", "browser_get_info", map[string]any{})
	text := mbText(t, "browser_get_info", items)
	t.Logf("browser_get_info: %s", text)
	if !isErr || !strings.HasPrefix(text, "browser: ") || !strings.Contains(text, "GET /v1/capabilities") {
		t.Errorf("browser_get_info: %v %q", isErr, text)
	}
	items, isErr = mbCall(t, d.URL, "/mcp", "browser_gui_screenshot", map[string]any{})
	if text := mbText(t, "browser_gui_screenshot", items); !isErr || text != workerDown {
		t.Errorf("browser_gui_screenshot: %v %q", isErr, text)
	}
	items, isErr = mbCall(t, d.URL, "/mcp", "browser_gui_execute_action", map[string]any{"action": map[string]any{"action_type": "MOVE_TO", "x": 5, "y": 5}})
	if text := mbText(t, "browser_gui_execute_action", items); !isErr || text != workerDown {
		t.Errorf("browser_gui_execute_action: %v %q", isErr, text)
	}
	// The type is checked before the worker is asked.
	items, isErr = mbCall(t, d.URL, "/mcp", "browser_gui_execute_action", map[string]any{"action": map[string]any{"action_type": "FLY"}})
	if text := mbText(t, "browser_gui_execute_action", items); !isErr || !strings.HasPrefix(text, "Invalid action_type: FLY. Available types: MOVE_TO, DRAG_TO, ") ||
		!strings.HasSuffix(text, ", NODE_SET_VALUE") {
		t.Errorf("FLY: %v %q", isErr, text)
	}
}

// TestAiodMCPBrowserInfo is R31: against a headless Chromium,
// browser_get_info is a JSON text whose cdp_url is built from the /mcp
// request (Host; X-Forwarded-Proto/Host/Prefix; the query kept).
func TestAiodMCPBrowserInfo(t *testing.T) {
	b := harness.Chromium(t, harness.ChromiumOptions{})
	d := startAiod(t, []string{"BROWSER_REMOTE_DEBUGGING_HOST=127.0.0.1", "BROWSER_REMOTE_DEBUGGING_PORT=" + strconv.Itoa(b.Port())})
	ws, err := url.Parse(b.Version(t)["webSocketDebuggerUrl"])
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		CDPURL    *string `json:"cdp_url"`
		UserAgent string  `json:"user_agent"`
		Viewport  struct {
			Width, Height int
		} `json:"viewport"`
	}
	items, isErr := mbCall(t, d.URL, "/mcp", "browser_get_info", map[string]any{})
	text := mbText(t, "browser_get_info", items)
	if isErr || json.Unmarshal([]byte(text), &info) != nil || info.CDPURL == nil {
		t.Fatalf("browser_get_info: %v %s", isErr, text)
	}
	if want := "ws://" + d.Addr + "/cdp" + ws.Path; *info.CDPURL != want || !strings.Contains(info.UserAgent, "Chrome") || info.Viewport.Width <= 0 {
		t.Errorf("info: %s\nwant cdp_url %s", text, want)
	}
	if !regexp.MustCompile(`^ws://127\.0\.0\.1:\d+/cdp/devtools/browser/[0-9a-f-]+$`).MatchString(*info.CDPURL) {
		t.Errorf("cdp_url %q", *info.CDPURL)
	}
	if strings.Contains(text, "vnc_url") {
		t.Errorf("the tool is v2's info, without vnc_url: %s", text)
	}

	items, isErr = mbCall(t, d.URL, "/mcp?api_key=K", "browser_get_info", map[string]any{},
		"X-Forwarded-Proto", "https", "X-Forwarded-Host", "sb.example", "X-Forwarded-Prefix", "/p/")
	text = mbText(t, "browser_get_info", items)
	info.CDPURL = nil
	if isErr || json.Unmarshal([]byte(text), &info) != nil || info.CDPURL == nil ||
		*info.CDPURL != "wss://sb.example/p/cdp"+ws.Path+"?api_key=K" {
		t.Errorf("forwarded: %v %s", isErr, text)
	}
}

// pngSize reads a PNG's IHDR width and height; ok is false when b is not
// a PNG.
func pngSize(b []byte) (w, h int, ok bool) {
	if len(b) < 24 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || string(b[12:16]) != "IHDR" {
		return 0, 0, false
	}
	return int(binary.BigEndian.Uint32(b[16:20])), int(binary.BigEndian.Uint32(b[20:24])), true
}

// TestAiodMCPBrowserDesktop is R42: with Xvfb and the worker, the GUI
// tools work through aiod: the screenshot is one image item of the whole
// display; MOVE_TO answers the 1.x text and moves the pointer; a missing
// or unknown action_type and a field the worker refuses are isError.
func TestAiodMCPBrowserDesktop(t *testing.T) {
	x := harness.Xvfb(t, 1280, 800)
	worker := harness.ComputerUseWorker(t, x.Display()).URL
	d := startAiod(t, []string{"AIO_COMPUTER_USE_URL=" + worker})

	items, isErr := mbCall(t, d.URL, "/mcp", "browser_gui_screenshot", map[string]any{})
	if isErr || len(items) != 1 || items[0].Type != "image" || items[0].MimeType != "image/png" {
		t.Fatalf("screenshot: isError %v, items %d %+v", isErr, len(items), items)
	}
	img, err := base64.StdEncoding.DecodeString(items[0].Data)
	if w, h, ok := pngSize(img); err != nil || !ok || w != 1280 || h != 800 {
		t.Errorf("screenshot: %v, a %dx%d PNG (%v)", err, w, h, ok)
	}

	items, isErr = mbCall(t, d.URL, "/mcp", "browser_gui_execute_action", map[string]any{"action": map[string]any{"action_type": "MOVE_TO", "x": 5, "y": 5}})
	if text := mbText(t, "MOVE_TO", items); isErr || text != `{"status":"success","action_performed":"MOVE_TO"}` {
		t.Errorf("MOVE_TO: %v %q", isErr, text)
	}
	if code, body := get(t, d.URL+"/v2/computer/cursor"); code != 200 || !strings.Contains(body, `"x":5`) || !strings.Contains(body, `"y":5`) {
		t.Errorf("cursor after MOVE_TO 5,5: %d %s", code, body)
	}

	for _, c := range []struct {
		name   string
		action any
		want   string // "" = any text from the worker
	}{
		{"empty", map[string]any{}, "action_type is required"},
		{"unknown", map[string]any{"action_type": "FLY"}, ""},
		{"bad field", map[string]any{"action_type": "WAIT", "duration": 11}, ""},
		{"unknown key", map[string]any{"action_type": "PRESS", "key": "notakey"}, ""},
	} {
		items, isErr := mbCall(t, d.URL, "/mcp", "browser_gui_execute_action", map[string]any{"action": c.action})
		text := mbText(t, c.name, items)
		t.Logf("%s: %s", c.name, text)
		if !isErr || c.want != "" && text != c.want || text == "" || text == workerDown || strings.HasPrefix(text, "{") {
			t.Errorf("%s: %v %q", c.name, isErr, text)
		}
	}
}
