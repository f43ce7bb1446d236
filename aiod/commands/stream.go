package commands

import (
	"strings"
	"unicode/utf8"
)

// Retention per stream: past retainMax bytes the earliest are dropped
// until retainTrim remain.
const (
	defaultRetainMax  = 10 << 20
	defaultRetainTrim = 5 << 20
)

// stream is one output stream's retained bytes. start is the logical
// offset of buf[0]; start+len(buf) is every byte the command produced.
// Guarded by the owning Command's mutex.
type stream struct {
	buf   []byte
	start int64
}

func (s *stream) end() int64 { return s.start + int64(len(s.buf)) }

// write appends p and trims the retained bytes to keep past max.
func (s *stream) write(p []byte, max, keep int) {
	s.buf = append(s.buf, p...)
	if max > 0 && len(s.buf) > max {
		drop := len(s.buf) - keep
		s.start += int64(drop)
		s.buf = append(s.buf[:0:0], s.buf[drop:]...)
	}
}

// read returns the retained bytes from offset on (a copy), and whether
// offset fell before the retained start (a gap). An offset past the end
// reads nothing.
func (s *stream) read(offset int64) (data []byte, gap bool) {
	if offset < s.start {
		offset, gap = s.start, true
	}
	if offset >= s.end() {
		return nil, gap
	}
	return append([]byte(nil), s.buf[offset-s.start:]...), gap
}

// truncMarker replaces the middle of a stream longer than the response's
// max_output_length.
const truncMarker = "\n... output truncated ...\n"

// truncateMiddle keeps the first and last max/2 characters of s around
// marker when s has more than max characters; max 0 means no limit.
func truncateMiddle(s string, max int, marker string) string {
	if max <= 0 || len(s) <= max || utf8.RuneCountInString(s) <= max {
		return s
	}
	head, tail := max/2, max-max/2
	i := 0
	for n := 0; n < head; n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	j := len(s)
	for n := 0; n < tail; n++ {
		_, size := utf8.DecodeLastRuneInString(s[:j])
		j -= size
	}
	var b strings.Builder
	b.Grow(i + len(marker) + len(s) - j)
	b.WriteString(s[:i])
	b.WriteString(marker)
	b.WriteString(s[j:])
	return b.String()
}
