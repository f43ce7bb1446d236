package browser

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeBrowser is a DevTools endpoint for the unit tests: /json/version,
// /json/list and a WebSocket that answers a few methods and records
// every method it was sent.
type fakeBrowser struct {
	srv     *httptest.Server
	mu      sync.Mutex
	methods []string
	conns   []*websocket.Conn
	gen     atomic.Int32
}

func newFakeBrowser(t *testing.T) *fakeBrowser {
	f := &fakeBrowser{}
	mux := http.NewServeMux()
	mux.HandleFunc("/json/version", func(w http.ResponseWriter, r *http.Request) {
		// Chrome names its own address; the plane must dial its endpoint.
		_ = json.NewEncoder(w).Encode(map[string]string{"Browser": "Fake/1", "User-Agent": "HeadlessChrome",
			"webSocketDebuggerUrl": "ws://127.0.0.1:1/devtools/browser/g" + string(rune('0'+f.gen.Load()))})
	})
	mux.HandleFunc("/json/list", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"id":"UI","type":"browser_ui","title":"Omnibox Popup","url":"chrome://omnibox-popup.top-chrome/"},{"id":"T1","type":"page","title":"t","url":"about:blank"}]`))
	})
	up := websocket.Upgrader{}
	mux.HandleFunc("/devtools/browser/", func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, ws)
		f.mu.Unlock()
		for {
			var req struct {
				ID        int64  `json:"id"`
				Method    string `json:"method"`
				SessionID string `json:"sessionId"`
			}
			if ws.ReadJSON(&req) != nil {
				return
			}
			f.mu.Lock()
			f.methods = append(f.methods, req.Method)
			f.mu.Unlock()
			var res any = map[string]any{}
			switch req.Method {
			case "Target.attachToTarget":
				res = map[string]any{"sessionId": "S" + r.URL.Path[len(r.URL.Path)-1:]}
			case "Runtime.evaluate":
				res = map[string]any{"result": map[string]any{"type": "number", "value": 2}}
			case "Foo.bar":
				_ = ws.WriteJSON(map[string]any{"id": req.ID, "error": map[string]any{"code": -32601, "message": "'Foo.bar' wasn't found"}})
				continue
			}
			_ = ws.WriteJSON(map[string]any{"id": req.ID, "result": res, "sessionId": req.SessionID})
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// restart drops every WebSocket, as a browser that died does, and gives
// the next one a new browser id.
func (f *fakeBrowser) restart() {
	f.gen.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func (f *fakeBrowser) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.methods...)
}

func TestPlaneReconnectsThroughDial(t *testing.T) {
	f := newFakeBrowser(t)
	var dials atomic.Int32
	p := New(Config{CDPEndpoint: f.srv.URL, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}})
	ctx := context.Background()
	eval := func() {
		t.Helper()
		r := httptest.NewRequest("POST", "/v2/browser/evaluate", nil)
		out, err := p.evaluate(r, evaluateBody{Expression: "1+1"})
		if err != nil || string(out.Value) != "2" || out.Exception != nil {
			t.Fatalf("evaluate: %+v %v", out, err)
		}
	}
	eval()
	eval()
	if got := strings.Join(f.sent(), ","); got != "Target.attachToTarget,Runtime.evaluate,Runtime.evaluate" {
		t.Errorf("first connection sent %s (one attach, sessions cached)", got)
	}
	if dials.Load() == 0 {
		t.Fatal("the plane did not use Config.Dial")
	}
	f.restart()
	deadline := time.Now().Add(5 * time.Second)
	for p.c.alive() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	eval() // a new connection, a new session
	if got := strings.Join(f.sent(), ","); !strings.HasSuffix(got, "Runtime.evaluate,Target.attachToTarget,Runtime.evaluate") {
		t.Errorf("after the restart: %s", got)
	}
	// A CDP error is the plane's 503 with the method named.
	r := httptest.NewRequest("POST", "/v2/browser/cdp", nil)
	if _, err := p.rawCDP(r, cdpBody{Method: "Foo.bar"}); err == nil || err.Error() != "browser: Foo.bar: 'Foo.bar' wasn't found" {
		t.Errorf("Foo.bar: %v", err)
	}
	// Tabs are pages only.
	tabs, err := p.tabs(ctx)
	if err != nil || len(tabs) != 1 || tabs[0].ID != "T1" {
		t.Errorf("tabs: %+v %v", tabs, err)
	}
	// Close detaches, never closes a tab, and ends the reader.
	c := p.c
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sent := f.sent()
	if sent[len(sent)-1] != "Target.detachFromTarget" || strings.Contains(strings.Join(sent, ","), "closeTarget") {
		t.Errorf("close sent %v", sent)
	}
	if c.alive() {
		t.Error("the reader outlived Close")
	}
	if _, err := p.conn(ctx); err == nil {
		t.Error("a closed plane connected again")
	}
}

func TestPlaneUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := New(Config{CDPEndpoint: "http://" + addr})
	defer p.Close(context.Background())
	r := httptest.NewRequest("GET", "/v1/browser/info", nil)
	if _, err := p.Info(context.Background(), r, true); err == nil || err.Error() != "browser: read version: connection refused" {
		t.Errorf("info: %v", err)
	}
	if p.Probe(context.Background()) {
		t.Error("probe of a closed port succeeded")
	}
	if _, err := p.tabs(context.Background()); err == nil || err.Error() != "browser: list targets: connection refused" {
		t.Errorf("tabs: %v", err)
	}
}
