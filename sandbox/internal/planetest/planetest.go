// Package planetest serves an aiod plane for the planes' own tests: on a
// real loopback HTTP server, closed with the plane when the test ends.
package planetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Plane is what every aiod plane offers the daemon.
type Plane interface {
	Mount(mux *http.ServeMux)
	Close(ctx context.Context) error
}

// Serve mounts p on a real HTTP server; at cleanup the plane closes
// first (within 20 s, or the test fails), which ends its streams and
// sockets, then the server.
func Serve(t testing.TB, p Plane) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	p.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		srv.Close()
	})
	return srv
}
