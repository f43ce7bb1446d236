package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

func TestMain(m *testing.M) {
	Dispatch(os.Args)
	if len(os.Args) > 1 && os.Args[1] == probeArg {
		os.Exit(probeCalls()) // the attacker of TestConfined, inside a sandbox
	}
	code := m.Run()
	if testMaskDir != "" {
		_ = os.RemoveAll(testMaskDir)
	}
	os.Exit(code)
}

// newSandbox starts a sandbox on a fresh workspace, or skips where the
// machine cannot have one.
func newSandbox(t *testing.T, cfg Config) (*Sandbox, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	ws := t.TempDir()
	cfg.Workspace = ws
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

func run(t *testing.T, s *Sandbox, script string) (string, error) {
	t.Helper()
	return runArgv(t, s, "/bin/sh", "-c", script)
}

func runArgv(t *testing.T, s *Sandbox, argv ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.Wrap(cmd, cmd.Start)(); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

func TestView(t *testing.T) {
	s, ws := newSandbox(t, Config{})
	cases := []struct {
		name, script, want string
		fails              bool
	}{
		{"id", "id -u", "65534\n", false},
		{"shadow", "cat /etc/shadow", "Permission denied", true},
		{"usr read-only", "touch /usr/x", "Read-only file system", true},
		{"root absent", "ls -d /root", "No such file", true},
		{"home absent", "ls /home", "No such file", true},
		{"ps", "ps -e -o pid= | wc -l", "", false},
		{"workspace", "echo hi > " + ws + "/f && cat " + ws + "/f", "hi\n", false},
		{"hostname", "cat /proc/sys/kernel/hostname", "sandbox\n", false},
		{"tmp", "stat -c '%a %U' /tmp /dev/shm; ls -A / | grep -c tmpfs", "1777 root\n1777 root\n0\n", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, s, c.script)
			if (err != nil) != c.fails || !strings.Contains(out, c.want) {
				t.Errorf("%s: %q %v", c.script, out, err)
			}
			t.Logf("%s: %q", c.script, out)
		})
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "f"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("owner on the host: %d %v", st.Uid, err)
	}
	err := s.Do(func() error { _, err := os.ReadFile("/etc/shadow"); return err })
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Do read /etc/shadow: %v", err)
	}
	err = s.Do(func() error { _, err := os.Stat("/root"); return err })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Do stat /root: %v", err)
	}
}

func TestNetworkNone(t *testing.T) {
	// A port of the host's loopback, which the sandbox must not reach.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	probe := "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; (exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && echo reached || echo refused"
	for _, c := range []struct{ network, want string }{
		{NetworkHost, "reached"},
		{NetworkNone, "lo\nrefused\n"},
	} {
		s, _ := newSandbox(t, Config{Network: c.network})
		out, err := runArgv(t, s, "/bin/bash", "-c", probe)
		if err != nil || !strings.HasSuffix(out, c.want+map[bool]string{true: "\n", false: ""}[c.network == NetworkHost]) {
			t.Errorf("network %s: %q %v", c.network, out, err)
		}
	}
}

func TestLimits(t *testing.T) {
	s, _ := newSandbox(t, Config{Pids: 16, Memory: 128 << 20})
	if s.cg == nil {
		t.Skip("no cgroups here:", s.warnings)
	}
	// The process limit: 32 sleepers cannot all start.
	out, _ := run(t, s, "for i in $(seq 32); do sleep 5 & done 2>&1 | head -1; kill $(jobs -p) 2>/dev/null; true")
	if !strings.Contains(out, "Resource temporarily unavailable") && !strings.Contains(out, "fork") {
		t.Errorf("pids: %q", out)
	}
	// The memory limit kills the process that goes over it, alone.
	before := s.OOMKills()
	out, err := run(t, s, "exec python3 -c 'b = bytearray(512 << 20)'")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("memory: %q %v", out, err)
	}
	if s.OOMKills() != before+1 {
		t.Errorf("oom kills %d -> %d", before, s.OOMKills())
	}
	if out, err := run(t, s, "echo alive"); out != "alive\n" || err != nil {
		t.Errorf("after the kill: %q %v", out, err)
	}
}

// TestRestart: when init dies (the OOM killer may choose it), the next
// start builds a new sandbox instead of failing forever.
func TestRestart(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	first := s.cur
	_ = first.init.Process.Kill()
	<-first.done
	if out, err := run(t, s, "echo again"); out != "again\n" || err != nil {
		t.Fatalf("after init died: %q %v", out, err)
	}
	if s.cur == first {
		t.Error("no new instance")
	}
	if err := s.Do(func() error { _, err := os.Stat("/etc/hostname"); return err }); err != nil {
		t.Errorf("Do after restart: %v", err)
	}
}

// TestDoSpill: more concurrent Do calls than pool threads all run in the
// view, none waits behind a busy one.
func TestDoSpill(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	release := make(chan struct{})
	var started sync.WaitGroup
	errs := make(chan error, 2*doThreads)
	for range 2 * doThreads {
		started.Add(1)
		go func() {
			errs <- s.Do(func() error {
				started.Done()
				<-release
				_, err := os.Stat("/root")
				if !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("/root in the view: %v", err)
				}
				return nil
			})
		}()
	}
	started.Wait() // every call is running at once
	close(release)
	for range 2 * doThreads {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestClose: closing ends every process in the sandbox and removes its
// groups.
func TestClose(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	s, err := New(Config{Workspace: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "600")
	if err := s.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	// An orphan too: its parent exits at once.
	orphan := exec.Command("/bin/sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!")
	var pidOut strings.Builder
	orphan.Stdout = &pidOut
	if err := s.Wrap(orphan, orphan.Start)(); err != nil {
		t.Fatal(err)
	}
	_ = orphan.Wait()
	dirs := []string{}
	if s.cg != nil {
		dirs = append(dirs, s.cg.v2)
		for _, d := range s.cg.v1 {
			dirs = append(dirs, d)
		}
	}
	// The plane's supervisor reaps its process, as a plane does.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a sandboxed process outlived Close")
	}
	init := s.cur.init.Process.Pid
	if err := syscall.Kill(init, 0); err == nil {
		t.Errorf("init %d alive after Close", init)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); d != "" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("group %s left: %v", d, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2GiB", 2 << 30, true}, {"512MiB", 512 << 20, true}, {"64KiB", 64 << 10, true}, {"1.5GiB", 3 << 29, true},
		{"1024", 1024, true}, {"3g", 3 << 30, true}, {" 8 MB ", 8 << 20, true},
		{"", 0, false}, {"GiB", 0, false}, {"-1GiB", 0, false}, {"0", 0, false}, {"1PiB", 0, false},
		{"99999999999TiB", 0, false}, {"1e3MiB", 0, false}, {"1..2GiB", 0, false}, {"NaN", 0, false},
	} {
		got, err := ParseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v", c.in, got, err)
		}
	}
	if FormatSize(2<<30) != "2GiB" || FormatSize(1536<<20) != "1536MiB" || FormatSize(1000) != "1000" {
		t.Error("FormatSize")
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"2GiB", "1.5g", "12", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 1 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}

func TestUnsafeWorkspace(t *testing.T) {
	for ws, bad := range map[string]bool{
		"/": true, "/root": true, "/home": true, "/home/alice": true, "/home/alice/": true, "/etc": true,
		"/etc/x": true, "/libexec/x": true, "/lib64": true, "/usr/local/work": true, "/proc/1": true, "/tmp": true, "/var": true, "/opt": true, "/dev/shm": true,
		"/tmp/ws": false, "/home/alice/project": false, "/root/project/workspace": false, "/srv/sandbox": false,
		"/var/lib/aiod/workspace": false, "/opt/work": false, "/tmpx": false,
	} {
		if got := unsafeWorkspace(ws) != ""; got != bad {
			t.Errorf("unsafeWorkspace(%q) = %q", ws, unsafeWorkspace(ws))
		}
	}
}

// TestWorkspaceOwner: an empty workspace root owns is given to the
// account; one with content keeps its owner (a warning says so), and
// KeepOwner changes nothing.
func TestWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	owner := func(p string) uint32 {
		var st syscall.Stat_t
		_ = syscall.Stat(p, &st)
		return st.Uid
	}
	empty, full, kept := t.TempDir(), t.TempDir(), t.TempDir()
	_ = os.WriteFile(filepath.Join(full, "mine"), nil, 0o600)
	for _, c := range []struct {
		dir  string
		keep bool
		want uint32
		warn bool
	}{{empty, false, 65534, false}, {full, false, 0, true}, {kept, true, 0, true}} {
		s, err := New(Config{Workspace: c.dir, KeepOwner: c.keep}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if owner(c.dir) != c.want || (len(s.warnings) > 0) != c.warn {
			t.Errorf("%s keep=%v: owner %d, warnings %q", c.dir, c.keep, owner(c.dir), s.warnings)
		}
		s.Close()
	}
	if _, err := New(Config{Workspace: "/root"}, nil); err == nil || !strings.Contains(err.Error(), "home directory") || owner("/root") != 0 {
		t.Errorf("/root: %v, owner %d", err, owner("/root"))
	}
}

// TestAbstractSockets: the host's abstract Unix sockets are out of reach
// with either network (Landlock's scope under the host's network, the
// namespace under none) where the kernel can scope them.
func TestAbstractSockets(t *testing.T) {
	if landlockABI() < 6 {
		t.Skip("Landlock cannot scope abstract sockets here")
	}
	name := "@aiod-sandbox-test-" + strconv.Itoa(os.Getpid())
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	probe := `import socket; s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0` + name[1:] + `"); print("connected")
except OSError as e:
    print("refused", e.errno)`
	for _, network := range []string{NetworkHost, NetworkNone} {
		s, _ := newSandbox(t, Config{Network: network})
		out, err := runArgv(t, s, "/usr/bin/python3", "-c", probe)
		if err != nil || !strings.HasPrefix(out, "refused") {
			t.Errorf("network %s: %q %v", network, out, err)
		}
		// Sockets of the sandbox's own stay usable inside it.
		out, err = run(t, s, `python3 -c '
import socket, os
a = socket.socket(socket.AF_UNIX); a.bind("\0inside"); a.listen(1)
b = socket.socket(socket.AF_UNIX); b.connect("\0inside"); print("ok")'`)
		if err != nil || out != "ok\n" {
			t.Errorf("network %s, own socket: %q %v", network, out, err)
		}
	}
}

// TestNoPrivilege: neither a sandboxed process nor a Do thread can
// change the host's kernel settings, see its secrets in /proc, or use a
// descriptor the daemon inherited.
func TestNoPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	// A descriptor inherited without close-on-exec, as from a shell.
	fd, err := syscall.Open("/", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	s, _ := newSandbox(t, Config{})
	before, _ := os.ReadFile("/proc/sys/kernel/domainname")
	out, err := run(t, s, "echo x > /proc/sys/kernel/domainname; head -c 1 /proc/kcore | wc -c; ls /proc/self/fd")
	if err != nil || !strings.Contains(out, "Read-only file system") || !strings.Contains(out, "\n0\n") {
		t.Errorf("command: %q %v", out, err)
	}
	if strings.Contains(out, "\n"+strconv.Itoa(fd)+"\n") && fd > 3 {
		t.Errorf("the inherited descriptor %d reached the sandbox: %q", fd, out)
	}
	werr := s.Do(func() error { return os.WriteFile("/proc/sys/kernel/domainname", []byte("x"), 0) })
	if werr == nil {
		t.Error("a Do thread wrote a kernel setting")
	}
	if after, _ := os.ReadFile("/proc/sys/kernel/domainname"); string(after) != string(before) {
		t.Errorf("the host's domain name changed: %q -> %q", before, after)
	}
	var euid int
	_ = s.Do(func() error { euid = syscall.Geteuid(); return nil })
	if euid != 65534 {
		t.Errorf("a Do thread runs as %d", euid)
	}
}

// TestTerminal: a terminal started in the sandbox has a name there, from
// the sandbox's own devpts, and belongs to the account.
func TestTerminal(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	cmd := exec.Command("/bin/sh", "-c", "t=$(tty); echo \"$t $(stat -c %u $t) $(ls /dev/pts | wc -l)\"")
	var f *os.File
	if err := s.Wrap(cmd, func() (err error) { f, err = pty.Start(cmd); return err })(); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, _ := io.ReadAll(f) // EIO once the shell exits
	_ = cmd.Wait()
	if got := strings.TrimSpace(string(out)); got != "/dev/pts/0 65534 2" {
		t.Errorf("terminal: %q", got)
	}
}

// TestNetworkEgress: under NetworkEgress the sandbox has a namespace of
// its own that Attach is given before anything runs in it (here a veth
// pair inside it), again for an init started after one died; resolv.conf names
// the nameserver; DialContext dials inside; an Attach error fails the
// start.
func TestNetworkEgress(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	var pids []int
	attach := func(pid int) error {
		pids = append(pids, pid)
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "ip", "link", "add", "eg0", "type", "veth", "peer", "name", "eg1").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	s, _ := newSandbox(t, Config{Network: NetworkEgress, Attach: attach, Nameserver: netip.MustParseAddr("10.9.8.1")})
	probe := "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort; cat /etc/resolv.conf"
	want := "eg0\neg1\nlo\n# aiod: this sandbox's resolver (its egress link's gateway)\nnameserver 10.9.8.1\n"
	if out, err := run(t, s, probe); out != want || err != nil {
		t.Errorf("inside: %q %v", out, err)
	}
	if len(pids) != 1 || pids[0] != s.cur.init.Process.Pid {
		t.Errorf("Attach got %v, init is %d", pids, s.cur.init.Process.Pid)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err := s.DialContext(context.Background(), "tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("DialContext reached the host's loopback")
	}
	first := s.cur
	_ = first.init.Process.Kill()
	<-first.done
	if out, err := run(t, s, probe); out != want || err != nil {
		t.Errorf("after a restart: %q %v", out, err)
	}
	if len(pids) != 2 || pids[1] != s.cur.init.Process.Pid {
		t.Errorf("Attach after the restart got %v", pids)
	}
	if r := s.Report(); r.Network != NetworkEgress || !slices.Contains(r.Namespaces, "net") {
		t.Errorf("report %+v", r)
	}

	// A restart whose Attach fails leaves the ended instance current:
	// the next use tries again, and nothing ends it twice (a panic).
	fail := true
	attach2 := func(pid int) error {
		if fail {
			return errors.New("attach failed")
		}
		return attach(pid)
	}
	s.cfg.Attach = attach2
	cur := s.cur
	_ = cur.init.Process.Kill()
	<-cur.done
	if _, err := run(t, s, "true"); err == nil || !strings.Contains(err.Error(), "attach failed") {
		t.Errorf("a start whose Attach fails: %v", err)
	}
	if _, err := run(t, s, "true"); err == nil {
		t.Error("a second start whose Attach fails succeeded")
	}
	fail = false
	if out, err := run(t, s, "echo back"); out != "back\n" || err != nil {
		t.Errorf("after Attach works again: %q %v", out, err)
	}

	_, err = New(Config{Workspace: t.TempDir(), Network: NetworkEgress, Attach: func(int) error { return errors.New("no way out") }}, nil)
	if err == nil || !strings.Contains(err.Error(), "no way out") {
		t.Errorf("a failing Attach: %v", err)
	}
	if _, err := New(Config{Workspace: t.TempDir(), Network: NetworkEgress}, nil); err == nil {
		t.Error("egress without Attach started")
	}
}
