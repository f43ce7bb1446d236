package aiod

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// TestPooledDaemonsIndependent: daemons of one process, each in a
// sandbox of its own (a pool), end only their own: shutting one down
// leaves another's processes, and its init, running. (Once, a commands
// plane's shutdown took every other sandbox's init, a child of the
// process in a session of its own, for one of its orphans.)
func TestPooledDaemonsIndependent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root here")
	}
	mk := func(name string, uid int) (*Daemon, *sandbox.Sandbox) {
		ws := t.TempDir()
		sb, err := sandbox.New(sandbox.Config{Workspace: ws, Network: sandbox.NetworkNone, Name: name, UID: uid, GID: uid}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(pinPorts(t, Config{Workspace: ws, Sandbox: sb, Pooled: true}))
		if err != nil {
			t.Fatal(err)
		}
		return d, sb
	}
	d1, _ := mk("one", 1900000101)
	d2, s2 := mk("two", 1900000102)
	defer d2.Shutdown(context.Background())
	cmd := exec.Command("/bin/sleep", "100")
	if err := s2.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := d1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the second daemon's sleep ended when the first shut down: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
}
