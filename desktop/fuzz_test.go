package desktop

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseURI(f *testing.F) {
	for _, s := range []string{
		"window://com.example.browser/main/tab1",
		"window://com.example.logger",
		"window://com.example.editor/src%2Fmain/file%20name",
		"window://com.example.mcp/page?priority=90&fullscreen=true",
		"WINDOW://h/a#frag",
		"window://例子/窗口/%E7%AA%97",
		"window://a%2Eb//x/",
		"window://",
		"window:///a",
		"window://user@h:80/a",
		"window://h/%zz",
		"window://h/%FF",
		"http://example.com",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURI(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidURI) {
				t.Fatalf("ParseURI(%q) error %v does not wrap ErrInvalidURI", s, err)
			}
			if IsWindowURI(s) {
				t.Fatalf("IsWindowURI(%q) = true after an error", s)
			}
			return
		}
		if !IsWindowURI(s) {
			t.Fatalf("IsWindowURI(%q) = false after success", s)
		}
		if u.Host == "" || strings.ContainsAny(u.Host, "/?#@:") {
			t.Fatalf("ParseURI(%q).Host = %q", s, u.Host)
		}
		for _, seg := range u.Path {
			if seg == "" || !utf8.ValidString(seg) {
				t.Fatalf("ParseURI(%q).Path holds %q", s, seg)
			}
		}
		c := u.String()
		v, err := ParseURI(c)
		if err != nil {
			t.Fatalf("ParseURI(%q) (canonical form of %q): %v", c, s, err)
		}
		if !v.Equal(u) || v.Query != "" || v.Fragment != "" {
			t.Fatalf("%q -> %+v -> %q -> %+v", s, u, c, v)
		}
		if v.String() != c {
			t.Fatalf("canonical form not stable: %q -> %q", c, v.String())
		}
	})
}
