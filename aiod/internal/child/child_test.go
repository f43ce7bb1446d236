package child

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestOwnedNeverReaped: a registered child's exit status stays its
// exec.Cmd's even when a reaper asks for it.
func TestOwnedNeverReaped(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 7")
	if err := Start(cmd, cmd.Start); err != nil {
		t.Fatal(err)
	}
	waitZombie(t, cmd.Process.Pid)
	Reap([]int{cmd.Process.Pid})
	err := cmd.Wait()
	Forget(cmd.Process.Pid)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 || Owned(cmd.Process.Pid) {
		t.Fatalf("exit status lost: %v", err)
	}
}

// TestUnownedReaped: an unregistered zombie child is reaped.
func TestUnownedReaped(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitZombie(t, cmd.Process.Pid)
	Reap([]int{cmd.Process.Pid})
	if err := cmd.Wait(); err == nil {
		t.Fatal("the zombie was not reaped (Wait still saw it)")
	}
}

// waitZombie waits until pid has exited and awaits its parent.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, ok := ReadProc(pid); ok && p.State == 'Z' {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("pid %d did not become a zombie", pid)
		}
	}
}

func TestParseStat(t *testing.T) {
	p, ok := ParseStat([]byte("4242 (we ird) (x)) S 1 4240 4240 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"))
	if !ok || p.PID != 4242 || p.State != 'S' || p.PPID != 1 || p.PGID != 4240 || p.SID != 4240 || p.Start != 987654 {
		t.Errorf("%+v %v", p, ok)
	}
	if _, ok := ParseStat([]byte("garbage")); ok {
		t.Error("garbage parsed")
	}
	if self, ok := ReadProc(os.Getpid()); !ok || self.PID != os.Getpid() || Scan().Procs[os.Getpid()].Start != self.Start {
		t.Errorf("ReadProc/Scan disagree: %+v", self)
	}
}
