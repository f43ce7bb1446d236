package desktop

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestWorkerRefusesWebPages: the worker's own port meets the Host and
// Origin rule before the key is asked for, so a page that found the port
// (a rebound name, or a fetch from another site) drives nothing.
func TestWorkerRefusesWebPages(t *testing.T) {
	wk := newWorker(":0", "", "", slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(wk.handler(time.Second))
	defer srv.Close()
	cases := []struct {
		name, host, origin string
		status             int
		body               string
	}{
		{"loopback", "", "", 200, `{"success":true,"message":"Operation successful","data":{"status":"ok"},"hint":null}`},
		{"rebound host", "evil.example:18100", "", 421,
			`{"success":false,"message":"Host \"evil.example:18100\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host","data":null,"hint":null}`},
		{"other origin", "", "http://evil.example", 403,
			`{"success":false,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin","data":null,"hint":null}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
			if c.host != "" {
				req.Host = c.host
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || string(b) != c.body+"\n" && string(b) != c.body {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode, b, c.status, c.body)
			}
		})
	}
}
