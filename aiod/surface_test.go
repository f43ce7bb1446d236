package aiod

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInV2Surface(t *testing.T) {
	for _, c := range []struct {
		path string
		in   bool
	}{
		{"/v2/commands", true},
		{"/v2/pty/sessions/x/ws", true},
		{"/v2", true},
		{"/v2/", true},
		{"/mcp", true},
		{"/mcp/", true},
		{"/metrics", true},
		{"/health", true},
		{"/v1/ping", true},
		{"/v1/openapi.json", true},
		{"/v2/openapi.json", true},
		{"/internal/auth", true},
		{"/", true},
		{"//v2/commands", true},
		{"/%76%32/sandbox", true}, // "/v2/sandbox", encoded
		{"/v2/fs/read?path=/v1/x", true},
		{"/v1/capabilities", false},
		{"/v1/bash/exec", false},
		{"/v1/file/read", false},
		{"/v1/shell/ws", false},
		{"/v2x", false},
		{"/mcpx", false},
		{"/metricsx", false},
		{"/V2/commands", false},
		{"/v2/../v1/bash/exec", false},
		{"/v2/%2e%2e/v1/bash/exec", false},
		{"/v2%2F..%2Fv1/file/read", false},
		{"/health/../v1/capabilities", false},
		{"/v2%252f..%252fv1", false}, // double encoding
		{"/v2/a\\b", false},
		{"/v2/a;b", false},
		{"/v2/a%00", false},
		{"/v2/a%zz", false},
		{"v2/commands", false},
		{"", false},
	} {
		if got := inV2Surface(c.path); got != c.in {
			t.Errorf("%q: in v2 surface %v, want %v", c.path, got, c.in)
		}
	}
}

// TestCleanRouteMatchesPublicRoute holds the surface's path cleaning to
// the one publicRoute applies: the same paths are refused, and a cleaned
// path is public exactly when publicRoute says the raw one is.
func TestCleanRouteMatchesPublicRoute(t *testing.T) {
	for _, raw := range []string{"/health", "/health/", "/health/x", "/healthcheck", "/v1/ping", "/v1/ping/../../v2/x", "/%68ealth",
		"/health%2f..%2fv2", "/health%252f", "/health\\x", "/health;x", "/health%0a", "health", "", "/", "//", "/./health", "/x/../health",
		"/v2/openapi.json?x=1", "/internal/auth#f", "/%zz"} {
		p, ok := cleanRoute(raw)
		public := ok && p == "/"
		for _, r := range publicRoutes {
			public = public || (ok && (p == r || strings.HasPrefix(p, r+"/")))
		}
		if public != publicRoute(raw) {
			t.Errorf("%q: cleanRoute gives %q, %v; publicRoute says %v", raw, p, ok, publicRoute(raw))
		}
	}
}

// TestAPISurfaceRoutes: the v2 surface on the daemon's real routes, the
// refused ones answering exactly as an unknown route.
func TestAPISurfaceRoutes(t *testing.T) {
	notFound := `{"success":false,"message":"Not Found","data":null,"hint":null}`
	for _, surface := range []string{"", SurfaceFull, SurfaceV2} {
		url := start(t, Config{APISurface: surface, APIKey: "k", Workspace: t.TempDir()})
		key := map[string]string{"X-API-Key": "k"}
		v2 := surface == SurfaceV2
		for _, c := range []struct {
			method, path string
			refused      bool // on the v2 surface
		}{
			{"GET", "/v2/sandbox", false},
			{"GET", "/%76%32/sandbox", false},
			{"GET", "/v2/commands/sessions", false},
			{"GET", "/health", false},
			{"GET", "/v1/ping", false},
			{"GET", "/v1/openapi.json", false},
			{"GET", "/v2/openapi.json", false},
			{"GET", "/metrics", false},
			{"GET", "/v1/capabilities", true},
			{"GET", "/v1/sandbox", true},
			{"GET", "/v1/bash/sessions", true},
			{"POST", "/v1/file/list", true},
			{"GET", "/v1/shell/sessions", true},
		} {
			resp, body := do(t, c.method, url+c.path, "", key)
			refused := v2 && c.refused
			switch {
			case refused && (resp.StatusCode != 404 || strings.TrimSpace(body) != notFound || resp.Header.Get("Content-Type") != "application/json"):
				t.Errorf("surface %q %s %s: %d %s %s, want the 404 envelope", surface, c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			case !refused && resp.StatusCode == 404:
				t.Errorf("surface %q %s %s: %d %s", surface, c.method, c.path, resp.StatusCode, body)
			}
		}
		// An encoded dot-dot out of /v2 is refused on the v2 surface (the
		// mux of the full surface does not route it either).
		if resp, body := do(t, "GET", url+"/v2/%2e%2e/v1/capabilities", "", key); resp.StatusCode != 404 || strings.TrimSpace(body) != notFound {
			t.Errorf("surface %q encoded dot-dot: %d %s", surface, resp.StatusCode, body)
		}
		// The unknown route answers the same bytes on every surface.
		if resp, body := do(t, "GET", url+"/v2/nope", "", key); resp.StatusCode != 404 || strings.TrimSpace(body) != notFound {
			t.Errorf("surface %q unknown route: %d %s", surface, resp.StatusCode, body)
		}
		// The key is still asked first: a refused route without it is 401.
		if resp, _ := do(t, "GET", url+"/v1/capabilities", "", nil); resp.StatusCode != 401 {
			t.Errorf("surface %q /v1/capabilities without the key: %d", surface, resp.StatusCode)
		}
		// /mcp is reached (whatever it answers, not the 404 of a refused route).
		if resp, body := do(t, "POST", url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
			map[string]string{"X-API-Key": "k", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}); resp.StatusCode == 404 {
			t.Errorf("surface %q /mcp: %d %s", surface, resp.StatusCode, body)
		}
	}
}

// TestAPISurfaceFullIsIdentity: full and "" hand the handler through.
func TestAPISurfaceFullIsIdentity(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) })
	for _, s := range []string{"", SurfaceFull} {
		rec := httptest.NewRecorder()
		apiSurface(s, h).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/anything", nil))
		if rec.Code != 299 {
			t.Errorf("%q: %d", s, rec.Code)
		}
	}
}
