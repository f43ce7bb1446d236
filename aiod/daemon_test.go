package aiod

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

func start(t *testing.T, cfg Config) string {
	t.Helper()
	d, err := New(pinPorts(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(d.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

func do(t *testing.T, method, url string, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestPublicAndEnvelopes(t *testing.T) {
	url := start(t, Config{Revision: "abc"})
	resp, body := do(t, "GET", url+"/health", "", nil)
	if resp.StatusCode != 200 || strings.TrimSpace(body) != `{"status":"ok","version":"0.9.2","server":"aiod","revision":"abc"}` {
		t.Errorf("health: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", url+"/v1/ping", "", nil)
	if resp.StatusCode != 200 || strings.TrimSpace(body) != `{"success":true,"message":"Operation successful","data":"pong","hint":null}` {
		t.Errorf("ping: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", url+"/nope", "", nil)
	if resp.StatusCode != 404 || strings.TrimSpace(body) != `{"success":false,"message":"Not Found","data":null,"hint":null}` {
		t.Errorf("404: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", url+"/health", "", nil)
	if resp.StatusCode != 405 || strings.TrimSpace(body) != `{"success":false,"message":"Method Not Allowed","data":null,"hint":null}` {
		t.Errorf("405: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/v2/openapi.json", "/v1/openapi.json"} {
		resp, body = do(t, "GET", url+p, "", nil)
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &doc) != nil || len(doc.Paths) < 60 {
			t.Errorf("%s: %d, %d paths", p, resp.StatusCode, len(doc.Paths))
		}
	}
	resp, body = do(t, "GET", url+"/v2/sandbox", "", nil)
	var env api.Envelope
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &env) != nil || !env.Success || env.Data.(map[string]any)["version"] != "0.9.2" {
		t.Errorf("sandbox: %d %s", resp.StatusCode, body)
	}
}

func TestRequestID(t *testing.T) {
	url := start(t, Config{})
	resp, _ := do(t, "GET", url+"/health", "", map[string]string{"X-Request-Id": "req-42"})
	if resp.Header.Get("X-Tt-Logid") != "req-42" {
		t.Errorf("echo = %q", resp.Header.Get("X-Tt-Logid"))
	}
	resp, _ = do(t, "GET", url+"/health", "", map[string]string{"X-Tt-Logid": "tt-1", "X-Request-Id": "other"})
	if resp.Header.Get("X-Tt-Logid") != "tt-1" {
		t.Errorf("x-tt-logid first: %q", resp.Header.Get("X-Tt-Logid"))
	}
	resp, _ = do(t, "GET", url+"/health", "", nil)
	if len(resp.Header.Get("X-Tt-Logid")) != 32 {
		t.Errorf("generated id %q", resp.Header.Get("X-Tt-Logid"))
	}
}

func TestAuth(t *testing.T) {
	url := start(t, Config{APIKey: "k3y"})
	unauthorized := `{"success":false,"message":"Unauthorized","data":null,"hint":null}`
	for _, tc := range []struct {
		name, path string
		header     map[string]string
		want       int
	}{
		{"no key", "/v2/sandbox", nil, 401},
		{"wrong key", "/v2/sandbox", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"bearer", "/v2/sandbox", map[string]string{"Authorization": "Bearer k3y"}, 200},
		{"x-api-key", "/v2/sandbox", map[string]string{"X-API-Key": "k3y"}, 200},
		{"query key", "/v2/sandbox?api_key=k3y", nil, 200},
		{"metrics need the key", "/metrics", nil, 401},
		{"unknown routes need the key", "/nope", nil, 401},
		{"health is public", "/health", nil, 200},
		{"ping is public", "/v1/ping", nil, 200},
		{"openapi is public", "/v2/openapi.json", nil, 200},
	} {
		resp, body := do(t, "GET", url+tc.path, "", tc.header)
		if resp.StatusCode != tc.want || (tc.want == 401 && strings.TrimSpace(body) != unauthorized) {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
	}
	for _, tc := range []struct {
		orig   string
		header map[string]string
		want   int
	}{
		{"/v2/sandbox", nil, 401},
		{"/v2/sandbox", map[string]string{"X-API-Key": "k3y"}, 204},
		{"/health?x=1", nil, 204},
	} {
		h := map[string]string{"X-Original-URI": tc.orig}
		for k, v := range tc.header {
			h[k] = v
		}
		resp, body := do(t, "GET", url+"/internal/auth", "", h)
		if resp.StatusCode != tc.want || body != "" {
			t.Errorf("internal auth %s: %d %q", tc.orig, resp.StatusCode, body)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	url := start(t, Config{})
	big := `{"command":"` + strings.Repeat("x", api.MaxJSONBody) + `"}`
	resp, body := do(t, "POST", url+"/v2/commands", big, map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 413 || !strings.Contains(body, `"success":false`) {
		t.Errorf("413: %d %s", resp.StatusCode, body)
	}
}

func TestPackages(t *testing.T) {
	url := start(t, Config{})
	resp, body := do(t, "GET", url+"/v2/sandbox/packages", "", nil)
	if resp.StatusCode != 422 || strings.TrimSpace(body) !=
		`{"success":false,"message":"Request data validation failed","data":null,"errors":[{"location":["query","lang"],"message":"missing field `+"`lang`"+`","type":"value_error.missing"}]}` {
		t.Errorf("no lang: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", url+"/v2/sandbox/packages?lang=ruby", "", nil)
	if resp.StatusCode != 400 || !strings.Contains(body, `"message":"unknown lang \"ruby\": expected python or nodejs"`) {
		t.Errorf("ruby: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", url+"/v2/sandbox/packages?lang=python", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `  - `) {
		t.Errorf("python: %d %.200s", resp.StatusCode, body)
	}
}

// TestCORS: an origin given with --allowed-origin gets its own CORS
// headers (never a wildcard) and its preflight answered before the key
// is asked for; a preflight or a request from any other origin is
// refused 403 with no CORS header.
func TestCORS(t *testing.T) {
	url := start(t, Config{APIKey: "k", AllowedOrigins: []string{"http://app.example"}})
	preflight := map[string]string{"Origin": "http://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
	resp, body := do(t, "OPTIONS", url+"/v2/commands", "", preflight)
	if resp.StatusCode != 204 || body != "" || resp.Header.Get("Access-Control-Allow-Origin") != "http://app.example" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "authorization, content-type" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	resp, _ = do(t, "GET", url+"/v2/sandbox", "", map[string]string{"Origin": "http://app.example"})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "http://app.example" {
		t.Errorf("401 without CORS headers: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = do(t, "OPTIONS", url+"/v2/sandbox", "", nil)
	if resp.StatusCode != 401 {
		t.Errorf("a plain OPTIONS is not a preflight: %d", resp.StatusCode)
	}
	preflight["Origin"] = "http://evil.example"
	resp, body = do(t, "OPTIONS", url+"/v2/commands", "", preflight)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" ||
		body != `{"success":false,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin","data":null,"hint":null}`+"\n" {
		t.Errorf("preflight from another origin: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}
