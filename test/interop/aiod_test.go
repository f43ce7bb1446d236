package interop

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startAiod runs the real aiod binary on a random loopback port.
func startAiod(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	bin := filepath.Join(filepath.Dir(binPath), "aiod")
	if _, err := exec.LookPath(bin); err != nil {
		build := exec.Command("go", "build", "-o", bin, "./cmd/aiod")
		build.Dir = moduleRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build aiod: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, append([]string{"--port", "0"}, args...)...)
	cmd.Env = append(cmd.Environ(), env...)
	return run(t, cmd, true)
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
