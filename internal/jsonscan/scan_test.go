package jsonscan

import (
	"strings"
	"testing"
	"time"
)

// stringRef is the byte-at-a-time scanner String replaced,
// kept as the reference FuzzString holds it to.
func stringRef(data []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(data); {
		c := data[j]
		switch {
		case c == '"':
			return j + 1, esc
		case c < 0x20:
			return -1, esc
		case c != '\\':
			j++
			continue
		}
		esc = true
		if j+1 >= len(data) {
			return -1, esc
		}
		switch data[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j += 2
		case 'u':
			if j+6 > len(data) {
				return -1, esc
			}
			for _, h := range data[j+2 : j+6] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return -1, esc
				}
			}
			j += 6
		default:
			return -1, esc
		}
	}
	return -1, esc
}

func TestString(t *testing.T) {
	long := strings.Repeat("QUJD", 100)
	tests := []struct {
		in  string
		end int // -1: refused
		esc bool
	}{
		{`""`, 2, false},
		{`"abc"x`, 5, false},
		{`"` + long + `"`, len(long) + 2, false},
		{`"a\"b"`, 6, true},
		{`"a\\"b"`, 5, true},
		{`"\u00e9\n\/"`, 12, true},
		{`"` + long + `\"` + long + `"`, 2*len(long) + 4, true},
		{`"abc`, -1, false},
		{`"` + long, -1, false},
		{`"a\"`, -1, true},
		{`"a\`, -1, true},
		{`"\x"`, -1, true},
		{`"\u12"`, -1, true},
		{`"\u12g4"`, -1, true},
		{"\"a\x1fb\"", -1, false},
		{"\"" + long + "\x00" + long + "\"", -1, false},
		{"\"" + long + "\n\"", -1, false},
		{"\"\x7f\xff\xc3\"", 5, false},
		{"\"" + long + "\\n" + long + "\t\"", -1, true},
	}
	for _, tt := range tests {
		end, esc := String([]byte(tt.in), 0)
		if end != tt.end || (end >= 0 && esc != tt.esc) {
			t.Errorf("String(%.40q) = %d, %v; want %d, %v", tt.in, end, esc, tt.end, tt.esc)
		}
	}
}

// TestStringLinear checks that a string full of escapes, with its
// closing quote far away, is scanned in linear time: the quote is not
// searched for again from every escape.
func TestStringLinear(t *testing.T) {
	in := []byte(`"` + strings.Repeat(`\n`, 1<<20) + `"`)
	start := time.Now()
	if end, _ := String(in, 0); end != len(in) {
		t.Fatalf("end %d, want %d", end, len(in))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("scan of 2 MiB of escapes took %s", d)
	}
}

// FuzzString holds the span scanner to the byte loop, at every
// start position that opens a string.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"\u00e9"`, "\"a\x01\"", `"\`, `"abc`, `"x" "y\\"`, `"` + strings.Repeat("a", 70) + "\x1f\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			if b[i] != '"' {
				continue
			}
			end, esc := String(b, i)
			wend, wesc := stringRef(b, i)
			if end != wend || (end >= 0 && esc != wesc) {
				t.Fatalf("String(%q, %d) = %d, %v; want %d, %v", b, i, end, esc, wend, wesc)
			}
		}
	})
}

// FuzzHasControl holds the word-at-a-time test to the byte loop, at
// every alignment.
func FuzzHasControl(f *testing.F) {
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz0123456789ABCDEF\x1f"))
	f.Add([]byte("\xff\xa0\x20\x21\x7f\x80\x9f\xe0abcdefgh"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b) && i < 40; i++ {
			want := false
			for _, c := range b[i:] {
				want = want || c < 0x20
			}
			if got := HasControl(b[i:]); got != want {
				t.Fatalf("HasControl(%q) = %v", b[i:], got)
			}
		}
	})
}

func TestHasControlEveryByte(t *testing.T) {
	// Every byte value at every position of a 40-byte span of spaces,
	// and every pair of a low byte after a high one (the borrow case).
	for pos := 0; pos < 40; pos++ {
		for c := 0; c < 256; c++ {
			b := []byte(strings.Repeat(" ", 40))
			b[pos] = byte(c)
			if got := HasControl(b); got != (c < 0x20) {
				t.Fatalf("byte %#x at %d: %v", c, pos, got)
			}
		}
	}
	for c := 0; c < 256; c++ {
		for d := 0; d < 256; d++ {
			b := []byte{byte(c), byte(d), 'a', 'a', 'a', 'a', 'a', 'a'}
			if got := HasControl(b); got != (c < 0x20 || d < 0x20) {
				t.Fatalf("%#x %#x: %v", c, d, got)
			}
		}
	}
}
