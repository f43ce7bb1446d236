package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// probeArg makes the test binary (see TestMain) the attacker of
// TestConfined: run inside the sandbox through /proc/self/exe, it makes
// each call below and prints "name errno" (0 when the call succeeded).
const probeArg = "__sandbox-probe"

// probes are the calls the filter must refuse, with arguments whose
// answer without the filter differs from the filter's (a success, EBADF,
// EFAULT or EINVAL), so a pass is the filter's doing, not the kernel's
// checks on an unprivileged caller.
var probes = []struct {
	name string
	call func() syscall.Errno
	want syscall.Errno
}{
	{"unshare(CLONE_NEWUSER)", func() syscall.Errno { return raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) }, unix.EPERM},
	{"clone3", func() syscall.Errno { return raw(unix.SYS_CLONE3, 0, 0) }, unix.ENOSYS}, // EINVAL unfiltered
	{"setns", func() syscall.Errno { return raw(unix.SYS_SETNS, ^uintptr(0), 0) }, unix.EPERM},
	{"keyctl", func() syscall.Errno {
		return raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(^uint32(2)), 1) // the session keyring: succeeds unfiltered
	}, unix.EPERM},
	{"add_key", func() syscall.Errno { return raw(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0) }, unix.EPERM},
	{"request_key", func() syscall.Errno { return raw(unix.SYS_REQUEST_KEY, 0, 0, 0, 0) }, unix.EPERM},
	{"bpf", func() syscall.Errno { return raw(unix.SYS_BPF, 9999, 0, 0) }, unix.EPERM},
	{"perf_event_open", func() syscall.Errno { return raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) }, unix.EPERM},
	{"init_module", func() syscall.Errno { return raw(unix.SYS_INIT_MODULE, 0, 0, 0) }, unix.EPERM},
	{"finit_module", func() syscall.Errno { return raw(unix.SYS_FINIT_MODULE, ^uintptr(0), 0, 0) }, unix.EPERM},
	{"mount", func() syscall.Errno { return raw(unix.SYS_MOUNT, 0, 0, 0, 0, 0) }, unix.EPERM},
	{"umount2", func() syscall.Errno { return raw(unix.SYS_UMOUNT2, 0, 0) }, unix.EPERM},
	{"pivot_root", func() syscall.Errno { return raw(unix.SYS_PIVOT_ROOT, 0, 0) }, unix.EPERM},
	{"fsopen", func() syscall.Errno { return raw(unix.SYS_FSOPEN, 0, 0) }, unix.EPERM},
	{"open_tree", func() syscall.Errno { return raw(unix.SYS_OPEN_TREE, ^uintptr(0), 0, 0) }, unix.EPERM},
	{"move_mount", func() syscall.Errno { return raw(unix.SYS_MOVE_MOUNT, ^uintptr(0), 0, ^uintptr(0), 0, 0) }, unix.EPERM},
	{"mount_setattr", func() syscall.Errno { return raw(unix.SYS_MOUNT_SETATTR, ^uintptr(0), 0, 0, 0, 0) }, unix.EPERM},
	{"kexec_load", func() syscall.Errno { return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0) }, unix.EPERM},
	{"userfaultfd", func() syscall.Errno { return raw(unix.SYS_USERFAULTFD, 0xffff) }, unix.EPERM},                       // EINVAL unfiltered
	{"personality(ADDR_NO_RANDOMIZE)", func() syscall.Errno { return raw(unix.SYS_PERSONALITY, 0x0040000) }, unix.EPERM}, // succeeds unfiltered
	{"open_by_handle_at", func() syscall.Errno { return raw(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0) }, unix.EPERM},
	// What must still work: a thread (clone without namespace flags),
	// the personality query, ptrace's own-child request.
	{"personality(query)", func() syscall.Errno { return raw(unix.SYS_PERSONALITY, 0xffffffff) }, 0},
	{"getpid", func() syscall.Errno { return raw(unix.SYS_GETPID) }, 0},
}

func raw(nr uintptr, args ...uintptr) syscall.Errno {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := syscall.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	return e
}

// probeCalls runs in the sandbox: every probe on one locked thread, one
// line each.
func probeCalls() int {
	runtime.LockOSThread()
	for _, p := range probes {
		fmt.Printf("%s %d\n", p.name, int(p.call()))
	}
	return 0
}

// TestConfined: every sandboxed process has no_new_privs, no
// capability in any set, the filter (Seccomp 2), and the filter refuses
// each probe with EPERM (clone3: ENOSYS); unshare -Urm, the way to
// nested mounts and root-in-a-namespace, fails. The sandbox's init is
// confined the same way.
func TestConfined(t *testing.T) {
	s, _ := newSandbox(t, Config{Pids: 64})
	for _, who := range []string{"self", "1"} {
		out, err := run(t, s, "grep -E '^(NoNewPrivs|Seccomp|Cap(Inh|Prm|Eff|Bnd|Amb)):' /proc/"+who+"/status")
		if err != nil {
			t.Fatalf("%s: %q %v", who, out, err)
		}
		want := map[string]string{"NoNewPrivs": "1", "Seccomp": "2", "CapInh": "0000000000000000", "CapPrm": "0000000000000000",
			"CapEff": "0000000000000000", "CapBnd": "0000000000000000", "CapAmb": "0000000000000000"}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if w, ok := want[k]; ok && strings.TrimSpace(v) != w {
				t.Errorf("/proc/%s/status %s: %s, want %s", who, k, strings.TrimSpace(v), w)
			}
			delete(want, k)
		}
		for k := range want {
			t.Errorf("/proc/%s/status has no %s: %q", who, k, out)
		}
	}
	out, err := runArgv(t, s, "/proc/self/exe", probeArg)
	if err != nil {
		t.Fatalf("probe: %q %v", out, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		i := strings.LastIndexByte(line, ' ')
		got[line[:i]] = line[i+1:]
	}
	for _, p := range probes {
		if got[p.name] != fmt.Sprint(int(p.want)) {
			t.Errorf("%s: errno %s, want %d (%v)", p.name, got[p.name], int(p.want), p.want)
		}
	}
	if out, err := run(t, s, "unshare -Urm sh -c 'mount -t tmpfs none /tmp && echo mounted'"); err == nil || strings.Contains(out, "mounted") {
		t.Errorf("unshare -Urm: %q %v", out, err)
	}
}

// TestConfinedWork: ordinary work still runs under the filter: a shell,
// threads, a C compiler, git, python and pip, node; a fork bomb meets
// the pids limit and the sandbox goes on.
func TestConfinedWork(t *testing.T) {
	s, ws := newSandbox(t, Config{Pids: 64})
	cases := []struct{ name, need, script, want string }{
		{"bash", "/bin/bash", "bash -c 'echo $((6*7))'", "42\n"},
		{"python threads", "/usr/bin/python3", `/usr/bin/python3 -c 'import threading,os
r=[]
ts=[threading.Thread(target=lambda: r.append(os.getpid())) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]; print(len(r))'`, "8\n"},
		{"pip", "/usr/bin/python3", "/usr/bin/python3 -m pip --help | grep -m1 Usage", "Usage:"},
		{"cc", "/usr/bin/cc", "cd " + ws + " && printf '#include <stdio.h>\\nint main(void){puts(\"built\");return 0;}\\n' > m.c && cc -o m m.c && ./m", "built\n"},
		{"git", "/usr/bin/git", "cd " + ws + " && HOME=" + ws + " git init -q r && cd r && HOME=" + ws + " git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && git log --format=%s", "x\n"},
		{"node", "/usr/bin/node", "HOME=" + ws + " node -e 'require(\"worker_threads\"); console.log(1+1)'", "2\n"},
		{"fork bomb", "/bin/bash", "for i in $(seq 100); do sleep 3 & done 2>&1 | head -1; kill $(jobs -p) 2>/dev/null; true", "fork"},
		{"after the bomb", "/bin/sh", "echo alive", "alive\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := os.Stat(c.need); err != nil {
				t.Skip(c.need + " is not installed")
			}
			out, err := run(t, s, c.script)
			if err != nil || !strings.Contains(out, c.want) {
				t.Errorf("%s: %q %v", c.script, out, err)
			}
		})
	}
}

// TestFilterArches: every call name the profile allows or refuses is
// resolved for each architecture aiod ships; the filter assembles for
// this one.
func TestFilterArches(t *testing.T) {
	for _, a := range []string{"amd64", "arm64"} {
		for _, system := range []bool{false, true} {
			p, err := sandboxPolicy(a, system)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			n := 0
			for _, g := range p.Syscalls {
				n += len(g.Names) + len(g.NamesWithCondtions)
			}
			if n < 300 {
				t.Errorf("%s (system %v): only %d calls in the policy", a, system, n)
			}
		}
	}
	for _, compile := range []func() ([]unix.SockFilter, error){filterProgram, systemFilterProgram} {
		prog, err := compile()
		if err != nil || len(prog) == 0 {
			t.Fatalf("filter: %d instructions, %v", len(prog), err)
		}
	}
}

// TestHeldStart: a process held at its exec (always on cgroup v2, where
// clone3 is filtered; forced here on v1) is in the sandbox's memory
// group before its first instruction, and a start that fails does not
// leave anything held.
func TestHeldStart(t *testing.T) {
	s, _ := newSandbox(t, Config{Memory: 256 << 20})
	if s.cg == nil {
		t.Skip("no cgroups here:", s.warnings)
	}
	s.hold = true // set before any start: Wrap reads it
	group := filepath.Base(s.cg.v2)
	if s.cg.v1 != nil {
		group = filepath.Base(s.cg.v1["memory"])
	}
	for range 20 {
		out, err := runArgv(t, s, "/bin/cat", "/proc/self/cgroup")
		if err != nil {
			t.Fatalf("%q %v", out, err)
		}
		placed := false
		for _, line := range strings.Split(out, "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && (parts[1] == "memory" || parts[0] == "0" && s.cg.v2 != "") && strings.HasSuffix(parts[2], "/"+group) {
				placed = true
			}
		}
		if !placed {
			t.Fatalf("not in %s at its first instruction: %q", group, out)
		}
	}
	if _, err := runArgv(t, s, "/no/such/program"); err == nil {
		t.Error("a missing program started")
	}
	if out, err := run(t, s, "echo alive"); out != "alive\n" || err != nil {
		t.Errorf("after a failed start: %q %v", out, err)
	}
}

// TestNoSetIDFiles: a sandboxed command cannot give a file in the
// workspace (the user's folder on the host) the set-user-ID or
// set-group-ID bit, by chmod, mkdir or open with O_CREAT; plain modes
// still work, and openat2 answers ENOSYS (a red-team pass left a 6755
// copy of id, owned by the folder's owner, that any local account ran).
func TestNoSetIDFiles(t *testing.T) {
	requireRootT(t)
	s, ws := newSandbox(t, Config{})
	out, err := run(t, s, `cd `+ws+` && cp /bin/true x && for m in 4755 2755 6755; do chmod $m x 2>/dev/null && echo "chmod $m ok"; done
chmod 755 x && echo plain ok
mkdir -m 2775 d 2>/dev/null && echo "mkdir 2775 ok"
python3 -c '
import ctypes, errno, os
for m in (0o4755, 0o2755):
    try:
        os.close(os.open("y%o" % m, os.O_CREAT | os.O_WRONLY, m)); print("open %o ok" % m)
    except OSError as e:
        print("open %o" % m, errno.errorcode[e.errno])
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(437, -100, b"x", None, 0)  # openat2 on x86-64 and arm64
print("openat2", errno.errorcode[ctypes.get_errno()] if r < 0 else "ok")
'
stat -c '%a %n' x; ls`)
	want := "plain ok\nopen 4755 EPERM\nopen 2755 EPERM\nopenat2 ENOSYS\n755 x\nx\n"
	if err != nil || out != want {
		t.Errorf("got %q, %v; want %q", out, err, want)
	}
}

// TestFilterConditionsAlone: a rule with argument conditions is judged on
// its own call only. The library's assembler let personality(56) through
// (56 is clone's number on x86-64, whose rule then read personality's
// argument as clone's flags); only the profile's personas pass.
func TestFilterConditionsAlone(t *testing.T) {
	requireRootT(t)
	s, _ := newSandbox(t, Config{})
	out, err := run(t, s, `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 135, "aarch64": 92}[__import__("platform").machine()]
ok = []
for v in range(0, 1024):
    if libc.syscall(nr, ctypes.c_ulong(v)) >= 0:
        ok.append(v)
    libc.syscall(nr, ctypes.c_ulong(0))
print(ok)
'`)
	if err != nil || out != "[0, 8]\n" {
		t.Errorf("personality passed for %q, %v; want [0, 8] (PER_LINUX and UNAME26)", out, err)
	}
}
