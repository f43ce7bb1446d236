package console

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAiod records the requests it gets and answers with a cookie, a
// script-friendly type, and for /v2/commands a streamed body.
type fakeAiod struct {
	mu      sync.Mutex
	got     []*http.Request
	bodies  []string
	release chan struct{}
}

func (f *fakeAiod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.got = append(f.got, r.Clone(r.Context()))
	f.bodies = append(f.bodies, string(b))
	f.mu.Unlock()
	w.Header().Set("Set-Cookie", "sandbox=1")
	w.Header().Set("Content-Security-Policy", "default-src *")
	if strings.HasSuffix(r.URL.Path, "/v2/commands") {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte("{\"out\":\"first\"}\n"))
		w.(http.Flusher).Flush()
		<-f.release
		_, _ = w.Write([]byte("{\"out\":\"second\"}\n"))
		return
	}
	w.Header().Set("Content-Type", "text/html")
	_, _ = w.Write([]byte("<script>alert(1)</script>"))
}

func (f *fakeAiod) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		t.Fatal("the sandbox got nothing")
	}
	return f.got[len(f.got)-1], f.bodies[len(f.bodies)-1]
}

func (f *fakeAiod) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

func TestSandboxProxy(t *testing.T) {
	f := &fakeAiod{release: make(chan struct{})}
	box := httptest.NewServer(f)
	defer box.Close()
	defer close(f.release)
	h := newHub(t, testToken, Sandbox{Name: "sb", URL: box.URL + "/base/", Token: "box-key"})
	c := h.client(t)
	// Logged out: 401, nothing reaches the sandbox.
	if resp, _ := c.get("/api/console/sandboxes/sb/api/v2/fs/list"); resp.StatusCode != 401 || f.count() != 0 {
		t.Fatalf("logged out: %d", resp.StatusCode)
	}
	c.login(testToken)
	if _, body := c.get("/api/console/sandboxes"); body != `{"sandboxes":[{"name":"sb","url":"`+box.URL+`/base/"}]}` {
		t.Fatalf("sandboxes: %s", body)
	}

	// A read, with the client's credentials stripped and the sandbox's key added.
	req, _ := http.NewRequest("GET", h.url+"/api/console/sandboxes/sb/api/v2/fs/list?path=%2Fws&depth=1", nil)
	req.Header.Set("Cookie", CookieName+"="+c.cookie+"; other=1")
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("X-Api-Key", testToken)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "<script>alert(1)</script>" {
		t.Fatalf("proxied read: %d %s", resp.StatusCode, body)
	}
	got, _ := f.last(t)
	if got.URL.Path != "/base/v2/fs/list" || got.URL.RawQuery != "path=%2Fws&depth=1" {
		t.Fatalf("the sandbox got %s", got.URL)
	}
	if got.Header.Get("X-Api-Key") != "box-key" || got.Header.Get("Cookie") != "" || got.Header.Get("Authorization") != "" ||
		got.Header.Get("Origin") != "" || got.Header.Get("Accept") != "application/json" {
		t.Fatalf("the sandbox got headers %v", got.Header)
	}
	if resp.Header.Get("Set-Cookie") != "" {
		t.Fatal("the sandbox's cookie reached the client")
	}
	csp := resp.Header.Values("Content-Security-Policy")
	if len(csp) != 2 || csp[0] != cspWant || csp[1] != "default-src 'none'; sandbox" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("CSP %q", csp)
	}

	// A write needs the hub's origin; its body is passed on.
	if resp, _ := c.do("POST", "/api/console/sandboxes/sb/api/v2/fs/write", "", "application/json", `{"path":"/ws/a"}`); resp.StatusCode != 403 {
		t.Fatalf("write without Origin: %d", resp.StatusCode)
	}
	if resp, _ := c.do("POST", "/api/console/sandboxes/sb/api/v2/fs/write", "self", "application/json", `{"path":"/ws/a"}`); resp.StatusCode != 200 {
		t.Fatalf("write: %d", resp.StatusCode)
	}
	if got, body := f.last(t); got.Method != "POST" || body != `{"path":"/ws/a"}` || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the sandbox got %s %s", got.Method, body)
	}

	// Routes outside the allowlist, traversal, unknown sandboxes: 404, and
	// the sandbox sees none of them.
	before := f.count()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/console/sandboxes/sb/api/v1/browser/info"},
		{"GET", "/api/console/sandboxes/sb/api/v2/pty/ws"},
		{"GET", "/api/console/sandboxes/sb/api/v1/shell/ws"},
		{"GET", "/api/console/sandboxes/sb/api/v2/computer/screenshot"},
		{"POST", "/api/console/sandboxes/sb/api/mcp"},
		{"GET", "/api/console/sandboxes/sb/api/health"},
		{"POST", "/api/console/sandboxes/sb/api/v1/sandbox/hooks"},
		{"POST", "/api/console/sandboxes/sb/api/v1/sandbox"},
		{"GET", "/api/console/sandboxes/sb/api/v2/fs"},
		{"GET", "/api/console/sandboxes/sb/api/v2/commandsx"},
		{"GET", "/api/console/sandboxes/sb/api/v2/fs/%2e%2e/%2e%2e/v1/browser/info"},
		{"GET", "/api/console/sandboxes/sb/api/v2/fs/..%2f..%2fv1%2fbrowser%2finfo"},
		{"GET", "/api/console/sandboxes/sb/api/v2/fs/list%5c..%5c"},
		{"GET", "/api/console/sandboxes/nope/api/v2/fs/list"},
		{"GET", "/api/console/sandboxes/sb/api/"},
	} {
		resp, body := c.do(tc.method, tc.path, "self", "", "")
		if resp.StatusCode != 404 || !strings.HasPrefix(body, `{"error":{"code":404,`) {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	// A path the mux cleans is redirected to where nothing is served.
	resp, _ = c.do("GET", "/api/console/sandboxes/sb/api/../../etc", "", "", "")
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 {
		if r2, body := c.get(loc); r2.StatusCode != 404 || !strings.HasPrefix(body, `{"error":{"code":404,`) {
			t.Errorf("traversal redirected to %s: %d", loc, r2.StatusCode)
		}
	} else if resp.StatusCode != 404 {
		t.Errorf("traversal: %d", resp.StatusCode)
	}
	// An upgrade (WebSocket) is refused.
	req, _ = http.NewRequest("GET", h.url+"/api/console/sandboxes/sb/api/v2/watch", nil)
	req.Header.Set("Cookie", CookieName+"="+c.cookie)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("upgrade: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if f.count() != before {
		t.Fatalf("the sandbox got %d refused requests", f.count()-before)
	}

	// A command's output streams: the first line arrives before the
	// command ends.
	req, _ = http.NewRequest("POST", h.url+"/api/console/sandboxes/sb/api/v2/commands", strings.NewReader(`{"command":"x"}`))
	req.Header.Set("Cookie", CookieName+"="+c.cookie)
	req.Header.Set("Origin", h.url)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "{\"out\":\"first\"}\n" {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first line did not stream")
	}
}

func TestSandboxProxyDown(t *testing.T) {
	box := httptest.NewServer(http.NotFoundHandler())
	u := box.URL
	box.Close()
	h := newHub(t, "", Sandbox{Name: "sb", URL: u})
	c := h.client(t)
	if resp, body := c.get("/api/console/sandboxes/sb/api/v2/fs/list"); resp.StatusCode != 502 || body != `{"error":{"code":502,"message":"the sandbox did not answer"}}` {
		t.Fatalf("down: %d %s", resp.StatusCode, body)
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		ok           bool
	}{
		{"GET", "v2/fs/list", true},
		{"POST", "v1/file/read", true},
		{"POST", "v1/bash/exec", true},
		{"POST", "v1/shell/exec", true},
		{"POST", "v1/jupyter/execute", true},
		{"POST", "v1/code/execute", true},
		{"POST", "v2/code/execute", true},
		{"POST", "v2/commands", true},
		{"GET", "v2/commands/abc", true},
		{"DELETE", "v2/watch/w1", true},
		{"GET", "v2/sandbox", true},
		{"HEAD", "v1/sandbox", true},
		{"DELETE", "v2/sandbox", false},
		{"GET", "v2/sandbox/packages", false},
		{"GET", "v1/shell/ws", false},
		{"GET", "v1/shell/terminal-url", false},
		{"GET", "v2/fs/../../x", false},
		{"GET", "v2/fs/./list", false},
		{"GET", "v2/fs/a\\b", false},
		{"GET", "v2/fs/a\x00", false},
		{"GET", "", false},
		{"GET", "v2/fs/", false},
		{"GET", "v3/fs/list", false},
		{"GET", "v2/pty/sessions", false},
	} {
		if _, ok := checkPath(tc.method, tc.path); ok != tc.ok {
			t.Errorf("checkPath(%s, %q) = %v, want %v", tc.method, tc.path, ok, tc.ok)
		}
	}
}
