package commands

import (
	"strings"
	"testing"
)

func TestTruncateMiddle(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"abcdef", 0, "abcdef"},
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 4, "ab" + truncMarker + "fg"},
		{"abcdefg", 5, "ab" + truncMarker + "efg"},
		{"ééééé", 4, "éé" + truncMarker + "éé"},
		{"ééé", 3, "ééé"},
	} {
		if got := truncateMiddle(c.in, c.max, truncMarker); got != c.want {
			t.Errorf("truncateMiddle(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestStreamRetention(t *testing.T) {
	var s stream
	s.write([]byte(strings.Repeat("a", 8)), 10, 5)
	s.write([]byte("bcd"), 10, 5) // 11 > 10: keep the last 5
	if s.start != 6 || string(s.buf) != "aabcd" || s.end() != 11 {
		t.Fatalf("%d %q", s.start, s.buf)
	}
	if d, gap := s.read(0); !gap || string(d) != "aabcd" {
		t.Fatalf("%q %v", d, gap)
	}
	if d, gap := s.read(9); gap || string(d) != "cd" {
		t.Fatalf("%q %v", d, gap)
	}
	if d, gap := s.read(50); gap || d != nil {
		t.Fatalf("%q %v", d, gap)
	}
}

func TestStreamGapFrames(t *testing.T) {
	pos := streamPos{name: "stdout", at: 2}
	fs := pos.frames([]byte("xyz"), true, 7, 10)
	if len(fs) != 2 || fs[0].Type != "gap" || *fs[0].LostFrom != 2 || *fs[0].ResumeOffset != 7 ||
		fs[1].Type != "output" || *fs[1].Offset != 7 || fs[1].Data != "eHl6" || pos.at != 10 {
		t.Fatalf("%+v", fs)
	}
	if fs = pos.frames(nil, false, 7, 10); len(fs) != 0 {
		t.Fatalf("%+v", fs)
	}
}
