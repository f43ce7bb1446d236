package sio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// This file is the engine's JSON validator. Every event and
// acknowledgement a peer sends is checked before a handler sees it, and
// A2C-SMCP relays payloads of hundreds of kilobytes (client:put_blob
// chunks, mostly one long base64 string), so encoding/json's
// byte-at-a-time scanner was the largest cost of a relay. validJSON
// accepts and refuses exactly what json.Valid does (FuzzValidJSON holds
// it to that), but crosses long strings a span at a time.
//
// What json.Valid accepts, and so this does:
//
//   - one value, with optional white space (space, tab, LF, CR) around it;
//   - objects and arrays nested at most maxDepth deep (the 10001st
//     opening bracket is refused);
//   - strings with no raw byte below 0x20 and only the escapes \" \\ \/
//     \b \f \n \r \t \uXXXX (any case hex); bytes of 0x80 and above are
//     NOT checked: json.Valid accepts invalid UTF-8 in strings (a
//     WebSocket text message has been checked for UTF-8 already);
//   - numbers -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?;
//   - the literals true, false and null.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// validJSON reports whether b is one valid JSON value, as json.Valid.
func validJSON(b []byte) bool {
	return scanJSON(b, nil)
}

// scanJSON validates b as json.Valid does. When b is valid and its value
// is an array, and elems is not nil, the elements of that array are
// appended to *elems as subslices of b without surrounding white space
// (the form splitArray returns), so that a packet's arguments are split
// in the same pass that validates them.
//
// The walk is iterative: stack holds the open containers ('[' or '{'),
// so a deeply nested input costs no recursion.
func scanJSON(b []byte, elems *[]json.RawMessage) bool {
	var stackBuf [32]byte
	stack := stackBuf[:0]
	elemStart := -1 // start of the current top-level array element
	i := skipWS(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, c)
			i = skipWS(b, i+1)
			if c == '[' {
				if i < len(b) && b[i] == ']' {
					stack = stack[:len(stack)-1]
					i++
					break // an empty array is a complete value
				}
				if len(stack) == 1 {
					elemStart = i
				}
				continue // its first element
			}
			if i < len(b) && b[i] == '}' {
				stack = stack[:len(stack)-1]
				i++
				break // an empty object is a complete value
			}
			if i = scanMember(b, i); i < 0 {
				return false
			}
			continue // its first member's value
		case '"':
			if i = scanString(b, i); i < 0 {
				return false
			}
		case 't':
			if i = scanLiteral(b, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = scanLiteral(b, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = scanLiteral(b, i, "null"); i < 0 {
				return false
			}
		default:
			if i = scanNumber(b, i); i < 0 {
				return false
			}
		}
		// A value ended just before b[i]; close every container that
		// ends here, until one goes on with ',' or the input ends.
		for {
			end := i
			i = skipWS(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if len(stack) == 1 && top == '[' && elems != nil && (b[i] == ',' || b[i] == ']') {
				*elems = append(*elems, json.RawMessage(b[elemStart:end]))
			}
			switch {
			case b[i] == ',':
				i = skipWS(b, i+1)
				if top == '{' {
					if i = scanMember(b, i); i < 0 {
						return false
					}
				} else if len(stack) == 1 {
					elemStart = i
				}
			case b[i] == ']' && top == '[', b[i] == '}' && top == '{':
				stack = stack[:len(stack)-1]
				i++
				continue // the container is a value that ended
			default:
				return false
			}
			break // a value follows
		}
	}
}

// scanMember reads an object member's key and colon at b[i] (after white
// space) and returns the index of its value (white space skipped), or -1.
func scanMember(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = scanString(b, i); i < 0 {
		return -1
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipWS(b, i+1)
}

func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber returns the index just past the number at b[i], or -1. What
// follows the number is the caller's to judge ("01" is the number 0
// followed by a stray 1).
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return -1
		}
		i = skipDigits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = skipDigits(b, i)
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// scanString returns the index just past the JSON string starting at
// b[i] == '"', or -1 when it is not well-formed (unterminated, a raw
// control character, a bad escape).
//
// This is the hot loop of a relay, and it works on spans, not bytes: the
// next quote and the next backslash are found with bytes.IndexByte
// (vectorised), and the span before whichever comes first is checked
// for control characters eight bytes at a time (hasControl). Each found
// position is kept until the scan passes it, so every byte is searched
// at most once per kind: a long string full of escapes still costs
// linear time, not a search to its far end from every escape (see
// TestScanStringLinear).
func scanString(b []byte, i int) int {
	quote, bslash := -1, -1 // next '"' and '\\' at or after j; len(b) for "no more"
	for j := i + 1; ; {
		if quote < j {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				return -1 // unterminated
			}
			quote = j + k
		}
		if bslash < j {
			if k := bytes.IndexByte(b[j:], '\\'); k < 0 {
				bslash = len(b)
			} else {
				bslash = j + k
			}
		}
		stop := min(quote, bslash)
		if hasControl(b[j:stop]) {
			return -1
		}
		if stop == quote {
			return quote + 1
		}
		// An escape at stop. A quote found inside it (\") lies before
		// the next j, so it is searched for again from there.
		if stop+1 >= len(b) {
			return -1
		}
		switch b[stop+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j = stop + 2
		case 'u':
			if stop+6 > len(b) {
				return -1
			}
			for _, h := range b[stop+2 : stop+6] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return -1
				}
			}
			j = stop + 6
		default:
			return -1
		}
	}
}

// Constants of the word-at-a-time control character test.
const (
	lsbs = 0x0101010101010101 // the low bit of every byte
	msbs = 0x8080808080808080 // the high bit of every byte
)

// hasControl reports whether b holds a byte below 0x20.
//
// For a 64-bit word w, (w - 0x20*lsbs) &^ w & msbs is non-zero exactly
// when some byte of w is below 0x20. The lowest such byte x is reached by
// no borrow (every byte below it is >= 0x20), so it becomes x - 0x20 +
// 256 >= 0xE0, high bit set, while x itself has its high bit clear: the
// test fires. Conversely, a byte x >= 0x20 that no borrow reaches has the
// high bit of x - 0x20 set only when x >= 0xA0, whose own high bit
// masks it out: without a byte below 0x20 there is no borrow at all, and
// the test stays silent. Bytes above the lowest hit may be flagged
// wrongly (the borrow runs into them), which a yes/no answer does not
// care about. TestHasControlEveryByte and FuzzValidJSON check it.
func hasControl(b []byte) bool {
	for len(b) >= 32 {
		w0 := binary.LittleEndian.Uint64(b)
		w1 := binary.LittleEndian.Uint64(b[8:])
		w2 := binary.LittleEndian.Uint64(b[16:])
		w3 := binary.LittleEndian.Uint64(b[24:])
		if ((w0-0x20*lsbs)&^w0|(w1-0x20*lsbs)&^w1|(w2-0x20*lsbs)&^w2|(w3-0x20*lsbs)&^w3)&msbs != 0 {
			return true
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w-0x20*lsbs)&^w&msbs != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}
