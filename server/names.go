package server

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkNames refuses routing names (Agent and Computer names, office ids)
// that are not valid Unicode in the raw JSON they came in. encoding/json
// turns a lone UTF-16 surrogate escape ("\ud800") or an invalid UTF-8 byte
// into U+FFFD, so two different names on the wire would route as one
// while the original bytes are forwarded. Only a decoded name holding
// U+FFFD can hide such input, so the raw payload is scanned only then,
// which keeps the relay path free of the cost. It returns the refusal
// message, or "".
func checkNames(raw []byte, names ...string) string {
	for _, n := range names {
		if strings.ContainsRune(n, utf8.RuneError) {
			if !validUnicodeJSON(raw) {
				return "invalid payload: names must be valid Unicode (lone UTF-16 surrogate or invalid UTF-8)"
			}
			return ""
		}
	}
	return ""
}

// validUnicodeJSON reports whether every string of a JSON text is valid
// Unicode: valid UTF-8, and every \u surrogate escape paired (a high one
// followed at once by a low one). Malformed JSON is left to the decoder.
func validUnicodeJSON(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			in = !in
		case in && c == '\\' && i+1 < len(b):
			i++
			if b[i] != 'u' {
				continue
			}
			r, ok := hex4(b, i+1)
			if !ok {
				return true // malformed: the decoder has refused it already
			}
			i += 4
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low must follow
				if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
					return false
				}
				lo, ok := hex4(b, i+3)
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return false
				}
				i += 6
			case utf16.IsSurrogate(r): // a low one alone
				return false
			}
		}
	}
	return true
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
