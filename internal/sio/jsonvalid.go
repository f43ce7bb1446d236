package sio

import (
	"encoding/json"

	"github.com/a2c-smcp/a2c-go/internal/jsonscan"
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
// b[i] == '"', or -1 when it is not well-formed (see jsonscan.String).
func scanString(b []byte, i int) int {
	end, _ := jsonscan.String(b, i)
	return end
}
