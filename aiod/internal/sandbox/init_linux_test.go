package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestInitSecondStage: once the view is built, a sandbox's init (plain,
// and a whole machine's) is its second stage: the static reaper where
// one exists (else this binary again), named sandbox-init, not
// dumpable (its /proc files are the host root's), ignoring SIGCHLD,
// holding its standard descriptors only, and found by its arguments.
func TestInitSecondStage(t *testing.T) {
	plain, _ := newSandbox(t, Config{})
	machine, _, _ := newMachine(t, 2_100_800_000)
	for name, s := range map[string]*Sandbox{"plain": plain, "machine": machine} {
		t.Run(name, func(t *testing.T) {
			if out, err := run(t, s, "true"); err != nil {
				t.Fatal(out, err)
			}
			pid := strconv.Itoa(s.cur.init.Process.Pid)
			exe, _ := os.Readlink("/proc/" + pid + "/exe")
			if want := "/memfd:sandbox-init (deleted)"; reaperCode != nil && exe != want {
				t.Errorf("init's program: %q, want %q", exe, want)
			}
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			if string(comm) != "sandbox-init\n" || string(cmdline) != "aiod-sandbox-init\x00"+InitArg+"\x00"+confinedArg+"\x00" {
				t.Errorf("init: comm %q cmdline %q", comm, cmdline)
			}
			var st unix.Stat_t
			if err := unix.Stat("/proc/"+pid+"/status", &st); err != nil || st.Uid != 0 {
				t.Errorf("init's /proc files are uid %d (%v): it is dumpable", st.Uid, err)
			}
			status, _ := os.ReadFile("/proc/" + pid + "/status")
			var ign uint64
			for line := range strings.Lines(string(status)) {
				if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
					ign, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				}
			}
			if ign&(1<<(unix.SIGCHLD-1)) == 0 {
				t.Errorf("init does not ignore SIGCHLD: SigIgn %x", ign)
			}
			fds, _ := os.ReadDir("/proc/" + pid + "/fd")
			var names []string
			for _, f := range fds {
				names = append(names, f.Name())
			}
			if want := "0 1 2"; reaperCode != nil && strings.Join(names, " ") != want {
				t.Errorf("init's descriptors: %v, want %s", names, want)
			}
		})
	}
}
