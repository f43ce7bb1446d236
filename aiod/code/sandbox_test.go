package code

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Dispatch(os.Args) // a sandbox's init is this test binary
	os.Exit(m.Run())
}

// newSandbox starts a sandbox on a fresh workspace (closed at the end
// of the test), or skips where the machine cannot have one.
func newSandbox(t testing.TB, network string) (*sandbox.Sandbox, string) {
	t.Helper()
	return planetest.Sandbox(t, sandbox.Config{Network: network})
}

// sandboxed is a plane whose kernels and node sessions run in a sandbox.
func sandboxed(t *testing.T, network string) (*harness, *sandbox.Sandbox, string) {
	sb, ws := newSandbox(t, network)
	h := newHarness(t, Config{Sandbox: sb, Workspace: ws, Python: "/usr/bin/python3", InterruptGrace: time.Second,
		KernelStartTimeout: 30 * time.Second})
	return h, sb, ws
}

// TestSandboxPython runs cells on a kernel inside a sandbox: it is the
// sandbox account, sees the view and not the host, writes the workspace
// as that account, and speaks to the daemon over unix sockets.
func TestSandboxPython(t *testing.T) {
	h, sb, ws := sandboxed(t, sandbox.NetworkHost)
	cases := []struct {
		name, code, stdout, ename string
	}{
		{"uid", "import os; print(os.getuid(), os.getgid())", "65534 65534\n", ""},
		{"shadow", "open('/etc/shadow')", "", "PermissionError"},
		{"root absent", "import os; os.listdir('/root')", "", "FileNotFoundError"},
		{"workspace", "open('f.txt', 'w').write('hi'); print(open('" + ws + "/f.txt').read())", "hi\n", ""},
		{"home is the workspace", "import os; print(os.environ['HOME'] == os.getcwd() == '" + ws + "')", "True\n", ""},
		{"own pid namespace", "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[0])", "1\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, rp := h.exec("python", "a", c.code)
			if c.ename == "" {
				if r.Status != StatusOK || *r.Stdout != c.stdout {
					t.Fatalf("%s", rp.raw)
				}
				return
			}
			if r.Status != StatusError || r.out(t, 0).Ename != c.ename {
				t.Fatalf("%s", rp.raw)
			}
		})
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "f.txt"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("f.txt on the host: uid %d, %v", st.Uid, err)
	}

	t.Run("connection file and sockets in the view", func(t *testing.T) {
		s, _ := h.p.e.reg.Get(Python, "a")
		k := s.rt.(*kernel)
		if !strings.HasPrefix(k.dir, "/tmp/aiod-k-") {
			t.Fatalf("connection dir %q", k.dir)
		}
		if _, err := os.Stat(k.dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("connection dir %s on the host: %v", k.dir, err)
		}
		var dir, file, sock os.FileInfo
		err := sb.Do(func() (err error) {
			if dir, err = os.Stat(k.dir); err == nil {
				if file, err = os.Stat(k.dir + "/kernel.json"); err == nil {
					sock, err = os.Stat(k.dir + "/k-1")
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		owner := func(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
		// The kernel rewrites the file and may set the sticky bit on its
		// directory (jupyter_client does); the permissions must stay.
		if !dir.IsDir() || dir.Mode().Perm() != 0o700 || file.Mode() != 0o600 || sock.Mode()&fs.ModeSocket == 0 ||
			owner(dir) != 65534 || owner(file) != 65534 {
			t.Errorf("dir %v uid %d, file %v uid %d, socket %v", dir.Mode(), owner(dir), file.Mode(), owner(file), sock.Mode())
		}
		if !k.alive(2e9) {
			t.Error("heartbeat unanswered")
		}
		if !h.p.e.CloseSession(Python, "a") {
			t.Fatal("no session a")
		}
		err = sb.Do(func() error { _, err := os.Stat(k.dir); return err })
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("connection dir after close: %v", err)
		}
	})

	t.Run("timeout interrupts", func(t *testing.T) {
		r, rp := h.exec("python", "b", "while True: pass", "timeout", 1)
		if r.Status != StatusTimeout || r.out(t, 0).Ename != "KeyboardInterrupt" {
			t.Fatalf("%s", rp.raw)
		}
	})

	t.Run("node", func(t *testing.T) {
		r, rp := h.exec("javascript", "n", "console.log(process.getuid(), require('fs').existsSync('/root'))")
		if r.Status != StatusOK || *r.Stdout != "65534 false\n" {
			t.Fatalf("%s", rp.raw)
		}
	})
}

// TestSandboxNetworkNone runs a cell in a sandbox with a network
// namespace of its own, where no loopback port of the daemon's is
// reachable: the kernel's channels are unix sockets.
func TestSandboxNetworkNone(t *testing.T) {
	h, _, _ := sandboxed(t, sandbox.NetworkNone)
	r, rp := h.exec("python", "", "import socket; print(len(socket.if_nameindex()), 21 * 2)")
	if r.Status != StatusOK || *r.Stdout != "1 42\n" {
		t.Fatalf("%s", rp.raw)
	}
	r, rp = h.exec("javascript", "", "process.getuid()")
	if r.Status != StatusOK || r.out(t, 0).Data["text/plain"] != "65534" {
		t.Fatalf("%s", rp.raw)
	}
}

// TestSandboxInterpreterOutside refuses an interpreter the sandbox
// cannot see, naming it and the fix, instead of a kernel that never
// comes up.
func TestSandboxInterpreterOutside(t *testing.T) {
	sb, ws := newSandbox(t, sandbox.NetworkHost)
	outside := t.TempDir() // a host directory that is not in the view
	for _, c := range []struct{ name, target string }{{"python3", "/usr/bin/python3"}, {"node", "/usr/bin/node"}} {
		if err := os.Symlink(c.target, filepath.Join(outside, c.name)); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, Config{Sandbox: sb, Workspace: ws, Python: filepath.Join(outside, "python3"), Node: filepath.Join(outside, "node")})
	for _, c := range []struct{ lang, name, fix string }{
		{"python", "python3", "AIO_PYTHON_BIN=/usr/bin/python3"},
		{"javascript", "node", "AIO_NODE_BIN=/usr/bin/node"},
	} {
		rp := h.do("POST", "/v2/code/execute", map[string]any{"language": c.lang, "code": "1"})
		if rp.status != http.StatusServiceUnavailable || !strings.Contains(rp.Message, filepath.Join(outside, c.name)+" is outside the sandbox") ||
			!strings.Contains(rp.raw, c.fix) {
			t.Errorf("%s: %d %s", c.lang, rp.status, rp.raw)
		}
	}
	if rp := h.do("GET", "/v2/code/info", nil); !strings.Contains(rp.raw, `"python":{"available":false`) {
		t.Errorf("info: %s", rp.raw)
	}
}

// TestSandboxIPCNoRedirect: a socket path the sandbox replaced with a
// link to one of the host's sockets is refused, never dialled (every
// sandbox process runs as the kernel's account and can do that).
func TestSandboxIPCNoRedirect(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.NetworkHost)
	hostDir := t.TempDir()
	hostSock := filepath.Join(hostDir, "host.sock")
	ln, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dir string
	if err := sb.Do(func() error {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "aiod-k-"); err != nil {
			return err
		}
		return os.Symlink(hostSock, dir+"/k-1")
	}); err != nil {
		t.Fatal(err)
	}
	k := &kernel{spec: kernelSpec{sb: sb}, exited: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	dials, err := k.resolveIPC(ctx, []string{dir + "/k-1"})
	if err == nil || dials != nil {
		t.Errorf("a linked socket path resolved: %v %v", dials, err)
	}
	// A link in the middle of the path is refused too.
	if err := sb.Do(func() error { return os.Symlink(hostDir, dir+"/d") }); err != nil {
		t.Fatal(err)
	}
	if dials, err := k.resolveIPC(ctx, []string{dir + "/d/host.sock"}); err == nil || dials != nil {
		t.Errorf("a linked directory resolved: %v %v", dials, err)
	}
}
