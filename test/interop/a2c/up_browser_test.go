package a2c

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// ubCDPURLRE is the browser line of a2c up's banner.
var ubCDPURLRE = regexp.MustCompile(`(?m)^a2c up: browser cdp_url=(ws://127\.0\.0\.1:\d+/cdp/devtools/browser/[0-9a-f-]+)(\?api_key=\S+)? auth=(true|false)$`)

// ubStartUp runs a2c up --browser with token on random ports (the
// DevTools port too) and waits until it is ready; it returns the process
// and the banner's cdp_url (with ?api_key= as printed).
func ubStartUp(t *testing.T, token string, args ...string) (*harness.Proc, string) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		harness.MissingPeer(t, "chromium (Debian package chromium)")
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	cmd := exec.Command(harness.Bin(t, "a2c"), append([]string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0",
		"--workspace", ws, "--browser", "--token", token}, args...)...)
	cmd.Env = append(os.Environ(), "BROWSER_REMOTE_DEBUGGING_PORT="+strconv.Itoa(freePort(t)), "A2C_TOKEN=")
	p := harness.Run(t, cmd, true)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		logs := p.Logs()
		if strings.Contains(logs, "a2c up: ready") {
			m := ubCDPURLRE.FindStringSubmatch(logs)
			if m == nil {
				t.Fatalf("no cdp_url line in the banner:\n%s", logs)
			}
			if m[2] != "?api_key="+token || m[3] != "true" {
				t.Fatalf("cdp_url line %q: want ?api_key=%s and auth=true (the token was given with --token)", m[0], token)
			}
			return p, m[1] + m[2]
		}
		select {
		case <-p.Exited():
			t.Fatalf("a2c up --browser exited before it was ready; logs:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("a2c up --browser not ready after 60 s; logs:\n%s", logs)
		}
	}
}

// TestUpBrowserPlaywright: Playwright's Node client connects over the
// cdp_url a2c up --browser prints (its /cdp proxy, the token in the URL)
// and reads the title of a local page; a wrong or missing token is
// refused with 401 before anything reaches the browser.
func TestUpBrowserPlaywright(t *testing.T) {
	const title = "a2c up browser fixture"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>%s</title><p>hello</p>", title)
	}))
	defer page.Close()
	const token = "ub-s3cret"
	up, cdpURL := ubStartUp(t, token)

	res, err := harness.Playwright(t, cdpURL, page.URL+"/fixture.html")
	if err != nil || res["title"] != title {
		t.Fatalf("connectOverCDP(%s): %v, %v; want the title %q\nlogs:\n%s", cdpURL, res, err, title, up.Logs())
	}

	bare, _, _ := strings.Cut(cdpURL, "?")
	// Through the office, browser_get_info names the same proxy (an
	// Agent adds its token, as it has it).
	a := dialAgent(t, up.URL, "go-agent", agent.Options{Auth: map[string]any{"x-api-key": token}})
	if err := a.Join(ctx10(t), "default"); err != nil {
		t.Fatal(err)
	}
	res2, err := a.CallTool(ctx10(t), agent.Call{Computer: "sandbox", Tool: "sandbox__browser_get_info", Params: map[string]any{}, Timeout: 20 * time.Second})
	var info struct {
		CDPURL string `json:"cdp_url"`
	}
	if err != nil || res2.IsError || json.Unmarshal([]byte(toolText(t, res2)), &info) != nil || info.CDPURL != bare {
		t.Errorf("sandbox__browser_get_info: %v %+v; want cdp_url %s", err, res2, bare)
	}
	for _, u := range []string{bare, bare + "?api_key=wrong"} {
		res, err := harness.Playwright(t, u, page.URL)
		if err == nil || !strings.Contains(res["error"], "401") {
			t.Errorf("connectOverCDP(%s) = %v, %v; want a refusal with 401", u, res, err)
		}
	}

	endpoint := "http://" + strings.TrimPrefix(bare[:strings.Index(bare, "/cdp/")], "ws://") + "/cdp"
	// The HTTP side of the proxy: the token by header, and the /json
	// routes answered by the browser with the /cdp prefix removed.
	httpURL := endpoint + "/json/version"
	for _, tc := range []struct {
		hdr  [2]string
		code int
	}{{[2]string{"X-Api-Key", token}, 200}, {[2]string{"Authorization", "Bearer " + token}, 200}, {[2]string{"X-Api-Key", "no"}, 401}, {[2]string{}, 401}} {
		req, _ := http.NewRequest(http.MethodGet, httpURL, nil)
		if tc.hdr[0] != "" {
			req.Header.Set(tc.hdr[0], tc.hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != tc.code || tc.code == 200 && v["Browser"] == nil {
			t.Errorf("GET %s with %v: %d %v; want %d (and /json/version's Browser)", httpURL, tc.hdr, resp.StatusCode, v, tc.code)
		}
	}
	// A rebound name or another origin's page reaches no browser, token
	// or not: /cdp meets the sandbox API's Host and Origin rule.
	for _, tc := range []struct {
		host, origin string
		code         int
	}{{"evil.example", "", 421}, {"", "http://evil.example", 403}} {
		req, _ := http.NewRequest(http.MethodGet, httpURL, nil)
		req.Header.Set("X-Api-Key", token)
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("GET %s from Host %q, Origin %q: %d; want %d", httpURL, tc.host, tc.origin, resp.StatusCode, tc.code)
		}
	}
}

// TestUpBrowserNetworkNone: with the sandbox on a network of its own
// (--network none) the browser's DevTools port exists only inside it,
// as on another machine: Playwright still connects, over the printed
// cdp_url and over the http:// endpoint, whose /json/version must then
// name the proxy's WebSocket rather than the browser's own address.
func TestUpBrowserNetworkNone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--network none needs root here")
	}
	const title = "a2c up isolated browser"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<!doctype html><title>%s</title>", title)
	}))
	defer page.Close()
	const token = "ub-n0ne"
	up, cdpURL := ubStartUp(t, token, "--network", "none")
	// The page is served on the host's loopback, which the sandboxed
	// browser cannot reach: it gets a data: URL of the same page.
	pageURL := "data:text/html,<title>" + strings.ReplaceAll(title, " ", "%20") + "</title>"
	if res, err := harness.Playwright(t, cdpURL, pageURL); err != nil || res["title"] != title {
		t.Fatalf("connectOverCDP(%s): %v, %v\nlogs:\n%s", cdpURL, res, err, up.Logs())
	}
	bare, _, _ := strings.Cut(cdpURL, "?")
	endpoint := "http://" + strings.TrimPrefix(bare[:strings.Index(bare, "/cdp/")], "ws://") + "/cdp"
	if res, err := harness.Playwright(t, endpoint, pageURL, token); err != nil || res["title"] != title {
		t.Errorf("connectOverCDP(%s) with the token as x-api-key: %v, %v; want the title %q", endpoint, res, err, title)
	}
}

// ubDescendants is the pids below root whose command name is comm.
func ubDescendants(root int, comm string) []int {
	parent := map[int]int{}
	name := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fs := strings.Fields(s[end+1:])
		if len(fs) < 2 {
			continue
		}
		name[pid] = s[open+1 : end]
		parent[pid], _ = strconv.Atoi(fs[1])
	}
	var out []int
	for pid, c := range name {
		if c != comm {
			continue
		}
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// ubListeners is the TCP sockets in LISTEN state the pids hold (their fd
// links matched with /proc/<pid>/net/tcp and tcp6), as hex addr:port.
func ubListeners(pids []int) []string {
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
	}
	var out []string
	for _, pid := range pids {
		for _, f := range []string{"tcp", "tcp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
			for _, line := range strings.Split(string(b), "\n") {
				if fs := strings.Fields(line); len(fs) > 9 && fs[3] == "0A" && inodes[fs[9]] {
					out = append(out, fs[1])
				}
			}
		}
	}
	return out
}

// TestUpBrowserNoDevToolsPort: under a2c up --browser no process of
// Chromium's listens on a TCP port (it listened on the DevTools port,
// 127.0.0.1:9222 by default, which any local process could drive
// without the token); /cdp behind the token is the only way in.
func TestUpBrowserNoDevToolsPort(t *testing.T) {
	up, _ := ubStartUp(t, "ub-noport")
	pids := ubDescendants(up.Cmd().Process.Pid, "chromium")
	if len(pids) == 0 {
		t.Fatalf("no chromium below a2c up; logs:\n%s", up.Logs())
	}
	if l := ubListeners(pids); len(l) != 0 {
		t.Errorf("chromium listens on TCP %v (hex addr:port); want no port", l)
	}
}
