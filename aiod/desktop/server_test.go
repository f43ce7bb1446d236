package desktop

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestWrongMethod: a known path with another method is 405 with Allow,
// an unknown path 404, both in the envelope (aiod's own answers).
func TestWrongMethod(t *testing.T) {
	_, srv := testWorker(t, 320, 200)
	for _, tc := range []struct {
		method, path string
		code         int
		allow, msg   string
	}{
		{"GET", "/v2/computer/actions", 405, "POST", "Method Not Allowed"},
		{"DELETE", "/v2/computer/record", 405, "POST", "Method Not Allowed"},
		{"POST", "/v2/computer/screenshot", 405, "GET, HEAD", "Method Not Allowed"},
		{"GET", "/v2/computer/nope", 404, "", "Not Found"},
		{"GET", "/", 404, "", "Not Found"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := `{"success":false,"message":"` + tc.msg + `","data":null,"hint":null}`
		if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow || strings.TrimSpace(string(b)) != want ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d Allow=%q %q %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), b)
		}
	}
}
