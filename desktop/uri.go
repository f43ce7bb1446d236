package desktop

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Scheme is the URI scheme of every window.
const Scheme = "window"

// ErrInvalidURI is the error every [ParseURI] failure wraps; test for it
// with [errors.Is].
var ErrInvalidURI = errors.New("invalid window URI")

// URI is a parsed window URI. Its identity is Host and Path; Query and
// Fragment record what [ParseURI] dropped.
type URI struct {
	// Host is the host, verbatim: never empty in a parsed URI.
	Host string
	// Path holds the percent-decoded, non-empty path segments, in order;
	// nil when the URI has none.
	Path []string
	// Query is the raw query the URI carried, without the "?", and was
	// dropped. Window URIs must not carry one: when it is non-empty the
	// Computer logs a warning.
	Query string
	// Fragment is the raw fragment the URI carried, without the "#", and was
	// dropped. When it is non-empty the Computer logs a warning.
	Fragment string
}

// ParseURI parses s as a window URI. It fails, with an error wrapping
// [ErrInvalidURI], when s is not valid UTF-8, its scheme is not "window"
// (compared case-insensitively), the "//" authority marker is missing, the
// host is empty or not an RFC 3986 reg-name, or a path segment holds an
// ASCII control character, a malformed escape or decodes to invalid UTF-8.
// A query or a fragment is not an error: it is dropped and returned in
// [URI.Query] or [URI.Fragment]. Empty path segments are dropped.
//
// The organisation treats a window whose URI fails here as invalid and
// skips it.
func ParseURI(s string) (URI, error) {
	if !utf8.ValidString(s) {
		return URI{}, invalid("not valid UTF-8", s)
	}
	const prefix = Scheme + "://"
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(Scheme)], Scheme) || s[len(Scheme):len(prefix)] != "://" {
		return URI{}, invalid(`scheme is not "window://"`, s)
	}
	var u URI
	rest := s[len(prefix):]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest, u.Fragment = rest[:i], rest[i+1:]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, u.Query = rest[:i], rest[i+1:]
	}
	host, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, path = rest[:i], rest[i+1:]
	}
	if host == "" {
		return URI{}, invalid("empty host", s)
	}
	if err := checkHost(host); err != "" {
		return URI{}, invalid(err, s)
	}
	u.Host = host
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "" {
			continue
		}
		dec, err := decodeSegment(seg)
		if err != "" {
			return URI{}, invalid(err, s)
		}
		u.Path = append(u.Path, dec)
	}
	return u, nil
}

// IsWindowURI reports whether s is a valid window URI, that is whether
// [ParseURI] accepts it.
func IsWindowURI(s string) bool {
	_, err := ParseURI(s)
	return err == nil
}

// String returns the canonical form of u: "window://", the host, then each
// non-empty path segment after a "/", with every byte other than an ASCII
// letter, digit or one of "-._~" written as an upper-case %XX escape. The
// dropped query and fragment are not part of it. For a URI returned by
// [ParseURI], parsing String again yields the same Host and Path.
func (u URI) String() string {
	var b strings.Builder
	b.WriteString(Scheme + "://")
	b.WriteString(u.Host)
	for _, seg := range u.Path {
		if seg == "" {
			continue
		}
		b.WriteByte('/')
		escapeSegment(&b, seg)
	}
	return b.String()
}

// Equal reports whether u and v identify the same window: the same host
// (compared byte for byte) and the same path segments. Query and Fragment
// are ignored.
func (u URI) Equal(v URI) bool {
	if u.Host != v.Host || len(u.Path) != len(v.Path) {
		return false
	}
	for i := range u.Path {
		if u.Path[i] != v.Path[i] {
			return false
		}
	}
	return true
}

func invalid(reason, s string) error {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidURI, reason, strconv.Quote(s))
}

// checkHost reports why host is not an RFC 3986 reg-name (non-ASCII
// characters allowed), or "" when it is.
func checkHost(host string) string {
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c >= utf8.RuneSelf:
			// Part of a non-ASCII character; the input is valid UTF-8.
		case unreserved(c) || strings.IndexByte("!$&'()*+,;=", c) >= 0:
		case c == '%':
			if i+2 >= len(host) || !ishex(host[i+1]) || !ishex(host[i+2]) {
				return "malformed escape in host"
			}
			i += 2
		default:
			return fmt.Sprintf("character %q not allowed in host", c)
		}
	}
	return ""
}

// decodeSegment percent-decodes one path segment, or reports why it cannot.
func decodeSegment(seg string) (string, string) {
	if !strings.ContainsRune(seg, '%') {
		for i := 0; i < len(seg); i++ {
			if seg[i] < 0x20 || seg[i] == 0x7f {
				return "", "control character in path"
			}
		}
		return seg, ""
	}
	buf := make([]byte, 0, len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return "", "control character in path"
		case c == '%':
			if i+2 >= len(seg) || !ishex(seg[i+1]) || !ishex(seg[i+2]) {
				return "", "malformed escape in path"
			}
			buf = append(buf, unhex(seg[i+1])<<4|unhex(seg[i+2]))
			i += 2
		default:
			buf = append(buf, c)
		}
	}
	if !utf8.Valid(buf) {
		return "", "path segment decodes to invalid UTF-8"
	}
	return string(buf), ""
}

func escapeSegment(b *strings.Builder, seg string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}
