package aiod

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startAiod runs the real aiod binary on a random loopback port.
func startAiod(t *testing.T, env []string, args ...string) *harness.Proc {
	t.Helper()
	cmd := exec.Command(harness.Bin(t, "aiod"), append([]string{"--port", "0"}, args...)...)
	cmd.Env = append(append(cmd.Environ(), harness.PinnedPorts(t)...), env...)
	return harness.Run(t, cmd, true)
}

func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestAiodDaemon starts the aiod binary: public health, the key from the
// environment, the envelope on unknown routes, and a clean SIGTERM.
func TestAiodDaemon(t *testing.T) {
	d := startAiod(t, []string{"AIO_API_KEY=s3cret"})
	if code, body := get(t, d.URL+"/health"); code != 200 || !strings.Contains(body, `"server":"aiod"`) {
		t.Errorf("health: %d %s", code, body)
	}
	if code, body := get(t, d.URL+"/v2/sandbox"); code != 401 || body != `{"success":false,"message":"Unauthorized","data":null,"hint":null}` {
		t.Errorf("no key: %d %s", code, body)
	}
	if code, body := get(t, d.URL+"/v2/sandbox", "Authorization", "Bearer s3cret"); code != 200 || !strings.Contains(body, `"success":true`) {
		t.Errorf("with key: %d %s", code, body)
	}
	if code, body := get(t, d.URL+"/v2/nope", "X-API-Key", "s3cret"); code != 404 || body != `{"success":false,"message":"Not Found","data":null,"hint":null}` {
		t.Errorf("404: %d %s", code, body)
	}
	if strings.Contains(d.Logs(), "s3cret") {
		t.Errorf("the key reached the log:\n%s", d.Logs())
	}
	if !strings.Contains(d.Logs(), fmt.Sprintf("addr=%s", d.Addr)) {
		t.Errorf("first line does not say where it listens:\n%s", d.Logs())
	}
}

// TestAiodDaemonStalledBody: on the real binary, a client that sends its
// headers and half a body, then nothing, loses its connection once the
// body has made no progress for AIO_BODY_IDLE_TIMEOUT_SECS.
func TestAiodDaemonStalledBody(t *testing.T) {
	d := startAiod(t, []string{"AIO_BODY_IDLE_TIMEOUT_SECS=1"})
	c, err := net.DialTimeout("tcp", d.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second)) // the failure bound
	fmt.Fprintf(c, "POST /v2/commands HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"command\":\"echo ")
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the stalled body's connection is still open after 15 s")
	}
}

// TestAiodAuth checks requirements 49-53 on the real binary: 401 body,
// every way to send the key, public prefixes, /metrics protected, and
// /internal/auth for a gateway.
func TestAiodAuth(t *testing.T) {
	d := startAiod(t, []string{"AIO_API_KEY=k3y"})
	unauth := `{"success":false,"message":"Unauthorized","data":null,"hint":null}`
	for _, c := range []struct {
		path   string
		hdr    []string
		status int
	}{
		{"/v2/commands/sessions", nil, 401},
		{"/v2/commands/sessions", []string{"Authorization", "Bearer wrong"}, 401},
		{"/v2/commands/sessions", []string{"Authorization", "Bearer k3y"}, 200},
		{"/v2/commands/sessions", []string{"X-API-Key", "k3y"}, 200},
		{"/v2/commands/sessions?api_key=k3y", nil, 200},
		{"/v2/fs/list?path=/", nil, 401},
		{"/v1/capabilities", nil, 401},
		{"/metrics", nil, 401},
		{"/metrics", []string{"X-API-Key", "k3y"}, 200},
		{"/health", nil, 200},
		{"/v1/ping", nil, 200},
		{"/v2/openapi.json", nil, 200},
		{"/v1/openapi.json", nil, 200},
	} {
		code, body := get(t, d.URL+c.path, c.hdr...)
		if code != c.status || (code == 401 && body != unauth) {
			t.Errorf("%s %v: %d %.120s", c.path, c.hdr, code, body)
		}
	}
	for _, c := range []struct {
		uri    string
		hdr    []string
		status int
	}{
		{"/v2/fs/list", nil, 401},
		{"/v2/fs/list", []string{"Authorization", "Bearer k3y"}, 204},
		{"/health", nil, 204},
		{"/v2/openapi.json?x=1", nil, 204},
		// Hostile forms: cleaned, decoded once, matched at a "/" boundary.
		{"/health/../v2/commands", nil, 401},
		{"/health/%2e%2e/vnc/", nil, 401},
		{"/health/%252e%252e/v2/commands", nil, 401},
		{"/health%2f..%2fmetrics", nil, 401},
		{"/health/..\\metrics", nil, 401},
		{"/health;/../metrics", nil, 401},
		{"//health/../../metrics", nil, 401},
		{"/healthcheck-admin", nil, 401},
		{"/internal/authz/x", nil, 401},
		{"/metrics#/health", nil, 401},
		{"/health/x", nil, 204},
		{"/health/../v2/commands", []string{"X-API-Key", "k3y"}, 204},
	} {
		code, body := get(t, d.URL+"/internal/auth", append([]string{"X-Original-URI", c.uri}, c.hdr...)...)
		if code != c.status || body != "" {
			t.Errorf("internal/auth %s: %d %q", c.uri, code, body)
		}
	}
	if code, _ := get(t, d.URL+"/metrics", "X-API-Key", "k3y"); code == 200 {
		_, body := get(t, d.URL+"/metrics", "X-API-Key", "k3y")
		if !strings.Contains(body, `http_requests_total{method="GET",route="GET /health",status="200"}`) {
			t.Errorf("metrics lack the request counter:\n%.400s", body)
		}
	}
}

// TestAiodReplay replays the documented request examples of each plane
// (test/interop/aiod/python/aiod_replay.py, Python standard library only).
func TestAiodReplay(t *testing.T) {
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws)
	for _, plane := range []string{"commands", "files"} {
		t.Run(plane, func(t *testing.T) {
			harness.RunScenarios(t, nil, "/usr/bin/python3", "test/interop/aiod/python/aiod_replay.py", d.URL, ws, plane)
		})
	}
}

// TestAiodInfo holds the info routes to the OpenAPI on the real binary.
func TestAiodInfo(t *testing.T) {
	d := startAiod(t, nil)
	a := &aio{t: t, base: d.URL}
	code, e := a.call("GET", "/v2/sandbox", "/v2/sandbox", nil)
	m := e.obj()
	caps, _ := m["capabilities"].(map[string]any)
	if code != 200 || caps == nil || m["version"] != "0.9.2" {
		t.Errorf("sandbox: %d %s", code, e.raw)
	}
	code, e = a.call("GET", "/v1/capabilities", "/v1/capabilities?refresh=true", nil)
	if m := e.obj(); code != 200 || m["exec"].(map[string]any)["bash"] != true {
		t.Errorf("capabilities: %d %s", code, e.raw)
	}
	code, e = a.call("GET", "/v2/sandbox/packages", "/v2/sandbox/packages?lang=python", nil)
	if code != 200 || !strings.Contains(string(e.Data), "  - ") {
		t.Errorf("packages: %d %.200s", code, e.raw)
	}
	code, e = a.call("GET", "/v2/sandbox/packages", "/v2/sandbox/packages?lang=ruby", nil)
	if code != 400 || e.Message != `unknown lang "ruby": expected python or nodejs` {
		t.Errorf("ruby: %d %s", code, e.raw)
	}
}
