package interp

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestSharedIsOneAnswer(t *testing.T) {
	pins := Pins{Python: "/bin/sh", Node: "/definitely/not/node"}
	a, b := Shared(pins), Shared(pins)
	if a != b {
		t.Fatal("two finders for the same pins")
	}
	if Shared(Pins{Python: "/bin/sh"}) == a {
		t.Fatal("one finder for different pins")
	}
	py := a.Python()
	if py.Path != "/bin/sh" || py.OK || py.Problem != "ipykernel is not importable by /bin/sh" || py.Hint == "" {
		t.Errorf("python without ipykernel: %+v", py)
	}
	if n := a.Node(); n.OK || n.Path != "" || n.Problem != "No node interpreter found (looked for /definitely/not/node)" {
		t.Errorf("missing node: %+v", n)
	}
	if py2 := b.Python(); py2 != py {
		t.Errorf("answers differ: %+v, %+v", py, py2)
	}
}

func TestMissingPython(t *testing.T) {
	py := Shared(Pins{Python: "/definitely/not/python"}).Python()
	if py.OK || py.Path != "" || py.Problem != "No python interpreter found (looked for /definitely/not/python)" {
		t.Errorf("%+v", py)
	}
}

// TestDiscovery checks the unpinned search on this machine: when a
// python with ipykernel is installed it is found, with a version.
func TestDiscovery(t *testing.T) {
	f := &Finder{}
	py := f.Python()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on this machine")
	}
	if py.Path == "" || py.Version == "" {
		t.Errorf("python3 is installed but not found: %+v", py)
	}
	if py.OK != (exec.Command(py.Path, "-c", "import ipykernel").Run() == nil) {
		t.Errorf("kernel verdict disagrees with the interpreter: %+v", py)
	}
}

// TestInstalledLaterIsFound: an interpreter that was missing is looked
// for again after the recheck period, so one installed while the daemon
// runs is found (by every consumer of the shared finder); a usable one
// is kept.
func TestInstalledLaterIsFound(t *testing.T) {
	old := recheck
	recheck = 50 * time.Millisecond
	t.Cleanup(func() { recheck = old })
	bin := filepath.Join(t.TempDir(), "node")
	f := Shared(Pins{Node: bin})
	if n := f.Node(); n.OK {
		t.Fatalf("found before it exists: %+v", n)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho v99.1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !f.Node().OK {
		if time.Now().After(deadline) {
			t.Fatal("an interpreter installed later is never found")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := Shared(Pins{Node: bin}).Node(); n.Version != "99.1.0" {
		t.Fatalf("the shared finder answers otherwise: %+v", n)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * recheck) // the usable answer is kept: nothing to wait for
	if n := f.Node(); !n.OK {
		t.Fatalf("a usable answer was dropped: %+v", n)
	}
}
