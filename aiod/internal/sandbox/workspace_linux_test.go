package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func requireRootT(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
}

// TestWorkspaceLinks: a workspace that is a symbolic link is judged by
// the directory it leads to: links to the root, /etc, /home or /root
// are refused; a link to a directory of its own gives that directory,
// mounted at the link's path.
func TestWorkspaceLinks(t *testing.T) {
	requireRootT(t)
	dir := t.TempDir()
	for _, c := range []struct{ target, why string }{
		{"/", "is the root of the filesystem"}, {"/etc", "is a system directory"},
		{"/home", "is a home directory"}, {"/root", "is a home directory"}, {"/usr/lib", "is a system directory"},
	} {
		link := filepath.Join(dir, "link"+strings.ReplaceAll(c.target, "/", "-"))
		if err := os.Symlink(c.target, link); err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Workspace: link}, nil)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "(a link to "+c.target+") "+c.why) {
			t.Errorf("workspace %s -> %s: %v", link, c.target, err)
		}
	}
	own := t.TempDir()
	link := filepath.Join(dir, "own")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Workspace: link}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out, err := run(t, s, "echo hi > "+link+"/f && cat "+link+"/f"); err != nil || out != "hi\n" {
		t.Errorf("write through the link's path: %q %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(own, "f")); err != nil || string(b) != "hi\n" {
		t.Errorf("the file on the host: %q %v", b, err)
	}
}

// TestWorkspaceSwapped: a directory swapped for another, or for a link
// to /root, after the workspace was checked and before init mounts it,
// is refused: init never mounts what was not checked.
func TestWorkspaceSwapped(t *testing.T) {
	requireRootT(t)
	for _, c := range []struct {
		name string
		swap func(t *testing.T, dir string)
	}{
		{"link to /root", func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/root", dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"another directory", func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			testHookWorkspaceChecked = func(resolved string) { c.swap(t, resolved) }
			defer func() { testHookWorkspaceChecked = nil }()
			s, err := New(Config{Workspace: ws}, nil)
			if err == nil {
				out, _ := run(t, s, "ls -a "+ws)
				s.Close()
				t.Fatalf("the swapped workspace was mounted: %q", out)
			}
			if !strings.Contains(err.Error(), "the workspace changed while the sandbox started") {
				t.Errorf("error: %v", err)
			}
		})
	}
}

// TestWorkspaceSwapRace: while another goroutine swaps a link between a
// directory of its own and /root, every sandbox either refuses the
// workspace or mounts the directory of its own, never /root.
func TestWorkspaceSwapRace(t *testing.T) {
	requireRootT(t)
	dir := t.TempDir()
	own := filepath.Join(dir, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "ws")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			target := own
			if i%2 == 1 {
				target = "/root"
			}
			tmp := filepath.Join(dir, "next")
			_ = os.Remove(tmp)
			if os.Symlink(target, tmp) == nil {
				_ = os.Rename(tmp, link) // atomic: the link is always one or the other
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	started, refused := 0, 0
	for range 20 {
		s, err := New(Config{Workspace: link}, nil)
		if err != nil {
			if !strings.Contains(err.Error(), "is a home directory") && !strings.Contains(err.Error(), "changed while") {
				t.Errorf("unexpected refusal: %v", err)
			}
			refused++
			continue
		}
		started++
		var seen []string
		err = s.Do(func() error {
			f, err := os.Open(link) // the workspace's path in the view
			if err != nil {
				return err
			}
			defer f.Close()
			seen, err = f.Readdirnames(-1)
			return err
		})
		s.Close()
		if err != nil || len(seen) != 1 || seen[0] != "marker" || s.ws.resolved != own {
			t.Fatalf("a sandbox mounted %s holding %q (%v), not %s", s.ws.resolved, seen, err, own)
		}
	}
	t.Logf("%d started, %d refused", started, refused)
}

// TestWorkspaceIdmapped: a project folder with content, owned by a user
// (uid 1000), is writable by the sandbox account through an idmapped
// mount: inside, it can edit and create files; on the host the new
// files belong to uid 1000 and no owner changed.
func TestWorkspaceIdmapped(t *testing.T) {
	requireRootT(t)
	ws := t.TempDir()
	mk := func(name string, uid int) {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	mk("mine", 1000)
	mk("roots", 0)
	if err := os.Chown(ws, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Workspace: ws}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Report()
	if r.Workspace == "" || len(r.Warnings) != 0 {
		var fs syscall.Statfs_t
		_ = syscall.Statfs(ws, &fs)
		t.Fatalf("not idmapped (filesystem type %#x): workspace %q, warnings %q", fs.Type, r.Workspace, r.Warnings)
	}
	script := "cd " + ws + " && id -u && echo new >> mine && echo hi > created && mkdir sub && touch sub/f && stat -c '%u %n' mine roots created; echo x >> roots"
	out, err := run(t, s, script)
	want := "65534\n65534 mine\n0 roots\n65534 created\n"
	if err == nil || !strings.HasPrefix(out, want) || !strings.Contains(out, "roots: Permission denied") {
		t.Errorf("inside: %q %v; want %q then a refusal to write roots", out, err, want)
	}
	for name, uid := range map[string]uint32{".": 1000, "mine": 1000, "roots": 0, "created": 1000, "sub": 1000, "sub/f": 1000} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, name), &st); err != nil || st.Uid != uid || st.Gid != uid {
			t.Errorf("%s on the host: %d:%d %v, want %d:%d", name, st.Uid, st.Gid, err, uid, uid)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "mine")); string(b) != "old\nnew\n" {
		t.Errorf("mine: %q", b)
	}
}

// TestWorkspaceIdmapUnsupported: on a filesystem that cannot be
// idmapped (ramfs), a user's folder keeps today's rule: the sandbox
// starts, a warning says why the account cannot write it, and no owner
// changes.
func TestWorkspaceIdmapUnsupported(t *testing.T) {
	requireRootT(t)
	ws := t.TempDir()
	if err := syscall.Mount("ramfs", ws, "ramfs", 0, "mode=0755"); err != nil {
		t.Skip("no ramfs here:", err)
	}
	defer func() { _ = syscall.Unmount(ws, syscall.MNT_DETACH) }()
	if err := os.WriteFile(filepath.Join(ws, "mine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "mine")} {
		if err := os.Chown(p, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Config{Workspace: ws}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Report()
	want := "the workspace " + ws + " belongs to uid 1000 and cannot be idmapped here (the kernel or the filesystem does not support idmapped mounts: "
	if r.Workspace != "" || len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], want) ||
		!strings.HasSuffix(r.Warnings[0], "): the sandbox account nobody cannot write it (chown it to nobody, or start with an empty one)") {
		t.Errorf("report: workspace %q, warnings %q", r.Workspace, r.Warnings)
	}
	t.Logf("warning: %s", r.Warnings)
	if out, err := run(t, s, "touch "+ws+"/new"); err == nil {
		t.Errorf("the account wrote the folder: %q", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(ws, &st); err != nil || st.Uid != 1000 {
		t.Errorf("owner on the host: %d %v", st.Uid, err)
	}
}
