package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
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
	// list, when set, answers /json/list; lists counts its requests.
	list  atomic.Pointer[http.HandlerFunc]
	lists atomic.Int32
	// answer, when set, answers a method first (handled false: the
	// defaults); an errMsg is a CDP error. It runs on the socket's
	// reader, and send writes an event (or anything) to the socket.
	answer atomic.Pointer[func(send func(any), method, session string, params json.RawMessage) (res any, errMsg string, handled bool)]
}

// fakeNoReply is an answer hook's result for a request it answers later.
var fakeNoReply = new(int)

// fakeTargets are the targets the fake browser has.
var fakeTargets = []map[string]any{
	{"targetId": "UI", "type": "browser_ui", "title": "Omnibox Popup", "url": "chrome://omnibox-popup.top-chrome/"},
	{"targetId": "T1", "type": "page", "title": "t", "url": "about:blank"},
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
		f.lists.Add(1)
		if h := f.list.Load(); h != nil {
			(*h)(w, r)
			return
		}
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
				ID        int64           `json:"id"`
				Method    string          `json:"method"`
				SessionID string          `json:"sessionId"`
				Params    json.RawMessage `json:"params"`
			}
			if ws.ReadJSON(&req) != nil {
				return
			}
			f.mu.Lock()
			f.methods = append(f.methods, req.Method)
			f.mu.Unlock()
			if a := f.answer.Load(); a != nil {
				send := func(v any) { _ = ws.WriteJSON(v) }
				if res, msg, ok := (*a)(send, req.Method, req.SessionID, req.Params); ok {
					if res == fakeNoReply {
						continue
					}
					if msg != "" {
						_ = ws.WriteJSON(map[string]any{"id": req.ID, "error": map[string]any{"code": -32000, "message": msg}, "sessionId": req.SessionID})
					} else {
						_ = ws.WriteJSON(map[string]any{"id": req.ID, "result": res, "sessionId": req.SessionID})
					}
					continue
				}
			}
			var res any = map[string]any{}
			var tp struct {
				TargetID string `json:"targetId"`
			}
			_ = json.Unmarshal(req.Params, &tp)
			switch req.Method {
			case "Target.getTargets":
				res = map[string]any{"targetInfos": fakeTargets}
			case "Target.getTargetInfo", "Target.closeTarget":
				var info any
				for _, ti := range fakeTargets {
					if ti["targetId"] == tp.TargetID {
						info = ti
					}
				}
				if info == nil {
					_ = ws.WriteJSON(map[string]any{"id": req.ID, "error": map[string]any{"code": -32602, "message": "No target with given id found"}})
					continue
				}
				res = map[string]any{"targetInfo": info}
				if req.Method == "Target.closeTarget" {
					res = map[string]any{"success": true}
				}
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
	if got := strings.Join(f.sent(), ","); got != "Target.attachToTarget,Page.enable,Page.setLifecycleEventsEnabled,Inspector.enable,Runtime.evaluate,Runtime.evaluate" {
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
	if got := strings.Join(f.sent(), ","); !strings.HasSuffix(got, "Runtime.evaluate,Target.attachToTarget,Page.enable,Page.setLifecycleEventsEnabled,Inspector.enable,Runtime.evaluate") {
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
	p := New(Config{CDPEndpoint: planetest.DeadURL(t)})
	defer p.Close(context.Background())
	r := httptest.NewRequest("GET", "/v1/browser/info", nil)
	if _, err := p.Info(context.Background(), r, CDPPrefix, true); err == nil || err.Error() != "browser: read version: connection refused" {
		t.Errorf("info: %v", err)
	}
	if p.Probe(context.Background()) {
		t.Error("probe of a closed port succeeded")
	}
	if _, err := p.tabs(context.Background()); err == nil || err.Error() != "browser: list targets: connection refused" {
		t.Errorf("tabs: %v", err)
	}
}

// TestTabsHostileList: no page content can make target listing fail. A
// /json/list with a multi-megabyte URL is read (the URL cut at 64 KiB);
// one that cannot be read falls back to Target.getTargets; closing a tab
// and a browser-level cdp call do not read the list at all.
func TestTabsHostileList(t *testing.T) {
	f := newFakeBrowser(t)
	p := New(Config{CDPEndpoint: f.srv.URL})
	defer p.Close(context.Background())
	ctx := context.Background()

	huge := "http://x.test/?q=" + strings.Repeat("a", 5<<20)
	list := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal([]map[string]string{
			{"id": "BIG", "type": "page", "title": "é" + strings.Repeat("é", 40<<10), "url": huge, "devtoolsFrontendUrl": huge},
			{"id": "IF", "type": "iframe", "url": huge},
			{"id": "T1", "type": "page", "title": "t", "url": "about:blank"},
		})
		_, _ = w.Write(b)
	})
	f.list.Store(&list)
	tabs, err := p.tabs(ctx)
	if err != nil || len(tabs) != 2 || tabs[0].ID != "BIG" || tabs[1].ID != "T1" {
		t.Fatalf("tabs with a 5 MiB URL: %d %v", len(tabs), err)
	}
	if len(tabs[0].URL) != maxTargetText || !strings.HasPrefix(huge, tabs[0].URL) || !utf8.ValidString(tabs[0].Title) || len(tabs[0].Title) > maxTargetText {
		t.Errorf("cut: url %d bytes, title %d bytes (valid %v)", len(tabs[0].URL), len(tabs[0].Title), utf8.ValidString(tabs[0].Title))
	}

	for name, h := range map[string]http.HandlerFunc{
		"500":      func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) },
		"not JSON": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`[{"id":"T1",`)) },
	} {
		f.list.Store(&h)
		tabs, err := p.tabs(ctx)
		if err != nil || len(tabs) != 1 || tabs[0] != (Tab{ID: "T1", Title: "t", URL: "about:blank", Type: "page"}) {
			t.Errorf("%s: tabs from Target.getTargets: %+v %v", name, tabs, err)
		}
	}

	// Neither DELETE tabs/{id} nor cdp browser:true reads /json/list.
	f.lists.Store(0)
	del := func(id string) error {
		r := httptest.NewRequest("DELETE", "/v2/browser/tabs/"+id, nil)
		r.SetPathValue("id", id)
		_, err := p.closeTab(r, struct{}{})
		return err
	}
	if err := del("NOPE"); err == nil || err.Error() != "no tab with id NOPE" || !errors.Is(err, api.ErrNotFound) {
		t.Errorf("close NOPE: %v", err)
	}
	if err := del("UI"); err == nil || err.Error() != "no tab with id UI" {
		t.Errorf("close a browser_ui target: %v", err)
	}
	r := httptest.NewRequest("POST", "/v2/browser/cdp", nil)
	yes := true
	if _, err := p.rawCDP(r, cdpBody{Method: "Browser.getVersion", Browser: &yes}); err != nil {
		t.Errorf("cdp browser:true: %v", err)
	}
	tab := "NOPE"
	if _, err := p.rawCDP(r, cdpBody{Method: "Browser.getVersion", Browser: &yes, TabID: &tab}); err == nil || err.Error() != "no tab with id NOPE" {
		t.Errorf("cdp browser:true tab NOPE: %v", err)
	}
	if n := f.lists.Load(); n != 0 {
		t.Errorf("/json/list read %d times", n)
	}
}

// TestDialogAnswered: a JavaScript dialog that opens during a call is
// answered at once (alert, confirm, prompt dismissed; beforeunload
// accepted), so the call that raised it completes.
func TestDialogAnswered(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		accept bool
	}{{"alert", false}, {"confirm", false}, {"prompt", false}, {"beforeunload", true}} {
		t.Run(tc.typ, func(t *testing.T) {
			f := newFakeBrowser(t)
			var mu sync.Mutex
			var got []string
			hook := func(send func(any), method, session string, params json.RawMessage) (any, string, bool) {
				switch method {
				case "Runtime.evaluate":
					// The dialog opens; the evaluation answers only once
					// the dialog is closed, as Chrome's does.
					send(map[string]any{"method": "Page.javascriptDialogOpening", "sessionId": session,
						"params": map[string]any{"type": tc.typ, "message": "hi", "url": "http://x.test/"}})
					return fakeNoReply, "", true
				case "Page.handleJavaScriptDialog":
					mu.Lock()
					got = append(got, string(params))
					mu.Unlock()
					return map[string]any{}, "", true
				}
				return nil, "", false
			}
			f.answer.Store(&hook)
			p := New(Config{CDPEndpoint: f.srv.URL})
			defer p.Close(context.Background())
			c, s, err := p.session(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			// Raise the dialog with a call that is never answered: only
			// the dialog's answer is looked at.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_ = c.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": "alert(1); 7"}, nil)
			cancel()
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			want := `{"accept":false}`
			if tc.accept {
				want = `{"accept":true}`
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("Page.handleJavaScriptDialog sent %v, want [%s]", got, want)
			}
		})
	}
}

// TestCrashFailsAtOnce: a tab whose renderer crashed fails its pending
// and later calls at once with the crash's 503; a navigation is still
// sent, and once Chrome accepts it the tab is usable again.
func TestCrashFailsAtOnce(t *testing.T) {
	f := newFakeBrowser(t)
	hook := func(send func(any), method, session string, params json.RawMessage) (any, string, bool) {
		if method == "Runtime.evaluate" && strings.Contains(string(params), "crash") {
			send(map[string]any{"method": "Inspector.targetCrashed", "sessionId": session, "params": map[string]any{}})
			return fakeNoReply, "", true
		}
		if method == "Page.navigate" {
			return map[string]any{"frameId": "T1"}, "", true
		}
		return nil, "", false
	}
	f.answer.Store(&hook)
	p := New(Config{CDPEndpoint: f.srv.URL})
	defer p.Close(context.Background())
	eval := func(expr string) error {
		r := httptest.NewRequest("POST", "/v2/browser/evaluate", nil)
		_, err := p.evaluate(r, evaluateBody{Expression: expr})
		return err
	}
	start := time.Now()
	err := eval("crash")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Message != "browser: the tab crashed" || ae.Hint != CrashHint || !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("pending call on a crashing tab: %v", err)
	}
	n := len(f.sent())
	if err := eval("1"); err == nil || err.Error() != "browser: the tab crashed" {
		t.Errorf("later call: %v", err)
	}
	if len(f.sent()) != n {
		t.Errorf("a call was sent to the crashed tab: %v", f.sent()[n:])
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	r := httptest.NewRequest("POST", "/v2/browser/navigate", nil)
	u, commit := "about:blank", "commit"
	if _, err := p.navigate(r, navigateBody{URL: &u, WaitUntil: &commit}); err != nil {
		t.Fatalf("navigate a crashed tab: %v", err)
	}
	if err := eval("1"); err != nil {
		t.Errorf("after the navigation: %v", err)
	}
}

// TestAnswerPastLimit: an answer past its call's limit fails that call
// alone (413, the limit named) and the connection carries on; a
// screenshot may be larger.
func TestAnswerPastLimit(t *testing.T) {
	f := newFakeBrowser(t)
	big := strings.Repeat("x", maxResult+1)
	hook := func(send func(any), method, session string, params json.RawMessage) (any, string, bool) {
		switch {
		case method == "Runtime.evaluate" && strings.Contains(string(params), "big"):
			return map[string]any{"result": map[string]any{"type": "string", "value": big}}, "", true
		case method == "Page.captureScreenshot":
			return map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(big))}, "", true
		}
		return nil, "", false
	}
	f.answer.Store(&hook)
	p := New(Config{CDPEndpoint: f.srv.URL})
	defer p.Close(context.Background())
	r := httptest.NewRequest("POST", "/v2/browser/evaluate", nil)
	_, err := p.evaluate(r, evaluateBody{Expression: "big"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Message != "browser: the result is larger than 32 MiB" || api.Status(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("big evaluate: %v", err)
	}
	c := p.c
	out, err := p.evaluate(r, evaluateBody{Expression: "1+1"})
	if err != nil || string(out.Value) != "2" || p.c != c || !c.alive() {
		t.Errorf("after: %s %v (same connection %v)", out.Value, err, p.c == c)
	}
	sh, err := p.screenshot(httptest.NewRequest("GET", "/v2/browser/screenshot", nil), screenshotQuery{})
	if err != nil || sh.end-sh.start != base64.StdEncoding.EncodedLen(len(big)) {
		t.Errorf("screenshot past 32 MiB: %v", err)
	}
}

// TestObjectGroupReleased: an element lookup resolves in an object group
// of its own, released when the request ends (found or not).
func TestObjectGroupReleased(t *testing.T) {
	f := newFakeBrowser(t)
	var mu sync.Mutex
	var groups []string
	hook := func(send func(any), method, session string, params json.RawMessage) (any, string, bool) {
		var p struct {
			ObjectGroup string `json:"objectGroup"`
		}
		_ = json.Unmarshal(params, &p)
		switch method {
		case "Runtime.evaluate":
			mu.Lock()
			groups = append(groups, "lookup "+p.ObjectGroup)
			mu.Unlock()
			return map[string]any{"result": map[string]any{"type": "object", "objectId": "O1"}}, "", true
		case "Runtime.releaseObjectGroup":
			mu.Lock()
			groups = append(groups, "release "+p.ObjectGroup)
			mu.Unlock()
			return map[string]any{}, "", true
		case "Runtime.callFunctionOn":
			return map[string]any{"result": map[string]any{"type": "undefined"}}, "", true
		}
		return nil, "", false
	}
	f.answer.Store(&hook)
	p := New(Config{CDPEndpoint: f.srv.URL})
	defer p.Close(context.Background())
	sel := "#x"
	if _, err := p.click(httptest.NewRequest("POST", "/v2/browser/click", nil), elementBody{Selector: &sel}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(groups) != 2 || groups[0] == "lookup " || "release"+groups[0][len("lookup"):] != groups[1] {
		t.Errorf("groups %q: want a lookup in a group, then its release", groups)
	}
}

// TestCallTimeout: a CDP call whose caller set no deadline ends after
// callTimeout when the browser never answers (the request's context
// alone would hold it until the client left), as the 503 that says so.
func TestCallTimeout(t *testing.T) {
	defer func(d time.Duration) { callTimeout = d }(callTimeout)
	callTimeout = 300 * time.Millisecond
	tests := []struct {
		name   string
		silent string // the method the browser never answers
		run    func(p *Plane, r *http.Request) error
	}{
		{"activate tab", "Target.getTargetInfo", func(p *Plane, r *http.Request) error {
			r.SetPathValue("id", "T1")
			_, err := p.activateTab(r, struct{}{})
			return err
		}},
		{"tabs by Target.getTargets", "Target.getTargets", func(p *Plane, r *http.Request) error {
			_, err := p.tabs(r.Context())
			return err
		}},
		{"snapshot", "Accessibility.getFullAXTree", func(p *Plane, r *http.Request) error {
			_, err := p.snapshot(r, snapshotBody{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBrowser(t)
			fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusInternalServerError) })
			if tt.silent == "Target.getTargets" {
				f.list.Store(&fail)
			}
			hook := func(send func(any), method, session string, params json.RawMessage) (any, string, bool) {
				if method == tt.silent {
					return fakeNoReply, "", true
				}
				return nil, "", false
			}
			f.answer.Store(&hook)
			p := New(Config{CDPEndpoint: f.srv.URL})
			defer p.Close(context.Background())
			start := time.Now()
			err := tt.run(p, httptest.NewRequest("GET", "/", nil))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			if api.Status(err) != http.StatusServiceUnavailable {
				t.Fatalf("err = %v, want a 503", err)
			}
		})
	}
}
