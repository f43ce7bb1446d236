package aiod

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The isolation suite (issue 12) runs the real aiod with --isolation
// namespaces and shows, from a command, a terminal and a python cell,
// that what runs inside cannot read the host's secrets, see or signal
// its processes, reach the daemon under --network none, exhaust its
// processes or memory, or find the daemon's key. Each test starts its
// own daemon on a fresh workspace; a test that expects containment
// fails when the daemon runs with --isolation none.
//
// Safety: a test here must not harm the host even when the daemon
// contains nothing. Writes to system paths target a fresh name
// (/usr/aiod-isolation-test-<random>) that the test removes; the fork
// bomb and the allocation are bounded (511 processes, 4 GiB) so that
// they are harmless on the host.

// sandboxUID and sandboxGID are the host account sandbox processes run
// as by default (nobody:nogroup on Debian).
const sandboxUID, sandboxGID = 65534, 65534

// isoDaemon is an aiod started with --isolation namespaces.
type isoDaemon struct {
	*harness.Proc
	a    *aio
	ws   string // the workspace, on the host
	init int    // host PID of the sandbox's init, 0 when none was found
}

// isoRand is n random bytes in hex.
func isoRand(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// requireRoot skips a test of the isolation when not root (CI is root).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("isolation namespaces needs root (CI runs as root)")
	}
}

// startIsolated runs aiod with --isolation namespaces on a fresh
// workspace, with the Debian python (the one with ipykernel inside the
// view). key, when set, is the API key the client sends. At cleanup the
// daemon stops, and its sandbox's init, every process of its PID
// namespace and its cgroups must be gone.
func startIsolated(t *testing.T, key string, env []string, args ...string) *isoDaemon {
	t.Helper()
	requireRoot(t)
	ws := t.TempDir()
	env = append([]string{"AIO_PYTHON_BIN=/usr/bin/python3"}, env...)
	p := startAiod(t, env, append([]string{"--workspace", ws, "--isolation", "namespaces"}, args...)...)
	d := &isoDaemon{Proc: p, a: &aio{t: t, base: p.URL, key: key}, ws: ws}
	d.init = sandboxInit(p.Cmd().Process.Pid)
	if d.init == 0 {
		t.Errorf("no sandbox init under the daemon (pid %d)", p.Cmd().Process.Pid)
	}
	groups := cgroupDirs(d.init)
	t.Cleanup(func() {
		left := append(sandboxPids(d.init), d.init)
		p.Stop(t)
		if d.init == 0 {
			return
		}
		waitUntil(t, 10*time.Second, "the sandbox's processes outlived the daemon", func() bool {
			return !slices.ContainsFunc(left, isoAlive)
		})
		for _, g := range groups {
			if _, err := os.Stat(g); err == nil {
				t.Errorf("cgroup %s left behind", g)
			}
		}
	})
	return d
}

// isoAlive reports whether pid is a process that has not exited (a
// zombie has).
func isoAlive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !bytes.Contains(st, []byte(") Z "))
}

// sandboxInit is the host PID of the sandbox init started by the
// process daemon (its child run as __aiod-sandbox-init), or 0.
func sandboxInit(daemon int) int {
	ppid := regexp.MustCompile(`(?m)^PPid:\s+` + strconv.Itoa(daemon) + `$`)
	for _, pid := range processesWith("__aiod-sandbox-init") {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil && ppid.Match(st) {
			return pid
		}
	}
	return 0
}

// sandboxPids lists, with host PIDs, the live processes of init's PID
// namespace (init included).
func sandboxPids(init int) []int {
	if init == 0 {
		return nil
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
	if err != nil {
		return nil
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns && isoAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupDirs are the sandbox's cgroup directories found on the host
// under /sys/fs/cgroup (v1: one per controller; v2: one).
func cgroupDirs(init int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", init))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "aiod-sandbox") {
			continue
		}
		cands := []string{filepath.Join("/sys/fs/cgroup", parts[2])}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				cands = append(cands, filepath.Join("/sys/fs/cgroup", c, parts[2]))
			}
		}
		for _, c := range cands {
			if fi, err := os.Stat(c); err == nil && fi.IsDir() {
				out = append(out, c)
			}
		}
	}
	return out
}

// command runs a command to its end through /v2/commands and returns
// the answer's data.
func (d *isoDaemon) command(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	if _, ok := body["timeout"]; !ok {
		body["timeout"] = 60
	}
	code, e := d.a.call("POST", "/v2/commands", "/v2/commands", body)
	m := e.obj()
	if code != 200 || !e.Success || m["status"] == "running" {
		t.Fatalf("command %q: %d %s", body["command"], code, e.raw)
	}
	return m
}

// cell runs a python cell in session and returns the answer.
func (d *isoDaemon) cell(t *testing.T, session, code string) (envelope, map[string]any) {
	t.Helper()
	_, e := d.a.call("POST", "/v2/code/execute", "/v2/code/execute", map[string]any{"language": "python", "session_id": session, "code": code, "timeout": 120})
	return e, e.obj()
}

// terminal runs line in a new PTY session over the WebSocket and
// returns what the terminal printed after it, up to an end marker, with
// \r\n as \n.
func (d *isoDaemon) terminal(t *testing.T, id, line string) string {
	t.Helper()
	if code, e := d.a.call("POST", "/v2/pty/sessions", "/v2/pty/sessions", map[string]any{"id": id}); code != 200 || e.obj()["session_id"] != id {
		t.Fatalf("pty create: %d %s", code, e.raw)
	}
	hdr := http.Header{}
	if d.a.key != "" {
		hdr.Set("Authorization", "Bearer "+d.a.key)
	}
	c, resp, err := websocket.DefaultDialer.Dial(wsURL(d.URL, "/v2/pty/sessions/"+id+"/ws"), hdr)
	if err != nil {
		t.Fatalf("pty dial: %v %v", err, resp)
	}
	defer c.Close()
	d.a.covered("GET", "/v2/pty/sessions/{id}/ws")
	if first := readUntil(t, c, 10*time.Second, func(map[string]any) bool { return true })[0]; first["type"] != "ready" {
		t.Fatalf("first frame %v", first)
	}
	// The echo of the line holds "$((6*7))", the output "42": only the
	// output ends the read.
	const echoed, end = "__iso_end__$((6*7))\n", "__iso_end__42\n"
	if err := c.WriteJSON(map[string]any{"type": "input", "data": line + "; echo __iso_end__$((6*7))\n"}); err != nil {
		t.Fatal(err)
	}
	out := ""
	readUntil(t, c, 30*time.Second, func(f map[string]any) bool {
		if f["type"] == "output" {
			out += fmt.Sprint(f["data"])
		}
		return strings.Contains(strings.ReplaceAll(out, "\r\n", "\n"), end)
	})
	out = strings.ReplaceAll(ansi.ReplaceAllString(strings.ReplaceAll(out, "\r\n", "\n"), ""), "\r", "")
	if i := strings.Index(out, echoed); i >= 0 {
		out = out[i+len(echoed):]
	}
	out, _, _ = strings.Cut(out, end)
	return out
}

// ansi matches the terminal's control sequences (bracketed paste
// mode); a lone \r goes with them.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// isoMissingLines returns the lines of want that are not whole lines of
// out.
func isoMissingLines(out string, want []string) []string {
	have := strings.Split(out, "\n")
	var miss []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			miss = append(miss, w)
		}
	}
	return miss
}

// writeProbe writes a script into the workspace as root, readable by
// all, and returns its path.
func writeProbe(t *testing.T, ws, name, text string) string {
	t.Helper()
	p := filepath.Join(ws, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkOwnedFile checks that path exists on the host with content,
// owned by the sandbox account.
func checkOwnedFile(t *testing.T, path, content string) {
	t.Helper()
	b, err := os.ReadFile(path)
	fi, serr := os.Stat(path)
	if err != nil || serr != nil {
		t.Errorf("%s on the host: %v %v", path, err, serr)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if string(b) != content || st.Uid != sandboxUID || st.Gid != sandboxGID {
		t.Errorf("%s on the host: %q owned by %d:%d, want %q owned by %d:%d", path, b, st.Uid, st.Gid, content, sandboxUID, sandboxGID)
	}
}

// TestIsolationView: /etc/shadow and a root-only file are unreadable,
// /usr is read-only, /root and /home are absent, and a file written in
// the workspace is the sandbox account's on the host; from a command, a
// terminal and a python cell.
func TestIsolationView(t *testing.T) {
	d := startIsolated(t, "", nil)
	ws := d.ws
	rootOnly := filepath.Join(ws, "rootonly")
	if err := os.WriteFile(rootOnly, []byte("root-only secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	usr := "/usr/aiod-isolation-test-" + isoRand(6) + "-"
	t.Cleanup(func() {
		for _, r := range []string{"command", "terminal", "python"} {
			if err := os.Remove(usr + r); err == nil {
				t.Errorf("%s was created on the host (now removed)", usr+r)
			}
		}
	})
	// Contents go to /dev/null and only errors are printed: a broken
	// sandbox never copies /etc/shadow into the test's log.
	probe := writeProbe(t, ws, "view-probe.sh", fmt.Sprintf(`cat /etc/shadow 2>&1 >/dev/null
cat '%[1]s' 2>&1 >/dev/null
touch '%[2]s'"$1" 2>&1
ls -d /root /home 2>&1
echo "written by $1" > '%[3]s/from-'"$1" && echo wrote
`, rootOnly, usr, ws))
	want := func(runner string) string {
		return fmt.Sprintf(`cat: /etc/shadow: Permission denied
cat: %s: Permission denied
touch: cannot touch '%s%s': Read-only file system
ls: cannot access '/root': No such file or directory
ls: cannot access '/home': No such file or directory
wrote
`, rootOnly, usr, runner)
	}

	t.Run("command", func(t *testing.T) {
		m := d.command(t, map[string]any{"command": "bash " + probe + " command"})
		if m["status"] != "completed" || m["exit_code"] != 0.0 || m["stdout"] != want("command") || m["stderr"] != "" {
			t.Errorf("got status %v exit %v stdout:\n%v\nstderr:\n%v\nwant stdout:\n%s", m["status"], m["exit_code"], m["stdout"], m["stderr"], want("command"))
		}
		checkOwnedFile(t, filepath.Join(ws, "from-command"), "written by command\n")
	})

	t.Run("terminal", func(t *testing.T) {
		out := d.terminal(t, "view", "bash "+probe+" terminal")
		if miss := isoMissingLines(out, strings.Split(strings.TrimSuffix(want("terminal"), "\n"), "\n")); len(miss) > 0 {
			t.Errorf("the terminal printed:\n%s\nlacking the lines %q", out, miss)
		}
		checkOwnedFile(t, filepath.Join(ws, "from-terminal"), "written by terminal\n")
	})

	t.Run("python", func(t *testing.T) {
		e, m := d.cell(t, "view", fmt.Sprintf(`import errno, os
def probe(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
probe("shadow", lambda: open("/etc/shadow").close())
probe("rootonly", lambda: open(%[1]q).close())
probe("usr", lambda: open(%[2]q + "python", "x").close())
probe("root", lambda: os.stat("/root"))
probe("home", lambda: os.stat("/home"))
with open(%[3]q + "/from-python", "w") as f:
    f.write("written by python\n")
print("wrote")
`, rootOnly, usr, ws))
		if want := "shadow EACCES\nrootonly EACCES\nusr EROFS\nroot ENOENT\nhome ENOENT\nwrote\n"; !e.Success || m["status"] != "ok" || m["stdout"] != want {
			t.Errorf("cell: %s\nwant stdout %q", e.raw, want)
		}
		checkOwnedFile(t, filepath.Join(ws, "from-python"), "written by python\n")
	})
}

// TestIsolationProcesses: ps -e shows only the sandbox's processes, the
// daemon's PID is not in /proc, and host processes cannot be signalled
// (the test's own, and one of the sandbox's account); from a command, a
// terminal and a python cell.
func TestIsolationProcesses(t *testing.T) {
	d := startIsolated(t, "", nil)
	daemon, self := d.Cmd().Process.Pid, os.Getpid()
	// A host process of the sandbox's own account: only the PID
	// namespace keeps the sandbox from signalling it.
	host := exec.Command("sleep", "61."+strconv.Itoa(100000+int(time.Now().UnixNano()%900000)))
	host.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxUID, Gid: sandboxGID}}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	hostDone := make(chan error, 1)
	go func() { hostDone <- host.Wait() }()
	t.Cleanup(func() {
		_ = host.Process.Kill()
		<-hostDone
	})
	probe := writeProbe(t, d.ws, "procs-probe.sh", fmt.Sprintf(`ps -e -o pid=,comm=
ls -d /proc/%[1]d 2>&1
kill -0 %[2]d 2>&1
echo "kill exit $?"
kill -TERM %[3]d 2>&1
echo "kill exit $?"
`, daemon, self, host.Process.Pid))
	hostAlive := func(t *testing.T) {
		t.Helper()
		select {
		case err := <-hostDone:
			hostDone <- err
			t.Errorf("the host process of the sandbox's account was signalled: %v", err)
		default:
		}
	}
	// What may run in this sandbox: its init, shells, ps, the kernel.
	sandboxComms := []string{"sandbox-init", "bash", "ps", "python3"}
	psLine := regexp.MustCompile(`^\s*\d+ \S`)
	check := func(t *testing.T, out string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var ps []string
		for len(lines) > 0 && psLine.MatchString(lines[0]) {
			ps, lines = append(ps, strings.TrimSpace(lines[0])), lines[1:]
		}
		for _, l := range ps {
			if f := strings.Fields(l); !slices.Contains(sandboxComms, f[1]) {
				t.Errorf("ps -e lists %q, not a sandbox process (%d processes in all)", l, len(ps))
				break
			}
		}
		if len(ps) == 0 || ps[0] != "1 sandbox-init" {
			t.Errorf("ps -e does not start with the sandbox's init:\n%.300s", out)
		}
		rest := strings.Join(lines, "\n")
		want := fmt.Sprintf("^ls: cannot access '/proc/%d': No such file or directory\n.*kill: \\(%d\\) - No such process\nkill exit 1\n.*kill: \\(%d\\) - No such process\nkill exit 1$",
			daemon, self, host.Process.Pid)
		if !regexp.MustCompile(want).MatchString(rest) {
			t.Errorf("after ps:\n%s\nwant to match %s", rest, want)
		}
	}

	t.Run("command", func(t *testing.T) {
		m := d.command(t, map[string]any{"command": "bash " + probe})
		if m["status"] != "completed" || m["exit_code"] != 0.0 || m["stderr"] != "" {
			t.Errorf("%v", m)
		}
		check(t, fmt.Sprint(m["stdout"]))
		hostAlive(t)
	})
	t.Run("terminal", func(t *testing.T) {
		check(t, d.terminal(t, "procs", "bash "+probe))
		hostAlive(t)
	})
	t.Run("python", func(t *testing.T) {
		e, m := d.cell(t, "procs", fmt.Sprintf(`import errno, os
comms = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            comms[int(p)] = open("/proc/%%s/comm" %% p).read().strip()
        except OSError:
            pass
print("init", comms.get(1))
print("others", sorted(set(c for c in comms.values() if c not in %s)))
print("daemon visible", os.path.exists("/proc/%d"))
for pid, sig in ((%d, 0), (%d, 15)):
    try:
        os.kill(pid, sig)
        print("kill ok")
    except OSError as e:
        print("kill", errno.errorcode[e.errno])
`, isoPyList(sandboxComms), daemon, self, host.Process.Pid))
		if want := "init sandbox-init\nothers []\ndaemon visible False\nkill ESRCH\nkill ESRCH\n"; !e.Success || m["stdout"] != want {
			t.Errorf("cell: %s\nwant stdout %q", e.raw, want)
		}
		hostAlive(t)
	})
}

// isoPyList writes strings as a Python list literal.
func isoPyList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// TestIsolationNetwork: under --network none the daemon's own port and
// the host's abstract Unix sockets are unreachable from inside; under
// the default network the port is reachable (which shows the first case
// can fail).
func TestIsolationNetwork(t *testing.T) {
	requireRoot(t)
	// An abstract socket of the host (D-Bus and X11 listen on such
	// names): it belongs to the host's network namespace.
	abstract := "aiod-isolation-" + isoRand(6)
	ln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, c := range []struct {
		network, shell, python string
	}{
		{"none", "refused\n", "ConnectionRefusedError(111, 'Connection refused')\n"},
		{"host", "connected\n", "connected\n"},
	} {
		t.Run(c.network, func(t *testing.T) {
			d := startIsolated(t, "", nil, "--network", c.network)
			_, port, _ := strings.Cut(d.Addr, ":")
			m := d.command(t, map[string]any{"command": fmt.Sprintf("(echo > /dev/tcp/127.0.0.1/%s) 2>/dev/null && echo connected || echo refused", port)})
			if m["stdout"] != c.shell || m["exit_code"] != 0.0 {
				t.Errorf("command: %v, want stdout %q", m, c.shell)
			}
			e, cm := d.cell(t, "net", fmt.Sprintf(`import socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", %s))
    print("connected")
except OSError as e:
    print(repr(e))
finally:
    s.close()
`, port))
			if cm["stdout"] != c.python {
				t.Errorf("cell: %s, want stdout %q", e.raw, c.python)
			}
			m = d.command(t, map[string]any{"command": fmt.Sprintf(`python3 -c 'import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0%s")
    print("connected")
except OSError as e:
    print(repr(e))'`, abstract)})
			// Under the host's network a Landlock scope keeps the host's
			// abstract sockets out of reach (where the kernel has ABI 6:
			// EPERM); under none the namespace has none of them.
			want := "ConnectionRefusedError(111, 'Connection refused')\n"
			if c.network == "host" {
				if landlockABI(t, d) < 6 {
					t.Logf("--network host without Landlock scopes: %q", m["stdout"])
					return
				}
				want = "PermissionError(1, 'Operation not permitted')\n"
			}
			if m["stdout"] != want {
				t.Errorf("the host's abstract socket from inside: %v, want %q", m, want)
			}
		})
	}
}

// pollStderr long-polls a command until its stderr holds want, the
// command ends or d passes; it returns the stderr read.
func pollStderr(t *testing.T, a *aio, id, want string, d time.Duration) string {
	t.Helper()
	var errOut string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		_, e := a.call("GET", "/v2/commands/{command_id}", fmt.Sprintf("/v2/commands/%s?wait=true&wait_timeout=1&offset=0&stderr_offset=%d", id, len(errOut)), nil)
		m := e.obj()
		errOut += fmt.Sprint(m["stderr"])
		if strings.Contains(errOut, want) {
			return errOut
		}
		if c, _ := m["command"].(map[string]any); c["status"] != "running" {
			return errOut
		}
	}
	return errOut
}

// startSurvivor starts, in a session of its own, a command that forks
// nothing once started (bash builtins only): it prints "alive <line>"
// when a line reaches its standard input.
func startSurvivor(t *testing.T, a *aio) string {
	t.Helper()
	if code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "survivor"}); code != 200 {
		t.Fatalf("session: %d %s", code, e.raw)
	}
	_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"session": "survivor", "mode": "async", "command": "read line; echo alive $line"})
	m := e.obj()
	if m["status"] != "running" {
		t.Fatalf("survivor: %s", e.raw)
	}
	return m["command_id"].(string)
}

// survives sends the survivor its line and checks that it answers and
// ends.
func survives(t *testing.T, a *aio, id string) {
	t.Helper()
	if code, e := a.call("POST", "/v2/commands/{command_id}/stdin", "/v2/commands/"+id+"/stdin", map[string]any{"input": "yes\n"}); code != 200 || !e.Success {
		t.Fatalf("survivor stdin: %d %s", code, e.raw)
	}
	got, out, errOut := waitDone(t, a, id)
	if c := got["command"].(map[string]any); c["status"] != "completed" || c["exit_code"] != 0.0 || out != "alive yes\n" || errOut != "" {
		t.Errorf("survivor: %v stdout %q stderr %q", c, out, errOut)
	}
}

// TestIsolationForkBomb: under --pids 64 a fork bomb's forks fail with
// EAGAIN while /health answers and another session's command runs to
// its end; once the bomb is killed a new command runs. The bomb is
// bounded (a binary tree of depth 8: 511 processes) so that it is
// harmless where nothing contains it.
func TestIsolationForkBomb(t *testing.T) {
	d := startIsolated(t, "", nil, "--pids", "64")
	a := d.a
	survivor := startSurvivor(t, a)
	marker := "31." + strconv.Itoa(100000+int(time.Now().UnixNano()%900000)) // a number sleep reads
	_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"mode": "async",
		"command": "f(){ if [ $1 -gt 0 ]; then f $(($1-1)) & f $(($1-1)) & wait; else sleep " + marker + "; fi; }; f 8"})
	bomb, _ := e.obj()["command_id"].(string)
	if bomb == "" {
		t.Fatalf("bomb: %s", e.raw)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+bomb+"/kill", map[string]any{"signal": "SIGKILL"})
		}
		noneLeft(t, marker)
	})

	errOut := pollStderr(t, a, bomb, "Resource temporarily unavailable", 15*time.Second)
	if !strings.Contains(errOut, "fork: retry: Resource temporarily unavailable") {
		t.Fatalf("the bomb's forks never failed; stderr %.300q, %d processes with its marker", errOut, len(processesWith(marker)))
	}
	if n := len(sandboxPids(d.init)); n > 64 {
		t.Errorf("%d processes in the sandbox under --pids 64", n)
	}
	if code, body := get(t, d.URL+"/health"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("health during the bomb: %d %s", code, body)
	}
	survives(t, a, survivor)

	code, e := a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+bomb+"/kill", map[string]any{"signal": "SIGKILL"})
	if code != 200 || strings.TrimSpace(string(e.raw)) != `{"success":true,"message":"Operation successful","data":null,"hint":null}` {
		t.Errorf("kill: %d %s", code, e.raw)
	}
	killed = true
	if got, _, _ := waitDone(t, a, bomb); got["command"].(map[string]any)["status"] != "completed" || got["command"].(map[string]any)["exit_code"] != -1.0 {
		t.Errorf("the bomb after kill: %v", got["command"])
	}
	noneLeft(t, marker)
	m := d.command(t, map[string]any{"command": "echo after-the-bomb"})
	if m["status"] != "completed" || m["exit_code"] != 0.0 || m["stdout"] != "after-the-bomb\n" || m["stderr"] != "" {
		t.Errorf("a command after the bomb: %v", m)
	}
}

// TestIsolationMemory: under --memory 1GiB a 4 GiB allocation is killed
// alone, from a command (exit 137: SIGKILL) and from a python cell (the
// kernel dies, the cell says so, the session starts again empty); the
// daemon and another session's command go on.
func TestIsolationMemory(t *testing.T) {
	d := startIsolated(t, "", nil, "--memory", "1GiB")
	a := d.a
	survivor := startSurvivor(t, a)

	// The result says what happened: a line on stderr.
	note := "aiod: killed: the sandbox reached its memory limit (1GiB)\n"
	m := d.command(t, map[string]any{"command": `python3 -c "b=bytearray(4<<30)"`})
	if m["status"] != "completed" || m["exit_code"] != 137.0 || m["stdout"] != "" || m["stderr"] != note || m["output"] != note {
		t.Errorf("the allocation's command: %v", m)
	}
	// A shell that goes on after the kill ends normally: no note.
	m = d.command(t, map[string]any{"command": `python3 -c "b=bytearray(4<<30)"; echo "exit $?"`})
	killed := regexp.MustCompile(`^\S+: line 1: +\d+ Killed +python3 -c "b=bytearray\(4<<30\)"\n$`)
	if m["status"] != "completed" || m["exit_code"] != 0.0 || m["stdout"] != "exit 137\n" || !killed.MatchString(fmt.Sprint(m["stderr"])) {
		t.Errorf("the allocation under a shell: %v", m)
	}

	e, cm := d.cell(t, "mem", "x = 41")
	if cm["status"] != "ok" {
		t.Fatalf("cell: %s", e.raw)
	}
	e, cm = d.cell(t, "mem", "b = bytearray(4 << 30)")
	wantOut := []any{map[string]any{"output_type": "error", "ename": "DeadKernelError", "evalue": "the kernel was killed: the sandbox reached its memory limit (1GiB); session state was reset", "traceback": []any{}}}
	if e.Success || e.Message != "Code execution failed" || cm["status"] != "error" || cm["exit_code"] != 1.0 || cm["session_id"] != "mem" ||
		!reflect.DeepEqual(cm["outputs"], wantOut) || cm["stdout"] != "" || cm["stderr"] != "" {
		t.Errorf("the allocation's cell: %s", e.raw)
	}
	e, cm = d.cell(t, "mem", "print('x' in globals(), 6 * 7)")
	if !e.Success || cm["status"] != "ok" || cm["stdout"] != "False 42\n" {
		t.Errorf("the next cell: %s", e.raw)
	}

	if code, body := get(t, d.URL+"/health"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("health after the allocations: %d %s", code, body)
	}
	survives(t, a, survivor)
	m = d.command(t, map[string]any{"command": "echo after-the-allocation"})
	if m["status"] != "completed" || m["exit_code"] != 0.0 || m["stdout"] != "after-the-allocation\n" {
		t.Errorf("a command after the allocations: %v", m)
	}
}

// isoUpload posts data to /v2/fs/upload at path.
func isoUpload(t *testing.T, a *aio, path string, data []byte) (int, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("path", path)
	part, _ := mw.CreateFormFile("file", filepath.Base(path))
	_, _ = part.Write(data)
	_ = mw.Close()
	resp, out := a.raw("POST", "/v2/fs/upload?path="+q(path), buf.Bytes(), "Content-Type", mw.FormDataContentType())
	a.contract("POST", "/v2/fs/upload", resp.StatusCode, out)
	return resp.StatusCode, out
}

// fileErrJSON is the exact envelope of a failed file operation, its
// fields in the daemon's order.
func fileErrJSON(message string, errno int, name, errType, exc, op, path string) string {
	type fileError struct {
		Errno         int    `json:"errno"`
		ErrnoName     string `json:"errno_name"`
		ErrorType     string `json:"error_type"`
		ExceptionType string `json:"exception_type"`
		Message       string `json:"message"`
		Operation     string `json:"operation"`
		Path          string `json:"path"`
		Retryable     bool   `json:"retryable"`
	}
	env, _ := json.Marshal(struct {
		Success bool      `json:"success"`
		Message string    `json:"message"`
		Data    fileError `json:"data"`
		Hint    *string   `json:"hint"`
	}{false, message, fileError{errno, name, errType, exc, message, op, path, false}, nil})
	return string(env)
}

// isoShown is an answer for a failure message; a successful read is not
// copied into the log (it may be a secret).
func isoShown(code int, body []byte) string {
	if code == 200 && bytes.Contains(body, []byte(`"success":true`)) {
		return fmt.Sprintf("%d success (%d bytes, not shown)", code, len(body))
	}
	return fmt.Sprintf("%d %s", code, body)
}

// TestIsolationFiles: the files plane sees the sandbox's view as its
// account: /etc/shadow and a root-only file are permission_denied, a
// symlink in the workspace to a host file outside the view is not
// followed out, and uploads and tree imports land in the view only.
func TestIsolationFiles(t *testing.T) {
	d := startIsolated(t, "", nil)
	a, ws := d.a, d.ws
	outside, err := os.MkdirTemp("/var/tmp", "aiod-isolation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	hostFile := filepath.Join(outside, "host-secret")
	rootOnly := filepath.Join(ws, "rootonly")
	for _, err := range []error{
		os.WriteFile(hostFile, []byte("host secret\n"), 0o644),
		os.Symlink(hostFile, filepath.Join(ws, "link")),
		os.Symlink(outside, filepath.Join(ws, "dirlink")),
		os.WriteFile(rootOnly, []byte("root-only secret\n"), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	eacces := func(path string) string {
		return fileErrJSON("Failed to read file: Permission denied (os error 13)", 13, "EACCES", "permission_denied", "PermissionError", "read", path)
	}
	enoent := func(op, verb, path string) string {
		return fileErrJSON("Failed to "+verb+": No such file or directory (os error 2)", 2, "ENOENT", "not_found", "FileNotFoundError", op, path)
	}
	outsideHolds := func(t *testing.T, names ...string) {
		t.Helper()
		ents, _ := os.ReadDir(outside)
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, names) {
			t.Errorf("the host directory outside the view holds %v, want %v", got, names)
		}
	}

	t.Run("reads", func(t *testing.T) {
		for _, c := range []struct {
			what, path string
			status     int
			want       string
		}{
			{"/etc/shadow", "/etc/shadow", 403, eacces("/etc/shadow")},
			{"a root-only file", rootOnly, 403, eacces(rootOnly)},
			{"a symlink out of the view", filepath.Join(ws, "link"), 404, enoent("read", "read file", filepath.Join(ws, "link"))},
			{"a path outside the view", hostFile, 404, enoent("read", "read file", hostFile)},
		} {
			resp, body := a.raw("GET", "/v2/fs/read?path="+q(c.path), nil)
			a.contract("GET", "/v2/fs/read", resp.StatusCode, body)
			if resp.StatusCode != c.status || strings.TrimSpace(string(body)) != c.want {
				t.Errorf("v2 read %s: %s\nwant %d %s", c.what, isoShown(resp.StatusCode, body), c.status, c.want)
			}
			// v1 answers the same envelope with status 200.
			resp, body = a.raw("POST", "/v1/file/read", map[string]any{"file": c.path})
			a.contract("POST", "/v1/file/read", resp.StatusCode, body)
			if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != c.want {
				t.Errorf("v1 read %s: %s\nwant 200 %s", c.what, isoShown(resp.StatusCode, body), c.want)
			}
		}
		resp, body := a.raw("GET", "/v2/fs/download?path="+q(filepath.Join(ws, "link")), nil)
		if resp.StatusCode != 404 || len(body) != 0 {
			t.Errorf("download of the symlink: %d (%d bytes)", resp.StatusCode, len(body))
		}
		resp, body = a.raw("GET", "/v2/fs/download?path=/etc/shadow", nil)
		if resp.StatusCode != 403 || len(body) != 0 {
			t.Errorf("download of /etc/shadow: %d (%d bytes)", resp.StatusCode, len(body))
		}
		code, e := a.call("GET", "/v2/fs/list", "/v2/fs/list?path="+q(filepath.Join(ws, "dirlink")), nil)
		if want := enoent("list", "list directory", filepath.Join(ws, "dirlink")); code != 404 || strings.TrimSpace(string(e.raw)) != want {
			t.Errorf("list through the directory symlink: %d %s\nwant %s", code, e.raw, want)
		}
	})

	t.Run("uploads", func(t *testing.T) {
		code, out := isoUpload(t, a, filepath.Join(ws, "up.bin"), []byte("uploaded\n"))
		want := fmt.Sprintf(`{"success":true,"message":"Operation successful","data":{"file_path":%q,"file_size":9,"success":true},"hint":null}`, filepath.Join(ws, "up.bin"))
		if code != 200 || strings.TrimSpace(string(out)) != want {
			t.Errorf("upload into the workspace: %d %s\nwant %s", code, out, want)
		}
		checkOwnedFile(t, filepath.Join(ws, "up.bin"), "uploaded\n")
		noDir := func(path string) string {
			return fileErrJSON("Failed to upload file: Destination directory not found", 2, "ENOENT", "not_found", "FileNotFoundError", "upload", path)
		}
		for _, path := range []string{filepath.Join(outside, "up.bin"), filepath.Join(ws, "dirlink", "up2.bin")} {
			code, out := isoUpload(t, a, path, []byte("x"))
			if code != 404 || strings.TrimSpace(string(out)) != noDir(path) {
				t.Errorf("upload to %s: %d %s\nwant 404 %s", path, code, out, noDir(path))
			}
		}
		outsideHolds(t, "host-secret")
		// /tmp is the sandbox's own: an upload there is seen inside, not
		// on the host.
		tmp := "/tmp/aiod-isolation-up-" + isoRand(6)
		t.Cleanup(func() { os.Remove(tmp) })
		code, out = isoUpload(t, a, tmp, []byte("in the view\n"))
		if code != 200 || !bytes.Contains(out, []byte(`"file_size":12`)) {
			t.Errorf("upload to %s: %d %s", tmp, code, out)
		}
		if _, err := os.Lstat(tmp); err == nil {
			t.Errorf("an upload to the sandbox's /tmp landed in the host's %s", tmp)
		}
		if m := d.command(t, map[string]any{"command": "cat " + tmp}); m["stdout"] != "in the view\n" {
			t.Errorf("the sandbox does not see its upload: %v", m)
		}
	})

	t.Run("tree imports", func(t *testing.T) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755})
		_ = tw.WriteHeader(&tar.Header{Name: "a/c.txt", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644})
		_, _ = tw.Write([]byte("c\n"))
		_ = tw.Close()
		put := func(path string) (int, []byte) {
			resp, out := a.raw("PUT", "/v2/fs/tree?path="+q(path), buf.Bytes(), "Content-Type", "application/x-tar")
			a.contract("PUT", "/v2/fs/tree", resp.StatusCode, out)
			return resp.StatusCode, out
		}
		code, out := put(filepath.Join(ws, "tree"))
		want := fmt.Sprintf(`{"success":true,"message":"Operation successful","data":{"path":%q,"entries":2,"mode":"rename"},"hint":null}`, filepath.Join(ws, "tree"))
		if code != 200 || strings.TrimSpace(string(out)) != want {
			t.Errorf("import into the workspace: %d %s\nwant %s", code, out, want)
		}
		checkOwnedFile(t, filepath.Join(ws, "tree", "a", "c.txt"), "c\n")
		for _, c := range []struct {
			path   string
			status int
			want   string
		}{
			// /var is not in the view, whose root is read-only (EROFS is
			// 500 on every route of the plane).
			{filepath.Join(outside, "tree"), 500, fileErrJSON("Failed to transfer tree: Read-only file system (os error 30)", 30, "EROFS", "read_only_filesystem", "OSError", "tree", filepath.Join(outside, "tree"))},
			{filepath.Join(ws, "dirlink", "tree"), 404, enoent("tree", "transfer tree", filepath.Join(ws, "dirlink", "tree"))},
		} {
			code, out := put(c.path)
			if code != c.status || strings.TrimSpace(string(out)) != c.want {
				t.Errorf("import to %s: %d %s\nwant %d %s", c.path, code, out, c.status, c.want)
			}
		}
		outsideHolds(t, "host-secret")
		tmp := "/tmp/aiod-isolation-tree-" + isoRand(6)
		t.Cleanup(func() { os.RemoveAll(tmp) })
		if code, out := put(tmp); code != 200 {
			t.Errorf("import to %s: %d %s", tmp, code, out)
		}
		if _, err := os.Lstat(tmp); err == nil {
			t.Errorf("an import to the sandbox's /tmp landed in the host's %s", tmp)
		}
		if m := d.command(t, map[string]any{"command": "cat " + tmp + "/a/c.txt"}); m["stdout"] != "c\n" {
			t.Errorf("the sandbox does not see its import: %v", m)
		}
	})
}

// TestIsolationSecrets: the daemon's key (--api-key and AIO_API_KEY) and
// the hub's token (A2C_TOKEN) are in no sandbox process's environment or
// command line, read from inside (a command, a python cell) and from
// the host.
func TestIsolationSecrets(t *testing.T) {
	key, token := "key"+isoRand(12), "tok"+isoRand(12)
	d := startIsolated(t, key, []string{"AIO_API_KEY=" + key, "A2C_TOKEN=" + token}, "--api-key", key)
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.Cmd().Process.Pid)); !bytes.Contains(b, []byte(token)) {
		t.Fatal("the daemon's environment lacks the token: this test would show nothing")
	}
	// Live processes of every kind: a kernel, a terminal's shell.
	if e, m := d.cell(t, "sec", "1"); m["status"] != "ok" {
		t.Fatalf("kernel: %s", e.raw)
	}
	if code, e := d.a.call("POST", "/v2/pty/sessions", "/v2/pty/sessions", map[string]any{"id": "sec"}); code != 200 {
		t.Fatalf("terminal: %d %s", code, e.raw)
	}
	// The secrets are written in two halves, so that the probe's own
	// command line does not hold them.
	half := func(s string) (string, string) { return s[:len(s)/2], s[len(s)/2:] }
	k1, k2 := half(key)
	t1, t2 := half(token)

	t.Run("command", func(t *testing.T) {
		// The patterns go to grep through a file (printf is a builtin), so
		// that no argument vector holds them either.
		m := d.command(t, map[string]any{"command": fmt.Sprintf(`K='%s''%s'; T='%s''%s'; pat=$(mktemp)
printf '%%s\n' "$K" "$T" > "$pat"
env | grep -c -F -f "$pat"
n=0; for f in /proc/[0-9]*/environ; do cat "$f" >/dev/null 2>&1 && n=$((n+1)); done; echo "readable $n"
grep -l -F -f "$pat" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null
rm "$pat"; echo end`, k1, k2, t1, t2)})
		out := fmt.Sprint(m["stdout"])
		sub := regexp.MustCompile(`^0\nreadable (\d+)\nend\n$`).FindStringSubmatch(out)
		if sub == nil {
			t.Fatalf("stdout %q, want no match in env and no /proc file holding a secret", out)
		}
		// The kernel, the terminal's shell and this command's shell at least.
		if n, _ := strconv.Atoi(sub[1]); n < 3 {
			t.Errorf("only %d environments readable: the scan shows nothing", n)
		}
	})

	t.Run("python", func(t *testing.T) {
		e, m := d.cell(t, "sec", fmt.Sprintf(`import os
secrets = [%q + %q, %q + %q]
print("env", [k for k, v in os.environ.items() if any(s in v for s in secrets)])
found, readable = [], 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    for f in ("environ", "cmdline"):
        try:
            b = open("/proc/%%s/%%s" %% (p, f), "rb").read().decode("latin-1")
        except OSError:
            continue
        readable += f == "environ"
        if any(s in b for s in secrets):
            found.append("/proc/%%s/%%s" %% (p, f))
print("found", found)
print("enough", readable >= 2)
`, k1, k2, t1, t2))
		if want := "env []\nfound []\nenough True\n"; !e.Success || m["stdout"] != want {
			t.Errorf("cell: %s\nwant stdout %q", e.raw, want)
		}
	})

	t.Run("from the host", func(t *testing.T) {
		pids := sandboxPids(d.init)
		if len(pids) < 3 {
			t.Fatalf("sandbox processes %v: want init, the kernel and the terminal", pids)
		}
		for _, pid := range pids {
			for _, f := range []string{"environ", "cmdline"} {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
				if err != nil {
					continue
				}
				if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte(token)) {
					t.Errorf("/proc/%d/%s of a sandbox process holds a secret", pid, f)
				}
			}
		}
	})
}

// doctorPlane is one plane of aiod doctor --json.
type doctorPlane struct {
	Plane    string `json:"plane"`
	Required bool   `json:"required"`
	OK       bool   `json:"ok"`
	Needs    string `json:"needs"`
	Found    string `json:"found"`
	Fix      string `json:"fix"`
}

// TestIsolationReport: aiod doctor with AIO_ISOLATION=namespaces reports
// the isolation plane ok and required, and /v1/capabilities the
// isolation in force and what the machine allows.
func TestIsolationReport(t *testing.T) {
	requireRoot(t)
	// An explicit workspace: the daemon gives a root-owned workspace to
	// the sandbox account.
	ws := t.TempDir()
	code, out, errs := runAiod(t, []string{"AIO_ISOLATION=namespaces", "AIO_PYTHON_BIN=/usr/bin/python3"}, "doctor", "--json", "--workspace", ws)
	waitUntil(t, 5*time.Second, "doctor left its sandbox running", func() bool { return len(processesWith(`"workspace":"`+ws+`"`)) == 0 })
	var r struct {
		OK     bool          `json:"ok"`
		Planes []doctorPlane `json:"planes"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || !r.OK {
		t.Fatalf("doctor: exit %d %v\n%s%s", code, err, out, errs)
	}
	i := slices.IndexFunc(r.Planes, func(p doctorPlane) bool { return p.Plane == "isolation" })
	if i < 0 {
		t.Fatalf("no isolation plane:\n%s", out)
	}
	p := r.Planes[i]
	found := regexp.MustCompile(`^namespaces \(mount, pid, ipc, uts\), network host, account nobody \(uid 65534\), limits by cgroup (v1|v2): memory 2GiB, pids 1024, cpus 1\.5; machine: root true, user namespaces (true|false), cgroup (v1|v2), openat2 (true|false)$`)
	m := found.FindStringSubmatch(p.Found)
	if !p.Required || !p.OK || m == nil || m[1] != m[3] ||
		p.Needs != "with --isolation namespaces: root (or unprivileged user namespaces), mount/PID/IPC/UTS namespaces, and cgroups (v2, or v1) for the limits" ||
		p.Fix != "run aiod as root or allow unprivileged user namespaces, or pass --isolation none (AIO_ISOLATION=none)" {
		t.Errorf("isolation plane: %+v", p)
	}

	d := startIsolated(t, "", nil, "--memory", "1GiB", "--pids", "100", "--cpus", "0.5", "--network", "none")
	c, e := d.a.call("GET", "/v1/capabilities", "/v1/capabilities", nil)
	var caps struct {
		Isolation map[string]any `json:"isolation"`
	}
	_ = json.Unmarshal(e.Data, &caps)
	iso := caps.Isolation
	machine, _ := iso["machine"].(map[string]any)
	cg, _ := machine["cgroup"].(string)
	want := map[string]any{"isolation": "namespaces", "network": "none", "user": "nobody", "uid": 65534.0,
		"namespaces": []any{"mount", "pid", "ipc", "uts", "net"}, "limits": "cgroup " + cg, "memory": "1GiB", "pids": 100.0, "cpus": 0.5,
		"machine": map[string]any{"root": true, "user_namespaces": machine["user_namespaces"], "cgroup": cg, "openat2": machine["openat2"],
			"landlock": machine["landlock"]}}
	if c != 200 || (cg != "v1" && cg != "v2") || !reflect.DeepEqual(iso, want) {
		t.Errorf("capabilities isolation: %d %v\nwant %v", c, iso, want)
	}
}

// TestIsolationA2CUp: a2c up isolates its sandbox by default, and
// --isolation none turns that off.
func TestIsolationA2CUp(t *testing.T) {
	requireRoot(t)
	sandboxAddr := regexp.MustCompile(`sandbox_addr=(127\.0\.0\.1:\d+)`)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"default", nil, "namespaces"},
		{"none", []string{"--isolation", "none"}, "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "workspace")
			cmd := exec.Command(harness.Bin(t, "a2c"), append([]string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--workspace", ws}, c.args...)...)
			cmd.Env = append(append(cmd.Environ(), harness.PinnedPorts(t)...), "A2C_TOKEN=", "AIO_ISOLATION=", "AIO_PYTHON_BIN=/usr/bin/python3")
			p := harness.Run(t, cmd, true)
			box := ""
			waitUntil(t, 20*time.Second, "a2c up never said where its sandbox API listens", func() bool {
				if m := sandboxAddr.FindStringSubmatch(p.Logs()); m != nil {
					box = "http://" + m[1]
				}
				return box != ""
			})
			a := &aio{t: t, base: box}
			code, e := a.call("GET", "/v1/capabilities", "/v1/capabilities", nil)
			var caps struct {
				Isolation struct {
					Isolation string `json:"isolation"`
				} `json:"isolation"`
			}
			_ = json.Unmarshal(e.Data, &caps)
			if code != 200 || caps.Isolation.Isolation != c.want {
				t.Errorf("capabilities: %d %s", code, e.raw)
			}
			_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "id -u; ls -d /root 2>&1"})
			out := e.obj()["stdout"]
			if c.want == "namespaces" && out != fmt.Sprintf("%d\nls: cannot access '/root': No such file or directory\n", sandboxUID) {
				t.Errorf("a command under a2c up: %s", e.raw)
			}
			if c.want == "none" && out != "0\n/root\n" {
				t.Errorf("a command under a2c up --isolation none: %s", e.raw)
			}
			init := sandboxInit(p.Cmd().Process.Pid)
			if (init != 0) != (c.want == "namespaces") {
				t.Errorf("sandbox init under a2c up: pid %d, want one only with isolation", init)
			}
			p.Stop(t)
			if init != 0 {
				waitUntil(t, 10*time.Second, "a sandbox init outlived a2c up", func() bool { return !isoAlive(init) })
			}
		})
	}
}

// landlockABI is the Landlock ABI the daemon reports in its capabilities.
func landlockABI(t *testing.T, d *isoDaemon) int {
	t.Helper()
	_, e := d.a.call("GET", "/v1/capabilities", "/v1/capabilities", nil)
	var caps struct {
		Isolation struct {
			Machine struct {
				Landlock int `json:"landlock"`
			} `json:"machine"`
		} `json:"isolation"`
	}
	_ = json.Unmarshal(e.Data, &caps)
	return caps.Isolation.Machine.Landlock
}

// TestIsolationUnprivileged: an aiod that is not root (here the account
// nobody) isolates too, through a user namespace of its own: its
// processes see the same view, only their own processes, and no root
// file, and run with the caller's rights on the host; its capabilities
// say so, and everything ends with the daemon.
func TestIsolationUnprivileged(t *testing.T) {
	requireRoot(t) // to start the daemon as another account
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("no unprivileged user namespaces here")
	}
	// The binary and the workspace where nobody may use them.
	dir, err := os.MkdirTemp("", "aiod-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, ws := filepath.Join(dir, "aiod"), filepath.Join(dir, "ws")
	src, err := os.ReadFile(harness.Bin(t, "aiod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil || os.Chmod(dir, 0o755) != nil || os.Mkdir(ws, 0o755) != nil || os.Chown(ws, 65534, 65534) != nil {
		t.Fatal("cannot lay out the daemon for nobody", err)
	}
	cmd := exec.Command(bin, "--port", "0", "--workspace", ws, "--isolation", "namespaces")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "AIO_PYTHON_BIN=/usr/bin/python3"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	p := harness.Run(t, cmd, true)
	d := &isoDaemon{Proc: p, a: &aio{t: t, base: p.URL}, ws: ws}
	var inits []int
	t.Cleanup(func() {
		p.Stop(t)
		waitUntil(t, 10*time.Second, "the unprivileged sandbox outlived its daemon", func() bool {
			return !slices.ContainsFunc(inits, isoAlive)
		})
	})

	m := d.command(t, map[string]any{"command": "id -u; ps -e -o comm= | head -1; cat /etc/shadow 2>&1; ls /root 2>&1; echo hi > f; touch /usr/aiod-unprivileged-test 2>&1; true"})
	want := "0\nsandbox-init\ncat: /etc/shadow: Permission denied\nls: cannot access '/root': No such file or directory\n" +
		"touch: cannot touch '/usr/aiod-unprivileged-test': Read-only file system\n"
	if m["stdout"] != want {
		t.Errorf("inside: %q, want %q", m["stdout"], want)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "f"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("a file of the sandbox on the host: owner %d %v", st.Uid, err)
	}
	inits = processesWith("__aiod-sandbox-init")
	_, e := d.a.call("GET", "/v1/capabilities", "/v1/capabilities", nil)
	var caps struct {
		Isolation struct {
			Isolation  string   `json:"isolation"`
			User       string   `json:"user"`
			UID        int      `json:"uid"`
			Namespaces []string `json:"namespaces"`
			Limits     string   `json:"limits"`
			Machine    struct {
				Root bool `json:"root"`
			} `json:"machine"`
		} `json:"isolation"`
	}
	_ = json.Unmarshal(e.Data, &caps)
	iso := caps.Isolation
	if iso.Isolation != "namespaces" || iso.User != "nobody" || iso.UID != 65534 || iso.Machine.Root ||
		!slices.Equal(iso.Namespaces, []string{"mount", "pid", "ipc", "uts", "user"}) {
		t.Errorf("capabilities: %+v", iso)
	}
}
