package aiod

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
)

// TestBrowserTools: the tools' errors are worded for an Agent: the
// browser plane's message and hint when CDP is silent, the documented
// worker message when the worker is down (no Go error text), the
// worker's own message when it refuses; success passes the worker's
// bytes and the action through unchanged.
func TestBrowserTools(t *testing.T) {
	dead := planetest.DeadURL(t)
	down := &browserTools{br: browser.New(browser.Config{CDPEndpoint: dead}), comp: computer.New(computer.Config{URL: dead})}
	ctx := context.Background()
	if _, err := down.Info(ctx, nil); err == nil || !strings.HasPrefix(err.Error(), "browser: ") ||
		!strings.HasSuffix(err.Error(), ". "+browser.Hint) {
		t.Errorf("info, no browser: %v", err)
	}
	want := "computer-use worker is not available (start computer-use or set AIO_COMPUTER_USE_URL)"
	if _, _, err := down.Screenshot(ctx); err == nil || err.Error() != want {
		t.Errorf("screenshot, no worker: %v", err)
	}
	if err := down.Action(ctx, json.RawMessage(`{"action_type":"WAIT","duration":0.1}`)); err == nil || err.Error() != want {
		t.Errorf("action, no worker: %v", err)
	}

	var got string
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/computer/screenshot":
			w.Header().Set("Content-Type", "image/png")
			_, _ = io.WriteString(w, "\x89PNG\r\n\x1a\nx")
		case "/v2/computer/actions":
			b, _ := io.ReadAll(r.Body)
			got = string(b)
			if strings.Contains(got, "notakey") {
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = io.WriteString(w, `{"success":false,"message":"Request data validation failed","data":null,"errors":[{"location":["body","key"],"message":"unknown key \"notakey\"","type":"value_error"}]}`)
				return
			}
			_, _ = io.WriteString(w, `{"success":true,"message":"ok","data":{"status":"success","action_performed":"PRESS"},"hint":null}`)
		}
	}))
	defer worker.Close()
	up := &browserTools{br: down.br, comp: computer.New(computer.Config{URL: worker.URL})}
	if img, mt, err := up.Screenshot(ctx); err != nil || string(img) != "\x89PNG\r\n\x1a\nx" || mt != "image/png" {
		t.Errorf("screenshot: %q %q %v", img, mt, err)
	}
	if err := up.Action(ctx, json.RawMessage(`{"action_type":"PRESS","key":"enter"}`)); err != nil || got != `{"action_type":"PRESS","key":"enter"}` {
		t.Errorf("action: %v, the worker got %s", err, got)
	}
	if err := up.Action(ctx, json.RawMessage(`{"action_type":"PRESS","key":"notakey"}`)); err == nil ||
		err.Error() != `Request data validation failed: body.key: unknown key "notakey"` {
		t.Errorf("refused action: %v", err)
	}
}

// TestBrowserToolsInfoURL: browser_get_info with no /mcp request names
// the browser's own endpoint (no /cdp), or a2c up's /cdp proxy at the
// daemon's PublicURL.
func TestBrowserToolsInfoURL(t *testing.T) {
	up := websocket.Upgrader{}
	devtools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/json/version":
			_, _ = io.WriteString(w, `{"Browser":"Fake/1","User-Agent":"Fake","webSocketDebuggerUrl":"ws://127.0.0.1:1/devtools/browser/b1"}`)
		case r.URL.Path == "/json/list":
			_, _ = io.WriteString(w, `[]`)
		case strings.HasPrefix(r.URL.Path, "/devtools/browser/"):
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}
	}))
	defer devtools.Close()
	host := strings.TrimPrefix(devtools.URL, "http://")
	public, _ := url.Parse("https://sb.example/p")
	for _, tc := range []struct {
		name   string
		public *url.URL
		want   string
	}{
		{"direct", nil, "ws://" + host + "/devtools/browser/b1"},
		{"public", public, "wss://sb.example/p/cdp/devtools/browser/b1"},
	} {
		br := browser.New(browser.Config{CDPEndpoint: devtools.URL})
		bt := &browserTools{br: br, cdpHost: host, public: tc.public}
		v, err := bt.Info(context.Background(), nil)
		info, _ := v.(*browser.Info)
		if err != nil || info == nil || info.CDPURL != tc.want {
			t.Errorf("%s: %+v %v, want cdp_url %s", tc.name, v, err, tc.want)
		}
		_ = br.Close(context.Background())
	}
}
