package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDirStaysInside: a command's directory is changed to inside the
// sandbox's view, as its account, by a process that holds no
// descriptor of the daemon's. /proc/self/fd/N of the daemon's workspace
// descriptor led a command out of the view to the host's files (an
// adversarial pass read a file only the host has), directly or through a
// link the sandbox points there; a directory the account cannot enter
// was entered as root. Both forms of setid.
func TestDirStaysInside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setid is the root daemon's")
	}
	marker := t.TempDir() // on the host only
	if err := os.WriteFile(filepath.Join(marker, "secret"), []byte("HOST-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{marker, filepath.Dir(marker)} { // reachable by any account, were the view left
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, goForm := range []bool{false, true} {
		t.Run(fmt.Sprintf("go=%v", goForm), func(t *testing.T) {
			forceGoForms = goForm
			defer func() { forceGoForms = false }()
			s, ws := newSandbox(t, Config{})
			private := filepath.Join(ws, "private")
			if err := os.Mkdir(private, 0o700); err != nil { // root's, on the host
				t.Fatal(err)
			}
			if err := os.Symlink("/proc/self/fd/"+strconv.Itoa(s.ws.fd()), filepath.Join(ws, "link")); err != nil {
				t.Fatal(err)
			}
			up := strings.Repeat("../", 12)
			for _, c := range []struct{ dir, want string }{
				{"/proc/self/fd/" + strconv.Itoa(s.ws.fd()), "sandbox: cannot change to directory /proc/self/fd/" + strconv.Itoa(s.ws.fd()) + ": No such file or directory\n"},
				{filepath.Join(ws, "link"), "sandbox: cannot change to directory " + filepath.Join(ws, "link") + ": No such file or directory\n"},
				{private, "sandbox: cannot change to directory " + private + ": Permission denied\n"},
			} {
				cmd := exec.Command("/bin/cat", up+strings.TrimPrefix(marker, "/")+"/secret")
				var b strings.Builder
				cmd.Stdout, cmd.Stderr, cmd.Dir = &b, &b, c.dir
				if err := s.Wrap(cmd, cmd.Start)(); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 || b.String() != c.want {
					t.Errorf("Dir %s: %q %v, want %q and exit status 1", c.dir, b.String(), err, c.want)
				}
			}
			cmd := exec.Command("/bin/pwd")
			var b strings.Builder
			cmd.Stdout, cmd.Dir = &b, ws
			if err := s.Wrap(cmd, cmd.Start)(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil || b.String() != ws+"\n" {
				t.Errorf("Dir %s: %q %v", ws, b.String(), err)
			}
		})
	}
}
