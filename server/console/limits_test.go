package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// wrappedHub is newHub with wrap around the hub's handler.
func wrappedHub(t *testing.T, token string, wrap func(http.Handler) http.Handler) *hub {
	t.Helper()
	cfg := server.Config{Calls: true}
	if token != "" {
		cfg.Auth = server.TokenAuth(token, "x-api-key")
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracing.NewRecorder(0, 0)
	con, err := New(Config{Server: srv, Token: token, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(wrap(srv.Handler()))
	t.Cleanup(func() {
		con.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return &hub{srv: srv, con: con, url: ts.URL, rec: rec}
}

// firstRead calls done at the first Read of a request body.
type firstRead struct {
	io.ReadCloser
	once *sync.Once
	done func()
}

func (f firstRead) Read(p []byte) (int, error) {
	f.once.Do(f.done)
	return f.ReadCloser.Read(p)
}

// Logins whose bodies arrive slowly all start reading before any of
// them has tried its token: the limit still lets only MaxFailedLogins
// wrong tokens through (the attempt is counted when the token is
// checked, in the same locked step as the check of the limit).
func TestLoginLimitSlowBodies(t *testing.T) {
	const n = 40
	var reading sync.WaitGroup
	reading.Add(n)
	h := wrappedHub(t, testToken, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/login" {
				r.Body = firstRead{r.Body, new(sync.Once), reading.Done}
			}
			next.ServeHTTP(w, r)
		})
	})
	u, _ := url.Parse(h.url)
	conns := make([]net.Conn, n)
	bodies := make([]string, n)
	for i := range n {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bodies[i] = url.Values{"token": {fmt.Sprintf("guess-%d", i)}}.Encode()
		// The headers and all of the body but its last byte.
		fmt.Fprintf(c, "POST /login HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nAccept: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
			u.Host, h.url, len(bodies[i]), bodies[i][:len(bodies[i])-1])
		conns[i] = c
	}
	waitGroup(t, &reading, 10*time.Second) // every handler reads its body
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.WriteString(c, bodies[i][len(bodies[i])-1:])
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[http.StatusUnauthorized] != MaxFailedLogins || codes[http.StatusTooManyRequests] != n-MaxFailedLogins {
		t.Fatalf("answers %v: want %d × 401 and %d × 429", codes, MaxFailedLogins, n-MaxFailedLogins)
	}
}

// waitGroup waits for wg, at most d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("timed out")
	}
}

var _ = strings.Contains
