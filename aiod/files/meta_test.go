package files

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// TestDeleteRootRefused: "/" and every path resolving to it are refused
// before anything is removed. Only non-recursive deletes are tried, so a
// broken check could not remove anything.
func TestDeleteRootRefused(t *testing.T) {
	f := newFixture(t)
	rootLink := filepath.Join(f.dir, "rootlink")
	if err := os.Symlink("/", rootLink); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(f.dir, "/")
	for _, p := range []string{"/", "//", "/..", "/tmp/..", rel, rootLink + "/"} {
		e := f.do("POST", "/v2/fs/delete", map[string]any{"path": p})
		fe := fileErr(t, e)
		if e.status != 400 || fe.ErrorType != fserr.InvalidTarget || fe.Message != "Failed to delete path: refusing to delete /" ||
			fe.Retryable || fe.Path != p {
			t.Errorf("delete %q: %d %s", p, e.status, e.Data)
		}
		e = f.do("POST", "/v1/file/delete", map[string]any{"path": p})
		if e.status != 200 || e.Success || fileErr(t, e).ErrorType != fserr.InvalidTarget {
			t.Errorf("v1 delete %q: %d %s", p, e.status, e.Data)
		}
	}
	// The link to the root itself is an ordinary link: removed, not
	// followed.
	e := f.do("POST", "/v2/fs/delete", map[string]any{"path": rootLink})
	if e.status != 200 {
		t.Fatalf("delete link: %d %s", e.status, e.Data)
	}
	if _, err := os.Lstat(rootLink); err == nil {
		t.Error("link to / not removed")
	}
	if _, err := os.Stat("/"); err != nil {
		t.Fatal(err)
	}
}
