package launch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// fakeChrome speaks DevTools on a pipe pair as Chromium does (checked
// against Chromium 156): NUL-ended messages, the id first in an answer,
// the sessionId appended last. Every command on a session is answered
// {"result":{"echo":<method>}}; Target.attachToBrowserTarget on the root
// makes a new session; hook, when set, answers first.
type fakeChrome struct {
	t    *testing.T
	in   *bufio.Reader // what the mux writes
	out  *os.File      // what the mux reads
	wmu  sync.Mutex
	mu   sync.Mutex
	n    int
	seen []map[string]any
	hook func(f *fakeChrome, m map[string]any) bool
	done chan struct{}
}

// newFakeChrome attaches a fake Chromium to a new mux served by an HTTP
// test server; it returns both.
func newFakeChrome(t *testing.T, hook func(f *fakeChrome, m map[string]any) bool) (*fakeChrome, *CDPMux, *httptest.Server) {
	t.Helper()
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeChrome{t: t, in: bufio.NewReader(toR), out: fromW, hook: hook, done: make(chan struct{})}
	m := NewCDPMux(nil)
	m.Attach(toW, fromR)
	go f.serve(toR)
	srv := httptest.NewServer(m)
	t.Cleanup(func() {
		srv.Close()
		m.Close()
		f.close()
		<-f.done
	})
	return f, m, srv
}

func (f *fakeChrome) close() { _ = f.out.Close() }

func (f *fakeChrome) send(s string) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_, _ = f.out.Write(append([]byte(s), 0))
}

func (f *fakeChrome) serve(r *os.File) {
	defer close(f.done)
	defer r.Close()
	for {
		b, err := f.in.ReadBytes(0)
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
			f.t.Errorf("the mux sent %q: %v", b, err)
			continue
		}
		f.mu.Lock()
		f.seen = append(f.seen, m)
		f.mu.Unlock()
		if f.hook != nil && f.hook(f, m) {
			continue
		}
		id := int64(m["id"].(float64))
		sess, _ := m["sessionId"].(string)
		method, _ := m["method"].(string)
		switch {
		case sess == "" && method == "Target.attachToBrowserTarget":
			f.mu.Lock()
			f.n++
			s := fmt.Sprintf("S%d", f.n)
			f.mu.Unlock()
			f.send(`{"method":"Target.attachedToTarget","params":{"sessionId":"` + s + `","targetInfo":{"type":"browser"}}}`)
			f.send(fmt.Sprintf(`{"id":%d,"result":{"sessionId":"%s"}}`, id, s))
		case sess == "":
			f.send(fmt.Sprintf(`{"id":%d,"result":{}}`, id))
		default:
			f.send(fmt.Sprintf(`{"id":%d,"result":{"echo":%q},"sessionId":"%s"}`, id, method, sess))
		}
	}
}

// sent is the messages the fake has read whose method is method.
func (f *fakeChrome) sent(method string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, m := range f.seen {
		if m["method"] == method {
			out = append(out, m)
		}
	}
	return out
}

// dialMux opens a WebSocket to the browser through srv.
func dialMux(t *testing.T, m *CDPMux, srv *httptest.Server) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/cdp" + m.BrowserPath()
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// next reads one message as text within 60 s (a loaded machine under
// -race moves TestCDPMuxTooLarge's 264 MiB slowly).
func next(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

// TestCDPMuxTwoClients: two clients using the same ids each get their
// own answers, without the sessionId of their own session, and each
// command reached Chromium on its client's session with an id of the
// mux's.
func TestCDPMuxTwoClients(t *testing.T) {
	f, m, srv := newFakeChrome(t, nil)
	a, b := dialMux(t, m, srv), dialMux(t, m, srv)
	for _, ws := range []*websocket.Conn{a, b} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"method":"Browser.getVersion"}`)); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"id":1,"result":{"echo":"Browser.getVersion"}}`
	if got := next(t, a); got != want {
		t.Errorf("a got %s, want %s", got, want)
	}
	if got := next(t, b); got != want {
		t.Errorf("b got %s, want %s", got, want)
	}
	sent := f.sent("Browser.getVersion")
	if len(sent) != 2 || sent[0]["sessionId"] == sent[1]["sessionId"] || sent[0]["id"] == sent[1]["id"] {
		t.Errorf("what reached Chromium: %v; want two sessions and two ids", sent)
	}
}

// TestCDPMuxRefusals: a command the mux cannot check is answered with a
// CDP error and never reaches Chromium: another client's session, a key
// written with an escape, a second sessionId, no integer id, not JSON.
func TestCDPMuxRefusals(t *testing.T) {
	f, m, srv := newFakeChrome(t, nil)
	a, b := dialMux(t, m, srv), dialMux(t, m, srv)
	_ = b // holds S2
	for _, tc := range []struct{ in, want string }{
		{`{"id":5,"method":"Runtime.evaluate","sessionId":"S2"}`, `{"id":5,"error":{"code":-32001,"message":"Session with given id not found."}}`},
		{`{"id":6,"method":"Runtime.evaluate","sess\u0069onId":"S2"}`, `{"error":{"code":-32600,"message":"Message keys must not be escaped"}}`},
		{`{"id":7,"method":"Runtime.evaluate","sessionId":"S1","sessionId":"S2"}`, `{"error":{"code":-32600,"message":"Message must have one 'sessionId' property"}}`},
		{`{"id":"x","method":"Runtime.evaluate"}`, `{"error":{"code":-32600,"message":"Message must have integer 'id' property"}}`},
		{`{"id":1.5,"method":"Runtime.evaluate"}`, `{"error":{"code":-32600,"message":"Message must have integer 'id' property"}}`},
		{`{"id":8}`, `{"id":8,"error":{"code":-32600,"message":"Message must have string 'method' property"}}`},
		{`[1]`, `{"error":{"code":-32600,"message":"Message must be an object"}}`},
		{`{"id":9,`, `{"error":{"code":-32700,"message":"Message must be a valid JSON"}}`},
	} {
		if err := a.WriteMessage(websocket.TextMessage, []byte(tc.in)); err != nil {
			t.Fatal(err)
		}
		if got := next(t, a); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	if s := f.sent("Runtime.evaluate"); len(s) != 0 {
		t.Errorf("refused commands reached Chromium: %v", s)
	}
}

// TestCDPMuxChildSessions: a session a client attaches is its own: its
// events reach that client alone, with their sessionId; it may send on
// it; another client may not; a detach forgets it.
func TestCDPMuxChildSessions(t *testing.T) {
	f, m, srv := newFakeChrome(t, nil)
	a, b := dialMux(t, m, srv), dialMux(t, m, srv)
	f.send(`{"method":"Target.attachedToTarget","params":{"sessionId":"C1","targetInfo":{"type":"page"}},"sessionId":"S1"}`)
	if got := next(t, a); !strings.HasPrefix(got, `{"method":"Target.attachedToTarget"`) || strings.HasSuffix(got, `"sessionId":"S1"}`) {
		t.Errorf("a got %s; want the attach event without its own session", got)
	}
	f.send(`{"method":"Page.loadEventFired","params":{},"sessionId":"C1"}`)
	if got, want := next(t, a), `{"method":"Page.loadEventFired","params":{},"sessionId":"C1"}`; got != want {
		t.Errorf("a got %s, want %s", got, want)
	}
	_ = a.WriteMessage(websocket.TextMessage, []byte(`{"id":3,"method":"Page.enable","sessionId":"C1"}`))
	if got, want := next(t, a), `{"id":3,"result":{"echo":"Page.enable"},"sessionId":"C1"}`; got != want {
		t.Errorf("a got %s, want %s", got, want)
	}
	_ = b.WriteMessage(websocket.TextMessage, []byte(`{"id":3,"method":"Page.enable","sessionId":"C1"}`))
	if got := next(t, b); !strings.Contains(got, "Session with given id not found.") {
		t.Errorf("b on a's session got %s", got)
	}
	f.send(`{"method":"Target.detachedFromTarget","params":{"sessionId":"C1"},"sessionId":"S1"}`)
	next(t, a)
	_ = a.WriteMessage(websocket.TextMessage, []byte(`{"id":4,"method":"Page.enable","sessionId":"C1"}`))
	if got := next(t, a); !strings.Contains(got, "Session with given id not found.") {
		t.Errorf("a on its detached session got %s", got)
	}
}

// TestCDPMuxClientEnds: a client that goes away has its session
// detached; Chromium ending disconnects every client.
func TestCDPMuxClientEnds(t *testing.T) {
	f, m, srv := newFakeChrome(t, nil)
	a := dialMux(t, m, srv)
	b := dialMux(t, m, srv)
	_ = a.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.sent("Target.detachFromTarget")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	d := f.sent("Target.detachFromTarget")
	if len(d) != 1 || d[0]["params"].(map[string]any)["sessionId"] != "S1" {
		t.Fatalf("detaches sent: %v; want S1's", d)
	}
	f.close()
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := b.ReadMessage(); err == nil || websocket.IsUnexpectedCloseError(err) && strings.Contains(err.Error(), "timeout") {
		t.Errorf("b after Chromium ended: %v; want the connection closed", err)
	}
	resp, err := http.Get(srv.URL + "/cdp/json/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("/json/version with no browser: %d", resp.StatusCode)
	}
}

// TestCDPMuxTooLarge: an answer past maxChromeMessage fails its call
// with a CDP error, and the mux reads on.
func TestCDPMuxTooLarge(t *testing.T) {
	old := maxChromeMessage
	t.Cleanup(func() { maxChromeMessage = old }) // after the mux's own cleanup
	maxChromeMessage = 4 << 20
	const limit = 4 << 20
	_, m, srv := newFakeChrome(t, func(f *fakeChrome, msg map[string]any) bool {
		if msg["method"] != "Page.captureScreenshot" {
			return false
		}
		id := int64(msg["id"].(float64))
		go func() {
			f.wmu.Lock()
			defer f.wmu.Unlock()
			fmt.Fprintf(f.out, `{"id":%d,"result":{"data":"`, id)
			chunk := bytes.Repeat([]byte("A"), 1<<20)
			for range limit >> 20 {
				_, _ = f.out.Write(chunk)
			}
			fmt.Fprintf(f.out, `"},"sessionId":"%s"}`+"\x00", msg["sessionId"])
		}()
		return true
	})
	a := dialMux(t, m, srv)
	_ = a.WriteMessage(websocket.TextMessage, []byte(`{"id":2,"method":"Page.captureScreenshot"}`))
	if got, want := next(t, a), `{"id":2,"error":{"code":-32000,"message":"the answer is larger than 4 MiB"}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	_ = a.WriteMessage(websocket.TextMessage, []byte(`{"id":3,"method":"Browser.getVersion"}`))
	if got := next(t, a); got != `{"id":3,"result":{"echo":"Browser.getVersion"}}` {
		t.Errorf("after: %s", got)
	}
}

// TestCDPMuxJSON: /json/version names the browser's WebSocket under
// /cdp with the client's api_key kept; an unknown path is 404.
func TestCDPMuxJSON(t *testing.T) {
	_, m, srv := newFakeChrome(t, func(f *fakeChrome, msg map[string]any) bool {
		if msg["method"] != "Browser.getVersion" {
			return false
		}
		f.send(fmt.Sprintf(`{"id":%d,"result":{"protocolVersion":"1.3","product":"Chrome/1","revision":"@r","userAgent":"UA","jsVersion":"9"}}`, int64(msg["id"].(float64))))
		return true
	})
	resp, err := http.Get(srv.URL + "/cdp/json/version/?api_key=K&x=1")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	want := map[string]string{"Browser": "Chrome/1", "Protocol-Version": "1.3", "User-Agent": "UA", "V8-Version": "9",
		"WebKit-Version": "537.36 (@r)", "webSocketDebuggerUrl": "ws://" + host + "/cdp" + m.BrowserPath() + "?api_key=K"}
	if resp.StatusCode != 200 || fmt.Sprint(v) != fmt.Sprint(want) {
		t.Errorf("/json/version: %d %v; want %v", resp.StatusCode, v, want)
	}
	for _, p := range []string{"/cdp/json/protocol", "/cdp/devtools/browser/other", "/cdpx", "/json/version"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keys []string
		ok   bool
	}{
		{`{}`, nil, true},
		{` { "a" : 1 , "b":"x\"}" ,"c":{"d":[1,{"e":"]"}]}} `, []string{"a", "b", "c"}, true},
		{`{"a":1}x`, nil, false},
		{`{"a":1,}`, nil, false},
		{`{"a"}`, nil, false},
		{`{"a":"x`, nil, false},
		{`[]`, nil, false},
		{``, nil, false},
	} {
		ms, ok := members([]byte(tc.in))
		var keys []string
		for _, m := range ms {
			keys = append(keys, string(m.key))
		}
		if ok != tc.ok || fmt.Sprint(keys) != fmt.Sprint(tc.keys) {
			t.Errorf("members(%s) = %v %v; want %v %v", tc.in, keys, ok, tc.keys, tc.ok)
		}
	}
}

func TestSessionTail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"id":1,"result":{},"sessionId":"AB12"}`, "AB12"},
		{`{"method":"x","params":{"sessionId":"AB12"}}`, ""},
		{`{"id":1,"result":{"v":"\",\"sessionId\":\"AB12"}}`, ""},
		{`{"id":1,"result":{},"sessionId":"A\"B"}`, ""},
		{`"}`, ""},
	} {
		got, _ := sessionTail([]byte(tc.in))
		if got != tc.want {
			t.Errorf("sessionTail(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzMembers: members never panics, its spans lie in the message and
// in order, and on valid JSON objects it finds the keys encoding/json
// finds.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"id":1,"method":"a","params":{"x":[1,"]"]},"sessionId":"S"}`, `{"a":"\\"}`, `{"a":tru`, `{"\u0061":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, ok := members(b)
		last := 0
		for _, m := range ms {
			if m.start < last || m.start > m.valStart || m.valStart > m.end || m.end > len(b) {
				t.Fatalf("bad span %+v in %q", m, b)
			}
			last = m.end
		}
		var v map[string]json.RawMessage
		// (encoding/json reads invalid UTF-8 as U+FFFD, the scan keeps
		// the bytes: only valid text is compared.)
		if utf8.Valid(b) && json.Unmarshal(b, &v) == nil && v != nil && bytes.IndexByte(b, '\\') < 0 {
			if !ok {
				t.Fatalf("members refused a valid object %q", b)
			}
			for _, m := range ms {
				if _, found := v[string(m.key)]; !found {
					t.Fatalf("key %q not in %q", m.key, b)
				}
			}
		}
		_, _ = sessionTail(b)
		_ = topSession(b)
		_, _, _ = headID(b)
	})
}

// FuzzRewrite: a client's command, whatever it is, is refused or sent
// as valid JSON with exactly one id and one sessionId, the session being
// one the client owns.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"a"}`, `{"id":1,"method":"a","sessionId":"C"}`, `{"id":1,"method":"a","sessionId":"X"}`,
		`{"id":2,"method":"Target.activateTarget","params":{"targetId":"T"}}`, `{"id":1,"method":"a","sess\u0069onId":"X"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &generation{sessions: map[string]*muxClient{}}
		c := &muxClient{g: g, def: "D"}
		g.sessions["D"], g.sessions["C"] = c, c
		g.sessions["X"] = &muxClient{}
		out, pc, cerr := c.rewrite(b)
		if cerr != nil {
			return
		}
		full := append([]byte(`{"id":77`), out...)
		var v map[string]json.RawMessage
		if err := json.Unmarshal(full, &v); err != nil {
			t.Fatalf("rewrote %q into invalid %q: %v", b, full, err)
		}
		ms, ok := members(full)
		ids, sessions := 0, 0
		for _, m := range ms {
			switch string(m.key) {
			case "id":
				ids++
			case "sessionId":
				sessions++
				if s := string(full[m.valStart:m.end]); s != `"D"` && s != `"C"` {
					t.Fatalf("sent on session %s: %q", s, full)
				}
			}
		}
		if !ok || ids != 1 || sessions != 1 || pc == nil {
			t.Fatalf("%q → %q: %d ids, %d sessions", b, full, ids, sessions)
		}
	})
}

// FuzzRoute: whatever Chromium sends, the reader never panics and
// delivers only to the owner of the message's session.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{`{"id":1,"result":{},"sessionId":"D"}`, `{"method":"Target.attachedToTarget","params":{"sessionId":"N"},"sessionId":"D"}`,
		`{"method":"Target.detachedFromTarget","params":{"sessionId":"D"}}`, `{"id":2,"result":{}}`, `{"method":"x","params":{},"sessionId":"E"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &CDPMux{log: slog.New(slog.DiscardHandler)}
		g := &generation{mux: m, pending: map[int64]*pendingCall{}, sessions: map[string]*muxClient{}, clients: map[*muxClient]struct{}{},
			done: make(chan struct{})}
		mine := newMuxClient(g, "D")
		other := newMuxClient(g, "E")
		g.sessions["D"], g.sessions["E"] = mine, other
		g.pending[1] = &pendingCall{c: mine, clientID: []byte("9")}
		g.pending[2] = &pendingCall{ch: make(chan []byte, 1)}
		g.route(append([]byte(nil), b...))
		for _, c := range []*muxClient{mine, other} {
			if len(c.out) > 0 {
				parts := <-c.out
				msg := bytes.Join(parts, nil)
				if s, ok := sessionTail(msg); ok && s != c.def && g.sessions[s] != c {
					t.Fatalf("%s's client got a message of session %s: %q", c.def, s, msg)
				}
			}
		}
	})
}
