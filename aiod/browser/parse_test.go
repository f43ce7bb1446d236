package browser

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		id   int64
		want bool
	}{
		{"e1", 1, true},
		{"e123456", 123456, true},
		{"e007", 7, true},
		{"e", 0, false},
		{"e0", 0, false},
		{"x1", 0, false},
		{"E1", 0, false},
		{"e-1", 0, false},
		{"e1a", 0, false},
		{"e+1", 0, false},
		{"e99999999999999999999", 0, false},
		{"", 0, false},
		{" e1", 0, false},
	} {
		id, ok := parseRef(tc.in)
		if ok != tc.want || (ok && id != tc.id) {
			t.Errorf("parseRef(%q) = %d, %v; want %d, %v", tc.in, id, ok, tc.id, tc.want)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"e1", "e", "x1", "e00", "e9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := parseRef(s)
		if ok && (id <= 0 || !strings.HasPrefix(s, "e")) {
			t.Fatalf("parseRef(%q) = %d", s, id)
		}
	})
}

func TestParseResolution(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Size
		err  bool
	}{
		{``, nil, false},
		{`null`, nil, false},
		{`{"width":1280,"height":720}`, &Size{1280, 720}, false},
		{`{"width":1600,"height":1200}`, &Size{1600, 1200}, false},
		{`{"width":1234,"height":567}`, nil, true},
		{`{"width":1280}`, nil, true},
		{`{"width":"1280","height":720}`, nil, true},
		{`[1280,720]`, nil, true},
		{`{"width":1280.5,"height":720}`, nil, true},
	} {
		got, err := parseResolution(json.RawMessage(tc.in))
		if (err != nil) != tc.err || (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("parseResolution(%s) = %v, %v", tc.in, got, err)
			continue
		}
		var se *serde.Error
		if err != nil && (!errors.As(err, &se) || strings.Join(se.Location, ".") != "body.resolution") {
			t.Errorf("parseResolution(%s): error %#v, want the 422 body on body.resolution", tc.in, err)
		}
	}
}

func FuzzParseResolution(f *testing.F) {
	f.Add(`{"width":1280,"height":720}`)
	f.Add(`{"width":-1,"height":1e99}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseResolution(json.RawMessage(s))
		if got != nil && err == nil {
			found := false
			for _, r := range Resolutions {
				found = found || r == *got
			}
			if !found {
				t.Fatalf("accepted %v", got)
			}
		}
	})
}

func TestUnderCDP(t *testing.T) {
	for path, want := range map[string]bool{"/cdp": true, "/cdp/": true, "/cdp/json/version": true,
		"/cdpx": false, "/": false, "/v1/cdp": false, "": false} {
		if got := UnderCDP(path); got != want {
			t.Errorf("UnderCDP(%q) = %v", path, got)
		}
	}
}

func TestCDPURL(t *testing.T) {
	const path = "/devtools/browser/1f2e"
	for _, tc := range []struct {
		name   string
		target string
		header map[string]string
		tls    bool
		want   string
	}{
		{"direct", "http://127.0.0.1:18091/v1/browser/info", nil, false, "ws://127.0.0.1:18091/cdp/devtools/browser/1f2e"},
		{"query kept", "http://h:1/v1/browser/info?api_key=K&x=a%20b", nil, false, "ws://h:1/cdp/devtools/browser/1f2e?api_key=K&x=a%20b"},
		{"forwarded", "http://h:1/v2/browser/info", map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "sb.example", "X-Forwarded-Prefix": "/p/"}, false, "wss://sb.example/p/cdp/devtools/browser/1f2e"},
		{"prefix without slashes", "http://h:1/i", map[string]string{"X-Forwarded-Prefix": "p/q"}, false, "ws://h:1/p/q/cdp/devtools/browser/1f2e"},
		{"prefix once", "http://h:1/i", map[string]string{"X-Forwarded-Prefix": "/cdp"}, false, "ws://h:1/cdp/devtools/browser/1f2e"},
		{"prefix slash only", "http://h:1/i", map[string]string{"X-Forwarded-Prefix": "/"}, false, "ws://h:1/cdp/devtools/browser/1f2e"},
		{"first forwarded host", "http://h:1/i", map[string]string{"X-Forwarded-Host": "a.example, b.example"}, false, "ws://a.example/cdp/devtools/browser/1f2e"},
		{"proto http over tls", "https://h/i", map[string]string{"X-Forwarded-Proto": "http"}, true, "ws://h/cdp/devtools/browser/1f2e"},
		{"tls", "https://h/i", nil, true, "wss://h/cdp/devtools/browser/1f2e"},
		{"unknown proto", "http://h/i", map[string]string{"X-Forwarded-Proto": "gopher"}, false, "ws://h/cdp/devtools/browser/1f2e"},
		{"browser's own endpoint", "http://127.0.0.1:9222/mcp", nil, false, "ws://127.0.0.1:9222/devtools/browser/1f2e"},
	} {
		r := httptest.NewRequest("GET", tc.target, nil)
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		if !tc.tls {
			r.TLS = nil
		} else {
			r.TLS = &tls.ConnectionState{}
		}
		prefix := CDPPrefix
		if strings.HasPrefix(tc.name, "browser's own") {
			prefix = ""
		}
		if got := CDPURL(r, prefix, path); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// decodeJSON runs jsonBody on a request whose body is b.
func decodeJSON[In any](b []byte, in *In) error {
	r := httptest.NewRequest("POST", "/v2/browser/x", bytes.NewReader(b))
	r.Header.Set("Content-Type", "application/json")
	return jsonBody(httptest.NewRecorder(), r, in)
}

func TestDecodeJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		kind error // nil: decodes
		ser  bool  // the 422 validation body
	}{
		{``, nil, false},
		{`{"selector":"#a"}`, nil, false},
		{`not json`, api.ErrInvalid, false},
		{`{"selector":`, api.ErrInvalid, false},
		{`{"selector":5}`, nil, true},
		{`[]`, nil, true},
		{`{"selector":"` + strings.Repeat("x", api.MaxJSONBody) + `"}`, api.ErrTooLarge, false},
	} {
		var in elementBody
		err := decodeJSON([]byte(tc.body), &in)
		var se *serde.Error
		switch {
		case tc.kind != nil && !errors.Is(err, tc.kind):
			t.Errorf("%q: %v, want %v", cut(tc.body, 40), err, tc.kind)
		case tc.ser && !errors.As(err, &se):
			t.Errorf("%q: %v, want a serde error", cut(tc.body, 40), err)
		case tc.kind == nil && !tc.ser && err != nil:
			t.Errorf("%q: %v", cut(tc.body, 40), err)
		}
	}
	var f fillBody
	var se *serde.Error
	if err := decodeJSON([]byte(`{"selector":"#a"}`), &f); !errors.As(err, &se) || se.Type != serde.TypeMissing {
		t.Errorf("fill without value: %v", err)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"url":"x","history":"back","timeout":1.5}`, `{"timeout":"1"}`, `nope`} {
		f.Add([]byte(s))
	}
	// Whatever the body, each decode answers nil or one of the plane's
	// error kinds (never another error, which would be a 500), and
	// accepts nothing that is not JSON (UTF-8, as serde_json reads it:
	// json.Valid alone passes bad bytes inside strings). Some JSON is
	// refused as not JSON too: a number beyond float64, as serde_json.
	kind := func(t *testing.T, b []byte, err error) {
		t.Helper()
		var se *serde.Error
		switch {
		case err == nil:
			if len(bytes.TrimSpace(b)) > 0 && !(json.Valid(b) && utf8.Valid(b)) {
				t.Fatalf("%q: decoded, but it is not JSON", b)
			}
		case errors.Is(err, api.ErrInvalid), errors.Is(err, api.ErrTooLarge), errors.As(err, &se):
		default:
			t.Fatalf("%q: %v (%T), not a plane error", b, err, err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var n navigateBody
		kind(t, b, decodeJSON(b, &n))
		var c cdpBody
		kind(t, b, decodeJSON(b, &c))
		var k setCookiesBody
		err := decodeJSON(b, &k)
		kind(t, b, err)
		if err == nil && len(k.Cookies) > 0 {
			_, _ = parseCookies(k.Cookies) // it must not panic; its errors are its unit test's
		}
	})
}

func TestElement(t *testing.T) {
	sel, ref, bad := "#a", "e12", "x1"
	empty := ""
	for _, tc := range []struct {
		in   elementBody
		want element
		kind error
	}{
		{elementBody{Selector: &sel}, element{selector: "#a"}, nil},
		{elementBody{Ref: &ref}, element{ref: 12}, nil},
		{elementBody{Ref: &ref, Selector: &sel}, element{ref: 12}, nil},
		{elementBody{Ref: &bad}, element{}, api.ErrInvalid},
		{elementBody{}, element{}, api.ErrInvalid},
		{elementBody{Selector: &empty}, element{}, api.ErrInvalid},
	} {
		got, err := tc.in.element()
		if got != tc.want || (tc.kind == nil) != (err == nil) || (tc.kind != nil && !errors.Is(err, tc.kind)) {
			t.Errorf("%+v: %+v, %v", tc.in, got, err)
		}
	}
}

func TestParseCookies(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		path bool // path "/" added
	}{
		{`[{"name":"a","value":"1","url":"http://x/"}]`, true, false},
		{`[{"name":"a","value":"1","domain":"x"}]`, true, true},
		{`[{"name":"a","value":"1"}]`, false, false},
		{`[{"name":"a","url":"http://x/"}]`, false, false},
		{`[{"name":1,"value":"1","url":"http://x/"}]`, false, false},
		{`{"name":"a"}`, false, false},
		{`[]`, true, false},
		{`[{"name":"a","value":"1","url":"not a url"}]`, false, false},
		{`[{"name":"a","value":"1","url":"ftp://x/"}]`, false, false},
		{`[{"name":"a","value":"1","url":"https://x/","expires":"soon"}]`, false, false},
		{`[{"name":"a","value":"1","url":"https://x/","expires":1.9e9,"secure":true,"httpOnly":false,"sameSite":"Lax"}]`, true, false},
		{`[{"name":"a","value":"1","domain":"x","secure":"yes"}]`, false, false},
		{`[{"name":"a","value":"1","domain":"x","sameSite":"lax"}]`, false, false},
		{`[{"name":"a","value":"1","domain":"x","path":5}]`, false, false},
	} {
		list, err := parseCookies(json.RawMessage(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if tc.path && list[0]["path"] != "/" {
			t.Errorf("%s: no path: %v", tc.in, list)
		}
	}
}

func TestMessageID(t *testing.T) {
	for _, tc := range []struct {
		msg string
		id  int64
		ok  bool
	}{
		{`{"id":7,"result":{}}`, 7, true},
		{`{"id":12}`, 12, true},
		{`{"result":{},"id":3}`, 3, true},
		{`{"method":"Page.loadEventFired","params":{}}`, 0, false},
		{`{"id":"x"}`, 0, false},
		{`garbage`, 0, false},
	} {
		id, ok := messageID([]byte(tc.msg))
		if id != tc.id || ok != tc.ok {
			t.Errorf("%s: %d %v", tc.msg, id, ok)
		}
	}
}

func TestCheckError(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want string
	}{
		{`{"id":1,"result":{"data":"x"}}`, ""},
		{`{"id":1,"result":{"error":{"a":1}}}`, ""},
		{`{"id":1,"error":{"code":-32601,"message":"'Foo.bar' wasn't found"}}`, "Foo.bar: 'Foo.bar' wasn't found"},
		{`{"id":1,"error":{"code":-32000,"message":"No node with given id found"},"sessionId":"S"}`, "Foo.bar: No node with given id found"},
	} {
		err := checkError("Foo.bar", []byte(tc.msg))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.msg, got, tc.want)
		}
	}
}

func TestBase64FieldAndPNGSize(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x05\x00\x00\x00\x02\xd0rest")
	b64 := base64.StdEncoding.EncodeToString(png)
	msg := []byte(`{"id":3,"result":{"data":"` + b64 + `"},"sessionId":"S"}`)
	st, end, ok := base64Field(msg, "data")
	if !ok || string(msg[st:end]) != b64 {
		t.Fatalf("base64Field: %d %d %v", st, end, ok)
	}
	head := make([]byte, 24)
	if _, err := base64.StdEncoding.Decode(head, msg[st:st+32]); err != nil {
		t.Fatal(err)
	}
	if w, h, ok := pngSize(head); !ok || w != 1280 || h != 720 {
		t.Errorf("pngSize: %d %d %v", w, h, ok)
	}
	if _, _, ok := base64Field([]byte(`{"id":1,"result":{"data":"a\/b"}}`), "data"); ok {
		t.Error("an escaped value passed as base64")
	}
	if _, _, ok := base64Field([]byte(`{"id":1,"result":{}}`), "data"); ok {
		t.Error("no field found one")
	}
	if _, _, ok := pngSize([]byte("GIF89a.................")); ok {
		t.Error("a GIF has a PNG size")
	}
}

func TestNetLogRing(t *testing.T) {
	n := newNetLog(3)
	c := &conn{sessions: map[string]string{"T1": "S1"}}
	ev := func(method, params string) *event {
		return &event{Method: method, Params: json.RawMessage(params), SessionID: "S1"}
	}
	n.onEvent(c, ev("Network.requestWillBeSent", `{"requestId":"0","request":{"url":"http://x/0","method":"GET"},"type":"Document"}`))
	if got := n.list(-1, false); len(got) != 0 {
		t.Fatalf("captured before the first read: %v", got)
	}
	n.start()
	for i, u := range []string{"a", "b", "c", "d"} {
		n.onEvent(c, ev("Network.requestWillBeSent", `{"requestId":"`+string(rune('1'+i))+`","request":{"url":"http://x/`+u+`","method":"GET"},"type":"Document","wallTime":1.5}`))
	}
	n.onEvent(c, ev("Network.responseReceived", `{"requestId":"4","response":{"status":404,"mimeType":"text/html"}}`))
	n.onEvent(c, ev("Network.loadingFailed", `{"requestId":"3","errorText":"net::ERR_FAILED"}`))
	got := n.list(-1, false)
	if len(got) != 3 || got[0].URL != "http://x/d" || got[2].URL != "http://x/b" {
		t.Fatalf("ring: %+v", got)
	}
	if got[0].Status == nil || *got[0].Status != 404 || *got[0].MimeType != "text/html" || got[0].TabID != "T1" || got[0].Timestamp != 1.5 {
		t.Errorf("response: %+v", got[0])
	}
	if !got[1].Failed || *got[1].ErrorText != "net::ERR_FAILED" || got[1].Status != nil {
		t.Errorf("failure: %+v", got[1])
	}
	if l := n.list(1, true); len(l) != 1 || l[0].URL != "http://x/d" {
		t.Errorf("limit 1: %+v", l)
	}
	if l := n.list(-1, false); len(l) != 0 {
		t.Errorf("after clear: %+v", l)
	}
	b, _ := json.Marshal(got[2])
	if string(b) != `{"id":"2","tab_id":"T1","url":"http://x/b","method":"GET","resource_type":"Document","status":null,"mime_type":null,"failed":false,"error_text":null,"timestamp":1.5}` {
		t.Errorf("entry: %s", b)
	}
}

// TestNetLogRedirect: a redirect's hops share a request id. The first
// hop ends with the redirect's response, the final response goes to the
// last hop, and evicting an older hop keeps the id on the newer one.
func TestNetLogRedirect(t *testing.T) {
	n := newNetLog(2)
	n.start()
	c := &conn{sessions: map[string]string{"T1": "S1"}}
	ev := func(method, params string) {
		n.onEvent(c, &event{Method: method, Params: json.RawMessage(params), SessionID: "S1"})
	}
	ev("Network.requestWillBeSent", `{"requestId":"1","request":{"url":"http://x/a","method":"GET"},"type":"Document"}`)
	ev("Network.requestWillBeSent", `{"requestId":"1","request":{"url":"http://x/b","method":"GET"},"type":"Document","redirectResponse":{"status":302,"mimeType":"text/plain"}}`)
	ev("Network.responseReceived", `{"requestId":"1","response":{"status":200,"mimeType":"text/html"}}`)
	got := n.list(-1, false)
	if len(got) != 2 || got[0].URL != "http://x/b" || got[0].ID != "1#http://x/b" || got[1].URL != "http://x/a" || got[1].ID != "1" {
		t.Fatalf("hops: %+v", got)
	}
	if got[1].Status == nil || *got[1].Status != 302 || *got[1].MimeType != "text/plain" {
		t.Errorf("first hop: %+v", got[1])
	}
	if got[0].Status == nil || *got[0].Status != 200 || *got[0].MimeType != "text/html" {
		t.Errorf("last hop: %+v", got[0])
	}
	// A third request evicts hop a; the id still names hop b.
	ev("Network.requestWillBeSent", `{"requestId":"2","request":{"url":"http://x/c","method":"GET"},"type":"Document"}`)
	ev("Network.loadingFailed", `{"requestId":"1","errorText":"net::ERR_ABORTED"}`)
	got = n.list(-1, false)
	if len(got) != 2 || got[1].URL != "http://x/b" || !got[1].Failed {
		t.Errorf("after evicting hop a: %+v", got)
	}
}
