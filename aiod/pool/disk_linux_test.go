package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// needDisk skips where workspaces cannot have a disk of their own.
func needDisk(t *testing.T) {
	t.Helper()
	needRoot(t)
	if _, err := diskTool(false); err != nil {
		t.Skip(err)
	}
}

// diskRoot is a pool root for a test with Disk: whatever the test leaves
// mounted under it is detached before the directory is removed (a
// failed test must not leave mounts, or loop devices, on a shared host).
func diskRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { unmountStale(root) })
	return root
}

// loopsFor lists the loop devices whose backing file is image (deleted
// or not).
func loopsFor(image string) []string {
	var out []string
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == image {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

// mounted reports whether dir is a mount point in this mount namespace.
func mounted(dir string) bool { return slices.Contains(mountsUnder(filepath.Dir(dir)), dir) }

// mountOptions are the per-mount options of the mount on dir.
func mountOptions(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 5 && unescapeMount(f[4]) == dir {
			return strings.Split(f[5], ",")
		}
	}
	return nil
}

// isExt4 reports whether image holds an ext4 superblock (magic 0xEF53
// at byte 1080).
func isExt4(image string) bool {
	f, err := os.Open(image)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [2]byte
	_, err = f.ReadAt(m[:], 1080)
	return err == nil && m == [2]byte{0x53, 0xef}
}

// TestDisk: with Disk, each workspace is a filesystem of its own: a
// write past it fails with ENOSPC in that sandbox only (another still
// writes; the host's filesystem never sees the excess), metrics read
// its usage, the template is copied into it, the sandbox owns it through
// the idmapping, and a delete unmounts it (its loop device detaches) and
// removes or keeps its image.
func TestDisk(t *testing.T) {
	needDisk(t)
	tpl := t.TempDir()
	if err := os.WriteFile(filepath.Join(tpl, "seed"), []byte("from the template\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tp := startPool(t, Config{Root: diskRoot(t), Disk: 32 << 20, Templates: map[string]string{"t": tpl}})
	a, b := tp.create(nil), tp.create(map[string]any{"template": "t"})
	wsA, wsB := filepath.Join(tp.root, "live", a.ID), filepath.Join(tp.root, "live", b.ID)
	imgA, imgB := filepath.Join(tp.root, "disks", a.ID+".img"), filepath.Join(tp.root, "disks", b.ID+".img")
	for _, ws := range []string{wsA, wsB} {
		if !mounted(ws) {
			t.Fatalf("%s is not a mount point", ws)
		}
		if opts := mountOptions(ws); !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") {
			t.Errorf("%s mounted %v", ws, opts)
		}
		if fi, err := os.Stat(ws); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", ws, fi.Mode(), err)
		}
	}
	out := tp.exec(a.ID, "dd if=/dev/zero of=big bs=1M count=64 2>&1; echo rc=$?; stat -c %u . ; id -u; ls -A | grep -v big")
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "rc=1") {
		t.Errorf("dd past the disk: %q", out)
	}
	if f := strings.Fields(out); len(f) < 2 || f[len(f)-1] != f[len(f)-2] {
		t.Errorf("the sandbox does not own its workspace (owner, uid last): %q", out)
	}
	if fi, err := os.Stat(filepath.Join(wsA, "big")); err != nil || fi.Size() < 24<<20 || fi.Size() > 32<<20 {
		t.Errorf("big on the host: %v %v", fi, err)
	} else if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != DefaultUIDBase {
		t.Errorf("big is uid %d on the host, want the base %d", st.Uid, DefaultUIDBase)
	}
	// The host's filesystem holds no more than the image's size for it.
	if fi, err := os.Stat(imgA); err != nil || fi.Size() != 32<<20 || fi.Sys().(*syscall.Stat_t).Blocks*512 > 32<<20 {
		t.Errorf("image: %v %v", fi, err)
	}
	if out := tp.exec(b.ID, "cat seed && dd if=/dev/zero of=f bs=1M count=8 2>/dev/null; echo rc=$?"); !strings.HasPrefix(out, "from the template\n") || !strings.HasSuffix(out, "rc=0") {
		t.Errorf("b after a filled its disk: %q", out)
	}
	if m := tp.metrics(a.ID); m.DiskBytes < 24<<20 || m.DiskBytes > 32<<20 {
		t.Errorf("a's disk_bytes %d", m.DiskBytes)
	}
	if m := tp.metrics(b.ID); m.DiskBytes < 8<<20 || m.DiskBytes > 10<<20 {
		t.Errorf("b's disk_bytes %d", m.DiskBytes)
	}
	// Read from the filesystem each time, never a cached walk.
	tp.exec(b.ID, "dd if=/dev/zero of=g bs=1M count=4 2>/dev/null")
	if m := tp.metrics(b.ID); m.DiskBytes < 12<<20 || m.DiskBytes > 14<<20 {
		t.Errorf("b's disk_bytes after 4 MiB more: %d", m.DiskBytes)
	}

	for _, c := range []struct {
		id, ws, img string
		keep        bool
	}{{a.ID, wsA, imgA, false}, {b.ID, wsB, imgB, true}} {
		loops := loopsFor(c.img)
		if len(loops) != 1 {
			t.Errorf("loop devices of %s: %v", c.img, loops)
		} else if dio, _ := os.ReadFile("/sys/block/" + loops[0] + "/loop/dio"); string(dio) != "1\n" {
			t.Errorf("%s: direct I/O %q", loops[0], dio)
		}
		q := ""
		if c.keep {
			q = "?keep_workspace=true"
		}
		if code, body := tp.do("DELETE", "/v2/sandboxes/"+c.id+q, nil); code != 204 {
			t.Fatalf("delete: %d %s", code, body)
		}
		if mounted(c.ws) {
			t.Errorf("%s still mounted after the delete", c.ws)
		}
		if _, err := os.Stat(c.ws); !os.IsNotExist(err) {
			t.Errorf("workspace after delete: %v", err)
		}
		if _, err := os.Stat(c.img); !os.IsNotExist(err) {
			t.Errorf("image after delete: %v", err)
		}
		kept := filepath.Join(tp.root, "kept", c.id+".img")
		if c.keep != isExt4(kept) {
			t.Errorf("keep=%v: kept image ext4 %v", c.keep, isExt4(kept))
		}
		// The sandbox's own mount namespace may hold the filesystem a
		// moment after the delete returns; the device goes with it.
		waitFor(t, 5*time.Second, "the loop device of "+c.img+" detached", func() bool {
			return len(loopsFor(c.img)) == 0 && len(loopsFor(kept)) == 0
		})
	}
}

// TestDiskTemplateTooBig: a template larger than --disk fails the
// create with ENOSPC named, and leaves no mount, image or loop device.
func TestDiskTemplateTooBig(t *testing.T) {
	needDisk(t)
	tpl := t.TempDir()
	f, err := os.Create(filepath.Join(tpl, "big"))
	if err == nil {
		err = f.Truncate(40 << 20) // sparse here, 40 MiB of zeros once copied
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	tp := startPool(t, Config{Root: diskRoot(t), Disk: MinDisk, Templates: map[string]string{"big": tpl}})
	code, body := tp.do("POST", "/v2/sandboxes", map[string]any{"template": "big"})
	if code != 500 || !strings.Contains(string(body), "no space left on device") {
		t.Errorf("create: %d %s", code, body)
	}
	if m := mountsUnder(filepath.Join(tp.root, "live")); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	images, _ := filepath.Glob(filepath.Join(tp.root, "disks", "*"))
	if len(images) != 0 {
		t.Errorf("images left: %v", images)
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, _ := os.ReadFile(f); strings.HasPrefix(string(b), tp.root) {
			t.Errorf("%s: %s", f, b)
		}
	}
}

// TestDiskNoMkfs: a pool with Disk refuses to start without mkfs.ext4,
// naming the package that has it.
func TestDiskNoMkfs(t *testing.T) {
	needRoot(t)
	t.Setenv("PATH", t.TempDir())
	_, err := New(Config{Root: t.TempDir(), Disk: 32 << 20, Listen: "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "e2fsprogs") || !strings.Contains(err.Error(), "mkfs.ext4") {
		t.Fatalf("New without mkfs.ext4: %v", err)
	}
}

// TestDiskSize: --disk below MinDisk is refused, by New and the flag.
func TestDiskSize(t *testing.T) {
	for _, c := range []struct {
		n  int64
		ok bool
	}{{MinDisk, true}, {1 << 30, true}, {MinDisk - 1, false}, {1 << 20, false}, {-1, false}} {
		if err := checkDisk(c.n); (err == nil) != c.ok {
			t.Errorf("checkDisk(%d): %v", c.n, err)
		}
	}
	for _, c := range []struct {
		arg  string
		want int64
		err  string
	}{{"1GiB", 1 << 30, ""}, {"16MiB", 16 << 20, ""}, {"1MiB", 0, "at least 16MiB"}, {"lots", 0, "--disk"}} {
		fs, o, finish := flags()
		if err := fs.Parse([]string{"--disk", c.arg}); err != nil {
			t.Fatal(err)
		}
		err := finish(map[string]bool{"disk": true})
		if c.err == "" && (err != nil || o.cfg.Disk != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("--disk %s: %d, %v", c.arg, o.cfg.Disk, err)
		}
	}
}

// TestMakeDiskFailures: a mkfs that fails, and an image that does not
// mount, leave no image, no mount and no loop device behind.
func TestMakeDiskFailures(t *testing.T) {
	needDisk(t)
	bin := t.TempDir()
	for _, c := range []struct{ name, script, want string }{
		{"mkfs fails", "#!/bin/sh\necho 'no such thing' >&2\nexit 1\n", "no such thing"},
		{"mount fails", "#!/bin/sh\nexit 0\n", "mounting"}, // an image of zeros is no filesystem
	} {
		t.Run(c.name, func(t *testing.T) {
			mkfs := filepath.Join(bin, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(mkfs, []byte(c.script), 0o755); err != nil {
				t.Fatal(err)
			}
			root := diskRoot(t)
			dir, image := filepath.Join(root, "ws"), filepath.Join(root, "ws.img")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			err := makeDisk(context.Background(), mkfs, image, dir, 32<<20, DefaultUIDBase)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("makeDisk: %v", err)
			}
			if _, err := os.Stat(image); !os.IsNotExist(err) {
				t.Errorf("image left: %v", err)
			}
			if mounted(dir) {
				t.Errorf("%s left mounted", dir)
			}
			if l := loopsFor(image); len(l) != 0 {
				t.Errorf("loop devices left: %v", l)
			}
		})
	}
}

// TestDiskStale: a pool started on the root of one killed with its
// workspaces mounted unmounts them and removes their images.
func TestDiskStale(t *testing.T) {
	needDisk(t)
	mkfs, _ := diskTool(false)
	root := diskRoot(t)
	if _, err := poolRoot(root); err != nil {
		t.Fatal(err)
	}
	dir, image := filepath.Join(root, "live", "stale"), filepath.Join(root, "disks", "stale.img")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := makeDisk(context.Background(), mkfs, image, dir, 16<<20, DefaultUIDBase); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := os.Open(filepath.Join(dir, "f")) // in use: a plain unmount would fail
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Root: root, Listen: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if mounted(dir) {
		t.Error("the stale workspace is still mounted")
	}
	for _, f := range []string{dir, image} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", f, err)
		}
	}
	busy.Close()
	waitFor(t, 5*time.Second, "the stale loop device detached", func() bool { return len(loopsFor(image)) == 0 })
}

// TestUnmountDiskBusy: a filesystem still in use (a file open on it) is
// detached at once and released with its last user, its loop device
// with it; an unmount of what is no mount is no error.
func TestUnmountDiskBusy(t *testing.T) {
	needDisk(t)
	mkfs, _ := diskTool(false)
	root := diskRoot(t)
	dir, image := filepath.Join(root, "ws"), filepath.Join(root, "ws.img")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := makeDisk(context.Background(), mkfs, image, dir, MinDisk, DefaultUIDBase); err != nil {
		t.Fatal(err)
	}
	busy, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unmountDisk(dir); err != nil || mounted(dir) {
		t.Fatalf("unmount of a busy disk: %v, still mounted %v", err, mounted(dir))
	}
	if len(loopsFor(image)) != 1 {
		t.Errorf("the loop device went while a file was open on it")
	}
	busy.Close()
	waitFor(t, 5*time.Second, "the loop device detached", func() bool { return len(loopsFor(image)) == 0 })
	if err := unmountDisk(dir); err != nil {
		t.Errorf("unmount of a plain directory: %v", err)
	}
}

// TestDiskRoom: a pool whose images could outgrow the host's free
// space is warned about, one that fits is not.
func TestDiskRoom(t *testing.T) {
	dir := t.TempDir()
	if w := diskRoom(dir, MinDisk, 1); w != "" {
		t.Errorf("one 16 MiB image: %q", w)
	}
	if w := diskRoom(dir, 1<<50, 64); !strings.Contains(w, "64 workspaces (--max and --warm) of --disk 1024TiB could take 65536TiB") {
		t.Errorf("64 PiB: %q", w)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:            "/a/b",
		`/a\040b`:         "/a b",
		`/a\011\012\134x`: "/a\t\n\\x",
		`/a\04`:           `/a\04`,
		`/a\999`:          `/a\999`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAttachLoopConcurrent: attaches racing for the same free device
// (LOOP_CTL_GET_FREE names it to all of them) each end with a device of
// their own, the losers retrying on EBUSY.
func TestAttachLoopConcurrent(t *testing.T) {
	needDisk(t)
	dir := t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	devs, errs := make([]string, n), make([]error, n)
	start := make(chan struct{})
	for i := range n {
		image := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(image, make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			dev, err := attachLoop(image)
			if err != nil {
				errs[i] = err
				return
			}
			devs[i] = dev.Name()
			t.Cleanup(func() { dev.Close() }) // autoclear: closing detaches it
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("attach %d: %v", i, err)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(devs)))) != n {
		t.Errorf("devices %v", devs)
	}
}

// TestDiskClose: Close unmounts every workspace, warm ones included, and
// removes their images.
func TestDiskClose(t *testing.T) {
	needDisk(t)
	root := diskRoot(t)
	p, err := New(Config{Root: root, Warm: 1, Disk: 16 << 20, Listen: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := p.Create(context.Background(), CreateRequest{}, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "a warm sandbox", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.warm) == 1
	})
	images, _ := filepath.Glob(filepath.Join(root, "disks", "*.img"))
	if len(images) != 3 || len(mountsUnder(filepath.Join(root, "live"))) != 3 {
		t.Fatalf("images %v, mounts %v", images, mountsUnder(filepath.Join(root, "live")))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(filepath.Join(root, "live")); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "disks")); len(ents) != 0 {
		t.Errorf("images left: %v", ents)
	}
	waitFor(t, 5*time.Second, "every loop device detached", func() bool {
		for _, img := range images {
			if len(loopsFor(img)) > 0 {
				return false
			}
		}
		return true
	})
}

// BenchmarkCreateDisk is a cold create and its delete, with a plain
// workspace directory and with --disk 1GiB (mkfs, loop, mount; then
// unmount and removal), reported apart as create-ns and delete-ns. disk
// alone is makeDisk and its removal without a sandbox: the share --disk
// adds.
func BenchmarkCreateDisk(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the pool needs root here")
	}
	if _, err := diskTool(false); err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name string
		disk int64
	}{{"dir", 0}, {"disk-1GiB", 1 << 30}} {
		b.Run(c.name, func(b *testing.B) {
			root := b.TempDir()
			b.Cleanup(func() { unmountStale(root) })
			p, err := New(Config{Root: root, Disk: c.disk, Listen: "127.0.0.1:1"})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			var create, del time.Duration
			for b.Loop() {
				t0 := time.Now()
				s, err := p.Create(context.Background(), CreateRequest{}, "")
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := p.Delete(context.Background(), s.ID, false); err != nil {
					b.Fatal(err)
				}
				create, del = create+t1.Sub(t0), del+time.Since(t1)
			}
			b.ReportMetric(float64(create.Nanoseconds())/float64(b.N), "create-ns")
			b.ReportMetric(float64(del.Nanoseconds())/float64(b.N), "delete-ns")
		})
	}
	b.Run("disk-alone-1GiB", func(b *testing.B) {
		mkfs, _ := diskTool(false)
		root := b.TempDir()
		b.Cleanup(func() { unmountStale(root) })
		dir, image := filepath.Join(root, "ws"), filepath.Join(root, "ws.img")
		for b.Loop() {
			if err := os.Mkdir(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			if err := makeDisk(context.Background(), mkfs, image, dir, 1<<30, DefaultUIDBase); err != nil {
				b.Fatal(err)
			}
			if err := unmountDisk(dir); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(dir); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(image); err != nil {
				b.Fatal(err)
			}
		}
	})
}
