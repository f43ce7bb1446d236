package aiod

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestCDPRouteAuth: aiod serves /cdp itself (not only a2c up), behind
// its key by the rule of every route: Authorization: Bearer, x-api-key
// or ?api_key=; anything else is 401 and reaches no browser. Without
// --browser, /cdp goes to the browser at CDPEndpoint with the prefix
// and the key removed.
func TestCDPRouteAuth(t *testing.T) {
	// Only the test's own requests (marked) count: the daemon probes the
	// browser's /json/version itself, at times of its own.
	var mu sync.Mutex
	var reached []string
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Cdp-Test") != "" {
			mu.Lock()
			reached = append(reached, r.URL.Path+"?"+r.URL.RawQuery)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	}))
	defer back.Close()
	d, err := New(Config{Workspace: t.TempDir(), APIKey: "T", CDPEndpoint: back.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Shutdown(context.Background()) }()
	for _, tc := range []struct {
		name, target string
		hdr          [2]string
		code         int
		want         string // what reached the browser, "" for nothing
	}{
		{"missing", "/cdp/json/version", [2]string{}, 401, ""},
		{"wrong", "/cdp/json/version?api_key=U", [2]string{}, 401, ""},
		{"wrong-header", "/cdp/json/list", [2]string{"X-Api-Key", "U"}, 401, ""},
		{"query", "/cdp/json/list?api_key=T", [2]string{}, 200, "/json/list?"},
		{"x-api-key", "/cdp/json/list", [2]string{"X-Api-Key", "T"}, 200, "/json/list?"},
		{"bearer", "/cdp/json/version", [2]string{"Authorization", "Bearer T"}, 200, "/json/version?"},
		{"bearer-any-case", "/cdp/json/version", [2]string{"Authorization", "bearer T"}, 200, "/json/version?"},
		{"bearer-wrong", "/cdp/json/version", [2]string{"Authorization", "Bearer U"}, 401, ""},
		{"not-bearer", "/cdp/json/version", [2]string{"Authorization", "T"}, 401, ""},
		{"new-keeps-query", "/cdp/json/new?http://x/?a=1&api_key=T", [2]string{}, 200, "/json/new?http://x/?a=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			reached = nil
			mu.Unlock()
			req := httptest.NewRequest(http.MethodGet, tc.target, nil)
			req.Header.Set("X-Cdp-Test", "1")
			req.Host = "127.0.0.1" // httptest's example.com is not a name the daemon answers to
			if tc.hdr[0] != "" {
				req.Header.Set(tc.hdr[0], tc.hdr[1])
			}
			w := httptest.NewRecorder()
			d.Handler().ServeHTTP(w, req)
			mu.Lock()
			got := strings.Join(reached, ",")
			mu.Unlock()
			if w.Code != tc.code || got != tc.want {
				t.Errorf("%s: %d %q, reached %q; want %d, %q", tc.target, w.Code, w.Body.String(), got, tc.code, tc.want)
			}
		})
	}
}
