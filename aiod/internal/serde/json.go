package serde

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// serde_json ErrorCode Display texts.
const (
	msgEOFValue      = "EOF while parsing a value"
	msgEOFList       = "EOF while parsing a list"
	msgEOFObject     = "EOF while parsing an object"
	msgEOFString     = "EOF while parsing a string"
	msgExpColon      = "expected `:`"
	msgExpListEnd    = "expected `,` or `]`"
	msgExpObjectEnd  = "expected `,` or `}`"
	msgExpIdent      = "expected ident"
	msgExpValue      = "expected value"
	msgInvEscape     = "invalid escape"
	msgInvNumber     = "invalid number"
	msgNumRange      = "number out of range"
	msgInvCodePoint  = "invalid unicode code point"
	msgCtrlChar      = `control character (\u0000-\u001F) found while parsing a string`
	msgKeyString     = "key must be a string"
	msgLoneSurrogate = "lone leading surrogate in hex escape"
	msgTrailingComma = "trailing comma"
	msgTrailingChars = "trailing characters"
	msgUnexpEndHex   = "unexpected end of hex escape"
	msgRecursion     = "recursion limit exceeded"
)

type category int

const (
	catSyntax category = iota
	catType
	catValue
	catMissing
	catDuplicate
)

// serr is a serde_json::Error: a message plus an optional position
// (line 0 = not yet positioned, like serde_json's fix_position).
type serr struct {
	msg       string
	cat       category
	line, col int
	field     string // set for errors about one field's value
}

func (e *serr) text() string {
	if e.line == 0 {
		return e.msg
	}
	return e.msg + " at line " + strconv.Itoa(e.line) + " column " + strconv.Itoa(e.col)
}

func custom(msg string, cat category) *serr { return &serr{msg: msg, cat: cat} }

type pnumKind int

const (
	numU64 pnumKind = iota
	numI64
	numF64
)

// pnum is serde_json's ParserNumber.
type pnum struct {
	kind pnumKind
	u    uint64
	i    int64
	f    float64
}

func (n pnum) unexpected() string {
	switch n.kind {
	case numU64:
		return unexpUnsigned(n.u)
	case numI64:
		return unexpSigned(n.i)
	default:
		return unexpFloat(n.f)
	}
}

// dec mirrors serde_json::Deserializer<SliceRead>.
type dec struct {
	b     []byte
	i     int
	depth int // remaining_depth
}

func newDec(b []byte) *dec { return &dec{b: b, depth: 128} }

// posAt is SliceRead::position_of_index.
func (d *dec) posAt(i int) (line, col int) {
	start := bytes.LastIndexByte(d.b[:i], '\n') + 1
	return 1 + bytes.Count(d.b[:start], []byte{'\n'}), i - start
}

// syntax is Deserializer::error (position of the current index).
func (d *dec) syntax(msg string) *serr {
	l, c := d.posAt(d.i)
	return &serr{msg: msg, cat: catSyntax, line: l, col: c}
}

// peekSyntax is Deserializer::peek_error (position of the next byte).
func (d *dec) peekSyntax(msg string) *serr {
	i := d.i + 1
	if i > len(d.b) {
		i = len(d.b)
	}
	l, c := d.posAt(i)
	return &serr{msg: msg, cat: catSyntax, line: l, col: c}
}

// fix is Deserializer::fix_position.
func (d *dec) fix(e *serr) *serr {
	if e != nil && e.line == 0 {
		e.line, e.col = d.posAt(d.i)
	}
	return e
}

func (d *dec) ws() (byte, bool) {
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case ' ', '\n', '\t', '\r':
			d.i++
		default:
			return c, true
		}
	}
	return 0, false
}

func (d *dec) peekOrNull() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *dec) next() (byte, bool) {
	if d.i < len(d.b) {
		c := d.b[d.i]
		d.i++
		return c, true
	}
	return 0, false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *dec) parseIdent(rest string) *serr {
	for j := 0; j < len(rest); j++ {
		c, ok := d.next()
		if !ok {
			return d.syntax(msgEOFValue)
		}
		if c != rest[j] {
			return d.syntax(msgExpIdent)
		}
	}
	return nil
}

// ---- strings ----

func (d *dec) skipToEscape() {
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' || c == '\\' || c < 0x20 {
			return
		}
		d.i++
	}
}

// parseStr is SliceRead::parse_str; d.i is just after the opening quote.
func (d *dec) parseStr() (string, *serr) {
	var scratch []byte
	start := d.i
	for {
		d.skipToEscape()
		if d.i == len(d.b) {
			return "", d.syntax(msgEOFString)
		}
		switch d.b[d.i] {
		case '"':
			scratch = append(scratch, d.b[start:d.i]...)
			d.i++
			if !utf8.Valid(scratch) {
				return "", d.syntax(msgInvCodePoint)
			}
			return string(scratch), nil
		case '\\':
			scratch = append(scratch, d.b[start:d.i]...)
			d.i++
			var err *serr
			if scratch, err = d.parseEscape(scratch); err != nil {
				return "", err
			}
			start = d.i
		default:
			d.i++
			return "", d.syntax(msgCtrlChar)
		}
	}
}

func (d *dec) parseEscape(scratch []byte) ([]byte, *serr) {
	c, ok := d.next()
	if !ok {
		return nil, d.syntax(msgEOFString)
	}
	switch c {
	case '"', '\\', '/':
		return append(scratch, c), nil
	case 'b':
		return append(scratch, '\b'), nil
	case 'f':
		return append(scratch, '\f'), nil
	case 'n':
		return append(scratch, '\n'), nil
	case 'r':
		return append(scratch, '\r'), nil
	case 't':
		return append(scratch, '\t'), nil
	case 'u':
		return d.parseUnicodeEscape(scratch)
	}
	return nil, d.syntax(msgInvEscape)
}

func hexVal(c byte) (uint16, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint16(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint16(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint16(c-'A') + 10, true
	}
	return 0, false
}

func (d *dec) decodeHex() (uint16, *serr) {
	if len(d.b)-d.i < 4 {
		d.i = len(d.b)
		return 0, d.syntax(msgEOFString)
	}
	var n uint16
	ok := true
	for j := 0; j < 4; j++ {
		v, good := hexVal(d.b[d.i+j])
		ok = ok && good
		n = n<<4 | v
	}
	d.i += 4
	if !ok {
		return 0, d.syntax(msgInvEscape)
	}
	return n, nil
}

func (d *dec) parseUnicodeEscape(scratch []byte) ([]byte, *serr) {
	n, err := d.decodeHex()
	if err != nil {
		return nil, err
	}
	if n >= 0xDC00 && n <= 0xDFFF {
		return nil, d.syntax(msgLoneSurrogate)
	}
	if n < 0xD800 || n > 0xDBFF {
		return utf8.AppendRune(scratch, rune(n)), nil
	}
	for _, want := range []byte{'\\', 'u'} {
		if d.i == len(d.b) {
			return nil, d.syntax(msgEOFString)
		}
		c := d.b[d.i]
		d.i++
		if c != want {
			return nil, d.syntax(msgUnexpEndHex)
		}
	}
	n2, err := d.decodeHex()
	if err != nil {
		return nil, err
	}
	if n2 < 0xDC00 || n2 > 0xDFFF {
		return nil, d.syntax(msgLoneSurrogate)
	}
	r := (rune(n-0xD800)<<10 | rune(n2-0xDC00)) + 0x10000
	return utf8.AppendRune(scratch, r), nil
}

// ignoreStr is SliceRead::ignore_str (no UTF-8 validation).
func (d *dec) ignoreStr() *serr {
	for {
		d.skipToEscape()
		if d.i == len(d.b) {
			return d.syntax(msgEOFString)
		}
		switch d.b[d.i] {
		case '"':
			d.i++
			return nil
		case '\\':
			d.i++
			c, ok := d.next()
			if !ok {
				return d.syntax(msgEOFString)
			}
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, err := d.decodeHex(); err != nil {
					return err
				}
			default:
				return d.syntax(msgInvEscape)
			}
		default:
			return d.syntax(msgCtrlChar)
		}
	}
}

// ---- numbers ----

// overflows is serde_json's overflow!(a * 10 + b, max).
func overflows(a, b, max uint64) bool { return a >= max/10 && (a > max/10 || b > max%10) }

// parseInteger: start is the index of the number's first byte ('-' included);
// for negatives the '-' has already been consumed.
func (d *dec) parseInteger(positive bool, start int) (pnum, *serr) {
	c, ok := d.next()
	if !ok {
		return pnum{}, d.syntax(msgEOFValue)
	}
	switch {
	case c == '0':
		if isDigit(d.peekOrNull()) {
			return pnum{}, d.peekSyntax(msgInvNumber)
		}
		return d.parseNumber(positive, 0, start)
	case c >= '1' && c <= '9':
		sig := uint64(c - '0')
		for {
			c := d.peekOrNull()
			if !isDigit(c) {
				return d.parseNumber(positive, sig, start)
			}
			dg := uint64(c - '0')
			if overflows(sig, dg, math.MaxUint64) {
				// parse_long_integer: remaining digits only scale the value.
				for isDigit(d.peekOrNull()) {
					d.i++
				}
				f, err := d.parseFraction(sig, start)
				return pnum{kind: numF64, f: f}, err
			}
			d.i++
			sig = sig*10 + dg
		}
	}
	return pnum{}, d.syntax(msgInvNumber)
}

func (d *dec) parseNumber(positive bool, sig uint64, start int) (pnum, *serr) {
	switch d.peekOrNull() {
	case '.', 'e', 'E':
		f, err := d.parseFraction(sig, start)
		return pnum{kind: numF64, f: f}, err
	}
	if positive {
		return pnum{kind: numU64, u: sig}, nil
	}
	neg := -int64(sig) // wrapping_neg
	if neg >= 0 {
		return pnum{kind: numF64, f: -float64(sig)}, nil
	}
	return pnum{kind: numI64, i: neg}, nil
}

// parseFraction handles an optional '.digits' and 'e±digits' tail and
// converts the whole literal b[start:i] (exactly rounded).
func (d *dec) parseFraction(sig uint64, start int) (float64, *serr) {
	zero := sig == 0
	if d.peekOrNull() == '.' {
		d.i++
		n := 0
		for isDigit(d.peekOrNull()) {
			if d.b[d.i] != '0' {
				zero = false
			}
			d.i++
			n++
		}
		if n == 0 {
			if d.i < len(d.b) {
				return 0, d.peekSyntax(msgInvNumber)
			}
			return 0, d.peekSyntax(msgEOFValue)
		}
	}
	if c := d.peekOrNull(); c == 'e' || c == 'E' {
		d.i++
		posExp := true
		switch d.peekOrNull() {
		case '+':
			d.i++
		case '-':
			d.i++
			posExp = false
		}
		c, ok := d.next()
		if !ok {
			return 0, d.syntax(msgEOFValue)
		}
		if !isDigit(c) {
			return 0, d.syntax(msgInvNumber)
		}
		exp := uint64(c - '0')
		for isDigit(d.peekOrNull()) {
			dg := uint64(d.b[d.i] - '0')
			d.i++
			if overflows(exp, dg, math.MaxInt32) {
				if !zero && posExp {
					return 0, d.syntax(msgNumRange)
				}
				for isDigit(d.peekOrNull()) {
					d.i++
				}
				if d.b[start] == '-' {
					return math.Copysign(0, -1), nil
				}
				return 0, nil
			}
			exp = exp*10 + dg
		}
	}
	f, _ := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	if math.IsInf(f, 0) {
		return 0, d.syntax(msgNumRange)
	}
	return f, nil
}

// visitNum applies serde's primitive visitors to a parsed number.
func visitNum(n pnum, k Kind) (any, *serr) {
	exp := k.expecting()
	switch k {
	case U64:
		switch n.kind {
		case numU64:
			return n.u, nil
		case numI64:
			return nil, custom(invalidValue(n.unexpected(), exp), catValue)
		}
	case I64:
		switch n.kind {
		case numU64:
			if n.u <= math.MaxInt64 {
				return int64(n.u), nil
			}
			return nil, custom(invalidValue(n.unexpected(), exp), catValue)
		case numI64:
			return n.i, nil
		}
	case U32:
		switch n.kind {
		case numU64:
			if n.u <= math.MaxUint32 {
				return uint32(n.u), nil
			}
			return nil, custom(invalidValue(n.unexpected(), exp), catValue)
		case numI64:
			return nil, custom(invalidValue(n.unexpected(), exp), catValue)
		}
	case F64:
		switch n.kind {
		case numU64:
			return float64(n.u), nil
		case numI64:
			return float64(n.i), nil
		default:
			return n.f, nil
		}
	}
	return nil, custom(invalidType(n.unexpected(), exp), catType)
}

// peekInvalidType is Deserializer::peek_invalid_type.
func (d *dec) peekInvalidType(exp string) *serr {
	var unexp string
	switch c := d.peekOrNull(); {
	case c == 'n':
		d.i++
		if err := d.parseIdent("ull"); err != nil {
			return err
		}
		unexp = "null"
	case c == 't':
		d.i++
		if err := d.parseIdent("rue"); err != nil {
			return err
		}
		unexp = unexpBool(true)
	case c == 'f':
		d.i++
		if err := d.parseIdent("alse"); err != nil {
			return err
		}
		unexp = unexpBool(false)
	case c == '-' || isDigit(c):
		start := d.i
		if c == '-' {
			d.i++
		}
		n, err := d.parseInteger(c != '-', start)
		if err != nil {
			return err
		}
		unexp = n.unexpected()
	case c == '"':
		d.i++
		s, err := d.parseStr()
		if err != nil {
			return err
		}
		unexp = unexpStr(s)
	case c == '[':
		unexp = "sequence"
	case c == '{':
		unexp = "map"
	default:
		return d.peekSyntax(msgExpValue)
	}
	return d.fix(custom(invalidType(unexp, exp), catType))
}

// ---- typed readers (Deserializer::deserialize_*) ----

func (d *dec) readString() (string, *serr) {
	c, ok := d.ws()
	if !ok {
		return "", d.peekSyntax(msgEOFValue)
	}
	if c != '"' {
		return "", d.peekInvalidType(String.expecting())
	}
	d.i++
	return d.parseStr()
}

func (d *dec) readNumber(k Kind) (any, *serr) {
	c, ok := d.ws()
	if !ok {
		return nil, d.peekSyntax(msgEOFValue)
	}
	if c != '-' && !isDigit(c) {
		return nil, d.peekInvalidType(k.expecting())
	}
	start := d.i
	if c == '-' {
		d.i++
	}
	n, err := d.parseInteger(c != '-', start)
	if err != nil {
		return nil, err
	}
	v, err := visitNum(n, k)
	return v, d.fix(err)
}

func (d *dec) readBool() (bool, *serr) {
	c, ok := d.ws()
	if !ok {
		return false, d.peekSyntax(msgEOFValue)
	}
	switch c {
	case 't':
		d.i++
		return true, d.parseIdent("rue")
	case 'f':
		d.i++
		return false, d.parseIdent("alse")
	}
	return false, d.peekInvalidType(Bool.expecting())
}

// enter is check_recursion!'s prologue.
func (d *dec) enter() *serr {
	d.depth--
	if d.depth == 0 {
		return d.peekSyntax(msgRecursion)
	}
	return nil
}

func (d *dec) hasNextElement(first *bool) (bool, *serr) {
	c, ok := d.ws()
	if !ok {
		return false, d.peekSyntax(msgEOFList)
	}
	if c == ']' {
		return false, nil
	}
	if *first {
		*first = false
		return true, nil
	}
	if c == ',' {
		d.i++
		c, ok := d.ws()
		switch {
		case !ok:
			return false, d.peekSyntax(msgEOFValue)
		case c == ']':
			return false, d.peekSyntax(msgTrailingComma)
		}
		return true, nil
	}
	return false, d.peekSyntax(msgExpListEnd)
}

func (d *dec) endSeq() *serr {
	c, ok := d.ws()
	switch {
	case !ok:
		return d.peekSyntax(msgEOFList)
	case c == ']':
		d.i++
		return nil
	case c == ',':
		d.i++
		if c, ok := d.ws(); ok && c == ']' {
			return d.peekSyntax(msgTrailingComma)
		}
	}
	return d.peekSyntax(msgTrailingChars)
}

func (d *dec) hasNextKey(first *bool) (bool, *serr) {
	c, ok := d.ws()
	if !ok {
		return false, d.peekSyntax(msgEOFObject)
	}
	if c == '}' {
		return false, nil
	}
	if *first {
		*first = false
		if c == '"' {
			return true, nil
		}
		return false, d.peekSyntax(msgKeyString)
	}
	if c == ',' {
		d.i++
		c, ok := d.ws()
		switch {
		case !ok:
			return false, d.peekSyntax(msgEOFValue)
		case c == '"':
			return true, nil
		case c == '}':
			return false, d.peekSyntax(msgTrailingComma)
		}
		return false, d.peekSyntax(msgKeyString)
	}
	return false, d.peekSyntax(msgExpObjectEnd)
}

// readKey parses a map key; d.i is at its opening quote.
func (d *dec) readKey() (string, *serr) {
	d.i++
	return d.parseStr()
}

func (d *dec) objectColon() *serr {
	c, ok := d.ws()
	switch {
	case !ok:
		return d.peekSyntax(msgEOFObject)
	case c == ':':
		d.i++
		return nil
	}
	return d.peekSyntax(msgExpColon)
}

func (d *dec) endMap() *serr {
	c, ok := d.ws()
	switch {
	case !ok:
		return d.peekSyntax(msgEOFObject)
	case c == '}':
		d.i++
		return nil
	case c == ',':
		return d.peekSyntax(msgTrailingComma)
	}
	return d.peekSyntax(msgTrailingChars)
}

// container runs visit inside '[' or '{' like serde_json's
// deserialize_seq/deserialize_map, including the end check and fix_position.
func (d *dec) container(open byte, visit func() *serr) *serr {
	if err := d.enter(); err != nil {
		return err
	}
	d.i++
	err := visit()
	var endErr *serr
	if open == '[' {
		endErr = d.endSeq()
	} else {
		endErr = d.endMap()
	}
	d.depth++
	if err != nil {
		return d.fix(err)
	}
	return endErr
}

func (d *dec) readStringList() ([]string, *serr) {
	c, ok := d.ws()
	if !ok {
		return nil, d.peekSyntax(msgEOFValue)
	}
	if c != '[' {
		return nil, d.peekInvalidType(StringList.expecting())
	}
	out := []string{}
	err := d.container('[', func() *serr {
		first := true
		for {
			more, err := d.hasNextElement(&first)
			if err != nil || !more {
				return err
			}
			s, err := d.readString()
			if err != nil {
				return err
			}
			out = append(out, s)
		}
	})
	return out, err
}

func (d *dec) readStringMap() (map[string]string, *serr) {
	c, ok := d.ws()
	if !ok {
		return nil, d.peekSyntax(msgEOFValue)
	}
	if c != '{' {
		return nil, d.peekInvalidType(StringMap.expecting())
	}
	out := map[string]string{}
	err := d.container('{', func() *serr {
		first := true
		for {
			more, err := d.hasNextKey(&first)
			if err != nil || !more {
				return err
			}
			k, err := d.readKey()
			if err != nil {
				return err
			}
			if err := d.objectColon(); err != nil {
				return err
			}
			v, err := d.readString()
			if err != nil {
				return err
			}
			out[k] = v
		}
	})
	return out, err
}

// readAny is deserialize_any into serde_json::Value; it returns the raw bytes.
func (d *dec) readAny() (json.RawMessage, *serr) {
	c, ok := d.ws()
	if !ok {
		return nil, d.peekSyntax(msgEOFValue)
	}
	start := d.i
	var err *serr
	switch {
	case c == 'n':
		d.i++
		err = d.parseIdent("ull")
	case c == 't':
		d.i++
		err = d.parseIdent("rue")
	case c == 'f':
		d.i++
		err = d.parseIdent("alse")
	case c == '-' || isDigit(c):
		if c == '-' {
			d.i++
		}
		_, err = d.parseInteger(c != '-', start)
	case c == '"':
		d.i++
		_, err = d.parseStr()
	case c == '[' || c == '{':
		err = d.anyContainer(c)
	default:
		err = d.peekSyntax(msgExpValue)
	}
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), d.b[start:d.i]...), nil
}

func (d *dec) anyContainer(c byte) *serr {
	return d.container(c, func() *serr {
		first := true
		for {
			var more bool
			var err *serr
			if c == '[' {
				more, err = d.hasNextElement(&first)
			} else {
				more, err = d.hasNextKey(&first)
			}
			if err != nil || !more {
				return err
			}
			if c == '{' {
				if _, err := d.readKey(); err != nil {
					return err
				}
				if err := d.objectColon(); err != nil {
					return err
				}
			}
			if _, err := d.readAny(); err != nil {
				return err
			}
		}
	})
}

func (d *dec) readObject() (json.RawMessage, *serr) {
	c, ok := d.ws()
	if !ok {
		return nil, d.peekSyntax(msgEOFValue)
	}
	if c != '{' {
		return nil, d.peekInvalidType(Object.expecting())
	}
	start := d.i
	if err := d.anyContainer('{'); err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), d.b[start:d.i]...), nil
}

// ignoreValue is Deserializer::ignore_value (IgnoredAny for unknown fields).
func (d *dec) ignoreValue() *serr {
	var stack []byte
	var enclosing byte // 0 = none
	for {
		peek, ok := d.ws()
		if !ok {
			return d.peekSyntax(msgEOFValue)
		}
		var frame byte
		switch {
		case peek == 'n':
			d.i++
			if err := d.parseIdent("ull"); err != nil {
				return err
			}
		case peek == 't':
			d.i++
			if err := d.parseIdent("rue"); err != nil {
				return err
			}
		case peek == 'f':
			d.i++
			if err := d.parseIdent("alse"); err != nil {
				return err
			}
		case peek == '-':
			d.i++
			if err := d.ignoreInteger(); err != nil {
				return err
			}
		case isDigit(peek):
			if err := d.ignoreInteger(); err != nil {
				return err
			}
		case peek == '"':
			d.i++
			if err := d.ignoreStr(); err != nil {
				return err
			}
		case peek == '[' || peek == '{':
			if enclosing != 0 {
				stack = append(stack, enclosing)
				enclosing = 0
			}
			d.i++
			frame = peek
		default:
			return d.peekSyntax(msgExpValue)
		}
		acceptComma := false
		if frame == 0 {
			if enclosing != 0 {
				frame, enclosing = enclosing, 0
			} else if len(stack) > 0 {
				frame, stack = stack[len(stack)-1], stack[:len(stack)-1]
			} else {
				return nil
			}
			acceptComma = true
		}
	inner:
		for {
			c, ok := d.ws()
			switch {
			case ok && c == ',' && acceptComma:
				d.i++
				break inner
			case ok && c == ']' && frame == '[', ok && c == '}' && frame == '{':
			case ok:
				if acceptComma {
					if frame == '[' {
						return d.peekSyntax(msgExpListEnd)
					}
					return d.peekSyntax(msgExpObjectEnd)
				}
				break inner
			default:
				if frame == '[' {
					return d.peekSyntax(msgEOFList)
				}
				return d.peekSyntax(msgEOFObject)
			}
			d.i++
			if len(stack) == 0 {
				return nil
			}
			frame, stack = stack[len(stack)-1], stack[:len(stack)-1]
			acceptComma = true
		}
		if frame == '{' {
			c, ok := d.ws()
			switch {
			case !ok:
				return d.peekSyntax(msgEOFObject)
			case c != '"':
				return d.peekSyntax(msgKeyString)
			}
			d.i++
			if err := d.ignoreStr(); err != nil {
				return err
			}
			c, ok = d.ws()
			switch {
			case !ok:
				return d.peekSyntax(msgEOFObject)
			case c != ':':
				return d.peekSyntax(msgExpColon)
			}
			d.i++
		}
		enclosing = frame
	}
}

func (d *dec) ignoreInteger() *serr {
	c, _ := d.next()
	switch {
	case c == '0':
		if isDigit(d.peekOrNull()) {
			return d.peekSyntax(msgInvNumber)
		}
	case c >= '1' && c <= '9':
		for isDigit(d.peekOrNull()) {
			d.i++
		}
	default:
		return d.syntax(msgInvNumber)
	}
	if d.peekOrNull() == '.' {
		d.i++
		n := 0
		for isDigit(d.peekOrNull()) {
			d.i++
			n++
		}
		if n == 0 {
			return d.peekSyntax(msgInvNumber)
		}
	}
	if c := d.peekOrNull(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peekOrNull(); c == '+' || c == '-' {
			d.i++
		}
		if c, _ := d.next(); !isDigit(c) {
			return d.syntax(msgInvNumber)
		}
		for isDigit(d.peekOrNull()) {
			d.i++
		}
	}
	return nil
}
