package aiod

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// TestAiodComputerUseBare is the digest's bare fixture for the
// computer-use plane (R3–R5): with no worker, every /v2/computer/* route
// and both v1 aliases answer the documented 503 envelope, capabilities
// say the plane is absent and why, and /v2/browser/actions does not
// exist.
func TestAiodComputerUseBare(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	worker := "http://" + l.Addr().String() // nothing listens there
	l.Close()
	p := startAiod(t, []string{"AIO_COMPUTER_USE_URL=" + worker, "DISPLAY="})
	want := `{"success":false,"message":"computer-use worker is not available","data":null,"hint":"start computer-use or set AIO_COMPUTER_USE_URL"}`
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v2/computer/info", ""},
		{"GET", "/v2/computer/screenshot", ""},
		{"POST", "/v2/computer/actions?include_screenshot=true", `{"action_type":"MOVE_TO","x":1,"y":2}`},
		{"POST", "/v2/computer/actions/batch", `{"actions":[{"action_type":"WAIT","duration":0.1}]}`},
		{"GET", "/v2/computer/cursor", ""},
		{"GET", "/v2/computer/clipboard", ""},
		{"GET", "/v2/computer/windows", ""},
		{"GET", "/v2/computer/accessibility", ""},
		{"GET", "/v2/computer/accessibility/nodes", ""},
		{"POST", "/v2/computer/record", `{"action":"status"}`},
		{"POST", "/v1/browser/actions", `{"action_type":"WAIT","duration":0.1}`},
		{"POST", "/v1/display/record", `{"action":"status"}`},
	} {
		req, _ := http.NewRequest(r.method, p.URL+r.path, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s %s: %d %s", r.method, r.path, resp.StatusCode, b)
		}
	}
	if r := planeDo(t, "POST", p.URL+"/v2/browser/actions", `{"action_type":"WAIT","duration":0.1}`); r.status != http.StatusNotFound {
		t.Errorf("POST /v2/browser/actions: %d %s, want 404", r.status, r.raw)
	}
	code, body := get(t, p.URL+"/v1/capabilities?refresh=true")
	var caps struct {
		Data struct {
			Computer struct {
				Status   string   `json:"status"`
				Missing  []string `json:"missing"`
				Warnings []string `json:"warnings"`
				Actions  *bool    `json:"actions"`
			} `json:"computer"`
		} `json:"data"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &caps) != nil {
		t.Fatalf("capabilities: %d %s", code, body)
	}
	c := caps.Data.Computer
	if c.Status != "absent" || len(c.Missing) != 1 || c.Missing[0] != "computer-use" || c.Actions == nil || *c.Actions ||
		len(c.Warnings) != 1 || c.Warnings[0] != "computer-use worker probe failed: error sending request for url ("+worker+"/capabilities)" {
		t.Errorf("capabilities.computer: %+v", c)
	}
}

// duData is the envelope's data re-encoded with sorted keys, to compare
// whole.
func duData(r planeReply) string {
	b, _ := json.Marshal(r.env["data"])
	return string(b)
}

// TestAiodComputerUseCLI: --help, and the start errors of the worker (no
// DISPLAY, an X server that cannot be reached) exit 1 with a clear line.
func TestAiodComputerUseCLI(t *testing.T) {
	code, out, _ := runAiod(t, nil, "computer-use", "--help")
	if code != 0 || !strings.Contains(out, "AIO_COMPUTER_USE_LISTEN") || !strings.Contains(out, "0.0.0.0:18100") {
		t.Errorf("--help: %d %q", code, out)
	}
	code, _, errOut := runAiod(t, []string{"DISPLAY="}, "computer-use")
	if code != 1 || !strings.Contains(errOut, "DISPLAY is not set") {
		t.Errorf("no DISPLAY: %d %q", code, errOut)
	}
	code, _, errOut = runAiod(t, []string{"DISPLAY=:4242", "AIO_COMPUTER_USE_LISTEN=127.0.0.1:0"}, "computer-use")
	if code != 1 || !strings.Contains(errOut, "cannot reach the X display :4242") {
		t.Errorf("unreachable display: %d %q", code, errOut)
	}
	code, _, errOut = runAiod(t, nil, "computer-use", "--port", "1")
	if code != 1 || !strings.Contains(errOut, "takes no arguments") {
		t.Errorf("an argument: %d %q", code, errOut)
	}
}

// TestAiodComputerUseWorkerAuth: the worker's own routes. /healthz and
// /openapi.json are public; /capabilities, /metrics and /v2/computer/*
// need AIO_API_KEY when it is set (Bearer, x-api-key or ?api_key=).
func TestAiodComputerUseWorkerAuth(t *testing.T) {
	x := harness.Xvfb(t, 640, 480)
	w := harness.ComputerUseWorker(t, x.Display(), "AIO_API_KEY=k3y")
	planeExpect(t, 200, "GET", w.URL+"/healthz", "")
	doc := planeExpect(t, 200, "GET", w.URL+"/openapi.json", "")
	if paths, _ := doc.env["paths"].(map[string]any); paths["/v2/computer/actions/batch"] == nil || paths["/capabilities"] == nil {
		t.Errorf("openapi.json paths: %v", doc.env["paths"])
	}
	for _, p := range []string{"/capabilities", "/metrics", "/v2/computer/info"} {
		r := planeExpect(t, 401, "GET", w.URL+p, "")
		if strings.TrimSpace(string(r.raw)) != `{"success":false,"message":"Unauthorized","data":null,"hint":null}` {
			t.Errorf("%s without the key: %s", p, r.raw)
		}
		planeExpect(t, 401, "GET", w.URL+p, "", "Authorization", "Bearer nope")
	}
	caps := planeExpect(t, 200, "GET", w.URL+"/capabilities", "", "Authorization", "Bearer k3y")
	want := `{"schema_version":1,"status":"ready","provider":"external","display":"` + x.Display() + `","screenshot":true,"actions":true,"clipboard":true,"recording":true,"accessibility":false,"accessibility_backend":null,"resolution":{"width":640,"height":480},"missing":[],"warnings":[]}`
	if strings.TrimSpace(string(caps.raw)) != want {
		t.Errorf("capabilities:\n got %s\nwant %s", caps.raw, want)
	}
	m := planeExpect(t, 200, "GET", w.URL+"/metrics", "", "x-api-key", "k3y")
	if !strings.Contains(string(m.raw), `computer_use_requests_total{code="200",route="GET /capabilities"} 1`) {
		t.Errorf("metrics: %s", m.raw)
	}
	planeExpect(t, 200, "GET", w.URL+"/v2/computer/info?api_key=k3y", "")
}

// duFixture serves the page of the desktop tests: a titled page with an
// autofocused text field that reports its value to the server.
func duFixture(t *testing.T) (*httptest.Server, <-chan string) {
	values := make(chan string, 64)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<!doctype html><html><head><meta charset="utf-8"><title>Desk Fixture</title></head>
<body><input id="f" autofocus oninput="fetch('/value?v='+encodeURIComponent(this.value))"></body></html>`)
	})
	mux.HandleFunc("GET /value", func(w http.ResponseWriter, r *http.Request) {
		select {
		case values <- r.URL.Query().Get("v"):
		default:
		}
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, values
}

// TestAiodComputerUse is the digest's desktop fixture (R32–R41): Xvfb
// with openbox, the worker (`aiod computer-use`), aiod forwarding to it,
// and a headful Chromium window holding a focused text field.
func TestAiodComputerUse(t *testing.T) {
	x := harness.Xvfb(t, 1280, 800)
	x.WindowManager(t)
	w := harness.ComputerUseWorker(t, x.Display())
	a := startAiod(t, []string{"AIO_COMPUTER_USE_URL=" + w.URL, "DISPLAY=" + x.Display()})
	cu := a.URL + "/v2/computer"
	ok := func(typ string) string {
		return `{"success":true,"message":"Operation successful","data":{"status":"success","action_performed":"` + typ + `"},"hint":null,"status":"success","action_performed":"` + typ + `"}`
	}

	t.Run("R32 info", func(t *testing.T) {
		r := planeExpect(t, 200, "GET", cu+"/info", "")
		want := `{"available":true,"capabilities":{"actions":true,"clipboard":true,"recording":true,"screenshot":true},"display":"` + x.Display() + `","screen_resolution":{"height":800,"width":1280},"warnings":[],"xauthority":null}`
		if r.env["success"] != true || duData(r) != want {
			t.Errorf("info: %s", r.raw)
		}
	})

	t.Run("R33 screenshot", func(t *testing.T) {
		r := planeExpect(t, 200, "GET", cu+"/screenshot", "")
		pw, ph, ok := pngSize(r.raw)
		if !ok {
			t.Fatalf("not a PNG: %.32q", r.raw)
		}
		if r.header.Get("Content-Type") != "image/png" || strconv.Itoa(pw) != r.header.Get("X-Image-Width") || strconv.Itoa(ph) != r.header.Get("X-Image-Height") ||
			r.header.Get("X-Screen-Width") != "1280" || r.header.Get("X-Screen-Height") != "800" || pw != 1280 || ph != 800 {
			t.Errorf("screenshot %dx%d, headers %v", pw, ph, r.header)
		}
	})

	t.Run("R34 move and cursor", func(t *testing.T) {
		r := planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"MOVE_TO","x":100,"y":200}`)
		if got := strings.TrimSpace(string(r.raw)); got != ok("MOVE_TO") {
			t.Errorf("MOVE_TO: %s", got)
		}
		c := planeExpect(t, 200, "GET", cu+"/cursor", "")
		if got := strings.TrimSpace(string(c.raw)); got != `{"success":true,"message":"Operation successful","data":{"x":100,"y":200},"hint":null}` {
			t.Errorf("cursor: %s", got)
		}
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"MOVE_REL","x_offset":-50,"y_offset":25}`)
		if c := planeExpect(t, 200, "GET", cu+"/cursor", ""); duData(c) != `{"x":50,"y":225}` {
			t.Errorf("cursor after MOVE_REL: %s", c.raw)
		}
		r = planeExpect(t, 422, "POST", cu+"/actions", `{"action_type":"MOVE_REL","x_offset":-51,"y_offset":0}`)
		if !strings.Contains(string(r.raw), "leaves the screen") {
			t.Errorf("MOVE_REL off screen: %s", r.raw)
		}
	})

	t.Run("R35 include_screenshot", func(t *testing.T) {
		for _, u := range []string{cu + "/actions?include_screenshot=true", a.URL + "/v1/browser/actions?include_screenshot=true"} {
			r := planeExpect(t, 200, "POST", u, `{"action_type":"WAIT","duration":0.1}`)
			s, _ := r.env["screenshot"].(string)
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil || r.env["action_performed"] != "WAIT" || r.env["status"] != "success" {
				t.Fatalf("%s: %.300s", u, r.raw)
			}
			if pw, ph, ok := pngSize(b); !ok || pw != 1280 || ph != 800 {
				t.Errorf("%s: screenshot %dx%d", u, pw, ph)
			}
			if _, has := r.env["screenshot_error"]; has {
				t.Errorf("%s: screenshot_error with a screenshot", u)
			}
		}
		r := planeExpect(t, 200, "POST", a.URL+"/v1/browser/actions", `{"action_type":"MOVE_TO","x":5,"y":5}`)
		if got := strings.TrimSpace(string(r.raw)); got != ok("MOVE_TO") {
			t.Errorf("v1 MOVE_TO: %s", got)
		}
	})

	t.Run("R36 refusals", func(t *testing.T) {
		for _, tc := range []struct {
			body   string
			status int
			loc    string
		}{
			{`{"action_type":"WAIT","duration":11}`, 422, "body.duration"},
			{`{"action_type":"SCROLL","dy":101}`, 422, "body.dy"},
			{`{"action_type":"TYPING","text":"é","use_clipboard":false}`, 400, ""},
			{`{"action_type":"PRESS","key":"notakey"}`, 422, "body.key"},
			{`{"action_type":"HOTKEY","keys":[]}`, 422, "body.keys"},
			{`{"action_type":"HOTKEY","keys":["ctrl","hyper","nope"]}`, 422, "body.keys.2"},
			{`{"action_type":"FLY"}`, 422, "body.action_type"},
			{`{"x":1}`, 422, "body.action_type"},
			{`{"action_type":"CLICK","x":1280,"y":10}`, 422, "body.x"},
			{`{"action_type":"CLICK","num_clicks":4}`, 422, "body.num_clicks"},
			{`{"action_type":"SCROLL"}`, 422, "body.dy"},
		} {
			r := planeExpect(t, tc.status, "POST", cu+"/actions", tc.body)
			if tc.status == 400 {
				if got := strings.TrimSpace(string(r.raw)); got != `{"success":false,"message":"TYPING with use_clipboard false types ASCII text only; use the clipboard for other characters","data":null,"hint":"set use_clipboard to true"}` {
					t.Errorf("%s: %s", tc.body, got)
				}
				continue
			}
			var v struct {
				Success bool   `json:"success"`
				Message string `json:"message"`
				Data    any    `json:"data"`
				Errors  []struct {
					Location []string `json:"location"`
					Message  string   `json:"message"`
					Type     string   `json:"type"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.raw, &v); err != nil || v.Success || v.Message != "Request data validation failed" || v.Data != nil ||
				len(v.Errors) != 1 || strings.Join(v.Errors[0].Location, ".") != tc.loc || v.Errors[0].Message == "" {
				t.Errorf("%s: %s", tc.body, r.raw)
			}
		}
	})

	t.Run("R37 batch", func(t *testing.T) {
		item := `{"action_type":"MOVE_TO","x":10,"y":10}`
		r := planeExpect(t, 422, "POST", cu+"/actions/batch", `{"actions":[`+strings.TrimSuffix(strings.Repeat(item+",", 51), ",")+`]}`)
		if !strings.Contains(string(r.raw), `"location":["body","actions"]`) {
			t.Errorf("51 actions: %s", r.raw)
		}
		wait := `{"action_type":"WAIT","duration":10}`
		planeExpect(t, 422, "POST", cu+"/actions/batch", `{"actions":[`+wait+","+wait+`,{"action_type":"WAIT","duration":1}]}`)
		planeExpect(t, 422, "POST", cu+"/actions/batch", `{"actions":[`+item+`,{"action_type":"PRESS","key":"nope"}]}`)
		// 50 actions run, in order
		r = planeExpect(t, 200, "POST", cu+"/actions/batch", `{"actions":[`+strings.TrimSuffix(strings.Repeat(`{"action_type":"MOVE_REL","x_offset":1,"y_offset":0},`, 49), ",")+`,{"action_type":"MOVE_TO","x":300,"y":301}]}`)
		if p, _ := r.env["data"].(map[string]any)["performed"].([]any); len(p) != 50 || r.env["success"] != true {
			t.Errorf("50 actions: %.300s", r.raw)
		}
		if c := planeExpect(t, 200, "GET", cu+"/cursor", ""); duData(c) != `{"x":300,"y":301}` {
			t.Errorf("cursor after the batch: %s", c.raw)
		}
		// a run-time failure at index 1 (a window that does not exist)
		r = planeExpect(t, 200, "POST", cu+"/actions/batch", `{"actions":[{"action_type":"WAIT","duration":0.1},{"action_type":"WINDOW_ACTIVATE","window_id":"123456789"},`+item+`],"include_screenshot":true}`)
		var v struct {
			Success bool   `json:"success"`
			Message string `json:"message"`
			Data    struct {
				Performed       []string `json:"performed"`
				FailedIndex     *int     `json:"failed_index"`
				Error           *string  `json:"error"`
				Screenshot      *string  `json:"screenshot"`
				ScreenshotError *string  `json:"screenshot_error"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.raw, &v); err != nil || v.Success || v.Data.FailedIndex == nil || *v.Data.FailedIndex != 1 ||
			len(v.Data.Performed) != 1 || v.Data.Performed[0] != "WAIT" || v.Data.Error == nil || !strings.Contains(*v.Data.Error, "123456789") ||
			v.Data.Screenshot == nil || v.Data.ScreenshotError != nil {
			t.Fatalf("failure at 1: %.400s", r.raw)
		}
		b, _ := base64.StdEncoding.DecodeString(*v.Data.Screenshot)
		if _, _, ok := pngSize(b); !ok {
			t.Errorf("failure at 1: the screenshot is not a PNG: %.32q", b)
		}
		// without a screenshot, both keys are null
		r = planeExpect(t, 200, "POST", cu+"/actions/batch", `{"actions":[`+item+`]}`)
		if duData(r) != `{"error":null,"failed_index":null,"performed":["MOVE_TO"],"screenshot":null,"screenshot_error":null}` || r.env["success"] != true {
			t.Errorf("one action: %s", r.raw)
		}
	})

	page, values := duFixture(t)
	harness.Chromium(t, harness.ChromiumOptions{Display: x.Display(), Args: []string{"--new-window", page.URL + "/"}})
	var win map[string]any
	waitUntil(t, 30*time.Second, "the Chromium window in GET windows", func() bool {
		r := planeExpect(t, 200, "GET", cu+"/windows", "")
		ws, _ := r.env["data"].(map[string]any)["windows"].([]any)
		for _, it := range ws {
			m := it.(map[string]any)
			if m["title"] == "Desk Fixture - Chromium" {
				win = m
				return true
			}
		}
		return false
	})

	t.Run("R39 windows", func(t *testing.T) {
		r := planeExpect(t, 200, "GET", cu+"/windows", "")
		if id, _ := r.env["data"].(map[string]any)["snapshot_id"].(string); id == "" {
			t.Errorf("snapshot_id: %s", r.raw)
		}
		b, _ := win["bounds"].(map[string]any)
		if pid, _ := win["process_id"].(float64); pid <= 0 || b == nil || b["width"].(float64) <= 0 || win["minimized"] != false {
			t.Errorf("window: %v", win)
		}
		id := win["window_id"].(string)
		r = planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"WINDOW_ACTIVATE","window_id":"`+id+`"}`)
		if strings.TrimSpace(string(r.raw)) != ok("WINDOW_ACTIVATE") {
			t.Errorf("activate: %s", r.raw)
		}
		// a window that existed and was closed
		closed := duClosedWindow(t, x.Display())
		r = planeExpect(t, 404, "POST", cu+"/actions", `{"action_type":"WINDOW_ACTIVATE","window_id":"`+closed+`"}`)
		if r.env["success"] != false || !strings.Contains(r.env["message"].(string), "does not exist") {
			t.Errorf("closed window: %s", r.raw)
		}
		planeExpect(t, 404, "POST", cu+"/actions", `{"action_type":"WINDOW_MINIMIZE","window_id":"`+closed+`"}`)
		planeExpect(t, 422, "POST", cu+"/actions", `{"action_type":"WINDOW_ACTIVATE","window_id":"chromium"}`)
	})

	t.Run("R38 clipboard and typing", func(t *testing.T) {
		r := planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"SET_CLIPBOARD","text":"héllo"}`)
		if strings.TrimSpace(string(r.raw)) != ok("SET_CLIPBOARD") {
			t.Errorf("SET_CLIPBOARD: %s", r.raw)
		}
		c := planeExpect(t, 200, "GET", cu+"/clipboard", "")
		if got := strings.TrimSpace(string(c.raw)); got != `{"success":true,"message":"Operation successful","data":{"format":"text","text":"héllo"},"hint":null}` {
			t.Errorf("clipboard: %s", got)
		}
		// the field has the focus once its window is active
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"WINDOW_ACTIVATE","window_id":"`+win["window_id"].(string)+`"}`)
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"WAIT","duration":0.3}`)
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"TYPING","text":"héllo"}`)
		duAwaitValue(t, values, "héllo")
		// ASCII typed key by key, then keys and a hotkey
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"TYPING","text":" Ada","use_clipboard":false}`)
		duAwaitValue(t, values, "héllo Ada")
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"PRESS","key":"backspace"}`)
		duAwaitValue(t, values, "héllo Ad")
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"HOTKEY","keys":["ctrl","a"]}`)
		planeExpect(t, 200, "POST", cu+"/actions", `{"action_type":"PRESS","key":"delete"}`)
		duAwaitValue(t, values, "")
	})

	t.Run("R40 record", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "sub", "dir", "rec.mp4")
		r := planeExpect(t, 200, "POST", cu+"/record", `{"action":"start","fps":10,"save_path":"`+path+`"}`)
		d := r.env["data"].(map[string]any)
		if d["status"] != "recording" || d["save_path"] != path || d["file_size_bytes"] != nil {
			t.Fatalf("start: %s", r.raw)
		}
		r = planeExpect(t, 409, "POST", cu+"/record", `{"action":"start"}`)
		if r.env["message"] != "a recording is already running" {
			t.Errorf("second start: %s", r.raw)
		}
		waitUntil(t, 10*time.Second, "a recording of 1 s", func() bool {
			r := planeExpect(t, 200, "POST", a.URL+"/v1/display/record", `{"action":"status"}`)
			d := r.env["data"].(map[string]any)
			return d["status"] == "recording" && d["duration"].(float64) > 1
		})
		r = planeExpect(t, 200, "POST", cu+"/record", `{"action":"stop"}`)
		d = r.env["data"].(map[string]any)
		fi, err := os.Stat(path)
		if d["status"] != "stopped" || d["duration"].(float64) <= 1 || err != nil || d["file_size_bytes"] != float64(fi.Size()) || fi.Size() == 0 {
			t.Errorf("stop: %s (%v)", r.raw, err)
		}
		// max_duration ends it by itself
		path2 := filepath.Join(dir, "short.mp4")
		planeExpect(t, 200, "POST", cu+"/record", `{"action":"start","max_duration":1,"fps":5,"width":640,"height":400,"save_path":"`+path2+`"}`)
		waitUntil(t, 15*time.Second, "the recording to end at max_duration", func() bool {
			r := planeExpect(t, 200, "POST", cu+"/record", `{"action":"status"}`)
			return r.env["data"].(map[string]any)["status"] == "stopped"
		})
		if fi, err := os.Stat(path2); err != nil || fi.Size() == 0 {
			t.Errorf("short recording: %v", err)
		}
		r = planeExpect(t, 400, "POST", cu+"/record", `{"action":"start","save_path":"/proc/none/rec.mp4"}`)
		if r.env["message"] != "save_path is not writable: /proc/none/rec.mp4" {
			t.Errorf("unwritable: %s", r.raw)
		}
		for _, b := range []string{`{"action":"rewind"}`, `{}`, `{"action":"start","fps":61}`, `{"action":"start","max_duration":601}`, `{"action":"start","crf":52}`, `{"action":"start","width":1281}`} {
			planeExpect(t, 422, "POST", cu+"/record", b)
		}
	})

	t.Run("R41 accessibility", func(t *testing.T) {
		for _, p := range []string{"/accessibility", "/accessibility/nodes?node_id=a::1.2:/x", "/accessibility?scope=desktop"} {
			r := planeExpect(t, 501, "GET", cu+p, "")
			if duData(r) != `{"accessibility_backend":null}` || r.env["success"] != false {
				t.Errorf("%s: %s", p, r.raw)
			}
		}
		r := planeExpect(t, 501, "POST", cu+"/actions", `{"action_type":"NODE_FOCUS","node_id":"a::1.2:/x"}`)
		if duData(r) != `{"accessibility_backend":null}` {
			t.Errorf("NODE_FOCUS: %s", r.raw)
		}
		c := planeExpect(t, 200, "GET", a.URL+"/v1/capabilities?refresh=true", "")
		comp, _ := c.env["data"].(map[string]any)["computer"].(map[string]any)
		if comp["status"] != "ready" || comp["accessibility"] != false || comp["accessibility_backend"] != nil || comp["actions"] != true ||
			comp["display"] != x.Display() {
			t.Errorf("capabilities.computer: %v", comp)
		}
	})
}

// duAwaitValue waits until the fixture's field reports want.
func duAwaitValue(t *testing.T, values <-chan string, want string) {
	t.Helper()
	var last string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case v := <-values:
			if v == want {
				return
			}
			last = v
		case <-timeout:
			t.Fatalf("the field never held %q (last %q)", want, last)
		}
	}
}

// duClosedWindow makes a top-level window on display, destroys it, and
// returns its id (decimal): a handle that no longer names a window.
func duClosedWindow(t *testing.T, display string) string {
	t.Helper()
	xgb.Logger = log.New(io.Discard, "", 0) // no ~/.Xauthority is fine
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	scr := xproto.Setup(c).DefaultScreen(c)
	id, err := xproto.NewWindowId(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.CreateWindowChecked(c, scr.RootDepth, id, scr.Root, 0, 0, 50, 50, 0,
		xproto.WindowClassInputOutput, scr.RootVisual, 0, nil).Check(); err != nil {
		t.Fatal(err)
	}
	if err := xproto.DestroyWindowChecked(c, id).Check(); err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(uint64(id), 10)
}

// TestAiodLaunchDesktopPortTaken: aiod --desktop whose worker address
// (AIO_COMPUTER_USE_URL) is held by another program does not start: it
// exits 1 naming the address, rather than forward its clients to the
// program that holds the port. Whether that program accepts any key or
// refuses every one, it cannot pass for the daemon's own worker.
func TestAiodLaunchDesktopPortTaken(t *testing.T) {
	for _, p := range []string{"Xvfb", "openbox", "xdotool"} {
		if _, err := exec.LookPath(p); err != nil {
			harness.MissingPeer(t, p)
		}
	}
	for _, tc := range []struct {
		name string
		code int
	}{{"open", 200}, {"keyed", 401}} {
		t.Run(tc.name, func(t *testing.T) {
			squatter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				io.WriteString(w, `{"schema_version":1,"status":"ready"}`)
			}))
			defer squatter.Close()
			addr := strings.TrimPrefix(squatter.URL, "http://")
			code, _, errOut := runAiod(t, []string{"AIO_COMPUTER_USE_URL=" + squatter.URL, "AIO_STATE_DIR=" + t.TempDir(), "DISPLAY="},
				"--port", "0", "--desktop")
			if code != 1 || !strings.Contains(errOut, "the computer-use worker on "+addr) {
				t.Errorf("exit %d, stderr:\n%s", code, errOut)
			}
		})
	}
}

// TestAiodComputerUseWrongMethod: a wrong method on a computer-use route
// answers, through aiod, what aiod answers on its own routes: 405 with
// Allow, in the envelope.
func TestAiodComputerUseWrongMethod(t *testing.T) {
	x := harness.Xvfb(t, 320, 200)
	w := harness.ComputerUseWorker(t, x.Display())
	a := startAiod(t, []string{"AIO_COMPUTER_USE_URL=" + w.URL, "DISPLAY=" + x.Display()})
	own := planeDo(t, "GET", a.URL+"/v1/code/execute", "")
	if own.status != 405 || own.header.Get("Allow") != "POST" {
		t.Fatalf("aiod's own 405: %d %v %s", own.status, own.header, own.raw)
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/display/record"},
		{"GET", "/v2/computer/actions"},
		{"DELETE", "/v2/computer/record"},
		{"GET", "/v1/browser/actions"},
	} {
		got := planeDo(t, r.method, a.URL+r.path, "")
		if got.status != 405 || got.header.Get("Allow") != "POST" || string(got.raw) != string(own.raw) ||
			got.header.Get("Content-Type") != own.header.Get("Content-Type") {
			t.Errorf("%s %s: %d Allow=%q %s; aiod answers %s", r.method, r.path, got.status, got.header.Get("Allow"), got.raw, own.raw)
		}
	}
}
