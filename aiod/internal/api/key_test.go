package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSplitKey: the rest of the query goes on byte for byte (Chromium's
// /json/new takes it whole as a URL), and every api_key parameter is
// taken out, however its name is escaped: the name HasKey reads.
func TestSplitKey(t *testing.T) {
	for _, tc := range []struct{ in, rest, key string }{
		{"https://example.com/", "https://example.com/", ""},
		{"about:blank", "about:blank", ""},
		{"http://127.0.0.1:1/?a=1&b=%2F", "http://127.0.0.1:1/?a=1&b=%2F", ""},
		{"api_key=K&http://h/?a=1", "http://h/?a=1", "api_key=K"},
		{"http://h/?a=1&api%5Fkey=K", "http://h/?a=1", "api%5Fkey=K"},
		{"api_key=K", "", "api_key=K"},
		{"x=1&api_key=A&api_key=B", "x=1", "api_key=A&api_key=B"},
		{"", "", ""},
	} {
		rest, key := SplitKey(tc.in)
		if rest != tc.rest || key != tc.key {
			t.Errorf("SplitKey(%q) = %q, %q; want %q, %q", tc.in, rest, key, tc.rest, tc.key)
		}
		// What HasKey accepts from the query is what SplitKey takes out.
		r := httptest.NewRequest(http.MethodGet, "/?"+tc.in, nil)
		if HasKey(r, "K") != (tc.key == "api_key=K" || tc.key == "api%5Fkey=K") {
			t.Errorf("HasKey(?%s) disagrees with SplitKey's %q", tc.in, tc.key)
		}
	}
}

// TestHasKey: the ways a key is presented, and what is refused.
func TestHasKey(t *testing.T) {
	for _, tc := range []struct {
		name, target, header, value string
		want                        bool
	}{
		{"bearer", "/", "Authorization", "Bearer K", true},
		{"bearer any case", "/", "Authorization", "bEARER K", true},
		{"bearer wrong", "/", "Authorization", "Bearer L", false},
		{"no scheme", "/", "Authorization", "K", false},
		{"x-api-key", "/", "X-Api-Key", "K", true},
		{"query", "/?api_key=K", "", "", true},
		{"query escaped name", "/?api%5Fkey=K", "", "", true},
		{"query wrong", "/?api_key=L", "", "", false},
		{"none", "/", "", "", false},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.target, nil)
		if tc.header != "" {
			r.Header.Set(tc.header, tc.value)
		}
		if got := HasKey(r, "K"); got != tc.want {
			t.Errorf("%s: HasKey = %v, want %v", tc.name, got, tc.want)
		}
	}
	if HasKey(httptest.NewRequest(http.MethodGet, "/?api_key=", nil), "") {
		t.Error("an empty key matched")
	}
}
