package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/internal/origin"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestOriginsRefuseWebPages: a handshake from another origin (polling or
// a direct WebSocket) or to a rebound name is answered 403 or 421 with
// the flat ErrorPayload (no Engine.IO open packet: no session, nothing
// to join with); a handshake without
// Origin, or from the server's own origin, opens one.
func TestOriginsRefuseWebPages(t *testing.T) {
	pol, err := origin.New(origin.Config{Listen: "127.0.0.1:0", Origins: []string{"https://app.example"}})
	if err != nil {
		t.Fatal(err)
	}
	_, url := newTestServer(t, Config{Origins: pol})
	host := strings.TrimPrefix(url, "http://")
	eio := url + "/socket.io/?EIO=4&" + smcp.QueryVersion + "=" + smcp.ProtocolVersion + "&transport="
	ws := map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	do := func(target, hostHdr string, hdr map[string]string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", target, nil)
		req.Host = hostHdr
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return resp.StatusCode, resp.Header, ""
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	evilHost := `{"code":421,"message":"Host \"evil.example:1\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host"}`
	evilOrigin := `{"code":403,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin"}`
	for _, c := range []struct {
		name, target, host string
		hdr                map[string]string
		status             int
		body               string
	}{
		{"polling, other origin", eio + "polling", host, map[string]string{"Origin": "http://evil.example"}, 403, evilOrigin},
		{"websocket, other origin", eio + "websocket", host, with(ws, "Origin", "http://evil.example"), 403, evilOrigin},
		{"polling, null origin", eio + "polling", host, map[string]string{"Origin": "null"}, 403,
			`{"code":403,"message":"Origin \"null\" is not allowed (cross-origin request); allow it with --allowed-origin"}`},
		{"polling, rebound", eio + "polling", "evil.example:1", nil, 421, evilHost},
		{"websocket, rebound", eio + "websocket", "evil.example:1", ws, 421, evilHost},
		{"healthz, rebound", url + "/healthz", "evil.example:1", nil, 421, evilHost},
		{"metrics, rebound", url + "/metrics", "evil.example:1", nil, 421, evilHost},
		{"preflight, other origin", eio + "polling", host, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, 403, evilOrigin},
	} {
		status, h, body := do(c.target, c.host, c.hdr)
		if status != c.status || body != c.body || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %q %s\nwant %d %s", c.name, status, h.Get("Access-Control-Allow-Origin"), body, c.status, c.body)
		}
	}
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
		acao   string
	}{
		{"polling, no origin", nil, 200, ""},
		{"polling, own origin", map[string]string{"Origin": url}, 200, ""},
		{"polling, listed origin", map[string]string{"Origin": "https://app.example"}, 200, "https://app.example"},
		{"websocket, own origin", with(ws, "Origin", url), 101, ""},
	} {
		target := eio + "polling"
		if c.status == 101 {
			target = eio + "websocket"
		}
		status, h, body := do(target, host, c.hdr)
		if status != c.status || h.Get("Access-Control-Allow-Origin") != c.acao {
			t.Errorf("%s: %d %q %s; want %d %q", c.name, status, h.Get("Access-Control-Allow-Origin"), body, c.status, c.acao)
		}
	}
}
