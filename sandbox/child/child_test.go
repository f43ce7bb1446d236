package child

import (
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
	time.Sleep(100 * time.Millisecond) // a zombie by now
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
	time.Sleep(100 * time.Millisecond)
	Reap([]int{cmd.Process.Pid})
	if err := cmd.Wait(); err == nil {
		t.Fatal("the zombie was not reaped (Wait still saw it)")
	}
}
