package aiod

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// planeReply is an answer of the browser or computer-use plane as the
// tests read it: status, headers, raw body and, when the body is JSON,
// the envelope both decoded (Success … Errors) and as a generic map (env:
// any key, such as the 1.x top-level ones).
type planeReply struct {
	status  int
	header  http.Header
	raw     []byte
	env     map[string]any
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Hint    *string         `json:"hint"`
	Errors  []struct {
		Location []string `json:"location"`
		Type     string   `json:"type"`
	} `json:"errors"`
}

// planeDo sends method url with body (JSON when non-empty) and header
// pairs, and decodes the envelope when the answer is JSON.
func planeDo(t *testing.T, method, url, body string, header ...string) planeReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	holdPlaneAnswer(t, method, url, resp, b)
	r := planeReply{status: resp.StatusCode, header: resp.Header, raw: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
		_ = json.Unmarshal(b, &r.env) // an array or a scalar leaves it nil
	}
	return r
}

// planeExpect fails unless the answer has status; it returns the reply.
func planeExpect(t *testing.T, status int, method, url, body string, header ...string) planeReply {
	t.Helper()
	r := planeDo(t, method, url, body, header...)
	if r.status != status {
		t.Fatalf("%s %s %s: %d %s, want %d", method, url, body, r.status, r.raw, status)
	}
	return r
}

// brKeys is the sorted key list of a JSON object.
func brKeys(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not an object: %s", raw)
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return strings.Join(ks, ",")
}

// brClosedPort is a loopback port nothing listens on.
func brClosedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// brBrowserRoutes are every browser route but info and
// network/requests, with bodies a ready browser would accept.
var brBrowserRoutes = []struct{ method, path, body string }{
	{"GET", "screenshot", ""},
	{"POST", "navigate", `{"url":"about:blank"}`},
	{"POST", "evaluate", `{"expression":"1"}`},
	{"POST", "snapshot", `{}`},
	{"POST", "click", `{"selector":"#x"}`},
	{"POST", "fill", `{"selector":"#x","value":"v"}`},
	{"POST", "upload", `{"selector":"#x","paths":["/tmp/x"]}`},
	{"POST", "config", `{"resolution":{"width":1280,"height":720}}`},
	{"POST", "cdp", `{"method":"Browser.getVersion","browser":true}`},
	{"GET", "tabs", ""},
	{"POST", "tabs", `{}`},
	{"POST", "tabs/ABC/activate", ""},
	{"DELETE", "tabs/ABC", ""},
	{"POST", "cookies", `{"cookies":[{"name":"a","value":"1","url":"http://example.com/"}]}`},
	{"GET", "cookies", ""},
	{"DELETE", "cookies?all=true", ""},
}

// TestAiodBrowserBare is the digest's bare fixture for the browser plane
// (R1–R3): no browser listens on the DevTools port. Capabilities say
// so; every route but info and network/requests answers 503 with a hint
// on v1 and v2 alike; info answers 200 with success false; there is no
// /v2/browser/actions.
func TestAiodBrowserBare(t *testing.T) {
	port := brClosedPort(t)
	p := startAiod(t, []string{"BROWSER_REMOTE_DEBUGGING_PORT=" + strconv.Itoa(port), "BROWSER_EXECUTABLE_PATH=", "DISPLAY="})
	// R1
	r := planeExpect(t, 200, "GET", p.URL+"/v1/capabilities?refresh=true", "")
	var caps struct {
		Browser struct {
			Status      string   `json:"status"`
			CDP         bool     `json:"cdp"`
			CDPEndpoint string   `json:"cdp_endpoint"`
			Missing     []string `json:"missing"`
			Warnings    []string `json:"warnings"`
		} `json:"browser"`
	}
	if err := json.Unmarshal(r.Data, &caps); err != nil {
		t.Fatal(err)
	}
	b := caps.Browser
	if (b.Status != "degraded" && b.Status != "absent") || b.CDP || !strings.Contains(strings.Join(b.Missing, ","), "cdp") ||
		b.CDPEndpoint != "http://127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("capabilities.browser: %+v", b)
	}
	for _, v := range []string{"v1", "v2"} {
		base := p.URL + "/" + v + "/browser/"
		// R2
		for _, rt := range brBrowserRoutes {
			r := planeDo(t, rt.method, base+rt.path, rt.body)
			if r.status != 503 || r.Success || r.Hint == nil || *r.Hint != "Ensure the browser capability is ready (GET /v1/capabilities)." ||
				!strings.HasPrefix(r.Message, "browser: ") || string(r.Data) != "null" {
				t.Errorf("%s %s: %d %s", rt.method, base+rt.path, r.status, r.raw)
			}
		}
		r := planeExpect(t, 200, "GET", base+"info", "")
		wantData := `{"user_agent":"","cdp_url":"","viewport":{"width":0,"height":0},"page_viewport":null,"cdp_ui_url":null}`
		if v == "v1" {
			wantData = `{"user_agent":"","cdp_url":"","viewport":{"width":0,"height":0},"page_viewport":null,"cdp_ui_url":null,"vnc_url":""}`
		}
		if r.Success || !strings.HasPrefix(r.Message, "browser: ") || string(r.Data) != wantData || r.Hint == nil {
			t.Errorf("%s info: %s", v, r.raw)
		}
		r = planeExpect(t, 200, "GET", base+"network/requests", "")
		if !r.Success || string(r.Data) != "[]" {
			t.Errorf("%s network/requests: %s", v, r.raw)
		}
	}
	// R3
	planeExpect(t, 404, "POST", p.URL+"/v2/browser/actions", `{"action_type":"WAIT","duration":0.1}`)
}

// brGreeter is the fixture page: a name field, a button that greets, a
// link and a file input.
const brGreeter = `<!doctype html><html><head><title>Greeter</title><link rel="icon" href="data:,"></head><body>
<label for="name">Name</label> <input id="name" type="text">
<button id="greet" onclick="document.getElementById('out').textContent='hello, '+document.getElementById('name').value">Greet</button>
<p id="out"></p>
<a id="other" href="/other">Other page</a>
<label for="file">File</label> <input id="file" type="file">
</body></html>`

// brFixture serves the Greeter at / and a second page at /other.
func brFixture(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, brGreeter)
	})
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><html><head><title>Other</title><link rel="icon" href="data:,"></head><body>other</body></html>`)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestAiodBrowser is the digest's browser fixture (R7–R30): headless
// Chromium and the Greeter page, every route on /v1 and on /v2 with the
// same expectations.
func TestAiodBrowser(t *testing.T) {
	chrome := harness.Chromium(t, harness.ChromiumOptions{})
	site := brFixture(t)
	p := startAiod(t, []string{"BROWSER_REMOTE_DEBUGGING_PORT=" + strconv.Itoa(chrome.Port()), "DISPLAY="})
	// R7. The probe's budget is 300 ms; on a loaded machine Chromium's
	// first answer can take longer, so a few fresh probes are allowed.
	var caps struct {
		Browser struct {
			Status   string   `json:"status"`
			CDP      bool     `json:"cdp"`
			Missing  []string `json:"missing"`
			Warnings []string `json:"warnings"`
		} `json:"browser"`
	}
	var r planeReply
	for range 5 {
		r = planeExpect(t, 200, "GET", p.URL+"/v1/capabilities?refresh=true", "")
		if err := json.Unmarshal(r.Data, &caps); err != nil {
			t.Fatal(err)
		}
		if caps.Browser.CDP {
			break
		}
	}
	if caps.Browser.Status != "ready" || !caps.Browser.CDP || len(caps.Browser.Warnings) != 0 || len(caps.Browser.Missing) != 0 {
		t.Errorf("capabilities.browser: %s", r.Data)
	}
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) { brSuite(t, p.URL, v, site.URL) })
	}
}

// brSuite runs R8–R29 against /<v>/browser/.
func brSuite(t *testing.T, aiod, v, site string) {
	base := aiod + "/" + v + "/browser/"
	host := strings.TrimPrefix(aiod, "http://")

	// R8, R11: info's shape and cdp_url.
	r := planeExpect(t, 200, "GET", base+"info", "")
	wantKeys := "cdp_ui_url,cdp_url,page_viewport,user_agent,viewport"
	if v == "v1" {
		wantKeys += ",vnc_url"
	}
	if got := brKeys(t, r.Data); got != wantKeys {
		t.Errorf("info keys %s, want %s", got, wantKeys)
	}
	var info struct {
		UserAgent    string  `json:"user_agent"`
		CDPURL       string  `json:"cdp_url"`
		CDPUIURL     *string `json:"cdp_ui_url"`
		VNCURL       *string `json:"vnc_url"`
		Viewport     struct{ Width, Height int }
		PageViewport *struct{ Width, Height int } `json:"page_viewport"`
	}
	if err := json.Unmarshal(r.Data, &info); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^ws://`+regexp.QuoteMeta(host)+`/cdp/devtools/browser/[0-9a-f-]+$`).MatchString(info.CDPURL) ||
		!strings.Contains(info.UserAgent, "HeadlessChrome") || info.CDPUIURL != nil || info.Viewport.Width <= 0 ||
		info.PageViewport == nil || info.PageViewport.Width <= 0 || (v == "v1" && (info.VNCURL == nil || *info.VNCURL != "")) {
		t.Errorf("info: %s", r.raw)
	}
	wsPath := info.CDPURL[strings.Index(info.CDPURL, "/cdp/"):]
	// R9
	r = planeExpect(t, 200, "GET", base+"info", "", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "sb.example", "X-Forwarded-Prefix", "/p/")
	json.Unmarshal(r.Data, &info)
	if info.CDPURL != "wss://sb.example/p"+wsPath {
		t.Errorf("forwarded cdp_url %s", info.CDPURL)
	}
	// R10
	r = planeExpect(t, 200, "GET", base+"info?api_key=K", "")
	json.Unmarshal(r.Data, &info)
	if info.CDPURL != "ws://"+host+wsPath+"?api_key=K" {
		t.Errorf("cdp_url with key %s", info.CDPURL)
	}

	// R12: navigate and evaluate.
	r = planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site+`/"}`)
	var nav struct {
		URL     string `json:"url"`
		FrameID string `json:"frame_id"`
	}
	json.Unmarshal(r.Data, &nav)
	if r.Message != "Navigated" || !r.Success || nav.URL != site+"/" || nav.FrameID == "" || brKeys(t, r.Data) != "frame_id,url" {
		t.Errorf("navigate: %s", r.raw)
	}
	brEval := func(expr string, extra string) (json.RawMessage, *string) {
		t.Helper()
		r := planeExpect(t, 200, "POST", base+"evaluate", `{"expression":`+strconv.Quote(expr)+extra+`}`)
		var e struct {
			Value     json.RawMessage `json:"value"`
			Exception *string         `json:"exception"`
		}
		if err := json.Unmarshal(r.Data, &e); err != nil || !r.Success || brKeys(t, r.Data) != "exception,value" {
			t.Fatalf("evaluate %s: %s", expr, r.raw)
		}
		return e.Value, e.Exception
	}
	if val, exc := brEval("document.title", ""); string(val) != `"Greeter"` || exc != nil {
		t.Errorf("title %s %v", val, exc)
	}
	// R13
	if val, exc := brEval("throw new Error('x')", ""); exc == nil || !strings.Contains(*exc, "x") || string(val) != "null" {
		t.Errorf("throw: %s %v", val, exc)
	}
	if val, exc := brEval("Promise.resolve(7)", `,"await_promise":true`); string(val) != "7" || exc != nil {
		t.Errorf("await: %s %v", val, exc)
	}
	planeExpect(t, 422, "POST", base+"evaluate", `{}`)
	planeExpect(t, 400, "POST", base+"evaluate", `{"expression":`)
	// JavaScript dialogs are dismissed at once: the evaluation that
	// raised one completes, and the tab stays usable.
	start := time.Now()
	if val, exc := brEval("alert(1); 7", ""); string(val) != "7" || exc != nil {
		t.Errorf("alert: %s %v", val, exc)
	}
	if val, exc := brEval("[confirm('sure?'), prompt('name?', 'x')]", ""); string(val) != "[false,null]" || exc != nil {
		t.Errorf("confirm, prompt: %s %v", val, exc)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("dialogs took %v", d)
	}
	if val, _ := brEval("document.title", ""); string(val) != `"Greeter"` {
		t.Errorf("after dialogs: %s", val)
	}

	// R16: screenshots.
	r = planeExpect(t, 200, "GET", base+"screenshot", "")
	w, werr := strconv.Atoi(r.header.Get("X-Image-Width"))
	h, herr := strconv.Atoi(r.header.Get("X-Image-Height"))
	if !bytes.HasPrefix(r.raw, []byte("\x89PNG\r\n\x1a\n")) || r.header.Get("Content-Type") != "image/png" || werr != nil || herr != nil || w <= 0 || h <= 0 {
		t.Errorf("png screenshot: %v %q", r.header, r.raw[:min(len(r.raw), 16)])
	}
	for _, f := range []string{"jpeg", "jpg"} {
		r = planeExpect(t, 200, "GET", base+"screenshot?format="+f+"&quality=50", "")
		if !bytes.HasPrefix(r.raw, []byte{0xFF, 0xD8}) || r.header.Get("Content-Type") != "image/jpeg" {
			t.Errorf("%s screenshot: %v", f, r.header)
		}
	}
	planeExpect(t, 200, "GET", base+"screenshot?full_page=true", "")
	planeExpect(t, 422, "GET", base+"screenshot?format=gif", "")
	planeExpect(t, 422, "GET", base+"screenshot?format=jpeg&quality=101", "")

	// R17: snapshot with refs.
	r = planeExpect(t, 200, "POST", base+"snapshot", `{"interactive_only":true}`)
	var snap struct {
		Role     string `json:"role"`
		Children []struct {
			Role string `json:"role"`
			Name string `json:"name"`
			Ref  string `json:"ref"`
		} `json:"children"`
	}
	if err := json.Unmarshal(r.Data, &snap); err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{}
	for _, n := range snap.Children {
		if !regexp.MustCompile(`^e\d+$`).MatchString(n.Ref) {
			t.Errorf("node %+v: ref", n)
		}
		if _, ok := refs[n.Role]; !ok {
			refs[n.Role] = n.Ref
		}
	}
	if snap.Role != "RootWebArea" || refs["textbox"] == "" || refs["button"] == "" || refs["link"] == "" {
		t.Fatalf("snapshot: %s", r.raw)
	}
	r = planeExpect(t, 200, "POST", base+"snapshot", `{}`)
	if !strings.Contains(string(r.raw), `"name":"Greet"`) || !strings.Contains(string(r.raw), `"ref":"`+refs["button"]+`"`) {
		t.Errorf("full snapshot: %s", r.raw)
	}

	// R18: fill and click by ref.
	r = planeExpect(t, 200, "POST", base+"fill", `{"ref":"`+refs["textbox"]+`","value":"Ada"}`)
	if r.Message != "Filled" || !r.Success {
		t.Errorf("fill: %s", r.raw)
	}
	r = planeExpect(t, 200, "POST", base+"click", `{"ref":"`+refs["button"]+`"}`)
	if r.Message != "Clicked" || !r.Success || string(r.Data) != "null" {
		t.Errorf("click: %s", r.raw)
	}
	if val, _ := brEval("document.getElementById('out').textContent", ""); string(val) != `"hello, Ada"` {
		t.Errorf("after ref click: %s", val)
	}
	// R19: by selector.
	planeExpect(t, 200, "POST", base+"fill", `{"selector":"#name","value":"Bob"}`)
	planeExpect(t, 200, "POST", base+"click", `{"selector":"#greet"}`)
	if val, _ := brEval("document.getElementById('name').value + '|' + document.getElementById('out').textContent", ""); string(val) != `"Bob|hello, Bob"` {
		t.Errorf("after selector fill/click: %s", val)
	}
	// R20
	r = planeExpect(t, 404, "POST", base+"click", `{"selector":"#nope"}`)
	if r.Success || !strings.HasPrefix(r.Message, "browser: ") {
		t.Errorf("404: %s", r.raw)
	}
	planeExpect(t, 400, "POST", base+"click", `{}`)
	planeExpect(t, 400, "POST", base+"click", `{"ref":"x1"}`)
	planeExpect(t, 400, "POST", base+"click", `not json`)
	planeExpect(t, 422, "POST", base+"fill", `{"selector":"#name"}`)
	planeExpect(t, 422, "POST", base+"click", `{"selector":5}`)

	// R22: upload.
	dir := t.TempDir()
	file := filepath.Join(dir, "hello.txt")
	os.WriteFile(file, []byte("hi"), 0o644)
	r = planeExpect(t, 200, "POST", base+"upload", `{"selector":"#file","paths":[`+strconv.Quote(file)+`]}`)
	if !r.Success {
		t.Errorf("upload: %s", r.raw)
	}
	if val, _ := brEval("document.getElementById('file').files[0].name", ""); string(val) != `"hello.txt"` {
		t.Errorf("uploaded file: %s", val)
	}
	planeExpect(t, 404, "POST", base+"upload", `{"selector":"#nofile","paths":[`+strconv.Quote(file)+`]}`)
	planeExpect(t, 422, "POST", base+"upload", `{"selector":"#file"}`)
	planeExpect(t, 422, "POST", base+"upload", `{"selector":"#file","paths":["rel.txt"]}`)

	// R21: a ref from before a navigation.
	planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site+`/other","wait_until":"domcontentloaded"}`)
	if r := planeDo(t, "POST", base+"click", `{"ref":"`+refs["button"]+`"}`); r.status != 200 && r.status != 503 {
		t.Errorf("stale ref: %d %s", r.status, r.raw)
	}
	// R15: history.
	r = planeExpect(t, 200, "POST", base+"navigate", `{"history":"back"}`)
	json.Unmarshal(r.Data, &nav)
	if nav.URL != site+"/" {
		t.Errorf("back: %s", r.raw)
	}
	if val, _ := brEval("location.href", ""); string(val) != strconv.Quote(site+"/") {
		t.Errorf("after back: %s", val)
	}
	planeExpect(t, 200, "POST", base+"navigate", `{"history":"forward","wait_until":"load"}`)
	planeExpect(t, 200, "POST", base+"navigate", `{"history":"reload","wait_until":"networkidle"}`)
	planeExpect(t, 400, "POST", base+"navigate", `{}`)
	if r := planeExpect(t, 422, "POST", base+"navigate", `{"url":""}`); len(r.Errors) != 1 || strings.Join(r.Errors[0].Location, ".") != "body.url" {
		t.Errorf("navigate to \"\": %s", r.raw)
	}
	planeExpect(t, 422, "POST", base+"navigate", `{"url":"`+site+`/","wait_until":"never"}`)
	planeExpect(t, 422, "POST", base+"navigate", `{"history":"sideways"}`)
	// R14: a refused connection is a success.
	closed := brClosedPort(t)
	planeExpect(t, 200, "POST", base+"navigate", `{"url":"http://127.0.0.1:`+strconv.Itoa(closed)+`/"}`)
	if val, _ := brEval("location.href", ""); !strings.HasPrefix(string(val), `"chrome-error://`) {
		t.Errorf("refused: %s", val)
	}

	// R23, R24, R25: tabs.
	var tabs []struct{ ID, Title, URL, Type string }
	listTabs := func() {
		t.Helper()
		r := planeExpect(t, 200, "GET", base+"tabs", "")
		tabs = nil
		if err := json.Unmarshal(r.Data, &tabs); err != nil || len(tabs) == 0 {
			t.Fatalf("tabs: %s", r.raw)
		}
		for _, tb := range tabs {
			if tb.Type != "page" {
				t.Errorf("tab %+v", tb)
			}
		}
	}
	listTabs()
	first := tabs[0].ID
	r = planeExpect(t, 200, "POST", base+"tabs", `{}`)
	var tab struct{ ID, Title, URL, Type string }
	json.Unmarshal(r.Data, &tab)
	if tab.URL != "about:blank" || tab.Type != "page" || tab.ID == "" || brKeys(t, r.Data) != "id,title,type,url" {
		t.Errorf("new tab: %s", r.raw)
	}
	listTabs()
	if tabs[0].ID != tab.ID {
		t.Errorf("new tab not first: %+v", tabs)
	}
	// R25: tab_id.
	if val, _ := brEval("location.href", `,"tab_id":"`+first+`"`); !strings.HasPrefix(string(val), `"chrome-error://`) {
		t.Errorf("evaluate in tab %s: %s", first, val)
	}
	if val, _ := brEval("location.href", ""); string(val) != `"about:blank"` {
		t.Errorf("evaluate in the default tab: %s", val)
	}
	planeExpect(t, 404, "POST", base+"evaluate", `{"expression":"1","tab_id":"NOPE"}`)
	r = planeExpect(t, 200, "POST", base+"tabs/"+first+"/activate", "")
	listTabs()
	if tabs[0].ID != first {
		t.Errorf("activated tab not first: %+v", tabs)
	}
	r = planeExpect(t, 404, "POST", base+"tabs/NOPE/activate", "")
	if r.Message != "no tab with id NOPE" {
		t.Errorf("unknown activate: %s", r.raw)
	}
	// v1 takes PUT too (the Python AIO SDK's browser_tabs.activate); v2
	// only POST.
	if strings.Contains(base, "/v1/") {
		planeExpect(t, 200, "PUT", base+"tabs/"+first+"/activate", "")
	} else {
		planeExpect(t, 405, "PUT", base+"tabs/"+first+"/activate", "")
	}
	planeExpect(t, 200, "DELETE", base+"tabs/"+tab.ID, "")
	listTabs()
	for _, tb := range tabs {
		if tb.ID == tab.ID {
			t.Errorf("closed tab still listed")
		}
	}
	r = planeExpect(t, 404, "DELETE", base+"tabs/1", "")
	if r.Message != "no tab with id 1" {
		t.Errorf("DELETE tabs/1: %s", r.raw)
	}

	// R26: cookies.
	r = planeExpect(t, 200, "POST", base+"cookies", `{"cookies":[{"name":"a","value":"1","url":"http://example.com/"}]}`)
	if string(r.Data) != `{"count":1}` {
		t.Errorf("set cookies: %s", r.raw)
	}
	planeExpect(t, 200, "POST", base+"cookies", `{"cookies":[{"name":"b","value":"2","domain":"other.test"}]}`)
	var cookies []struct{ Name, Value, Domain string }
	r = planeExpect(t, 200, "GET", base+"cookies?domain=example.com", "")
	json.Unmarshal(r.Data, &cookies)
	if len(cookies) != 1 || cookies[0].Name != "a" || cookies[0].Value != "1" || cookies[0].Domain != "example.com" {
		t.Errorf("get cookies: %s", r.raw)
	}
	r = planeExpect(t, 200, "GET", base+"cookies?url="+"http://example.com/x", "")
	json.Unmarshal(r.Data, &cookies)
	if len(cookies) != 1 || cookies[0].Name != "a" {
		t.Errorf("get cookies by url: %s", r.raw)
	}
	r = planeExpect(t, 200, "DELETE", base+"cookies?name=a&domain=example.com", "")
	if string(r.Data) != `{"count":1}` {
		t.Errorf("delete cookie: %s", r.raw)
	}
	r = planeExpect(t, 200, "GET", base+"cookies?domain=example.com", "")
	if string(r.Data) != `[]` {
		t.Errorf("after delete: %s", r.raw)
	}
	// A bare DELETE clears every cookie on v1 (the Python AIO SDK's
	// clear_cookies()); v2 asks what to delete.
	if strings.Contains(base, "/v1/") {
		planeExpect(t, 200, "DELETE", base+"cookies", "")
	} else {
		planeExpect(t, 400, "DELETE", base+"cookies", "")
	}
	planeExpect(t, 422, "POST", base+"cookies", `{}`)
	planeExpect(t, 422, "POST", base+"cookies", `{"cookies":[{"name":"a","value":"1"}]}`)
	for _, bad := range []string{`"url":"not a url"`, `"url":"http://example.com/","expires":"soon"`} {
		r = planeExpect(t, 422, "POST", base+"cookies", `{"cookies":[{"name":"a","value":"1",`+bad+`}]}`)
		if len(r.Errors) != 1 || strings.Join(r.Errors[0].Location, ".") != "body.cookies" {
			t.Errorf("cookie with %s: %s", bad, r.raw)
		}
	}
	planeExpect(t, 200, "DELETE", base+"cookies?all=true", "")
	r = planeExpect(t, 200, "GET", base+"cookies", "")
	if string(r.Data) != `[]` {
		t.Errorf("after all=true: %s", r.raw)
	}

	// R27: network/requests.
	planeExpect(t, 200, "GET", base+"network/requests?clear=true", "")
	planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site+`/other"}`)
	r = planeExpect(t, 200, "GET", base+"network/requests", "")
	var reqs []struct {
		URL          string `json:"url"`
		Method       string `json:"method"`
		Status       *int   `json:"status"`
		ResourceType string `json:"resource_type"`
	}
	json.Unmarshal(r.Data, &reqs)
	if len(reqs) == 0 || reqs[0].URL != site+"/other" && !brHasURL(reqs, site+"/other") || len(reqs) > 300 {
		t.Errorf("requests: %s", r.raw)
	}
	if i := brIndex(reqs, site+"/other"); i < 0 || reqs[i].Method != "GET" || reqs[i].ResourceType != "Document" || reqs[i].Status == nil || *reqs[i].Status != 200 {
		t.Errorf("request of the page: %s", r.raw)
	}
	planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site+`/"}`)
	r = planeExpect(t, 200, "GET", base+"network/requests?limit=1", "")
	json.Unmarshal(r.Data, &reqs)
	if len(reqs) != 1 || reqs[0].URL != site+"/" && !strings.HasPrefix(reqs[0].URL, site) {
		t.Errorf("newest first, limit 1: %s", r.raw)
	}
	planeExpect(t, 200, "GET", base+"network/requests?clear=true", "")
	r = planeExpect(t, 200, "GET", base+"network/requests", "")
	if string(r.Data) != "[]" {
		t.Errorf("after clear: %s", r.raw)
	}

	// R28: config.
	r = planeExpect(t, 200, "POST", base+"config", `{"resolution":{"width":1280,"height":720}}`)
	if string(r.Data) != `{"resolution":{"width":1280,"height":720}}` {
		t.Errorf("config: %s", r.raw)
	}
	r = planeExpect(t, 422, "POST", base+"config", `{"resolution":{"width":1234,"height":567}}`)
	if len(r.Errors) != 1 || strings.Join(r.Errors[0].Location, ".") != "body.resolution" {
		t.Errorf("config 422: %s", r.raw)
	}
	r = planeExpect(t, 200, "POST", base+"config", `{}`)
	if string(r.Data) != `{"resolution":null}` {
		t.Errorf("config {}: %s", r.raw)
	}

	// R29: raw CDP.
	r = planeExpect(t, 200, "POST", base+"cdp", `{"method":"Browser.getVersion","browser":true}`)
	var ver struct{ Product string }
	if json.Unmarshal(r.Data, &ver); !strings.Contains(ver.Product, "Chrome") {
		t.Errorf("Browser.getVersion: %s", r.raw)
	}
	r = planeExpect(t, 200, "POST", base+"cdp", `{"method":"Runtime.evaluate","params":{"expression":"1+1"}}`)
	if !strings.Contains(string(r.Data), `"value":2`) {
		t.Errorf("Runtime.evaluate: %s", r.raw)
	}
	r = planeExpect(t, 503, "POST", base+"cdp", `{"method":"Foo.bar"}`)
	if r.Message != "browser: Foo.bar: 'Foo.bar' wasn't found" || r.Hint == nil {
		t.Errorf("Foo.bar: %s", r.raw)
	}
	planeExpect(t, 422, "POST", base+"cdp", `{}`)
}

func brIndex(reqs []struct {
	URL          string `json:"url"`
	Method       string `json:"method"`
	Status       *int   `json:"status"`
	ResourceType string `json:"resource_type"`
}, url string) int {
	for i, r := range reqs {
		if r.URL == url {
			return i
		}
	}
	return -1
}

func brHasURL(reqs []struct {
	URL          string `json:"url"`
	Method       string `json:"method"`
	Status       *int   `json:"status"`
	ResourceType string `json:"resource_type"`
}, url string) bool {
	return brIndex(reqs, url) >= 0
}

// TestAiodBrowserHostile: what a page does cannot take the plane down
// or lock a tab: multi-megabyte URLs in the target list, a crashed
// renderer.
func TestAiodBrowserHostile(t *testing.T) {
	chrome := harness.Chromium(t, harness.ChromiumOptions{})
	site := brFixture(t)
	p := startAiod(t, []string{"BROWSER_REMOTE_DEBUGGING_PORT=" + strconv.Itoa(chrome.Port()), "DISPLAY="})
	base := p.URL + "/v2/browser/"
	planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site.URL+`/"}`)
	newTab := func() string {
		t.Helper()
		r := planeExpect(t, 200, "POST", base+"tabs", `{}`)
		var tab struct{ ID string }
		json.Unmarshal(r.Data, &tab)
		return tab.ID
	}

	t.Run("huge URLs", func(t *testing.T) {
		// Three tabs each on a 1.9 MB URL: /json/list is past 5 MiB.
		var ids []string
		for range 3 {
			id := newTab()
			ids = append(ids, id)
			planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site.URL+`/other","tab_id":"`+id+`"}`)
			planeExpect(t, 200, "POST", base+"evaluate", `{"expression":"history.replaceState(null, '', '?q=' + 'a'.repeat(1900000)); location.href.length","tab_id":"`+id+`"}`)
		}
		r := planeExpect(t, 200, "GET", base+"tabs", "")
		var tabs []struct{ ID, URL string }
		json.Unmarshal(r.Data, &tabs)
		big := 0
		for _, tb := range tabs {
			if strings.HasPrefix(tb.URL, site.URL+"/other?q=aaa") {
				big++
				if len(tb.URL) != 64<<10 {
					t.Errorf("tab %s: url of %d bytes, want cut at 64 KiB", tb.ID, len(tb.URL))
				}
			}
		}
		if big != 3 {
			t.Errorf("%d tabs with the long URL, want 3 (%d tabs)", big, len(tabs))
		}
		if val := planeExpect(t, 200, "POST", base+"evaluate", `{"expression":"1+1"}`); !strings.Contains(string(val.Data), `"value":2`) {
			t.Errorf("evaluate: %s", val.raw)
		}
		for _, id := range ids {
			planeExpect(t, 200, "DELETE", base+"tabs/"+id, "")
		}
	})

	t.Run("huge result", func(t *testing.T) {
		start := time.Now()
		r := planeExpect(t, 413, "POST", base+"evaluate", `{"expression":"'x'.repeat(50e6)"}`)
		if r.Message != "browser: the result is larger than 32 MiB" || r.Hint == nil {
			t.Errorf("50 MB result: %s", r.raw)
		}
		t.Logf("50 MB result refused in %v", time.Since(start))
		if r := planeExpect(t, 200, "POST", base+"evaluate", `{"expression":"'x'.repeat(1e6).length"}`); !strings.Contains(string(r.Data), `"value":1000000`) {
			t.Errorf("after: %s", r.raw)
		}
		// A tall, noisy page: its full-page screenshot is well past the
		// 32 MiB of other answers, and still answers.
		planeExpect(t, 200, "POST", base+"evaluate", `{"expression":"const c = document.createElement('canvas'); c.width = 1280; c.height = 12000; const g = c.getContext('2d'); const d = g.createImageData(1280, 12000); crypto.getRandomValues(new Uint8Array(d.data.buffer, 0, 65536)); for (let i = 0; i < d.data.length; i += 65536) crypto.getRandomValues(new Uint8Array(d.data.buffer, i, Math.min(65536, d.data.length - i))); for (let i = 3; i < d.data.length; i += 4) d.data[i] = 255; g.putImageData(d, 0, 0); document.body.append(c); document.documentElement.scrollHeight"}`)
		start = time.Now()
		r = planeExpect(t, 200, "GET", base+"screenshot?full_page=true", "")
		t.Logf("full-page screenshot: %d bytes, %sx%s, %v", len(r.raw), r.header.Get("X-Image-Width"), r.header.Get("X-Image-Height"), time.Since(start))
		if !bytes.HasPrefix(r.raw, []byte("\x89PNG")) || len(r.raw) < 24<<20 {
			t.Errorf("full-page screenshot of %d bytes", len(r.raw))
		}
	})

	t.Run("crash", func(t *testing.T) {
		id := newTab()
		start := time.Now()
		// The call that crashes the tab fails with it.
		r := planeExpect(t, 503, "POST", base+"cdp", `{"method":"Page.crash","tab_id":"`+id+`"}`)
		if r.Message != "browser: the tab crashed" {
			t.Errorf("Page.crash: %s", r.raw)
		}
		r = planeExpect(t, 503, "POST", base+"evaluate", `{"expression":"1","tab_id":"`+id+`"}`)
		if r.Message != "browser: the tab crashed" || r.Hint == nil || !strings.Contains(*r.Hint, "DELETE") {
			t.Errorf("evaluate in a crashed tab: %s", r.raw)
		}
		planeExpect(t, 503, "POST", base+"snapshot", `{"tab_id":"`+id+`"}`)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("calls on a crashed tab took %v", d)
		}
		// Chrome loads a crashed tab again in a new renderer.
		planeExpect(t, 200, "POST", base+"navigate", `{"url":"`+site.URL+`/other","tab_id":"`+id+`"}`)
		{
			if val := planeExpect(t, 200, "POST", base+"evaluate", `{"expression":"document.title","tab_id":"`+id+`"}`); !strings.Contains(string(val.Data), `"Other"`) {
				t.Errorf("after navigating again: %s", val.raw)
			}
		}
		planeExpect(t, 200, "DELETE", base+"tabs/"+id, "")
		// The other tabs never noticed.
		planeExpect(t, 200, "POST", base+"evaluate", `{"expression":"document.title"}`)
	})
}
