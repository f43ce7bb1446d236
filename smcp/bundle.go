package smcp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ValidBundleID reports whether s may be used as a bundle_id: non-empty,
// made only of ASCII letters, digits, '_' and '-', and free of "__" (so the
// exposed name's separator stays unambiguous). The protocol sets no length
// limit and allows a leading or trailing '_' or '-' in an explicit id.
func ValidBundleID(s string) bool {
	if s == "" || strings.Contains(s, "__") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isBundleByte(s[i]) {
			return false
		}
	}
	return true
}

func isBundleByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// NormalizeBundleName maps a server's display name to its default bundle_id
// candidate: each Unicode code point outside ASCII [A-Za-z0-9_-] becomes '_'
// (an invalid UTF-8 byte counts as one such code point), runs of '_' collapse
// to one (runs of '-' do not), and leading and trailing '_' and '-' are
// trimmed. Case is kept. The result is "" when nothing usable remains; it is
// otherwise a valid bundle_id.
func NormalizeBundleName(name string) string {
	b := make([]byte, 0, len(name))
	for _, r := range name {
		c := byte('_')
		if r < 0x80 && isBundleByte(byte(r)) {
			c = byte(r)
		}
		if c == '_' && len(b) > 0 && b[len(b)-1] == '_' {
			continue
		}
		b = append(b, c)
	}
	return strings.Trim(string(b), "_-")
}

// Identity is the connection identity of one MCP server configuration, taken
// from the raw configuration: ${input:...} and ${env:...} placeholders stay
// literal. It is what [DeriveBundleID] hashes when the display name yields
// no bundle_id. Everything else in a configuration (disabled, tool_meta,
// forbidden_tools, vrl, env_file, cwd, encoding, timeouts) is excluded.
type Identity struct {
	// Type is "stdio", "streamable" or "sse". The label "http" (or "HTTP")
	// is treated as "streamable".
	Type string
	// Command, Args and Env identify a stdio server. A nil Env or Args is
	// the same as an empty one.
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers identify a streamable or sse server.
	URL     string
	Headers map[string]string
}

// TLV returns the byte encoding of id that is hashed by [DeriveBundleID]:
// a string is its UTF-8 byte length as a big-endian uint32 followed by its
// bytes; a list is its element count as a big-endian uint32 followed by the
// elements; a map is its entry count followed by key and value of each entry
// in ascending byte order of the keys. A stdio identity is "stdio", Command,
// Args and Env; any other is Type, URL and Headers.
func (id Identity) TLV() []byte {
	var b []byte
	typ := id.Type
	if typ == "http" || typ == "HTTP" {
		typ = ServerTypeStreamable
	}
	b = appendTLVString(b, typ)
	if typ == ServerTypeStdio {
		b = appendTLVString(b, id.Command)
		b = binary.BigEndian.AppendUint32(b, uint32(len(id.Args)))
		for _, a := range id.Args {
			b = appendTLVString(b, a)
		}
		return appendTLVMap(b, id.Env)
	}
	b = appendTLVString(b, id.URL)
	return appendTLVMap(b, id.Headers)
}

func appendTLVString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendTLVMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // Go compares strings bytewise.
	b = binary.BigEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = appendTLVString(b, k)
		b = appendTLVString(b, m[k])
	}
	return b
}

// DeriveBundleID returns the default bundle_id of a server configured
// without one: [NormalizeBundleName](name) when that is non-empty, otherwise
// "bundle_" followed by the lower-case hex of the first 8 bytes of the
// SHA-256 of id.[Identity.TLV] (16 hex digits). The result is deterministic
// and always a valid bundle_id.
func DeriveBundleID(name string, id Identity) string {
	if n := NormalizeBundleName(name); n != "" {
		return n
	}
	sum := sha256.Sum256(id.TLV())
	return "bundle_" + hex.EncodeToString(sum[:8])
}

// ErrInvalidBundleID is returned by [ResolveBundleID] for an explicit
// bundle_id that [ValidBundleID] rejects. It is a local configuration
// diagnostic, never a protocol error.
var ErrInvalidBundleID = errors.New("smcp: invalid bundle_id")

// ResolveBundleID returns the bundle_id of a server configuration: explicit
// when it is non-empty (and valid), else [DeriveBundleID](name, id).
func ResolveBundleID(explicit, name string, id Identity) (string, error) {
	if explicit == "" {
		return DeriveBundleID(name, id), nil
	}
	if !ValidBundleID(explicit) {
		return "", fmt.Errorf("%w: %s", ErrInvalidBundleID, quoteShort(explicit, 64))
	}
	return explicit, nil
}

// ExposedName returns the name under which a Computer exposes tool (the
// alias if one is configured, else the original name) of the server
// bundleID: bundleID + "__" + tool. The prefix is always applied. Routing
// must go through the Computer's mapping, never by splitting this name.
func ExposedName(bundleID, tool string) string {
	return bundleID + "__" + tool
}
