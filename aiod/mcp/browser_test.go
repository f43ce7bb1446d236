package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeBrowser records what the tools hand it.
type fakeBrowser struct {
	mu      sync.Mutex
	origins []*http.Request
	actions []string
	infoErr error
	shotErr error
	actErr  error
}

func (b *fakeBrowser) Info(_ context.Context, r *http.Request) (any, error) {
	b.mu.Lock()
	b.origins = append(b.origins, r)
	b.mu.Unlock()
	if b.infoErr != nil {
		return nil, b.infoErr
	}
	host, query := "", ""
	if r != nil {
		host, query = r.Host, r.URL.RawQuery
	}
	return map[string]any{"cdp_url": "ws://" + host + "/cdp/devtools/browser/x?" + query}, nil
}

func (b *fakeBrowser) Screenshot(context.Context) ([]byte, string, error) {
	if b.shotErr != nil {
		return nil, "", b.shotErr
	}
	return []byte("\x89PNG\r\n\x1a\nfake"), "image/png", nil
}

func (b *fakeBrowser) Action(_ context.Context, action json.RawMessage) error {
	b.mu.Lock()
	b.actions = append(b.actions, string(action))
	b.mu.Unlock()
	return b.actErr
}

func (b *fakeBrowser) lastOrigin() *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.origins) == 0 {
		return nil
	}
	return b.origins[len(b.origins)-1]
}

// TestBrowserAction: browser_gui_execute_action checks action_type itself
// (absent, unknown) before the plane sees the action, passes a known one
// on unchanged, answers the exact 1.x text, and turns the plane's refusal
// into isError with its text.
func TestBrowserAction(t *testing.T) {
	fb := &fakeBrowser{}
	f := newFixture(t, func(c *Config) { c.Browser = fb })
	invalid := "Invalid action_type: FLY. Available types: MOVE_TO, DRAG_TO, MOVE_REL, DRAG_REL, CLICK, RIGHT_CLICK, DOUBLE_CLICK, " +
		"MOUSE_DOWN, MOUSE_UP, SCROLL, TYPING, PRESS, KEY_DOWN, KEY_UP, HOTKEY, WAIT, SET_CLIPBOARD, WINDOW_ACTIVATE, " +
		"WINDOW_MINIMIZE, NODE_FOCUS, NODE_INVOKE, NODE_SET_VALUE"
	cases := []struct {
		name   string
		args   any
		want   string
		isErr  bool
		passed string // the action the plane got; "" = none
	}{
		{"no action", map[string]any{}, "action is required: an object with action_type", true, ""},
		{"action not an object", map[string]any{"action": 3}, "action is required: an object with action_type", true, ""},
		{"empty action", map[string]any{"action": map[string]any{}}, "action_type is required", true, ""},
		{"null type", map[string]any{"action": map[string]any{"action_type": nil}}, "action_type is required", true, ""},
		{"unknown type", map[string]any{"action": map[string]any{"action_type": "FLY"}}, invalid, true, ""},
		{"lower case", map[string]any{"action": map[string]any{"action_type": "click"}}, strings.Replace(invalid, "FLY", "click", 1), true, ""},
		{"move", map[string]any{"action": map[string]any{"action_type": "MOVE_TO", "x": 5, "y": 5}},
			`{"status":"success","action_performed":"MOVE_TO"}`, false, `{"action_type":"MOVE_TO","x":5,"y":5}`},
		{"as a string", map[string]any{"action": `{"action_type": "WAIT", "duration": 0.1}`},
			`{"status":"success","action_performed":"WAIT"}`, false, `{"action_type":"WAIT","duration":0.1}`},
		{"v2 type", map[string]any{"action": map[string]any{"action_type": "SET_CLIPBOARD", "text": "hi"}},
			`{"status":"success","action_performed":"SET_CLIPBOARD"}`, false, `{"action_type":"SET_CLIPBOARD","text":"hi"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb.mu.Lock()
			fb.actions = nil
			fb.mu.Unlock()
			text, isErr := f.callTool(t, "browser_gui_execute_action", c.args)
			if text != c.want || isErr != c.isErr {
				t.Errorf("got %v %q\nwant %v %q", isErr, text, c.isErr, c.want)
			}
			fb.mu.Lock()
			got := fb.actions
			fb.mu.Unlock()
			if c.passed == "" && len(got) != 0 || c.passed != "" && (len(got) != 1 || got[0] != c.passed) {
				t.Errorf("the plane got %q, want %q", got, c.passed)
			}
		})
	}

	fb.actErr = errString("Request data validation failed: body.duration: must be more than 0 and at most 10")
	text, isErr := f.callTool(t, "browser_gui_execute_action", map[string]any{"action": map[string]any{"action_type": "WAIT", "duration": 11}})
	if !isErr || text != fb.actErr.Error() {
		t.Errorf("refused: %v %q", isErr, text)
	}
}

// TestBrowserActionSchema: the tool's schema lists exactly ActionTypes.
func TestBrowserActionSchema(t *testing.T) {
	f := newFixture(t, nil)
	var def struct {
		Properties struct {
			Action struct {
				Properties struct {
					ActionType struct {
						Enum []string `json:"enum"`
					} `json:"action_type"`
				} `json:"properties"`
			} `json:"action"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(f.s.byName["browser_gui_execute_action"].schema, &def); err != nil {
		t.Fatal(err)
	}
	if got := def.Properties.Action.Properties.ActionType.Enum; !slices.Equal(got, ActionTypes) || len(got) != 22 {
		t.Errorf("enum %v\nwant %v", got, ActionTypes)
	}
}

// TestBrowserScreenshot: one image item with the plane's bytes and type;
// a plane that fails gives isError with its text.
func TestBrowserScreenshot(t *testing.T) {
	fb := &fakeBrowser{}
	f := newFixture(t, func(c *Config) { c.Browser = fb })
	status, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "browser_gui_screenshot", "arguments": map[string]any{}}})
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"` +
		base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nfake")) + `","mimeType":"image/png"}],"isError":false}}`
	if status != 200 || strings.TrimSpace(body) != want {
		t.Errorf("got %d %s\nwant %s", status, body, want)
	}
	fb.shotErr = errString("computer-use worker is not available (start computer-use or set AIO_COMPUTER_USE_URL)")
	if text, isErr := f.callTool(t, "browser_gui_screenshot", nil); !isErr || text != fb.shotErr.Error() {
		t.Errorf("down: %v %q", isErr, text)
	}
}

// TestBrowserInfoOrigin: browser_get_info hands the plane the /mcp
// request the call came with (Host, forwarded headers, query), on the
// plain path and on a streamable-HTTP session alike; a client cannot
// forge the daemon's reading of them; through Connect there is none.
func TestBrowserInfoOrigin(t *testing.T) {
	fb := &fakeBrowser{}
	f := newFixture(t, func(c *Config) { c.Browser = fb; c.Origins = mustOrigins(t, "sb.example") })
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"browser_get_info","arguments":{}}}`
	check := func(t *testing.T, r *http.Request) {
		t.Helper()
		if r == nil {
			t.Fatal("no origin")
		}
		if r.Host != "sb.example" || r.URL.RawQuery != "api_key=K" || r.Header.Get("X-Forwarded-Proto") != "https" ||
			r.Header.Get("X-Forwarded-Prefix") != "/p/" || r.TLS != nil {
			t.Errorf("origin: host %q query %q headers %v tls %v", r.Host, r.URL.RawQuery, r.Header, r.TLS != nil)
		}
		for _, h := range []string{originHost, originQuery, originScheme} {
			if r.Header.Get(h) != "" {
				t.Errorf("the origin keeps %s", h)
			}
		}
	}

	t.Run("plain", func(t *testing.T) {
		status, body := post(t, f.url+"?api_key=K", call, "Host", "sb.example", "X-Forwarded-Proto", "https",
			"X-Forwarded-Prefix", "/p/", originHost, "evil.example")
		text, isErr := resultText(t, body)
		if status != 200 || isErr || text != `{"cdp_url":"ws://sb.example/cdp/devtools/browser/x?api_key=K"}` {
			t.Errorf("%d %v %s", status, isErr, text)
		}
		check(t, fb.lastOrigin())
	})

	t.Run("session", func(t *testing.T) {
		sid := openSession(t, f.url)
		req, _ := http.NewRequest(http.MethodPost, f.url+"?api_key=K", strings.NewReader(call))
		req.Host = "sb.example"
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Session-Id": sid, "X-Forwarded-Proto": "https", "X-Forwarded-Prefix": "/p/",
			originHost: "evil.example", originQuery: "api_key=stolen", originScheme: "https"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d", resp.StatusCode)
		}
		check(t, fb.lastOrigin())
	})

	t.Run("connect", func(t *testing.T) {
		raw := pipeCall(t, f.s, "browser_get_info", `{}`)
		if want := `{"content":[{"type":"text","text":"{\"cdp_url\":\"ws:///cdp/devtools/browser/x?\"}"}],"isError":false}`; raw != want {
			t.Errorf("got %s\nwant %s", raw, want)
		}
		if r := fb.lastOrigin(); r != nil {
			t.Errorf("an in-process call has an origin: %v", r.Host)
		}
	})

	fb.infoErr = errString("the browser is not available")
	if text, isErr := f.callTool(t, "browser_get_info", nil); !isErr || text != "the browser is not available" {
		t.Errorf("down: %v %q", isErr, text)
	}
}
