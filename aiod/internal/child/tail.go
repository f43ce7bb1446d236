package child

import (
	"strings"
	"sync"
)

// Tail keeps the last bytes a child program writes (its standard output
// or error), so that a failure can quote what the program said last
// however much it said before. The program's copying goroutine writes
// while a request or the program's owner reads; every method is safe
// for concurrent use.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail returns a Tail that keeps the last max bytes written to it.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// String is what is kept, as valid UTF-8 (a character cut at the start
// of the window is dropped).
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}

// LastLines is the last n non-empty lines kept, each trimmed of
// surrounding space, oldest first; nil when there is none.
func (t *Tail) LastLines(n int) []string {
	var keep []string
	lines := strings.Split(t.String(), "\n")
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append(keep, l)
		}
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return keep
}

// ExitText is how the result of an exec.Cmd's Wait reads in a log or a
// message: "exit status 0" for a nil error, the error's text otherwise.
func ExitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
