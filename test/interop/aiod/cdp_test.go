package aiod

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The /cdp suite: aiod --browser gives Chromium no TCP port (it speaks
// DevTools over a pipe) and serves the protocol itself at /cdp behind its
// API key, so that Playwright's connectOverCDP(cdp_url) works against a
// bare aiod and nothing reaches the browser around the key.

// cdpListeners is the TCP sockets in LISTEN state that a process of
// Chromium's process group holds (read from the pids' fd links and the
// machine's /proc/net/tcp and tcp6): "addr:port" of each.
func cdpListeners(t *testing.T, group []int) []string {
	t.Helper()
	inodes := map[string]bool{}
	for _, pid := range group {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
	}
	var out []string
	for _, pid := range group {
		for _, f := range []string{"tcp", "tcp6"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			for sc.Scan() {
				fs := strings.Fields(sc.Text())
				// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
				if len(fs) > 9 && fs[3] == "0A" && inodes[fs[9]] {
					out = append(out, fs[1])
				}
			}
		}
	}
	return out
}

// cdpInfoURL is GET /v1/browser/info's cdp_url.
func cdpInfoURL(t *testing.T, d *lnDaemon) string {
	t.Helper()
	code, e := d.a.call("GET", "/v1/browser/info", "/v1/browser/info", nil)
	var info struct {
		CDPURL string `json:"cdp_url"`
	}
	if code != 200 || json.Unmarshal(e.Data, &info) != nil || info.CDPURL == "" {
		t.Fatalf("GET /v1/browser/info: %d %s", code, e.raw)
	}
	return info.CDPURL
}

// TestAiodBrowserNoDevToolsPort: under aiod --browser no process of
// Chromium's listens on any TCP port (the DevTools port was
// 127.0.0.1:<BROWSER_REMOTE_DEBUGGING_PORT>, open to every local
// process without a key), and nothing answers on the port it was given.
func TestAiodBrowserNoDevToolsPort(t *testing.T) {
	lnNeed(t, "chromium")
	d := lnStart(t, nil, "--browser", "--api-key", "cdp-k")
	d.a.key = "cdp-k"
	pid := lnChild(d.Cmd().Process.Pid, "chromium")
	if pid == 0 {
		t.Fatalf("no chromium child of the daemon; logs:\n%s", d.Logs())
	}
	if l := cdpListeners(t, lnGroup(pid)); len(l) != 0 {
		t.Errorf("chromium listens on TCP %v (hex addr:port); want no port at all", l)
	}
	if lnCDPAnswers(d.cdp) {
		t.Errorf("DevTools answers on 127.0.0.1:%s", d.cdp)
	}
	// The plane still drives it: tabs, navigation, a screenshot.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>pipe</title><p>hi</p>")
	}))
	defer page.Close()
	if code, e := d.a.call("POST", "/v1/browser/navigate", "/v1/browser/navigate", map[string]any{"url": page.URL}); code != 200 {
		t.Fatalf("navigate: %d %s", code, e.raw)
	}
	if code, e := d.a.call("GET", "/v1/browser/tabs", "/v1/browser/tabs", nil); code != 200 || !strings.Contains(string(e.raw), page.URL) {
		t.Errorf("tabs: %d %s; want the page", code, e.raw)
	}
	resp, body := d.a.raw("GET", "/v1/browser/screenshot", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "\x89PNG") {
		t.Errorf("screenshot: %d %q", resp.StatusCode, body[:min(len(body), 64)])
	}
}

// TestAiodCDPRoute: bare aiod --browser serves its cdp_url (under /cdp)
// behind its key: Playwright connects with the key as a header and is
// refused without it; the HTTP side answers /json/version naming the
// /cdp WebSocket; two WebSocket clients at once each see their own
// answers and events only.
func TestAiodCDPRoute(t *testing.T) {
	lnNeed(t, "chromium")
	const key = "cdp-route-k"
	d := lnStart(t, nil, "--browser", "--api-key", key)
	d.a.key = key
	cdpURL := cdpInfoURL(t, d)
	if !strings.Contains(cdpURL, "/cdp/devtools/browser/") {
		t.Fatalf("cdp_url %q is not under /cdp", cdpURL)
	}
	const title = "bare aiod cdp"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<!doctype html><title>%s</title>", title)
	}))
	defer page.Close()
	res, err := harness.Playwright(t, cdpURL, page.URL, key)
	if err != nil || res["title"] != title {
		t.Fatalf("connectOverCDP(%s) with the key: %v, %v; want the title\nlogs:\n%s", cdpURL, res, err, d.Logs())
	}
	for _, k := range [][]string{nil, {"wrong"}} {
		if res, err := harness.Playwright(t, cdpURL, page.URL, k...); err == nil || !strings.Contains(res["error"], "401") {
			t.Errorf("connectOverCDP(%s) with key %v = %v, %v; want a refusal with 401", cdpURL, k, res, err)
		}
	}
	// The http:// endpoint: /json/version names the /cdp WebSocket.
	httpBase := "http://" + strings.TrimPrefix(cdpURL[:strings.Index(cdpURL, "/cdp/")], "ws://") + "/cdp"
	for _, tc := range []struct {
		key  string
		code int
	}{{key, 200}, {"", 401}, {"no", 401}} {
		req, _ := http.NewRequest(http.MethodGet, httpBase+"/json/version", nil)
		if tc.key != "" {
			req.Header.Set("X-Api-Key", tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != tc.code || tc.code == 200 && v["webSocketDebuggerUrl"] != cdpURL {
			t.Errorf("GET /cdp/json/version with key %q: %d %v; want %d naming %s", tc.key, resp.StatusCode, v, tc.code, cdpURL)
		}
	}
	if res, err := harness.Playwright(t, httpBase, page.URL, key); err != nil || res["title"] != title {
		t.Errorf("connectOverCDP(%s): %v, %v", httpBase, res, err)
	}

	// A page's own WebSocket, named by /json/list: commands without a
	// sessionId go to the page.
	req, _ := http.NewRequest(http.MethodGet, httpBase+"/json/list", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var targets []map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	pageWS := ""
	for _, tg := range targets {
		if tg["type"] == "page" {
			pageWS = tg["webSocketDebuggerUrl"]
			break
		}
	}
	if !strings.HasPrefix(pageWS, "ws://") || !strings.Contains(pageWS, "/cdp/devtools/page/") {
		t.Fatalf("/json/list: %v; want a page whose WebSocket is under /cdp", targets)
	}
	h := http.Header{}
	h.Set("X-Api-Key", key)
	pws, _, err := websocket.DefaultDialer.Dial(pageWS, h)
	if err != nil {
		t.Fatalf("dial %s: %v", pageWS, err)
	}
	_ = pws.WriteJSON(map[string]any{"id": 1, "method": "Runtime.evaluate", "params": map[string]any{"expression": "6*7", "returnByValue": true}})
	_ = pws.SetReadDeadline(time.Now().Add(20 * time.Second))
	var ev struct {
		ID     int `json:"id"`
		Result struct {
			Result struct {
				Value any `json:"value"`
			} `json:"result"`
		} `json:"result"`
	}
	if err := pws.ReadJSON(&ev); err != nil || ev.ID != 1 || ev.Result.Result.Value != float64(42) {
		t.Errorf("evaluate on the page's WebSocket: %+v %v", ev, err)
	}
	pws.Close()

	// Two clients at once.
	dial := func() *websocket.Conn {
		h := http.Header{}
		h.Set("X-Api-Key", key)
		ws, resp, err := websocket.DefaultDialer.Dial(cdpURL, h)
		if err != nil {
			t.Fatalf("dial %s: %v %v", cdpURL, resp, err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	a, b := dial(), dial()
	send := func(ws *websocket.Conn, id int, method string, params any) {
		if err := ws.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
			t.Fatal(err)
		}
	}
	// a watches targets; b creates one: a sees it, b sees no event.
	send(a, 1, "Target.setDiscoverTargets", map[string]any{"discover": true})
	for i := range 20 {
		send(a, 100+i, "Browser.getVersion", nil)
		send(b, 100+i, "Target.getTargets", nil)
	}
	send(b, 500, "Target.createTarget", map[string]any{"url": "about:blank"})
	read := func(ws *websocket.Conn, want int, last int) (ids []int, events []string) {
		_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			var m struct {
				ID        *int            `json:"id"`
				Method    string          `json:"method"`
				Result    json.RawMessage `json:"result"`
				SessionID string          `json:"sessionId"`
			}
			if err := ws.ReadJSON(&m); err != nil {
				t.Fatalf("read: %v (ids %v)", err, ids)
			}
			if m.ID == nil {
				events = append(events, m.Method)
				continue
			}
			if m.SessionID != "" {
				t.Errorf("answer %d carries sessionId %s: the client's own session must be invisible", *m.ID, m.SessionID)
			}
			ids = append(ids, *m.ID)
			if *m.ID == last {
				return ids, events
			}
		}
	}
	idsB, evB := read(b, 21, 500)
	send(a, 999, "Browser.getVersion", nil)
	idsA, evA := read(a, 22, 999)
	if len(idsA) != 22 || len(idsB) != 21 {
		t.Errorf("a got ids %v, b got %v; want 22 and 21 answers, each its own", idsA, idsB)
	}
	if len(evB) != 0 {
		t.Errorf("b saw events %v; it asked for none", evB)
	}
	if !strings.Contains(strings.Join(evA, ","), "Target.targetCreated") {
		t.Errorf("a saw %v; want Target.targetCreated for b's tab", evA)
	}
	// A message naming a session the client does not own is refused.
	if err := a.WriteMessage(websocket.TextMessage, []byte(`{"id":7,"method":"Runtime.evaluate","sessionId":"`+strconv.Itoa(12345)+`"}`)); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if err := a.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
		if m["id"] != nil {
			break
		}
	}
	if e, _ := m["error"].(map[string]any); m["id"] != float64(7) || e["message"] != "Session with given id not found." {
		t.Errorf("a command on a foreign session: %v", m)
	}
}
