package files

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// deadline runs fn and fails the test if it has not returned in a few
// seconds: an operation blocked in open(2) on a FIFO never would.
func deadline(t *testing.T, what string, fn func() envelope) envelope {
	t.Helper()
	done := make(chan envelope, 1)
	go func() { done <- fn() }()
	select {
	case e := <-done:
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still blocked after 5s", what)
		return envelope{}
	}
}

// mkfifo makes a FIFO and, at cleanup, opens it read-write (which never
// blocks) so that an operation wrongly blocked on it is released.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
			time.Sleep(10 * time.Millisecond)
			f.Close()
		}
	})
}

// TestNonRegularNeverBlocks: every operation that opens a file's content
// refuses a FIFO or a socket at once, invalid_target "<phrase>: not a
// regular file", 400 on v2 and 200 success:false on v1.
func TestNonRegularNeverBlocks(t *testing.T) {
	f := newFixture(t)
	fifo := filepath.Join(f.dir, "fifo")
	mkfifo(t, fifo)
	// A short name: a socket path must fit in sun_path.
	sockDir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	link := filepath.Join(f.dir, "fifo-link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{fifo, sock, link} {
		cases := []struct {
			method, target string
			body           any
			v1             bool
			phrase         string
		}{
			{"GET", "/v2/fs/read?path=" + q(p), nil, false, "Failed to read file"},
			{"POST", "/v1/file/read", map[string]any{"file": p}, true, "Failed to read file"},
			{"POST", "/v1/file/search", map[string]any{"file": p, "regex": "x"}, true, "Failed to search file"},
			{"POST", "/v1/file/replace", map[string]any{"file": p, "old_str": "a", "new_str": "b"}, true, "Failed to replace in file"},
			{"POST", "/v2/fs/edit", map[string]any{"command": "str_replace", "path": p, "old_str": "a", "new_str": "b"}, false, "Failed to edit file"},
			{"POST", "/v2/fs/edit", map[string]any{"command": "insert", "path": p, "insert_line": 0, "new_str": "b"}, false, "Failed to edit file"},
			{"POST", "/v1/file/str_replace_editor", map[string]any{"command": "view", "path": p}, true, "Failed to edit file"},
			{"POST", "/v1/file/str_replace_editor", map[string]any{"command": "create", "path": p, "file_text": "x"}, true, "Failed to edit file"},
			{"POST", "/v2/fs/write", map[string]any{"path": p, "content": "x"}, false, "Failed to write file"},
			{"POST", "/v2/fs/write", map[string]any{"path": p, "content": "x", "append": true}, false, "Failed to write file"},
			{"POST", "/v1/file/write", map[string]any{"file": p, "content": "x", "append": true}, true, "Failed to write file"},
			{"POST", "/v2/fs/copy", map[string]any{"source": p, "destination": filepath.Join(f.dir, "copy")}, false, "Failed to copy path"},
			{"POST", "/v2/fs/grep", map[string]any{"path": p, "pattern": "x"}, false, "Failed to grep files"},
			{"POST", "/v1/file/grep", map[string]any{"path": p, "pattern": "x"}, true, "Failed to grep files"},
		}
		for _, c := range cases {
			if p == link && c.target == "/v2/fs/copy" {
				continue // a link is copied as a link
			}
			what := c.method + " " + c.target + " " + filepath.Base(p)
			e := deadline(t, what, func() envelope { return f.do(c.method, c.target, c.body) })
			want := 400
			if c.v1 {
				want = 200
			}
			if e.status != want || e.Success {
				t.Errorf("%s: status %d success %v, want %d: %s", what, e.status, e.Success, want, e.Data)
				continue
			}
			fe := fileErr(t, e)
			if fe.ErrorType != fserr.InvalidTarget || fe.Message != c.phrase+": not a regular file" || e.Message != fe.Message || fe.Path != p {
				t.Errorf("%s: %s", what, e.Data)
			}
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s was replaced: %v %v", p, fi, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "copy")); err == nil {
		t.Error("a copy of a FIFO was made")
	}

	// A FIFO with a reader: the write's open succeeds, fstat refuses it.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, app := range []bool{false, true} {
		e := deadline(t, "write to a read FIFO", func() envelope {
			return f.do("POST", "/v2/fs/write", map[string]any{"path": fifo, "content": "x", "append": app})
		})
		if e.status != 400 || fileErr(t, e).Message != "Failed to write file: not a regular file" {
			t.Errorf("append %v: %d %s", app, e.status, e.Data)
		}
	}

	// A directory walk skips the FIFO and the socket's kind alike.
	f.write("g/a.txt", "x\n")
	mkfifo(t, filepath.Join(f.dir, "g/pipe"))
	e := deadline(t, "grep dir", func() envelope {
		return f.do("POST", "/v2/fs/grep", map[string]any{"path": filepath.Join(f.dir, "g"), "pattern": "x"})
	})
	if d := e.data(t); e.status != 200 || d["match_count"] != 1.0 || d["files_searched"] != 1.0 {
		t.Errorf("grep dir: %d %v", e.status, d)
	}
	e = deadline(t, "copy dir", func() envelope {
		return f.do("POST", "/v2/fs/copy", map[string]any{"source": filepath.Join(f.dir, "g"), "destination": filepath.Join(f.dir, "g2")})
	})
	if d := e.data(t); e.status != 200 || d["files_copied"] != 1.0 {
		t.Errorf("copy dir: %d %v", e.status, d)
	}
}
