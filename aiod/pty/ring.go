package pty

import (
	"bytes"
	"strconv"
)

// ring keeps the last max bytes a terminal printed, addressed by
// absolute offset (every byte ever written counts).
type ring struct {
	buf  []byte // grows up to max, then wraps
	max  int
	head int   // once full, where the oldest byte (and the next write) is
	end  int64 // bytes ever written
}

func (r *ring) write(p []byte) {
	r.end += int64(len(p))
	if len(p) >= r.max {
		r.buf, r.head = append(r.buf[:0], p[len(p)-r.max:]...), 0
		return
	}
	if n := min(r.max-len(r.buf), len(p)); n > 0 {
		r.buf, p = append(r.buf, p[:n]...), p[n:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.head:], p)
		p, r.head = p[n:], (r.head+n)%r.max
	}
}

// since returns a copy of the bytes from offset off on (clamped to what
// is retained), at most the last limit of them.
func (r *ring) since(off int64, limit int) []byte {
	off = max(off, r.end-int64(len(r.buf)), r.end-int64(limit))
	n := int(r.end - off)
	if n <= 0 {
		return nil
	}
	out := make([]byte, 0, n)
	linear := [2][]byte{r.buf[r.head:], r.buf[:r.head]}
	skip := len(r.buf) - n
	for _, part := range linear {
		if skip >= len(part) {
			skip -= len(part)
			continue
		}
		out, skip = append(out, part[skip:]...), 0
	}
	return out
}

// Marker kinds the shell prints, inside
// "ESC ] 6973 ; nonce ; kind [; n] [; exec id] BEL". The exec id names
// the exec whose command line the marker belongs to (empty, or absent,
// for a line typed by anyone else); see [session.typed].
const (
	markStart = 'S' // the command line was read; its output follows
	markEnd   = 'E' // back at the prompt, with $?
	markExit  = 'X' // the EXIT trap: the shell is exiting, with its status
)

// markerOSC is the private OSC number of the markers.
const markerOSC = "\x1b]6973;"

// filter removes the markers from a terminal's byte stream, in order,
// across reads. It holds back what may be the start of a marker, and an
// incomplete UTF-8 sequence at the end of a read, until the next read
// (or flush) settles it. Used by one goroutine.
type filter struct {
	prefix []byte // markerOSC + nonce + ";"
	hold   []byte
}

// maxMarkerBody bounds a marker's body ("E;" a status, ";" an exec id
// of at most 20 digits); a longer run is not a marker.
const maxMarkerBody = 48

// feed passes p's plain bytes to data and its markers to mark, in order.
func (f *filter) feed(p []byte, data func([]byte), mark func(kind byte, code int, exec string)) {
	buf := p
	if len(f.hold) > 0 {
		buf = append(f.hold, p...)
		f.hold = nil
	}
	from, i := 0, 0
	for {
		j := bytes.IndexByte(buf[i:], 0x1b)
		if j < 0 {
			break
		}
		j += i
		rest := buf[j:]
		if len(rest) < len(f.prefix) && bytes.HasPrefix(f.prefix, rest) {
			f.emit(buf[from:j], data)
			f.hold = append([]byte(nil), rest...)
			return
		}
		if bytes.HasPrefix(rest, f.prefix) {
			body := rest[len(f.prefix):]
			end := bytes.IndexByte(body[:min(len(body), maxMarkerBody+1)], 0x07)
			if end < 0 && len(body) <= maxMarkerBody {
				f.emit(buf[from:j], data)
				f.hold = append([]byte(nil), rest...)
				return
			}
			if end > 0 {
				if kind, code, exec, ok := parseMarker(body[:end]); ok {
					f.emit(buf[from:j], data)
					mark(kind, code, exec)
					from = j + len(f.prefix) + end + 1
					i = from
					continue
				}
			}
		}
		i = j + 1
	}
	tail := buf[from:]
	if k := incompleteUTF8(tail); k > 0 {
		f.hold = append([]byte(nil), tail[len(tail)-k:]...)
		tail = tail[:len(tail)-k]
	}
	f.emit(tail, data)
}

// flush passes on whatever is held back, as plain bytes.
func (f *filter) flush(data func([]byte)) {
	h := f.hold
	f.hold = nil
	f.emit(h, data)
}

func (f *filter) emit(b []byte, data func([]byte)) {
	if len(b) > 0 {
		data(b)
	}
}

// parseMarker reads "S", "E;n" or "X;n", each optionally followed by
// ";" and an exec id (digits, possibly none).
func parseMarker(b []byte) (kind byte, code int, exec string, ok bool) {
	if len(b) == 0 {
		return 0, 0, "", false
	}
	kind, rest := b[0], b[1:]
	switch kind {
	case markStart:
	case markEnd, markExit:
		if len(rest) < 2 || rest[0] != ';' {
			return 0, 0, "", false
		}
		num := rest[1:]
		if i := bytes.IndexByte(num, ';'); i >= 0 {
			num, rest = num[:i], num[i:]
		} else {
			rest = nil
		}
		n, err := strconv.Atoi(string(num))
		if err != nil {
			return 0, 0, "", false
		}
		code = n
	default:
		return 0, 0, "", false
	}
	if len(rest) > 0 {
		if rest[0] != ';' {
			return 0, 0, "", false
		}
		for _, c := range rest[1:] {
			if c < '0' || c > '9' {
				return 0, 0, "", false
			}
		}
		exec = string(rest[1:])
	}
	return kind, code, exec, true
}

// incompleteUTF8 is how many bytes at the end of b begin a UTF-8
// sequence that b does not complete.
func incompleteUTF8(b []byte) int {
	for k := 1; k <= min(3, len(b)); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a leading byte: complete when k covers its length
			if need := seqLen(c); need > k {
				return k
			}
			return 0
		}
	}
	return 0
}

func seqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	}
	return 2
}
