package child

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
		last1  []string
		last3  []string
	}{
		{"empty", 16, nil, "", nil, nil},
		{"fits", 64, []string{"a\n", "b\n\n  c  \n"}, "a\nb\n\n  c  \n", []string{"c"}, []string{"a", "b", "c"}},
		{"keeps the end", 8, []string{"first line\n", "x\ny\nz\n"}, "e\nx\ny\nz\n", []string{"z"}, []string{"x", "y", "z"}},
		{"one write larger than max", 4, []string{"0123456789"}, "6789", []string{"6789"}, []string{"6789"}},
		{"no trailing newline", 32, []string{"a\nb"}, "a\nb", []string{"b"}, []string{"a", "b"}},
		{"blank only", 32, []string{"\n \n\t\n"}, "\n \n\t\n", nil, nil},
		{"cut character dropped", 2, []string{"aé\n"}, "\n", nil, nil}, // é is 2 bytes; the window starts inside it
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := NewTail(tc.max)
			for _, w := range tc.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := tl.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if got := tl.LastLines(1); !slices.Equal(got, tc.last1) {
				t.Errorf("LastLines(1) = %q, want %q", got, tc.last1)
			}
			if got := tl.LastLines(3); !slices.Equal(got, tc.last3) {
				t.Errorf("LastLines(3) = %q, want %q", got, tc.last3)
			}
		})
	}
}

// TestTailLastLineAfterOverflow is the bug the type exists for: after more
// than max bytes, the last line is the last one written, not an early one.
func TestTailLastLineAfterOverflow(t *testing.T) {
	tl := NewTail(1 << 10)
	for i := range 1000 {
		fmt.Fprintf(tl, "line %d\n", i)
	}
	if got := tl.LastLines(2); !slices.Equal(got, []string{"line 998", "line 999"}) {
		t.Errorf("LastLines(2) = %q", got)
	}
	if got := len(tl.String()); got > 1<<10 {
		t.Errorf("kept %d bytes, want at most %d", got, 1<<10)
	}
}

func TestTailConcurrent(t *testing.T) {
	tl := NewTail(64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				_, _ = tl.Write([]byte("abc\n"))
				_ = tl.LastLines(2)
			}
		})
	}
	wg.Wait()
	if got := tl.String(); len(got) != 64 || strings.Trim(got, "abc\n") != "" {
		t.Errorf("String() = %q", got)
	}
}

func TestExitText(t *testing.T) {
	if got := ExitText(nil); got != "exit status 0" {
		t.Errorf("ExitText(nil) = %q", got)
	}
	if got := ExitText(errors.New("signal: killed")); got != "signal: killed" {
		t.Errorf("ExitText(err) = %q", got)
	}
}
