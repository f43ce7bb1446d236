package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

const testToken = "s3cret"

// hub is a server with the console on it, listening.
type hub struct {
	srv *server.Server
	con *Console
	url string
	rec *tracing.Recorder
}

func newHub(t *testing.T, token string, boxes ...Sandbox) *hub {
	t.Helper()
	return newHubConfig(t, token, Config{Sandboxes: boxes})
}

// newHubConfig is newHub with the console's Config (its Server and Token
// set here).
func newHubConfig(t *testing.T, token string, ccfg Config) *hub {
	t.Helper()
	rec := tracing.NewRecorder(0, 0)
	cfg := server.Config{Calls: true, Recorder: rec}
	if token != "" {
		cfg.Auth = server.TokenAuth(token, "x-api-key")
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg.Server, ccfg.Token = srv, token
	con, err := New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		con.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return &hub{srv: srv, con: con, url: ts.URL, rec: rec}
}

// client is a browser-like client: no redirects followed, a cookie jar
// of one session.
type client struct {
	t      *testing.T
	h      *hub
	cookie string
	http   *http.Client
}

func (h *hub) client(t *testing.T) *client {
	return &client{t: t, h: h, http: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// do sends a request; origin "" sends none, "self" the hub's own.
func (c *client) do(method, path, origin, ctype, body string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.h.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if origin == "self" {
		origin = c.h.url
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.cookie != "" {
		req.Header.Set("Cookie", CookieName+"="+c.cookie)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (c *client) get(path string) (*http.Response, string) { return c.do("GET", path, "", "", "") }

// login logs in with tok and keeps the cookie.
func (c *client) login(tok string) *http.Response {
	c.t.Helper()
	resp, _ := c.do("POST", "/login", "self", "application/x-www-form-urlencoded", url.Values{"token": {tok}}.Encode())
	for _, ck := range resp.Cookies() {
		if ck.Name == CookieName {
			c.cookie = ck.Value
		}
	}
	return resp
}

func staticBytes(t *testing.T, name string) string {
	b, err := fs.ReadFile(staticFiles, "static/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const cspWant = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func TestLogin(t *testing.T) {
	h := newHub(t, testToken)
	c := h.client(t)
	// No session: the login form, and 401 from the API.
	if resp, body := c.get("/"); resp.StatusCode != 200 || body != staticBytes(t, "login.html") {
		t.Fatalf("GET / without a session: %d", resp.StatusCode)
	}
	if resp, body := c.get("/api/console/offices"); resp.StatusCode != 401 || body != `{"error":{"code":401,"message":"login required"}}` {
		t.Fatalf("API without a session: %d %s", resp.StatusCode, body)
	}
	// The static files are public.
	if resp, body := c.get("/console/static/app.js"); resp.StatusCode != 200 || body != staticBytes(t, "app.js") {
		t.Fatalf("app.js: %d", resp.StatusCode)
	}
	for _, p := range []string{"/console/static/index.html", "/console/static/login.html", "/console/static/nothing.js", "/console/static/..%2fconsole.go"} {
		if resp, _ := c.get(p); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	// A login without Origin is refused; a wrong token goes back to the form.
	if resp, body := c.do("POST", "/login", "", "application/x-www-form-urlencoded", "token="+testToken); resp.StatusCode != 403 || body != `{"error":{"code":403,"message":"cross-origin request refused"}}` {
		t.Fatalf("login without Origin: %d %s", resp.StatusCode, body)
	}
	if resp := c.login("wrong"); resp.StatusCode != 303 || resp.Header.Get("Location") != "/?error=token" || c.cookie != "" {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The right one sets the cookie, exactly so.
	resp := c.login(testToken)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got, want := resp.Header.Get("Set-Cookie"), CookieName+"="+c.cookie+"; Path=/; Max-Age=43200; HttpOnly; SameSite=Strict"; got != want || len(c.cookie) != 43 {
		t.Fatalf("Set-Cookie %q, want %q", got, want)
	}
	if strings.Contains(c.cookie, testToken) {
		t.Fatal("the cookie holds the token")
	}
	if resp, body := c.get("/"); resp.StatusCode != 200 || body != staticBytes(t, "index.html") {
		t.Fatalf("GET / with a session: %d", resp.StatusCode)
	}
	if resp, body := c.get("/api/console/session"); resp.StatusCode != 200 || body != `{"auth":true,"node":"","pool":false,"version":"`+smcp.ProtocolVersion+`"}` {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	// A forged cookie is nothing.
	forged := h.client(t)
	forged.cookie = strings.Repeat("A", 43)
	if resp, _ := forged.get("/api/console/offices"); resp.StatusCode != 401 {
		t.Fatalf("forged cookie: %d", resp.StatusCode)
	}
	// JSON logins.
	req, _ := http.NewRequest("POST", h.url+"/login", strings.NewReader("token=nope"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Origin", h.url)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 401 || string(b) != `{"error":{"code":401,"message":"wrong token"}}` {
		t.Fatalf("JSON login: %d %s", r2.StatusCode, b)
	}
	// Logout ends the session and deletes the cookie.
	if resp, _ := c.do("POST", "/logout", "self", "", ""); resp.StatusCode != 303 || resp.Header.Get("Set-Cookie") != CookieName+"=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict" {
		t.Fatalf("logout: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	if resp, _ := c.get("/api/console/offices"); resp.StatusCode != 401 {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}

func TestLoginRateLimit(t *testing.T) {
	h := newHub(t, testToken)
	now := time.Now()
	var mu sync.Mutex
	h.con.sessions.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := h.client(t)
	for i := range MaxFailedLogins {
		if resp := c.login("wrong"); resp.Header.Get("Location") != "/?error=token" {
			t.Fatalf("failure %d: %s", i, resp.Header.Get("Location"))
		}
	}
	// Even the right token waits now.
	if resp := c.login(testToken); resp.StatusCode != 303 || resp.Header.Get("Location") != "/?error=limited" || resp.Header.Get("Retry-After") != "60" || c.cookie != "" {
		t.Fatalf("limited: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Another address is not limited.
	if h.con.sessions.limited("192.0.2.1") {
		t.Fatal("another address is limited")
	}
	mu.Lock()
	now = now.Add(LoginWindow)
	mu.Unlock()
	if resp := c.login(testToken); resp.Header.Get("Location") != "/" || c.cookie == "" {
		t.Fatalf("after the window: %s", resp.Header.Get("Location"))
	}
	// Sessions expire after SessionTTL.
	if resp, _ := c.get("/api/console/offices"); resp.StatusCode != 200 {
		t.Fatalf("fresh session: %d", resp.StatusCode)
	}
	mu.Lock()
	now = now.Add(SessionTTL)
	mu.Unlock()
	if resp, _ := c.get("/api/console/offices"); resp.StatusCode != 401 {
		t.Fatalf("expired session: %d", resp.StatusCode)
	}
}

func TestSessionBounds(t *testing.T) {
	s := newSessions("t")
	first := s.create()
	for range MaxSessions + 10 {
		s.create()
	}
	if n := s.count(); n != MaxSessions {
		t.Fatalf("%d sessions, want %d", n, MaxSessions)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: first})
	if s.valid(r) {
		t.Fatal("the oldest session survived")
	}
	s.maxAll = 1 << 30
	for i := range maxTracked + 10 {
		s.failed("10.0." + string(rune('a'+i%26)) + "." + strings.Repeat("x", i%7) + string(rune(i)))
	}
	if len(s.failures) > maxTracked+1 {
		t.Fatalf("%d addresses tracked", len(s.failures))
	}
	// Behind TLS the cookie is Secure.
	tr := httptest.NewRequest("GET", "https://hub/", nil)
	if ck := cookie(tr, "x"); !ck.Secure || ck.String() != CookieName+"=x; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict" {
		t.Fatalf("TLS cookie %s", ck)
	}
	if !s.checkToken("t") || s.checkToken("t ") || s.checkToken("") {
		t.Fatal("checkToken")
	}
}

func TestOriginCheck(t *testing.T) {
	h := newHub(t, "")
	c := h.client(t)
	u, _ := url.Parse(h.url)
	for _, tc := range []struct {
		name, header, value string
		want                int
	}{
		{"same origin", "Origin", h.url, 303},
		{"https in front", "Origin", "https://" + u.Host, 303},
		{"referer", "Referer", h.url + "/some/page", 303},
		{"other origin", "Origin", "http://evil.example", 403},
		{"other port", "Origin", "http://" + u.Hostname() + ":1", 403},
		{"null", "Origin", "null", 403},
		{"other referer", "Referer", "http://evil.example/" + u.Host, 403},
		{"none", "", "", 403},
		{"not http", "Origin", "file://" + u.Host, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.url+"/logout", nil)
			if tc.header != "" {
				req.Header.Set(tc.header, tc.value)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	// Also on the API: the hub's Host and Origin rule refuses it before
	// the console sees it, in the hub's shape.
	if resp, body := c.do("POST", "/api/console/offices/o/computers/c/call", "http://evil.example", "application/json", `{"tool":"t"}`); resp.StatusCode != 403 ||
		body != `{"code":403,"message":"Origin \"http://evil.example\" is not allowed (cross-origin request); allow it with --allowed-origin"}` {
		t.Fatalf("cross-origin call: %d %s", resp.StatusCode, body)
	}
}

func TestOpenConsoleAndHeaders(t *testing.T) {
	h := newHub(t, "")
	c := h.client(t)
	if resp, body := c.get("/"); resp.StatusCode != 200 || body != staticBytes(t, "index.html") {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	if resp, body := c.get("/api/console/session"); resp.StatusCode != 200 || !strings.HasPrefix(body, `{"auth":false,`) {
		t.Fatalf("session: %s", body)
	}
	for _, p := range []string{"/", "/api/console/offices", "/console/static/app.css", "/api/console/nothing", "/login"} {
		resp, _ := c.get(p)
		hd := resp.Header
		if hd.Get("Content-Security-Policy") != cspWant || hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", p, hd)
		}
		if strings.HasPrefix(p, "/api/") && hd.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", p, hd.Get("Cache-Control"))
		}
	}
	if resp, body := c.get("/api/console/nothing"); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"no such route"}}` {
		t.Fatalf("unknown route: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.get("/api/console/offices"); resp.StatusCode != 200 || body != `{"offices":[]}` {
		t.Fatalf("offices: %s", body)
	}
	if resp, body := c.get("/api/console/offices/nobody"); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"no such office"}}` {
		t.Fatalf("office: %d %s", resp.StatusCode, body)
	}
	// The server's own routes are untouched.
	if resp, _ := c.get("/healthz"); resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

// computer is a Computer connected to the hub that answers with reply.
func (h *hub) computer(t *testing.T, name, office string, reply func(e *sio.Event) any) {
	t.Helper()
	h.managedComputer(t, name, office, reply, nil)
}

// managedComputer is computer that, when st is not nil, sends st as its
// management state once joined (and waits for the hub's ack, so the
// state is there when it returns).
func (h *hub) managedComputer(t *testing.T, name, office string, reply func(e *sio.Event) any, st *smcp.ManagementState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hd := &handler{reply: reply}
	sock, err := sio.Dial(ctx, h.url, sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Header:    http.Header{"X-Api-Key": {testToken}},
		Transport: sio.WebSocketOnly,
		Handler:   hd,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sock.Disconnect)
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleComputer, Name: name, OfficeID: office})
	done := make(chan string, 1)
	sock.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{b}}, 5*time.Second, func(m sio.Message, err error) {
		if err != nil || len(m.Args) == 0 {
			done <- "error"
			return
		}
		done <- string(m.Args[0])
	})
	if got := <-done; got != "true" {
		t.Fatalf("join: %s", got)
	}
	if st == nil {
		return
	}
	b, _ = json.Marshal(st)
	acked := make(chan error, 1)
	sock.Request(smcp.EventManagementState, sio.Message{Args: []json.RawMessage{b}}, 5*time.Second, func(_ sio.Message, err error) { acked <- err })
	if err := <-acked; err != nil {
		t.Fatalf("management state: %v", err)
	}
}

// boxState is the management state of the Computer "box": b is declared
// by a plugin (not served) and by the user scope (served), z by the
// plugin only and awaits approval.
var boxState = &smcp.ManagementState{
	Computer: "box",
	Servers: []smcp.ManagedServer{
		{BundleID: "b", Name: "B", Origin: "plugin", Plugin: "audit@acme", Verdict: "enabled"},
		{BundleID: "b", Name: "B", Origin: "user", Verdict: "enabled", Served: true},
		{BundleID: "z", Name: "Z", Origin: "plugin", Plugin: "audit@acme", Verdict: "pending"},
	},
	Plugins: []smcp.ManagedPlugin{
		{ID: "audit@acme", State: "installed_enabled", Enabled: true, Reason: "server 'Z' (z) is pending", MCPServers: []string{"b", "z"}},
		{ID: "lint@acme", State: "installed_disabled", MCPServers: []string{}},
	},
}

type handler struct{ reply func(e *sio.Event) any }

func (h *handler) Event(_ *sio.Socket, e *sio.Event) {
	if v := h.reply(e); v != nil {
		b, _ := json.Marshal(v)
		_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
	}
}

func (h *handler) Disconnect(*sio.Socket, string) {}

// sandboxComputer answers as a Computer with one tool.
func sandboxComputer(e *sio.Event) any {
	switch e.Name {
	case smcp.EventGetTools:
		return smcp.GetToolsRet{Tools: []smcp.SMCPTool{
			{Name: "b__echo", BundleID: "b", Description: "echo", ParamsSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`),
				Meta: map[string]any{smcp.MetaKeyToolMeta: `{"auto_apply":true,"ret_object_mapper":null,"alias":null,"tags":["fs","safe"]}`}},
			{Name: "b__bare", BundleID: "b", Description: "no schema"},
		}}
	case smcp.EventGetConfig:
		return map[string]any{"servers": map[string]any{
			"z": map[string]any{"name": "Z", "type": "stdio", "disabled": true, "forbidden_tools": []string{}, "tool_meta": map[string]any{}, "server_parameters": map[string]any{"command": "z"}},
			"b": map[string]any{"name": "B", "type": "streamable", "disabled": false, "forbidden_tools": []string{}, "tool_meta": map[string]any{}, "default_tool_meta": map[string]any{"auto_apply": true}, "server_parameters": map[string]any{"url": "http://x"}},
		}}
	case smcp.EventToolCall:
		var req smcp.ToolCallReq
		_ = json.Unmarshal(e.Args[0], &req)
		if req.ToolName == "b__fail" {
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": "no"}}, "isError": true, "_meta": map[string]any{smcp.MetaErrorCode: 4003}}
		}
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "args " + string(req.Params)}}, "isError": false}
	}
	return nil
}

func TestComputerAndCall(t *testing.T) {
	h := newHub(t, testToken)
	h.managedComputer(t, "box", "o", sandboxComputer, boxState)
	h.computer(t, "bare", "o", sandboxComputer)
	c := h.client(t)
	c.login(testToken)
	resp, body := c.get("/api/console/offices")
	var offices struct {
		Offices []server.OfficeInfo `json:"offices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &offices) != nil || len(offices.Offices) != 1 || len(offices.Offices[0].Members) != 2 ||
		offices.Offices[0].Members[0].Name != "bare" || offices.Offices[0].Members[1].Name != "box" || offices.Offices[0].Members[1].ConnectedSince.IsZero() {
		t.Fatalf("offices: %s", body)
	}
	if resp, body := c.get("/api/console/offices/o"); resp.StatusCode != 200 || !strings.Contains(body, `"connected_since":"`) {
		t.Fatalf("office: %s", body)
	}
	tools := `"tools":[{"name":"b__echo","bundle_id":"b","description":"echo","inputSchema":{"type":"object","properties":{"x":{"type":"integer"}}},"meta":{"tags":["fs","safe"],"auto_apply":true}},` +
		`{"name":"b__bare","bundle_id":"b","description":"no schema","inputSchema":{"type":"object"},"meta":{"tags":[],"auto_apply":false}}]}`
	for _, tc := range []struct{ computer, want string }{
		// The management state as the Computer sent it; each server's
		// origin is its served declaration's, else its first one's.
		{"box", `{"computer":"box","management":{"computer":"box","servers":[` +
			`{"bundle_id":"b","name":"B","origin":"plugin","plugin":"audit@acme","verdict":"enabled","served":false},` +
			`{"bundle_id":"b","name":"B","origin":"user","verdict":"enabled","served":true},` +
			`{"bundle_id":"z","name":"Z","origin":"plugin","plugin":"audit@acme","verdict":"pending","served":false}],` +
			`"plugins":[{"id":"audit@acme","state":"installed_enabled","enabled":true,"active":false,"reason":"server 'Z' (z) is pending","mcpServers":["b","z"]},` +
			`{"id":"lint@acme","state":"installed_disabled","enabled":false,"active":false,"mcpServers":[]}]},` +
			`"office":"o","servers":[{"bundle_id":"b","name":"B","type":"streamable","disabled":false,"auto_apply":true,"origin":"user"},` +
			`{"bundle_id":"z","name":"Z","type":"stdio","disabled":true,"auto_apply":false,"origin":"plugin"}],` + tools},
		// A Computer without the management plane: null, origins unknown.
		{"bare", `{"computer":"bare","management":null,"office":"o","servers":[{"bundle_id":"b","name":"B","type":"streamable","disabled":false,"auto_apply":true,"origin":""},` +
			`{"bundle_id":"z","name":"Z","type":"stdio","disabled":true,"auto_apply":false,"origin":""}],` + tools},
	} {
		resp, body := c.get("/api/console/offices/o/computers/" + tc.computer)
		if resp.StatusCode != 200 || body != tc.want {
			t.Fatalf("computer %s: %d\n got %s\nwant %s", tc.computer, resp.StatusCode, body, tc.want)
		}
	}
	if resp, body := c.get("/api/console/offices/o/computers/nobody"); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"Computer not found"}}` {
		t.Fatalf("unknown computer: %d %s", resp.StatusCode, body)
	}

	call := func(body string) (*http.Response, string) {
		return c.do("POST", "/api/console/offices/o/computers/box/call", "self", "application/json", body)
	}
	for _, tc := range []struct{ name, body, msg string }{
		{"not json", `tool=x`, `the body must be a JSON object`},
		{"no tool", `{"arguments":{}}`, `tool must be a tool name`},
		{"arguments not an object", `{"tool":"b__echo","arguments":[1]}`, `arguments must be a JSON object`},
		{"timeout 0", `{"tool":"b__echo","timeout":0}`, `timeout must be 1..3600 seconds`},
		{"timeout too long", `{"tool":"b__echo","timeout":3601}`, `timeout must be 1..3600 seconds`},
		{"timeout not a number", `{"tool":"b__echo","timeout":"5"}`, `the body must be a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := call(tc.body)
			if resp.StatusCode != 400 || !strings.HasPrefix(body, `{"error":{"code":400,"message":"`+tc.msg) {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
	resp, body = call(`{"tool":"b__echo","arguments":{"x":1},"timeout":5}`)
	var ans struct {
		ReqID   string          `json:"req_id"`
		Agent   string          `json:"agent"`
		TraceID string          `json:"trace_id"`
		Result  json.RawMessage `json:"result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Agent != server.ConsoleAgent ||
		ans.TraceID != tracing.TraceID(ans.Agent, ans.ReqID).String() || string(ans.Result) != `{"content":[{"text":"args {\"x\":1}","type":"text"}],"isError":false}` {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	// A failed tool is still a 200 with its result.
	if resp, body := call(`{"tool":"b__fail"}`); resp.StatusCode != 200 || !strings.Contains(body, `"isError":true`) {
		t.Fatalf("failed tool: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.do("POST", "/api/console/offices/o/computers/nobody/call", "self", "application/json", `{"tool":"t"}`); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"Computer not found"}}` {
		t.Fatalf("unknown computer: %d %s", resp.StatusCode, body)
	}

	// The call log and the call's detail.
	resp, body = c.get("/api/console/calls?office=o")
	var calls struct {
		Calls   []server.Call `json:"calls"`
		Dropped int           `json:"dropped"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &calls) != nil || len(calls.Calls) != 3 {
		t.Fatalf("calls: %s", body)
	}
	if got := calls.Calls[1]; got.Tool != "b__fail" || got.Outcome != "error" || got.ErrorCode != 4003 || !got.Console {
		t.Fatalf("failed call %+v", got)
	}
	if _, body := c.get("/api/console/calls?office=other"); body != `{"calls":[],"dropped":0}` {
		t.Fatalf("other office: %s", body)
	}
	h.rec.Add(tracing.Span{TraceID: ans.TraceID, Name: tracing.SpanHubRelay, SpanID: "0102030405060708", Start: time.Now(), Status: "ok"})
	resp, body = c.get("/api/console/calls/" + server.ConsoleAgent + "/" + ans.ReqID)
	var detail struct {
		Call    *server.Call   `json:"call"`
		Trace   []tracing.Span `json:"trace"`
		Dropped *int           `json:"dropped_spans"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &detail) != nil || detail.Call == nil || detail.Call.ReqID != ans.ReqID ||
		len(detail.Trace) != 1 || detail.Trace[0].Name != tracing.SpanHubRelay || detail.Dropped == nil {
		t.Fatalf("detail: %s", body)
	}
	if resp, body := c.get("/api/console/calls/ag/unknown"); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"no such call"}}` {
		t.Fatalf("unknown call: %d %s", resp.StatusCode, body)
	}
}

// sseReader reads a server-sent event stream.
type sseReader struct {
	resp *http.Response
	r    *bufio.Reader
}

func (c *client) stream(path string) *sseReader {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.h.url+path, nil)
	req.Header.Set("Cookie", CookieName+"="+c.cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		c.t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	return &sseReader{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next block (up to a blank line), without it.
func (s *sseReader) next(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v after %q", err, b.String())
		}
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}

func TestStream(t *testing.T) {
	old := heartbeat
	heartbeat = 100 * time.Millisecond
	t.Cleanup(func() { heartbeat = old })
	h := newHub(t, testToken)
	h.computer(t, "box", "o", sandboxComputer)
	h.computer(t, "box2", "o2", sandboxComputer)
	c := h.client(t)
	c.login(testToken)
	st := c.stream("/api/console/calls/stream?office=o")
	if got := st.next(t); got != ": a2c console call stream\n" {
		t.Fatalf("first block %q", got)
	}
	// Another office's call is not in this stream.
	c.do("POST", "/api/console/offices/o2/computers/box2/call", "self", "application/json", `{"tool":"b__echo"}`)
	_, body := c.do("POST", "/api/console/offices/o/computers/box/call", "self", "application/json", `{"tool":"b__echo"}`)
	var ans struct {
		ReqID string `json:"req_id"`
	}
	_ = json.Unmarshal([]byte(body), &ans)
	for _, state := range []string{"running", "done"} {
		got := st.next(t)
		for strings.HasPrefix(got, ": ping") {
			got = st.next(t)
		}
		data, ok := strings.CutPrefix(got, "event: call\ndata: ")
		if !ok || strings.Count(got, "\n") != 2 {
			t.Fatalf("event %q", got)
		}
		var call server.Call
		if err := json.Unmarshal([]byte(data), &call); err != nil || call.State != state || call.ReqID != ans.ReqID || !call.Console || call.Office != "o" {
			t.Fatalf("%s event %q", state, got)
		}
	}
	if got := st.next(t); got != ": ping\n" {
		t.Fatalf("heartbeat %q", got)
	}
	// Close ends the stream.
	h.con.Close()
	if _, err := io.ReadAll(st.r); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

func TestStreamDropped(t *testing.T) {
	h := newHub(t, "")
	h.computer(t, "box", "o", sandboxComputer)
	sub, err := h.srv.SubscribeCalls("", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	c := h.client(t)
	for range 3 {
		c.do("POST", "/api/console/offices/o/computers/box/call", "self", "application/json", `{"tool":"b__echo"}`)
	}
	var lost int64
	if got := string(appendDropped(nil, sub, &lost)); got != "event: dropped\ndata: {\"dropped\":5}\n\n" {
		t.Fatalf("dropped event %q", got)
	}
	if got := string(appendDropped(nil, sub, &lost)); got != "" {
		t.Fatalf("no new drops: %q", got)
	}
	<-sub.Events()
	for range 2 {
		c.do("POST", "/api/console/offices/o/computers/box/call", "self", "application/json", `{"tool":"b__echo"}`)
	}
	if got := string(appendDropped(nil, sub, &lost)); got != "event: dropped\ndata: {\"dropped\":8}\n\n" {
		t.Fatalf("dropped event %q: the total so far", got)
	}
}
