package aiod

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
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
	if code, body := post(t, p.URL+"/v2/browser/actions", `{"action_type":"WAIT","duration":0.1}`); code != http.StatusNotFound {
		t.Errorf("POST /v2/browser/actions: %d %s, want 404", code, body)
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

// post sends a JSON body and returns the status and the trimmed body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
