package computer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAdminRefusesWebPages: the management plane has no key, so the Host
// and Origin rule is its only wall against a web page (a rebound name, or
// a fetch from another site). The CLI's own requests pass.
func TestAdminRefusesWebPages(t *testing.T) {
	c, err := New(Options{Server: "http://127.0.0.1:1", Office: "o", Name: "pc"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.AdminHandler(nil))
	defer srv.Close()
	cases := []struct {
		name, host, origin string
		status             int
		body               string
	}{
		{"cli", "", "", 200, `{"name":"pc","office":"o","joined":false,"servers":[]}`},
		{"rebound host", "evil.example:8001", "", 421,
			`{"code":421,"message":"Host \"evil.example:8001\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host"}`},
		{"other origin", "", "http://evil.example", 403,
			`{"code":403,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/status", nil)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(b) != tc.body+"\n" {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode, b, tc.status, tc.body)
			}
		})
	}
}
