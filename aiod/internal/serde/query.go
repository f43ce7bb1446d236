package serde

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Rust std parse error texts (ParseIntError, ParseBoolError, ParseFloatError).
const (
	MsgIntEmpty     = "cannot parse integer from empty string"
	MsgIntInvalid   = "invalid digit found in string"
	MsgIntPosOver   = "number too large to fit in target type"
	MsgIntNegOver   = "number too small to fit in target type"
	MsgBoolInvalid  = "provided string was not `true` or `false`"
	MsgFloatEmpty   = "cannot parse float from empty string"
	MsgFloatInvalid = "invalid float literal"
)

// DecodeQuery decodes a URL query like serde_urlencoded::from_str::<T>.
// url.Values has no order, so fields are visited in declaration order; use
// DecodeRawQuery to report the first error in query order like serde does.
func DecodeQuery(q url.Values, fields []Field) (map[string]any, *Error) {
	var pairs [][2]string
	for _, f := range fields {
		for _, v := range q[f.Name] {
			pairs = append(pairs, [2]string{f.Name, v})
		}
	}
	return decodePairs(pairs, fields)
}

// DecodeRawQuery decodes a raw query string (the part after '?') with
// form_urlencoded's lenient rules: '&'-separated, empty pieces skipped,
// '+' is a space, bad percent escapes are kept literally, invalid UTF-8 is
// replaced by U+FFFD.
func DecodeRawQuery(raw string, fields []Field) (map[string]any, *Error) {
	var pairs [][2]string
	for _, piece := range strings.Split(raw, "&") {
		if piece == "" {
			continue
		}
		k, v, _ := strings.Cut(piece, "=")
		pairs = append(pairs, [2]string{formDecode(k), formDecode(v)})
	}
	return decodePairs(pairs, fields)
}

func formDecode(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			h, _ := hexVal(s[i+1])
			l, _ := hexVal(s[i+2])
			b = append(b, byte(h<<4|l))
			i += 2
		default:
			b = append(b, c)
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func isHex(c byte) bool { _, ok := hexVal(c); return ok }

func queryError(loc []string, msg, typ string) *Error {
	return &Error{Location: loc, Message: msg, Type: typ}
}

func decodePairs(pairs [][2]string, fields []Field) (map[string]any, *Error) {
	index := make(map[string]int, len(fields))
	for i := len(fields) - 1; i >= 0; i-- {
		index[fields[i].Name] = i
	}
	seen := make([]bool, len(fields))
	vals := map[string]any{}
	for _, p := range pairs {
		i, ok := index[p[0]]
		if !ok {
			continue
		}
		if seen[i] {
			return nil, queryError([]string{"query"}, fmt.Sprintf("duplicate field `%s`", p[0]), TypeValue)
		}
		seen[i] = true
		v, msg, typ := parsePart(p[1], fields[i].Kind)
		if f := fields[i]; msg == "" && f.Kind == String && len(f.Variants) > 0 && !slices.Contains(f.Variants, p[1]) {
			msg, typ = unknownVariant(p[1], f.Variants), TypeValue
		}
		if msg != "" {
			return nil, queryError([]string{"query"}, msg, typ)
		}
		vals[p[0]] = v
	}
	for i, f := range fields {
		if f.Required && !seen[i] {
			return nil, queryError([]string{"query", f.Name}, fmt.Sprintf("missing field `%s`", f.Name), TypeMissing)
		}
	}
	return vals, nil
}

// parsePart is serde_urlencoded's Part deserializer: primitives go through
// str::parse, everything else sees a string.
func parsePart(s string, k Kind) (any, string, string) {
	switch k {
	case String:
		return s, "", ""
	case U64:
		n, msg := rustParseUint(s, 64)
		return n, msg, TypeType
	case U32:
		n, msg := rustParseUint(s, 32)
		return uint32(n), msg, TypeType
	case I64:
		n, msg := rustParseInt(s)
		return n, msg, TypeType
	case Bool:
		switch s {
		case "true":
			return true, "", ""
		case "false":
			return false, "", ""
		}
		return nil, MsgBoolInvalid, TypeType
	case F64:
		f, msg := rustParseFloat(s)
		return f, msg, TypeType
	case Any:
		// serde_json::Value from a string part is a JSON string.
		b, _ := marshalString(s)
		return json.RawMessage(b), "", ""
	}
	return nil, invalidType(unexpStr(s), k.expecting()), TypeType
}

// rustParseUint is <u64 as FromStr>::from_str (bits 64) / u32.
func rustParseUint(s string, bits int) (uint64, string) {
	if s == "" {
		return 0, MsgIntEmpty
	}
	digits := s
	if s[0] == '+' {
		digits = s[1:]
		if digits == "" {
			return 0, MsgIntInvalid
		}
	} else if s[0] == '-' && len(s) == 1 {
		return 0, MsgIntInvalid
	}
	var n uint64
	max := uint64(math.MaxUint64)
	if bits == 32 {
		max = math.MaxUint32
	}
	// Rust reports the first invalid digit or the first overflow, scanning
	// left to right.
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !isDigit(c) {
			return 0, MsgIntInvalid
		}
		dg := uint64(c - '0')
		if n > max/10 || n*10 > max-dg {
			return 0, MsgIntPosOver
		}
		n = n*10 + dg
	}
	return n, ""
}

// rustParseInt is <i64 as FromStr>::from_str.
func rustParseInt(s string) (int64, string) {
	if s == "" {
		return 0, MsgIntEmpty
	}
	neg := false
	digits := s
	switch s[0] {
	case '+', '-':
		if len(s) == 1 {
			return 0, MsgIntInvalid
		}
		neg = s[0] == '-'
		digits = s[1:]
	}
	// Rust reports the first invalid digit or the first overflow, scanning
	// left to right.
	var n uint64
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !isDigit(c) {
			return 0, MsgIntInvalid
		}
		dg := uint64(c - '0')
		if n > limit/10 || n*10 > limit-dg {
			if neg {
				return 0, MsgIntNegOver
			}
			return 0, MsgIntPosOver
		}
		n = n*10 + dg
	}
	if neg {
		return -int64(n), ""
	}
	return int64(n), ""
}

// rustParseFloat is <f64 as FromStr>::from_str: [+-]? (inf|infinity|nan|
// digits[.digits?]|.digits)([eE][+-]?digits)?, case-insensitive words.
func rustParseFloat(s string) (float64, string) {
	if s == "" {
		return 0, MsgFloatEmpty
	}
	body := s
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if s[0] == '-' {
			return math.Inf(-1), ""
		}
		return math.Inf(1), ""
	case "nan":
		return math.NaN(), ""
	}
	i, intDigits, fracDigits := 0, 0, 0
	for i < len(body) && isDigit(body[i]) {
		i++
		intDigits++
	}
	if i < len(body) && body[i] == '.' {
		i++
		for i < len(body) && isDigit(body[i]) {
			i++
			fracDigits++
		}
	}
	if intDigits+fracDigits == 0 {
		return 0, MsgFloatInvalid
	}
	if i < len(body) && (body[i] == 'e' || body[i] == 'E') {
		i++
		if i < len(body) && (body[i] == '+' || body[i] == '-') {
			i++
		}
		expDigits := 0
		for i < len(body) && isDigit(body[i]) {
			i++
			expDigits++
		}
		if expDigits == 0 {
			return 0, MsgFloatInvalid
		}
	}
	if i != len(body) {
		return 0, MsgFloatInvalid
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) && f != 0 {
		return 0, MsgFloatInvalid
	}
	return f, ""
}
