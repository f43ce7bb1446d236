package serde

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rustDebugStr formats s like Rust's <str as Debug>::fmt.
func rustDebugStr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case 0:
			b.WriteString(`\0`)
		default:
			// Rust escapes Grapheme_Extend (= Mn + Me + Other_Grapheme_Extend)
			// and non-printable chars (Cc Cf Cs Co Cn Zl Zp Zs except ' '),
			// which is Go's IsPrint complement.
			if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.In(r, unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend) {
				if r == utf8.RuneError {
					// U+FFFD is printable in Rust; strings here are valid UTF-8.
					b.WriteRune(r)
					continue
				}
				b.WriteString(`\u{`)
				b.WriteString(strconv.FormatInt(int64(r), 16))
				b.WriteByte('}')
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ryuFormat formats a finite f64 like the ryu crate (used by serde_json for
// floats in "invalid type" messages): 1.0, 1.5, 0.001, 1e30, 1.5e-7.
func ryuFormat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	ei := strings.IndexByte(s, 'e')
	mant, exp := s[:ei], s[ei+1:]
	e, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	length := len(digits)
	kk := e + 1 // 10^(kk-1) <= v < 10^kk
	k := kk - length
	var out string
	switch {
	case 0 <= k && kk <= 16:
		out = digits + strings.Repeat("0", k) + ".0"
	case 0 < kk && kk <= 16:
		out = digits[:kk] + "." + digits[kk:]
	case -5 < kk && kk <= 0:
		out = "0." + strings.Repeat("0", -kk) + digits
	case length == 1:
		out = digits + "e" + strconv.Itoa(kk-1)
	default:
		out = digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(kk-1)
	}
	if neg {
		return "-" + out
	}
	return out
}

// unexpected values (serde::de::Unexpected as displayed by serde_json).
func unexpStr(s string) string      { return "string " + rustDebugStr(s) }
func unexpUnsigned(n uint64) string { return "integer `" + strconv.FormatUint(n, 10) + "`" }
func unexpSigned(n int64) string    { return "integer `" + strconv.FormatInt(n, 10) + "`" }
func unexpFloat(f float64) string   { return "floating point `" + ryuFormat(f) + "`" }
func unexpBool(b bool) string       { return "boolean `" + strconv.FormatBool(b) + "`" }

func invalidType(unexp, exp string) string  { return "invalid type: " + unexp + ", expected " + exp }
func invalidValue(unexp, exp string) string { return "invalid value: " + unexp + ", expected " + exp }

func marshalString(s string) ([]byte, error) { return json.Marshal(s) }
