package origin

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func mustNew(t testing.TB, c Config) *Policy {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheck(t *testing.T) {
	local := Config{Listen: "127.0.0.1:8000"}
	named := Config{Listen: "127.0.0.1:8000", Hosts: []string{"hub.example"}, Origins: []string{"https://app.example"}}
	every := Config{Listen: "0.0.0.0:8000"}
	one := Config{Listen: "10.0.0.5:8000"}
	for _, c := range []struct {
		name   string
		cfg    Config
		host   string
		origin []string
		want   Verdict
	}{
		{"loopback v4", local, "127.0.0.1:8000", nil, Allowed},
		{"loopback other", local, "127.9.9.9:1", nil, Allowed},
		{"localhost", local, "localhost:8000", nil, Allowed},
		{"LOCALHOST.", local, "LOCALHOST.:8000", nil, Allowed},
		{"loopback v6", local, "[::1]:8000", nil, Allowed},
		{"mapped v6", local, "[::ffff:127.0.0.1]:8000", nil, Allowed},
		{"no port", local, "localhost", nil, Allowed},
		{"no host", local, "", nil, Allowed},
		{"rebound name", local, "evil.example:8000", nil, HostRefused},
		{"sub localhost", local, "evil.localhost:8000", nil, HostRefused},
		{"other ip", local, "10.0.0.5:8000", nil, HostRefused},
		{"unbracketed v6", local, "::1", nil, HostRefused},
		{"bracketed name", local, "[localhost]:8000", nil, HostRefused},
		{"bracketed v4", local, "[127.0.0.1]:8000", nil, HostRefused},
		{"zone", local, "[fe80::1%25eth0]:8000", nil, HostRefused},
		{"bad port", local, "localhost:80a", nil, HostRefused},
		{"long port", local, "localhost:123456", nil, HostRefused},
		{"empty port", local, "localhost:", nil, Allowed},
		{"decimal ip", local, "2130706433:8000", nil, HostRefused},
		{"listed name", named, "HUB.example", nil, Allowed},
		{"listed name dot", named, "hub.example.:443", nil, Allowed},
		{"every address: any ip", every, "192.0.2.7:8000", nil, Allowed},
		{"every address: v6", every, "[2001:db8::1]:8000", nil, Allowed},
		{"every address: name", every, "evil.example:8000", nil, HostRefused},
		{"one address", one, "10.0.0.5:8000", nil, Allowed},
		{"one address: other", one, "10.0.0.6:8000", nil, HostRefused},

		{"same origin", local, "127.0.0.1:8000", []string{"http://127.0.0.1:8000"}, Allowed},
		{"same origin https", local, "localhost:8000", []string{"https://localhost:8000"}, Allowed},
		{"same origin case", local, "localhost:8000", []string{"HTTP://LocalHost:8000"}, Allowed},
		{"default port", named, "hub.example", []string{"http://hub.example"}, Allowed},
		{"proxy dropped the port", local, "127.0.0.1", []string{"http://127.0.0.1:8080"}, Allowed},
		{"proxy dropped the port, other host", local, "127.0.0.1", []string{"http://localhost:8080"}, OriginRefused},
		{"default port explicit", named, "hub.example:443", []string{"https://hub.example"}, Allowed},
		{"default port mismatch", named, "hub.example:443", []string{"http://hub.example"}, OriginRefused},
		{"evil origin", local, "127.0.0.1:8000", []string{"http://evil.example"}, OriginRefused},
		{"other port", local, "127.0.0.1:8000", []string{"http://127.0.0.1:9000"}, OriginRefused},
		{"other loopback", local, "127.0.0.1:8000", []string{"http://localhost:8000"}, OriginRefused},
		{"every address: other ip page", every, "127.0.0.1:8000", []string{"http://192.0.2.7:8000"}, OriginRefused},
		{"null", local, "127.0.0.1:8000", []string{"null"}, OriginRefused},
		{"empty origin", local, "127.0.0.1:8000", []string{""}, OriginRefused},
		{"two origins", local, "127.0.0.1:8000", []string{"http://127.0.0.1:8000", "http://127.0.0.1:8000"}, OriginRefused},
		{"file", local, "127.0.0.1:8000", []string{"file://127.0.0.1:8000"}, OriginRefused},
		{"with path", local, "127.0.0.1:8000", []string{"http://127.0.0.1:8000/x"}, OriginRefused},
		{"with user", local, "127.0.0.1:8000", []string{"http://a@127.0.0.1:8000"}, OriginRefused},
		{"listed origin", named, "127.0.0.1:8000", []string{"https://app.example"}, Allowed},
		{"listed origin :443", named, "127.0.0.1:8000", []string{"https://app.example:443"}, Allowed},
		{"listed origin other scheme", named, "127.0.0.1:8000", []string{"http://app.example"}, OriginRefused},
		{"bad host wins", named, "evil.example", []string{"https://app.example"}, HostRefused},
		{"v6 origin", local, "[::1]:8000", []string{"http://[::1]:8000"}, Allowed},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustNew(t, c.cfg)
			r := httptest.NewRequest("GET", "/", nil)
			r.Host = c.host
			if c.origin != nil {
				r.Header["Origin"] = c.origin
			}
			if got := p.Check(r); got != c.want {
				t.Fatalf("Check(Host %q, Origin %q) = %d, want %d", c.host, c.origin, got, c.want)
			}
		})
	}
}

func TestStatusAndRefusal(t *testing.T) {
	p := Loopback()
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example:8000"
	if v := p.Check(r); v.Status() != 421 ||
		p.Refusal(v, r) != `Host "evil.example:8000" is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host` {
		t.Fatalf("host refusal: %d %q", v.Status(), p.Refusal(v, r))
	}
	r.Host = "127.0.0.1:8000"
	r.Header.Set("Origin", "http://evil.example")
	if v := p.Check(r); v.Status() != 403 ||
		p.Refusal(v, r) != `Origin "http://evil.example" is not allowed (cross-origin request); allow it with --allowed-origin` {
		t.Fatalf("origin refusal: %d %q", v.Status(), p.Refusal(v, r))
	}
	if Allowed.Status() != 200 || p.Refusal(Allowed, r) != "" {
		t.Fatal("Allowed has a refusal")
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, host, origin string }{
		{"sandbox.example", "sandbox.example", ""},
		{" Sandbox.Example. ", "sandbox.example", ""},
		{"sandbox.example:8080", "sandbox.example", ""},
		{"10.0.0.5", "10.0.0.5", ""},
		{"::1", "::1", ""},
		{"[::1]:80", "::1", ""},
		{"http://a.example", "", "http://a.example"},
		{"https://A.example:443/", "", "https://a.example"},
		{"http://a.example:80", "", "http://a.example"},
		{"http://a.example:3000", "", "http://a.example:3000"},
		{"http://[::1]:3000", "", "http://[::1]:3000"},
	} {
		if c.host != "" {
			if got, err := ParseHost(c.in); err != nil || got != c.host {
				t.Errorf("ParseHost(%q) = %q, %v; want %q", c.in, got, err, c.host)
			}
		}
		if c.origin != "" {
			if got, err := ParseOrigin(c.in); err != nil || got != c.origin {
				t.Errorf("ParseOrigin(%q) = %q, %v; want %q", c.in, got, err, c.origin)
			}
		}
	}
	for _, bad := range []string{"", " ", "http://a.example", "a.example/x", "*.example", "a b", "user@a", "[a.example]", "a:b"} {
		if got, err := ParseHost(bad); err == nil {
			t.Errorf("ParseHost(%q) = %q, want an error", bad, got)
		}
	}
	for _, bad := range []string{"", "a.example", "a.example:3000", "*", "null", "ftp://a.example", "http://", "http://a.example/x", "http://a.example?q", "http://u@a.example", "http://a.example:x", "http://[a]:1"} {
		if got, err := ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := New(Config{Origins: []string{"app.example"}}); err == nil || err.Error() != `bad allowed origin "app.example": want scheme://host[:port], like https://app.example or http://localhost:3000` {
		t.Errorf("New with a bad origin: %v", err)
	}
	if got := SplitList(" a, ,b,"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("SplitList = %q", got)
	}
}

func TestSourceAllowed(t *testing.T) {
	p := Loopback()
	r := httptest.NewRequest("POST", "/", nil)
	r.Host = "127.0.0.1:8000"
	for src, want := range map[string]bool{
		"http://127.0.0.1:8000":           true,
		"http://127.0.0.1:8000/console/x": true,
		"https://127.0.0.1:8000?q#f":      true,
		"http://evil.example/127.0.0.1":   false,
		"http://127.0.0.1:80001/":         false,
		"null":                            false,
		"":                                false,
	} {
		if got := p.SourceAllowed(r, src); got != want {
			t.Errorf("SourceAllowed(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestCORS(t *testing.T) {
	p := mustNew(t, Config{Listen: "127.0.0.1:0", Origins: []string{"https://app.example"}})
	allow := Allow{Methods: "GET, POST", Expose: "ETag"}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) })
	refuse := func(w http.ResponseWriter, _ *http.Request, status int, msg string) { http.Error(w, msg, status) }
	h := p.Handler(next, allow, refuse)
	for _, c := range []struct {
		name, method, origin string
		preflight            bool
		status               int
		acao                 string
	}{
		{"listed", "POST", "https://app.example", false, 299, "https://app.example"},
		{"listed preflight", "OPTIONS", "https://app.example", true, 204, "https://app.example"},
		{"same origin", "POST", "http://127.0.0.1:8000", false, 299, ""},
		{"no origin", "POST", "", false, 299, ""},
		{"other preflight", "OPTIONS", "http://evil.example", true, 403, ""},
		{"other", "POST", "http://evil.example", false, 403, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, "http://127.0.0.1:8000/x", nil)
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.preflight {
				r.Header.Set("Access-Control-Request-Method", "POST")
				r.Header.Set("Access-Control-Request-Headers", "content-type")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := w.Header()
			if w.Code != c.status || got.Get("Access-Control-Allow-Origin") != c.acao {
				t.Fatalf("%d %q, want %d %q", w.Code, got.Get("Access-Control-Allow-Origin"), c.status, c.acao)
			}
			if c.acao != "" && got.Get("Access-Control-Expose-Headers") != "ETag" {
				t.Fatalf("expose: %q", got.Get("Access-Control-Expose-Headers"))
			}
			if c.status == 204 && (got.Get("Access-Control-Allow-Methods") != "GET, POST" || got.Get("Access-Control-Allow-Headers") != "content-type") {
				t.Fatalf("preflight headers: %v", got)
			}
		})
	}
}

// TestCheckAllocs holds the happy path to no allocation: every polling
// request of the hub passes here.
func TestCheckAllocs(t *testing.T) {
	p := mustNew(t, Config{Listen: "127.0.0.1:8000", Hosts: []string{"hub.example"}, Origins: []string{"https://app.example"}})
	r := httptest.NewRequest("GET", "/socket.io/", nil)
	r.Host = "hub.example:8000"
	r.Header.Set("Origin", "https://app.example")
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() {
		if p.Check(r) != Allowed {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Fatalf("Check allocates %v times", n)
	}
	r.Header.Del("Origin")
	r.Host = "[::1]:8000"
	if n := testing.AllocsPerRun(100, func() { p.Check(r); p.CORS(w, r, Allow{}) }); n != 0 {
		t.Fatalf("Check and CORS allocate %v times", n)
	}
}

// FuzzCheck feeds arbitrary Host and Origin values: the rule never
// panics, a refusal always has a message, and whatever it allows has a
// Host that parses.
func FuzzCheck(f *testing.F) {
	for _, s := range [][2]string{{"127.0.0.1:8000", "http://127.0.0.1:8000"}, {"[::1]:1", "https://[::1]:1"}, {"evil.example", "null"},
		{"localhost.", "http://localhost."}, {"[", "http://["}, {"a:b:c", "http://a:b:c"}, {"hub.example:443", "https://app.example:443"}} {
		f.Add(s[0], s[1])
	}
	p, err := New(Config{Listen: "127.0.0.1:8000", Hosts: []string{"hub.example"}, Origins: []string{"https://app.example"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, origin string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		r.Header["Origin"] = []string{origin}
		v := p.Check(r)
		if v != Allowed && p.Refusal(v, r) == "" {
			t.Fatalf("refusal %d without a message", v)
		}
		if v == Allowed && host != "" {
			if _, _, _, ok := splitHost(host); !ok {
				t.Fatalf("allowed a Host that does not parse: %q", host)
			}
		}
		_, _ = ParseHost(host)
		if o, err := ParseOrigin(origin); err == nil {
			if again, err := ParseOrigin(o); err != nil || again != o {
				t.Fatalf("ParseOrigin(%q) = %q, again %q, %v", origin, o, again, err)
			}
		}
		_ = p.SourceAllowed(r, origin)
	})
}

// TestFetchSite: a browser's request without an Origin (an <img>, a
// no-cors GET) is judged by its Sec-Fetch-Site; only the user opening a
// page from another site passes, and clients that send no Sec-Fetch-*
// are not judged.
func TestFetchSite(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:18091"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, site, mode, dest string
		want                           Verdict
	}{
		{"cli", "GET", "", "", "", Allowed},
		{"same origin", "GET", "same-origin", "cors", "empty", Allowed},
		{"typed url", "GET", "none", "navigate", "document", Allowed},
		{"link from another site", "GET", "cross-site", "navigate", "document", Allowed},
		{"img from another site", "GET", "cross-site", "no-cors", "image", OriginRefused},
		{"iframe from another site", "GET", "cross-site", "navigate", "iframe", OriginRefused},
		{"form post navigation", "POST", "cross-site", "navigate", "document", OriginRefused},
		{"dev server on another port", "GET", "same-site", "no-cors", "script", OriginRefused},
	} {
		r := httptest.NewRequest(c.method, "http://127.0.0.1:18091/v1/shell/terminal-url", nil)
		for k, v := range map[string]string{"Sec-Fetch-Site": c.site, "Sec-Fetch-Mode": c.mode, "Sec-Fetch-Dest": c.dest} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		if got := p.Check(r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if c.want == OriginRefused {
			if msg := p.Refusal(OriginRefused, r); msg != `a request from another site (Sec-Fetch-Site: "`+c.site+`") is not allowed (cross-origin request)` {
				t.Errorf("%s: message %q", c.name, msg)
			}
		}
	}
}
