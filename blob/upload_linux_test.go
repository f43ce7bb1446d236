package blob

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// chrootDo is a Do hook that confines as a sandbox's Do does: f runs on
// a thread of its own whose root directory is view (unshare(CLONE_FS),
// then chroot), so that its paths and symbolic links resolve inside view
// only. The thread is never given back to the runtime: it ends with its
// goroutine. It needs root.
func chrootDo(view string) func(func() error) error {
	return func(f func() error) error {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				errc <- err
				return
			}
			if err := unix.Chroot(view); err != nil {
				errc <- err
				return
			}
			if err := unix.Chdir("/"); err != nil {
				errc <- err
				return
			}
			errc <- f()
		}()
		return <-errc
	}
}

// viewFixture is a landing whose Do confines to a view, laid out as an
// aiod workspace is: the workspace is one directory at one path both on
// the host and in the view (here the host's path is a link to the
// view's directory), the landing root is in it, and host is a directory
// of the host that the view does not contain.
type viewFixture struct {
	view string // the view's root, on the host
	host string // a host directory outside the view
	root string // the landing root, the same path in both
	l    *Landing
	c    *clock
}

// inView is where a path of the view is on the host.
func (f *viewFixture) inView(p string) string { return filepath.Join(f.view, p) }

func newViewFixture(t *testing.T) *viewFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	tmp := t.TempDir()
	f := &viewFixture{view: filepath.Join(tmp, "view"), host: filepath.Join(tmp, "host")}
	ws := filepath.Join(tmp, "ws")
	f.root = filepath.Join(ws, "uploads")
	for _, d := range []string{f.inView(ws), f.host} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(f.inView(ws), ws); err != nil {
		t.Fatal(err)
	}
	f.c = &clock{t: time.Unix(1_700_000_000, 0)}
	l, err := newLanding(f.root, UploadOptions{Do: chrootDo(f.view)}, nil, f.c.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	f.l = l
	return f
}

// linkRootOut replaces the landing root, in the view, with a link to the
// host directory, as a sandbox process may: on the host that link leads
// out, in the view it leads nowhere.
func (f *viewFixture) linkRootOut(t *testing.T) {
	t.Helper()
	p := f.inView(f.root)
	if _, err := os.Lstat(p); err == nil {
		if err := os.Rename(p, p+".old"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(f.host, p); err != nil {
		t.Fatal(err)
	}
}

// plant puts a file in the host directory, as one root's work might
// find there.
func (f *viewFixture) plant(t *testing.T, rel string, age time.Time) string {
	t.Helper()
	p := filepath.Join(f.host, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, age, age); err != nil {
		t.Fatal(err)
	}
	return p
}

// hostFiles lists the host directory (recursively, relative paths).
func (f *viewFixture) hostFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(f.host, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != f.host {
			rel, _ := filepath.Rel(f.host, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLandingDoConfines: every path operation of a landing runs in its
// Do, so a landing root a sandbox can write, and the links it plants
// there, never lead the landing out of the sandbox's view: not at the
// first chunk, not at the landing, not at an abort, not in the janitor's
// collection. Each case passes through the host's path of the workspace
// (a link into the view) if any operation runs outside Do.
func TestLandingDoConfines(t *testing.T) {
	data := []byte("0123456789")
	old := time.Unix(1_000_000_000, 0)
	cases := []struct {
		name string
		run  func(t *testing.T, f *viewFixture)
		host []string // what the host directory holds afterwards
	}{
		{"lands in the view", func(t *testing.T, f *viewFixture) {
			ret := upload(t, f.l, "a", data, 4, ptr("n.txt"))
			if want := filepath.Join(f.root, ret.UploadID+"_n.txt"); ret.LandingPath != want {
				t.Errorf("landing_path %s, want %s", ret.LandingPath, want)
			}
			if b, err := os.ReadFile(f.inView(ret.LandingPath)); err != nil || string(b) != string(data) {
				t.Errorf("landed %q %v", b, err)
			}
		}, nil},
		{"root linked out", func(t *testing.T, f *viewFixture) {
			f.linkRootOut(t)
			_, err := f.l.Put(firstReq("a", data, 4, nil))
			if err == nil || err.Reason() != smcp.ReasonForbidden {
				t.Errorf("answer %s, want forbidden", wire(err))
			}
		}, nil},
		{"part folder linked out", func(t *testing.T, f *viewFixture) {
			if err := os.MkdirAll(f.inView(f.root), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(f.host, f.inView(filepath.Join(f.root, PartDir))); err != nil {
				t.Fatal(err)
			}
			_, err := f.l.Put(firstReq("a", data, 4, nil))
			if err == nil || err.Reason() != smcp.ReasonForbidden {
				t.Errorf("answer %s, want forbidden", wire(err))
			}
		}, nil},
		{"root linked out before the landing", func(t *testing.T, f *viewFixture) {
			id := mustPut(t, f.l, firstReq("a", data, 4, ptr("n.txt"))).UploadID
			f.linkRootOut(t)
			f.plant(t, filepath.Join(PartDir, id+".part"), time.Now())
			_, err := f.l.Put(nextReq("a", id, data, 4, 10))
			wantRefused(t, err, smcp.ReasonIOError, map[string]any{"upload_id": id})
		}, []string{PartDir, filepath.Join(PartDir, "ID.part")}},
		{"root linked out before an abort", func(t *testing.T, f *viewFixture) {
			id := mustPut(t, f.l, firstReq("a", data, 4, nil)).UploadID
			f.linkRootOut(t)
			f.plant(t, filepath.Join(PartDir, id+".part"), time.Now())
			_, err := f.l.Put(nextReq("a", id, data, 5, 10))
			wantRefused(t, err, smcp.ReasonRange, map[string]any{"upload_id": id, "chunk_offset": int64(4)})
		}, []string{PartDir, filepath.Join(PartDir, "ID.part")}},
		{"collection through a link", func(t *testing.T, f *viewFixture) {
			f.linkRootOut(t)
			f.plant(t, filepath.Join(PartDir, strings.Repeat("a", 32)+".part"), old)
			f.l.Sweep()
		}, []string{PartDir, filepath.Join(PartDir, strings.Repeat("a", 32)+".part")}},
		{"collection in the view", func(t *testing.T, f *viewFixture) {
			orphan := f.inView(filepath.Join(f.root, PartDir, strings.Repeat("a", 32)+".part"))
			if err := os.MkdirAll(filepath.Dir(orphan), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(orphan, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(orphan, old, old); err != nil {
				t.Fatal(err)
			}
			f.l.Sweep()
			if _, err := os.Lstat(orphan); !os.IsNotExist(err) {
				t.Errorf("orphan kept: %v", err)
			}
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newViewFixture(t)
			c.run(t, f)
			got := f.hostFiles(t)
			for i, p := range got { // an upload_id is random
				if id, ok := strings.CutSuffix(filepath.Base(p), ".part"); ok && smcp.ValidUploadID(id) && id != strings.Repeat("a", 32) {
					got[i] = filepath.Join(filepath.Dir(p), "ID.part")
				}
			}
			if strings.Join(got, ",") != strings.Join(c.host, ",") {
				t.Errorf("host directory holds %q, want %q", got, c.host)
			}
		})
	}
}
