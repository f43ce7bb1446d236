package computer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
)

// TestWorkerDown: every computer-use route and both v1 aliases answer
// the documented 503 envelope while no worker listens.
func TestWorkerDown(t *testing.T) {
	ts := planetest.Serve(t, New(Config{URL: planetest.DeadURL(t)}))
	defer ts.Close()
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v2/computer/info", ""},
		{"GET", "/v2/computer/screenshot", ""},
		{"POST", "/v2/computer/actions", `{"action_type":"MOVE_TO","x":1,"y":2}`},
		{"POST", "/v2/computer/actions/batch", `{"actions":[]}`},
		{"GET", "/v2/computer/cursor", ""},
		{"GET", "/v2/computer/clipboard", ""},
		{"GET", "/v2/computer/windows", ""},
		{"GET", "/v2/computer/accessibility", ""},
		{"GET", "/v2/computer/accessibility/nodes", ""},
		{"POST", "/v2/computer/record", `{"action":"status"}`},
		{"POST", "/v1/browser/actions", `{"action_type":"WAIT","duration":0.1}`},
		{"POST", "/v1/display/record", `{"action":"status"}`},
	} {
		req, _ := http.NewRequest(r.method, ts.URL+r.path, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := `{"success":false,"message":"computer-use worker is not available","data":null,"hint":"start computer-use or set AIO_COMPUTER_USE_URL"}`
		if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s %s: %d %s", r.method, r.path, resp.StatusCode, b)
		}
	}
}

// TestForward: a request reaches the worker with its method, path (the v1
// aliases mapped to their v2 paths), raw query, headers and body, minus
// hop-by-hop headers; the worker's status, headers and body come back
// unchanged.
func TestForward(t *testing.T) {
	type seen struct{ method, uri, body, key, conn, hop string }
	got := make(chan seen, 1)
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), string(b), r.Header.Get("X-Api-Key"), r.Header.Get("Connection"), r.Header.Get("X-Hop")}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("X-Image-Width", "640")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("\x89PNG raw"))
	}))
	defer worker.Close()
	ts := planetest.Serve(t, New(Config{URL: worker.URL + "/"}))
	defer ts.Close()
	for _, tc := range []struct{ path, want string }{
		{"/v2/computer/actions?include_screenshot=true&x=%2F", "/v2/computer/actions?include_screenshot=true&x=%2F"},
		{"/v1/browser/actions?include_screenshot=true", "/v2/computer/actions?include_screenshot=true"},
		{"/v1/display/record", "/v2/computer/record"},
	} {
		req, _ := http.NewRequest("POST", ts.URL+tc.path, strings.NewReader(`{"a":1}`))
		req.Header.Set("X-Api-Key", "k")
		req.Header.Set("Connection", "X-Hop")
		req.Header.Set("X-Hop", "dropped")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s := <-got
		if s.method != "POST" || s.uri != tc.want || s.body != `{"a":1}` || s.key != "k" || s.hop != "" {
			t.Errorf("%s: the worker saw %+v", tc.path, s)
		}
		if resp.StatusCode != http.StatusTeapot || string(b) != "\x89PNG raw" || resp.Header.Get("X-Image-Width") != "640" || resp.Header.Get("Content-Type") != "image/png" {
			t.Errorf("%s: relayed %d %q %v", tc.path, resp.StatusCode, b, resp.Header)
		}
	}
}

// TestProbe: no worker is "absent" with the published daemon's missing
// part and warning; a worker's /capabilities is reported as it says.
func TestProbe(t *testing.T) {
	dead := planetest.DeadURL(t)
	c := New(Config{URL: dead}).Probe(context.Background(), ":99")
	b, _ := json.Marshal(c)
	want := `{"status":"absent","provider":null,"display":":99","screenshot":false,"actions":false,"clipboard":false,"recording":false,"accessibility":false,"accessibility_backend":null,"resolution":{"width":null,"height":null},"missing":["computer-use"],"warnings":["computer-use worker probe failed: error sending request for url (` + dead + `/capabilities)"]}`
	if string(b) != want {
		t.Fatalf("no worker:\n got %s\nwant %s", b, want)
	}
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/capabilities" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"schema_version":1,"status":"ready","provider":"xvfb-lite","display":":7","screenshot":true,"actions":true,"clipboard":true,"recording":true,"accessibility":false,"accessibility_backend":null,"resolution":{"width":1920,"height":1080},"missing":[],"warnings":[]}`))
	}))
	defer worker.Close()
	c = New(Config{URL: worker.URL}).Probe(context.Background(), "")
	if c.Status != "ready" || *c.Provider != "xvfb-lite" || *c.Display != ":7" || !c.Screenshot || !c.Recording || c.Accessibility || *c.Resolution.Width != 1920 {
		t.Fatalf("worker: %+v", c)
	}
}
