package browser

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPythonSDKShapes: the Python AIO SDK's browser_tabs.activate(index)
// sends PUT /v1/browser/tabs/{index}/activate and its clear_cookies()
// DELETE /v1/browser/cookies with no parameter; both answer 200 with the
// envelope (success, message, data) its Response model reads. v2 keeps
// asking what to delete.
func TestPythonSDKShapes(t *testing.T) {
	f := newFakeBrowser(t)
	var activated []string
	hook := func(send func(any), method, session string, params json.RawMessage) (any, string, bool) {
		if method == "Storage.getCookies" {
			return map[string]any{"cookies": []any{map[string]any{"name": "a", "domain": "x"}, map[string]any{"name": "b", "domain": "y"}}}, "", true
		}
		return nil, "", false
	}
	f.answer.Store(&hook)
	p := New(Config{CDPEndpoint: f.srv.URL})
	defer p.Close(context.Background())
	mux := http.NewServeMux()
	p.Mount(mux)
	back := f.srv.Config.Handler.(*http.ServeMux)
	back.HandleFunc("/json/activate/", func(w http.ResponseWriter, r *http.Request) {
		activated = append(activated, strings.TrimPrefix(r.URL.Path, "/json/activate/"))
		_, _ = w.Write([]byte("Target activated"))
	})
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"PUT", "/v1/browser/tabs/0/activate", 200, `{"success":true,"message":"Operation successful","data":{"id":"T1","title":"t","url":"about:blank","type":"page"},"hint":null}`},
		{"PUT", "/v1/browser/tabs/T1/activate", 200, `{"success":true,"message":"Operation successful","data":{"id":"T1","title":"t","url":"about:blank","type":"page"},"hint":null}`},
		{"PUT", "/v1/browser/tabs/1/activate", 404, `{"success":false,"message":"no tab at index 1","data":null,"hint":null}`},
		{"DELETE", "/v1/browser/cookies", 200, `{"success":true,"message":"Operation successful","data":{"count":2},"hint":null}`},
		{"DELETE", "/v2/browser/cookies", 400, ""},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if got := strings.TrimSpace(w.Body.String()); w.Code != tc.code || tc.body != "" && got != tc.body {
			t.Errorf("%s %s: %d %s; want %d %s", tc.method, tc.path, w.Code, got, tc.code, tc.body)
		}
	}
	if strings.Join(activated, ",") != "T1,T1" {
		t.Errorf("activated %v; want T1 twice", activated)
	}
	if n := strings.Count(strings.Join(f.sent(), ","), "Storage.clearCookies"); n != 1 {
		t.Errorf("Storage.clearCookies sent %d times, want 1", n)
	}
}
