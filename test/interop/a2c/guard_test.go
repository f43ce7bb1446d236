package a2c

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// guardReq sends one raw HTTP/1.1 request to addr (host:port) with the
// given Host and extra header lines, and returns the status and body.
// Raw, so that Host is exactly what a rebinding page's browser sends.
func guardReq(t *testing.T, addr, method, path, host string, headers []string, body string) (int, http.Header, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if body != "" || method == "POST" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, resp.Header, ""
	}
	rb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(rb)
}

var wsUpgrade = []string{"Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}

// TestUpRefusesWebPages is issue 28's attacks on a default "a2c up" (no
// token): a page on another origin, and a page whose name was rebound to
// 127.0.0.1, try to run a command through the hub, the console and the
// sandbox API. Each is refused before anything runs (the marker file
// stays absent), with the server's own error shape; clients that send
// no Origin and the server's own origin still work.
func TestUpRefusesWebPages(t *testing.T) {
	u := startUp(t, "--allowed-origin", "https://app.example")
	hub := strings.TrimSuffix(strings.TrimPrefix(caConsoleRE.FindStringSubmatch(u.Logs())[1], "http://"), "/")
	box := strings.TrimPrefix(u.SandboxURL, "http://")
	marker := filepath.Join(u.Workspace, "marker")
	evil := "Origin: http://evil.example"
	bash := `{"tool":"sandbox__sandbox_execute_bash","arguments":{"cmd":"touch ` + marker + `"},"timeout":20}`
	cmd := `{"command":"touch ` + marker + `"}`
	eio := "/socket.io/?EIO=4&a2c_version=0.4.0&transport="
	hubHost := `{"code":421,"message":"Host \"evil.example:` + strings.Split(hub, ":")[1] + `\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host"}`
	hubOrigin := `{"code":403,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin"}`
	boxHost := `{"success":false,"message":"Host \"evil.example:` + strings.Split(box, ":")[1] + `\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host","data":null,"hint":null}`
	boxOrigin := `{"success":false,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin","data":null,"hint":null}`
	json415 := `{"success":false,"message":"Expected request with ` + "`Content-Type: application/json`" + `","data":null,"hint":null}`
	evilHub, evilBox := "evil.example:"+strings.Split(hub, ":")[1], "evil.example:"+strings.Split(box, ":")[1]
	for _, c := range []struct {
		name, addr, method, path, host string
		headers                        []string
		body                           string
		status                         int
		want                           string // the exact body, "" for any
	}{
		{"hub websocket from another origin", hub, "GET", eio + "websocket", hub, append([]string{evil}, wsUpgrade...), "", 403, hubOrigin},
		{"hub polling from another origin", hub, "GET", eio + "polling", hub, []string{evil}, "", 403, hubOrigin},
		{"hub websocket rebound", hub, "GET", eio + "websocket", evilHub, wsUpgrade, "", 421, hubHost},
		{"hub polling rebound", hub, "GET", eio + "polling", evilHub, nil, "", 421, hubHost},
		{"hub healthz rebound", hub, "GET", "/healthz", evilHub, nil, "", 421, hubHost},
		{"hub metrics rebound", hub, "GET", "/metrics", evilHub, nil, "", 421, hubHost},
		{"console call rebound", hub, "POST", "/api/console/offices/default/computers/sandbox/call", evilHub,
			[]string{"Origin: http://" + evilHub, "Content-Type: application/json"}, bash, 421, hubHost},
		{"console call from another origin", hub, "POST", "/api/console/offices/default/computers/sandbox/call", hub,
			[]string{evil, "Content-Type: text/plain"}, bash, 403, hubOrigin},
		{"console page rebound", hub, "GET", "/", evilHub, nil, "", 421, hubHost},
		{"commands rebound", box, "POST", "/v2/commands", evilBox, []string{"Content-Type: application/json"}, cmd, 421, boxHost},
		{"shell exec rebound", box, "POST", "/v1/shell/exec", evilBox, []string{"Content-Type: application/json"}, cmd, 421, boxHost},
		{"commands text/plain from another origin", box, "POST", "/v2/commands", box, []string{evil, "Content-Type: text/plain"}, cmd, 403, boxOrigin},
		{"shell exec text/plain from another origin", box, "POST", "/v1/shell/exec", box, []string{evil, "Content-Type: text/plain"}, cmd, 403, boxOrigin},
		{"commands text/plain", box, "POST", "/v2/commands", box, []string{"Content-Type: text/plain"}, cmd, 415, json415},
		{"shell exec no type", box, "POST", "/v1/shell/exec", box, nil, cmd, 415, json415},
		{"shell exec form", box, "POST", "/v1/shell/exec", box, []string{"Content-Type: application/x-www-form-urlencoded"}, cmd, 415, json415},
		{"pty websocket rebound", box, "GET", "/v1/shell/ws", evilBox, wsUpgrade, "", 421, boxHost},
		{"pty websocket from another origin", box, "GET", "/v1/shell/ws", box, append([]string{evil}, wsUpgrade...), "", 403, boxOrigin},
		{"mcp rebound", box, "POST", "/mcp", evilBox, []string{"Content-Type: application/json", "Accept: application/json, text/event-stream"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_execute_bash","arguments":{"cmd":"touch ` + marker + `"}}}`, 421,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Host \"` + evilBox + `\" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host"}}`},
		{"upload from another origin", box, "POST", "/v1/file/upload", box, []string{evil, "Content-Type: multipart/form-data; boundary=x"},
			"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"marker\"\r\n\r\nx\r\n--x--\r\n", 403, boxOrigin},
		{"sandbox preflight from another origin", box, "OPTIONS", "/v2/commands", box,
			[]string{evil, "Access-Control-Request-Method: POST", "Access-Control-Request-Headers: content-type"}, "", 403, boxOrigin},
		{"hub preflight from another origin", hub, "OPTIONS", eio + "polling", hub,
			[]string{evil, "Access-Control-Request-Method: POST"}, "", 403, hubOrigin},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := guardReq(t, c.addr, c.method, c.path, c.host, c.headers, c.body)
			if status != c.status || (c.want != "" && strings.TrimSpace(body) != c.want) {
				t.Errorf("%d %s\nwant %d %s", status, body, c.status, c.want)
			}
			if a := h.Get("Access-Control-Allow-Origin"); a != "" {
				t.Errorf("Access-Control-Allow-Origin: %q", a)
			}
		})
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the marker exists (%v): a refused request ran", err)
	}

	// What must still work: the server's own origin, no Origin at all,
	// and a listed origin with its CORS answer.
	for _, c := range []struct {
		name, addr, method, path string
		headers                  []string
		body                     string
		status                   int
		acao                     string
	}{
		{"hub polling, no Origin", hub, "GET", eio + "polling", nil, "", 200, ""},
		{"hub polling, own origin", hub, "GET", eio + "polling", []string{"Origin: http://" + hub}, "", 200, ""},
		{"hub polling, own origin by localhost", hub, "GET", eio + "polling", []string{"Origin: http://localhost:" + strings.Split(hub, ":")[1]}, "", 200, ""},
		{"hub polling, listed origin", hub, "GET", eio + "polling", []string{"Origin: https://app.example"}, "", 200, "https://app.example"},
		{"hub preflight, listed origin", hub, "OPTIONS", eio + "polling", []string{"Origin: https://app.example", "Access-Control-Request-Method: POST"}, "", 204, "https://app.example"},
		{"sandbox, own origin", box, "POST", "/v2/commands", []string{"Origin: http://" + box, "Content-Type: application/json; charset=utf-8"}, `{"command":"true"}`, 200, ""},
		{"sandbox, no Origin, bodyless", box, "POST", "/v2/commands/sessions", nil, "", 200, ""},
		{"sandbox, listed origin", box, "POST", "/v2/commands", []string{"Origin: https://app.example", "Content-Type: application/json"}, `{"command":"true"}`, 200, "https://app.example"},
		{"sandbox preflight, listed origin", box, "OPTIONS", "/v2/commands", []string{"Origin: https://app.example", "Access-Control-Request-Method: POST",
			"Access-Control-Request-Headers: content-type"}, "", 204, "https://app.example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := c.addr
			if strings.Contains(c.name, "localhost") {
				host = "localhost:" + strings.Split(c.addr, ":")[1]
			}
			status, h, body := guardReq(t, c.addr, c.method, c.path, host, c.headers, c.body)
			if status != c.status || h.Get("Access-Control-Allow-Origin") != c.acao {
				t.Errorf("%d %q %s\nwant %d %q", status, h.Get("Access-Control-Allow-Origin"), body, c.status, c.acao)
			}
		})
	}
}
