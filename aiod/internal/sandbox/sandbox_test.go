package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	Dispatch(os.Args)
	os.Exit(m.Run())
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
	cmd := exec.Command("/bin/sh", "-c", script)
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
