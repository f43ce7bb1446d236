package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// zombies lists the sandbox's processes that have exited and not been
// reaped, as /proc in its view shows them.
func zombies(t *testing.T, s *Sandbox) []string {
	t.Helper()
	var out []string
	if err := s.Do(func() error {
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, p := range stats {
			b, err := os.ReadFile(p)
			if i := strings.LastIndexByte(string(b), ')'); err == nil && i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
				out = append(out, p)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInitReaps: orphans that exit (their parent exited first, so init
// is their parent) are reaped, none left as a zombie.
func TestInitReaps(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	if out, err := run(t, s, "for i in 1 2 3 4 5; do (exec /bin/true) & done; exit 0"); err != nil {
		t.Fatal(out, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for z := zombies(t, s); len(z) > 0; z = zombies(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("zombies left: %v", z)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
