package jsonscan

import (
	"bytes"
	"encoding/binary"
)

// String returns the index just past the JSON string starting at
// data[i] == '"', and whether it has escapes, or -1 when the string is
// not well-formed (unterminated, a raw control character, a bad escape).
// Bytes of 0x80 and above are not checked: encoding/json accepts invalid
// UTF-8 in a string (and replaces it when decoding).
//
// The strings it is made for (a client:put_blob chunk's blob, hundreds
// of kilobytes of base64) have no escapes, so the scan works on spans,
// not bytes: the next quote and the next
// backslash are found with bytes.IndexByte (vectorised), and the span
// before whichever comes first is checked for control characters eight
// bytes at a time ([HasControl]). Each position is remembered until the
// scan passes it, so that every byte is searched at most once per kind
// and a string full of escapes still costs linear time.
func String(data []byte, i int) (end int, escaped bool) {
	esc := false
	quote, bslash := -1, -1 // next '"' and '\\' at or after j; len(data) when there is none
	for j := i + 1; ; {
		if quote < j {
			k := bytes.IndexByte(data[j:], '"')
			if k < 0 {
				return -1, esc // unterminated
			}
			quote = j + k
		}
		if bslash < j {
			if k := bytes.IndexByte(data[j:], '\\'); k < 0 {
				bslash = len(data)
			} else {
				bslash = j + k
			}
		}
		stop := min(quote, bslash)
		if HasControl(data[j:stop]) {
			return -1, esc
		}
		if stop == quote {
			return quote + 1, esc
		}
		// An escape at stop: a quote found inside it (\") is passed over
		// and searched for again.
		esc = true
		if stop+1 >= len(data) {
			return -1, esc
		}
		switch data[stop+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j = stop + 2
		case 'u':
			if stop+6 > len(data) {
				return -1, esc
			}
			for _, h := range data[stop+2 : stop+6] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return -1, esc
				}
			}
			j = stop + 6
		default:
			return -1, esc
		}
	}
}

// Constants of the word-at-a-time control character test.
const (
	lsbs = 0x0101010101010101 // the low bit of every byte
	msbs = 0x8080808080808080 // the high bit of every byte
)

// HasControl reports whether b holds a byte below 0x20 (which JSON does
// not allow raw in a string).
//
// For a 64-bit word w, (w - 0x20*lsbs) &^ w & msbs is non-zero exactly
// when some byte of w is below 0x20: the lowest such byte x, which no
// borrow reaches (the bytes below it are all >= 0x20), becomes x - 0x20 +
// 256 >= 0xE0 (high bit set) while x itself has its high bit clear; and
// a byte >= 0x20 reached by no borrow only has the high bit of x - 0x20
// set when x >= 0xA0, whose own high bit is set, so it never shows. The
// flags of the bytes above the lowest hit may be wrong (a borrow runs
// into them), which does not matter for a yes/no answer. FuzzHasControl
// checks it against the byte loop.
func HasControl(b []byte) bool {
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
