package planetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
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

// httpClient bounds every request of a test (long polls wait up to 60 s).
var httpClient = &http.Client{Timeout: 2 * time.Minute}

// Client sends JSON requests to a plane's test server and decodes the
// answers; failures end the test.
type Client struct {
	T   testing.TB
	URL string
}

// Do sends method path with body (nil, a string sent as it is, or a value
// sent as JSON) and returns the status, the decoded answer and its raw
// bytes.
func (c Client) Do(method, path string, body any) (int, api.Reply, []byte) {
	c.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.T.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.URL+path, rd)
	if err != nil {
		c.T.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r api.Reply
	if err := json.Unmarshal(raw, &r); err != nil {
		c.T.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, r, raw
}

// OK sends a request that must answer 200 with success true and decodes
// its data into out (when non-nil).
func (c Client) OK(method, path string, body, out any) {
	c.T.Helper()
	st, r, _ := c.Do(method, path, body)
	if st != http.StatusOK || !r.Success {
		c.T.Fatalf("%s %s: %d %s %s", method, path, st, r.Message, r.Data)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			c.T.Fatalf("%s %s data %s: %v", method, path, r.Data, err)
		}
	}
}

// Fails sends a request that must answer status with success false; it
// returns the message.
func (c Client) Fails(status int, method, path string, body any) string {
	c.T.Helper()
	st, r, _ := c.Do(method, path, body)
	if st != status || r.Success {
		c.T.Fatalf("%s %s: want %d, got %d %s %s", method, path, status, st, r.Message, r.Data)
	}
	return r.Message
}

// SameJSON reports whether two JSON texts hold the same value, whatever
// their key order and spacing.
func SameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// DeadURL is an http URL on loopback where nothing listens (a port that
// was free a moment ago): a worker or browser that is down.
func DeadURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}
