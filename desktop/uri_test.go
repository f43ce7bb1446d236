package desktop

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		name, in string
		host     string
		path     []string
		query    string
		fragment string
	}{
		// The specification's examples.
		{"spec multi-segment", "window://com.example.browser/main/tab1", "com.example.browser", []string{"main", "tab1"}, "", ""},
		{"spec no path", "window://com.example.logger", "com.example.logger", nil, "", ""},
		{"spec escaped segments", "window://com.example.editor/src%2Fmain/file%20name", "com.example.editor", []string{"src/main", "file name"}, "", ""},
		// A query (v0.1 metadata) is dropped, not an error.
		{"query dropped", "window://com.example.mcp/page?priority=90&fullscreen=true", "com.example.mcp", []string{"page"}, "priority=90&fullscreen=true", ""},
		{"query on host", "window://x?priority=999", "x", nil, "priority=999", ""},
		{"empty query", "window://x?", "x", nil, "", ""},
		{"fragment dropped", "window://h/a#frag", "h", []string{"a"}, "", "frag"},
		{"query and fragment", "window://h/a?q=1#f?g", "h", []string{"a"}, "q=1", "f?g"},
		{"question mark in fragment", "window://h#a?b", "h", nil, "", "a?b"},
		{"upper-case scheme", "WINDOW://h/a", "h", []string{"a"}, "", ""},
		{"mixed-case scheme", "Window://h", "h", nil, "", ""},
		{"host kept verbatim", "window://Com.Example/A", "Com.Example", []string{"A"}, "", ""},
		{"host sub-delims", "window://a!$&'()*+,;=b~_-.", "a!$&'()*+,;=b~_-.", nil, "", ""},
		{"host escape kept", "window://a%2Eb", "a%2Eb", nil, "", ""},
		{"host non-ASCII", "window://例子.测试/窗口", "例子.测试", []string{"窗口"}, "", ""},
		{"trailing slash", "window://h/", "h", nil, "", ""},
		{"trailing slash after segment", "window://h/a/", "h", []string{"a"}, "", ""},
		{"empty segments dropped", "window://h//a///b", "h", []string{"a", "b"}, "", ""},
		{"escaped slash stays one segment", "window://h/c%2Fd/e", "h", []string{"c/d", "e"}, "", ""},
		{"lower-case escape", "window://h/%2f%3a", "h", []string{"/:"}, "", ""},
		{"escaped percent", "window://h/100%25", "h", []string{"100%"}, "", ""},
		{"escaped UTF-8", "window://h/%E7%AA%97", "h", []string{"窗"}, "", ""},
		{"raw space in path", "window://h/file name", "h", []string{"file name"}, "", ""},
		{"path pchars", "window://h/a:b@c;d=e", "h", []string{"a:b@c;d=e"}, "", ""},
		{"escaped control in path", "window://h/a%0Ab", "h", []string{"a\nb"}, "", ""},
		{"escaped space segment", "window://h/%20", "h", []string{" "}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseURI(tt.in)
			if err != nil {
				t.Fatalf("ParseURI(%q): %v", tt.in, err)
			}
			if u.Host != tt.host || !slices.Equal(u.Path, tt.path) || u.Query != tt.query || u.Fragment != tt.fragment {
				t.Errorf("ParseURI(%q) = %+v, want host %q path %q query %q fragment %q", tt.in, u, tt.host, tt.path, tt.query, tt.fragment)
			}
			if tt.path == nil && u.Path != nil {
				t.Errorf("ParseURI(%q).Path = %#v, want nil", tt.in, u.Path)
			}
			if !IsWindowURI(tt.in) {
				t.Errorf("IsWindowURI(%q) = false", tt.in)
			}
		})
	}
}

func TestParseURIInvalid(t *testing.T) {
	tests := []struct{ name, in, reason string }{
		{"empty", "", "scheme"},
		{"other scheme", "http://example.com", "scheme"},
		{"file scheme", "file:///tmp/x", "scheme"},
		{"scheme prefix only", "windows://h", "scheme"},
		{"no authority marker", "window:h/a", "scheme"},
		{"single slash", "window:/h", "scheme"},
		{"not a URI", ":::not_a_uri", "scheme"},
		{"leading space", " window://h", "scheme"},
		{"no host", "window://", "empty host"},
		{"no host with path", "window:///a", "empty host"},
		{"no host with query", "window://?priority=1", "empty host"},
		{"no host with fragment", "window://#f", "empty host"},
		{"userinfo", "window://user@host/a", "not allowed in host"},
		{"port", "window://host:80/a", "not allowed in host"},
		{"IP literal", "window://[::1]/a", "not allowed in host"},
		{"space in host", "window://a b", "not allowed in host"},
		{"backslash in host", `window://a\b`, "not allowed in host"},
		{"control in host", "window://a\nb", "not allowed in host"},
		{"malformed host escape", "window://a%2", "malformed escape in host"},
		{"bad hex in host", "window://a%zz", "malformed escape in host"},
		{"control in path", "window://h/a\tb", "control character"},
		{"DEL in path", "window://h/a\x7f", "control character"},
		{"control in escaped segment", "window://h/%41\x01", "control character"},
		{"malformed path escape", "window://h/a%2", "malformed escape in path"},
		{"bad hex in path", "window://h/%g0", "malformed escape in path"},
		{"escape to invalid UTF-8", "window://h/%FF", "invalid UTF-8"},
		{"invalid UTF-8 input", "window://h/\xff", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseURI(tt.in)
			if err == nil {
				t.Fatalf("ParseURI(%q) = %+v, want an error", tt.in, u)
			}
			if !errors.Is(err, ErrInvalidURI) {
				t.Errorf("ParseURI(%q) error %v does not wrap ErrInvalidURI", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("ParseURI(%q) error %q, want it to mention %q", tt.in, err, tt.reason)
			}
			if IsWindowURI(tt.in) {
				t.Errorf("IsWindowURI(%q) = true", tt.in)
			}
		})
	}
}

func TestParseURIErrorTruncatesInput(t *testing.T) {
	in := "http://" + strings.Repeat("é", 100)
	_, err := ParseURI(in)
	if err == nil {
		t.Fatal("want an error")
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long: %q", len(err.Error()), err)
	}
	if !strings.Contains(err.Error(), `..."`) {
		t.Errorf("error %q does not mark the truncation", err)
	}
}

func TestURIString(t *testing.T) {
	tests := []struct {
		u    URI
		want string
	}{
		{URI{Host: "com.example.logger"}, "window://com.example.logger"},
		{URI{Host: "com.example.browser", Path: []string{"main", "tab1"}}, "window://com.example.browser/main/tab1"},
		{URI{Host: "com.example.editor", Path: []string{"src/main", "file name"}}, "window://com.example.editor/src%2Fmain/file%20name"},
		{URI{Host: "h", Path: []string{"a", "", "b"}}, "window://h/a/b"},
		{URI{Host: "h", Path: []string{"~a-b_c.d", "100%", "?#", "窗"}}, "window://h/~a-b_c.d/100%25/%3F%23/%E7%AA%97"},
		{URI{Host: "h", Path: []string{"x"}, Query: "priority=1", Fragment: "f"}, "window://h/x"},
	}
	for _, tt := range tests {
		if got := tt.u.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.u, got, tt.want)
		}
	}
}

func TestURIRoundTrip(t *testing.T) {
	for _, in := range []string{
		"window://com.example.editor/src%2Fmain/file%20name",
		"WINDOW://h/a?q#f",
		"window://例子/窗口/a b",
		"window://a%2eb/%2f%2F",
		"window://h//x/",
	} {
		u, err := ParseURI(in)
		if err != nil {
			t.Fatalf("ParseURI(%q): %v", in, err)
		}
		s := u.String()
		v, err := ParseURI(s)
		if err != nil {
			t.Fatalf("ParseURI(%q) (from %q): %v", s, in, err)
		}
		if !v.Equal(u) || v.Query != "" || v.Fragment != "" || v.String() != s {
			t.Errorf("%q -> %q -> %+v, want %+v without query or fragment", in, s, v, u)
		}
	}
}

func TestURIEqual(t *testing.T) {
	parse := func(s string) URI {
		u, err := ParseURI(s)
		if err != nil {
			t.Fatalf("ParseURI(%q): %v", s, err)
		}
		return u
	}
	tests := []struct {
		a, b string
		want bool
	}{
		{"window://h/a", "window://h/a", true},
		{"window://h/a", "window://h/a?priority=1", true},
		{"window://h/a", "WINDOW://h/a#f", true},
		{"window://h/a", "window://h/a/", true},
		{"window://h/a%20b", "window://h/a b", true},
		{"window://h/a", "window://H/a", false},
		{"window://h/a", "window://h/b", false},
		{"window://h/a/b", "window://h/a%2Fb", false},
		{"window://h", "window://h/a", false},
	}
	for _, tt := range tests {
		if got := parse(tt.a).Equal(parse(tt.b)); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
