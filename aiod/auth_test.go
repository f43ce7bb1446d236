package aiod

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// hostilePaths are request paths (as sent on the wire) that must not be
// taken for a public route, and the public ones they imitate.
var hostilePaths = []struct {
	path   string
	public bool
}{
	{"/", true},
	{"/health", true},
	{"/health/", true},
	{"/health?x=1", true},
	{"/health#frag", true},
	{"/health/x", true},
	{"//health", true},
	{"/v1/ping", true},
	{"/v2/openapi.json", true},
	{"/v1/openapi.json?x=/../v2/commands", true},
	{"/internal/auth", true},
	{"/%68ealth", true}, // an encoded letter decodes to the route itself

	{"", false},
	{"health", false},
	{"/v2/commands", false},
	{"/metrics", false},
	{"/healthcheck-admin", false},
	{"/healthz", false},
	{"/internal/authz/x", false},
	{"/internal/authorize", false},
	{"/v1/pingx", false},
	{"/v2/openapi.jsonx", false},
	{"/health/../v2/commands", false},
	{"/health/./../v2/commands", false},
	{"/health/%2e%2e/vnc/", false},
	{"/health/%2E%2E/v2/commands", false},
	{"/health/.%2e/v2/commands", false},
	{"/health%2f..%2fv2/commands", false},
	{"/health%2F..%2Fv2%2Fcommands", false},
	{"/health/%252e%252e/v2/commands", false}, // double encoding
	{"/health/%25%32%65%25%32%65/v2", false},
	{"/health%252f..%252fmetrics", false},
	{"/health/..\\v2/commands", false},
	{"/health\\..\\metrics", false},
	{"/health/%5c..%5cmetrics", false},
	{"/health;/../v2/commands", false},
	{"/health/..;/v2/commands", false},
	{"/health;x=1", false},
	{"//health/../../metrics", false},
	{"/health/../../../metrics", false},
	{"/health/%zz", false},
	{"/health%", false},
	{"/health/%00/../metrics", false},
	{"/health%0a", false},
	{"/./metrics", false},
	{"/metrics?/health", false},
	{"/metrics#/health", false},
	{"/v2/commands/../../health/../v2/commands", false},
	{"http://127.0.0.1/health", false}, // absolute form: not a path
}

// TestPublicRoute: the one matching rule, on hostile forms.
func TestPublicRoute(t *testing.T) {
	for _, tc := range hostilePaths {
		if got := publicRoute(tc.path); got != tc.public {
			t.Errorf("publicRoute(%q) = %v, want %v", tc.path, got, tc.public)
		}
	}
}

// TestInternalAuthHostileURIs: /internal/auth answers 204 without the key
// only for the public routes, whatever form X-Original-URI takes.
func TestInternalAuthHostileURIs(t *testing.T) {
	base := start(t, Config{APIKey: "k3y"})
	for _, tc := range hostilePaths {
		want := map[bool]int{true: 204, false: 401}[tc.public]
		resp, body := do(t, "GET", base+"/internal/auth", "", map[string]string{"X-Original-URI": tc.path})
		if resp.StatusCode != want || body != "" {
			t.Errorf("X-Original-URI %q: %d %q, want %d", tc.path, resp.StatusCode, body, want)
		}
		// The key still opens every one of them.
		resp, _ = do(t, "GET", base+"/internal/auth", "", map[string]string{"X-Original-URI": tc.path, "X-API-Key": "k3y"})
		if resp.StatusCode != 204 {
			t.Errorf("X-Original-URI %q with the key: %d", tc.path, resp.StatusCode)
		}
	}
}

// TestAuthMiddlewareHostilePaths: the middleware applies the same rule
// to the request line as sent: no hostile form reaches a protected
// handler (or a redirect to one) without the key.
func TestAuthMiddlewareHostilePaths(t *testing.T) {
	base := start(t, Config{APIKey: "k3y"})
	u, _ := url.Parse(base)
	for _, tc := range hostilePaths {
		if tc.public || !strings.HasPrefix(tc.path, "/") || strings.ContainsAny(tc.path, "#\n") {
			continue
		}
		if strings.Contains(tc.path, "%0a") || strings.Contains(tc.path, "%00") {
			continue // Go's server refuses these request lines itself
		}
		status := rawGet(t, u.Host, tc.path)
		if status != 401 && status != 400 {
			t.Errorf("GET %s without the key: %d, want 401", tc.path, status)
		}
	}
	if status := rawGet(t, u.Host, "/health"); status != 200 {
		t.Errorf("GET /health: %d", status)
	}
}

// rawGet sends a request line exactly as given and returns the status.
func rawGet(t *testing.T, host, target string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
