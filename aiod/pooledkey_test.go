package aiod

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// TestPooledKeyStaysHome: a pool's daemon holds the pool's token, which
// opens every sandbox. Its computer and browser planes must neither
// present that token (nor forward a client's) to whatever listens on
// their loopback ports, nor reach the host's loopback from a sandbox
// with a network of its own. (Once, GET /v1/capabilities of any pool
// sandbox sent "Authorization: Bearer <pool token>" to the host's
// 127.0.0.1:18100, where a sandbox with network host, or any local
// user, could listen and take it.)
func TestPooledKeyStaysHome(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root here")
	}
	const key = "pool-token-3f9a"
	for _, tc := range []struct {
		network   string
		reachable bool // the host's loopback is the sandbox's
	}{
		{sandbox.NetworkNone, false},
		{sandbox.NetworkHost, true},
	} {
		t.Run(tc.network, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
				mu.Unlock()
				http.NotFound(w, r)
			}))
			defer spy.Close()
			ws := t.TempDir()
			sb, err := sandbox.New(sandbox.Config{Workspace: ws, Network: tc.network, Name: "key-" + tc.network, UID: 1900000111, GID: 1900000111}, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := New(Config{Workspace: ws, Sandbox: sb, Pooled: true, APIKey: key, CDPEndpoint: spy.URL, ComputerUseURL: spy.URL})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Shutdown(context.Background())
			h := d.Handler()
			for _, path := range []string{"/v1/capabilities", "/v2/computer/info", "/v2/browser/info"} {
				req := httptest.NewRequest("GET", "http://127.0.0.1"+path, nil)
				req.Header.Set("x-api-key", key)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range seen {
				if strings.Contains(s, key) {
					t.Errorf("the pool's token reached a loopback port: %s", s)
				}
			}
			if !tc.reachable && len(seen) > 0 {
				t.Errorf("a sandbox with a network of its own reached the host's loopback: %q", seen)
			}
		})
	}
}
