package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestStageInput: what stageControl and stageCommand write, parseStage
// reads back; what cannot be written is refused, and a damaged input is
// refused, not a panic.
func TestStageInput(t *testing.T) {
	cases := []struct {
		name      string
		fds       [5]int
		argv, env []string
		wantErr   bool
	}{
		{"plain", [5]int{3, 4, 5, 6, 7}, []string{"/bin/sh", "-c", "echo hi"}, []string{"A=1", "PATH=/usr/bin"}, false},
		{"no env", [5]int{5, 6, 7, 8, 9}, []string{"x"}, nil, false},
		{"empty strings", [5]int{3, 4, 5, 6, 7}, []string{"a", "-", ""}, []string{"", "B="}, false},
		{"many", [5]int{3, 4, 126, 127, 9}, slices.Repeat([]string{"a"}, 300), []string{"B=2"}, false},
		{"low descriptor", [5]int{2, 4, 5, 6, 7}, []string{"x"}, nil, true},
		{"high descriptor", [5]int{3, 4, 5, 128, 9}, []string{"x"}, nil, true},
		{"no argv", [5]int{3, 4, 5, 6, 7}, nil, nil, true},
		{"a NUL", [5]int{3, 4, 5, 6, 7}, []string{"a\x00b"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctl, err := stageControl(c.fds)
			var b []byte
			if err == nil {
				b, err = stageCommand("/work dir", "/bin/prog", c.argv, c.env)
			}
			if (err != nil) != c.wantErr {
				t.Fatalf("%v, want error %v", err, c.wantErr)
			}
			if err != nil {
				return
			}
			if strings.IndexByte(ctl, 0) >= 0 {
				t.Fatalf("the control bytes hold a NUL: %q", ctl)
			}
			sp, err := parseStage([]string{ctl}, func(fd int) ([]byte, error) {
				if fd != c.fds[3] {
					t.Errorf("read descriptor %d, want %d", fd, c.fds[3])
				}
				return b, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if sp.fds != c.fds || sp.dir != "/work dir" || sp.path != "/bin/prog" || !slices.Equal(sp.argv, c.argv) || len(sp.env) != len(c.env) || len(c.env) > 0 && !slices.Equal(sp.env, c.env) {
				t.Errorf("parsed %+v, want %v %v %v", sp, c.fds, c.argv, c.env)
			}
		})
	}
	good, _ := stageCommand("/", "/p", []string{"a"}, []string{"E=1"})
	for _, bad := range []struct {
		args []string
		file []byte
	}{
		{nil, good}, {[]string{"\x83\x84\x85\x86"}, good}, {[]string{"\x83\x84\x85\x86\x87", "x"}, good},
		{[]string{"\x03\x84\x85\x86\x87"}, good}, {[]string{"\x81\x84\x85\x86\x87"}, good},
		{[]string{"\x83\x84\x85\x86\x87"}, good[:5]}, {[]string{"\x83\x84\x85\x86\x87"}, good[:len(good)-1]},
		{[]string{"\x83\x84\x85\x86\x87"}, append(slices.Clone(good), 'x', 0)},
		{[]string{"\x83\x84\x85\x86\x87"}, append([]byte{0, 0, 0, 0}, good[4:]...)},
		{[]string{"\x83\x84\x85\x86\x87"}, append([]byte{9, 0, 0, 0}, good[4:]...)},
	} {
		if _, err := parseStage(bad.args, func(int) ([]byte, error) { return bad.file, nil }); err == nil {
			t.Errorf("parseStage(%q, %q) took it", bad.args, bad.file)
		}
	}
}

// FuzzParseStage: no input makes parseStage panic, and what it takes
// has its parts where stageCommand puts them.
func FuzzParseStage(f *testing.F) {
	good, _ := stageCommand("/", "/p", []string{"a", "b"}, []string{"E=1"})
	f.Add("\x83\x84\x85\x86\x87", good)
	f.Fuzz(func(t *testing.T, ctl string, file []byte) {
		sp, err := parseStage([]string{ctl}, func(int) ([]byte, error) { return file, nil })
		if err != nil {
			return
		}
		back, err := stageCommand(sp.dir, sp.path, sp.argv, sp.env)
		if err != nil || !bytes.Equal(back, file) {
			t.Fatalf("%q: parsed %+v, which writes %q (%v)", file, sp, back, err)
		}
	})
}

// TestStageForms: both forms of the stage (the static program and this
// binary) leave the command root with a container's capabilities, no
// descriptor of theirs, nothing loaded from the machine's files before
// the command, and the same messages when the command cannot start.
func TestStageForms(t *testing.T) {
	forms := []struct {
		name   string
		goForm bool
	}{{"static", false}, {"go", true}}
	for i, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			if !form.goForm && stageCode == nil {
				t.Skip("no static stage for this architecture")
			}
			forceGoForms = form.goForm
			defer func() { forceGoForms = false }()
			s, _, _ := newMachine(t, 2_100_600_000+i*SystemIDs)
			caps := fmt.Sprintf("CapPrm:\t%016x\nCapEff:\t%016x\nCapBnd:\t%016x\nCapAmb:\t%016x\n", containerMask(), containerMask(), containerMask(), 0)
			if out, err := run(t, s, "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status"); out != caps {
				t.Errorf("capabilities: %q %v, want %q", out, err, caps)
			}
			if out, err := run(t, s, "ls /proc/self/fd | tr '\\n' ' '"); out != "0 1 2 3 " {
				t.Errorf("descriptors: %q %v, want 0 1 2 3 (3 is ls's own)", out, err)
			}
			if out, err := run(t, s, "echo /nonexistent-a2c-preload.so > /etc/ld.so.preload"); err != nil {
				t.Fatalf("%q %v", out, err)
			}
			out, _ := runArgv(t, s, "/bin/true")
			if n := strings.Count(out, "nonexistent-a2c-preload.so"); n != 1 {
				t.Errorf("the preload was tried %d times, want 1 (true only):\n%s", n, out)
			}
			if out, err := run(t, s, "rm /etc/ld.so.preload"); err != nil {
				t.Fatalf("%q %v", out, err)
			}
			status := func(err error) int {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return ee.ExitCode()
				}
				return -1
			}
			out, err := runArgv(t, s, "/no/such/program", "x")
			if status(err) != 127 || out != "sandbox: /no/such/program: No such file or directory\n" {
				t.Errorf("a missing program: %q %v, want exit status 127", out, err)
			}
			out, err = runArgv(t, s, "/usr")
			if status(err) != 126 || out != "sandbox: /usr: Permission denied\n" {
				t.Errorf("a directory as the program: %q %v, want exit status 126", out, err)
			}
			cmd := exec.Command("/bin/pwd")
			var b strings.Builder
			cmd.Stdout, cmd.Stderr, cmd.Dir = &b, &b, "/no/such/dir"
			if err := s.Wrap(cmd, cmd.Start)(); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			if status(err) != 1 || b.String() != "sandbox: cannot change to directory /no/such/dir: No such file or directory\n" {
				t.Errorf("a missing directory: %q %v, want exit status 1", b.String(), err)
			}
			// The command's environment and arguments reach it, and no
			// argument list on the way (nsenter's, the stage's, which
			// every account may read in /proc/PID/cmdline) holds them.
			cmd = exec.Command("/bin/sh", "-c", "echo \"$A2C_SECRET\" \"$0\"", "argument-secret")
			b.Reset()
			cmd.Stdout, cmd.Stderr, cmd.Env = &b, &b, []string{"A2C_SECRET=env-secret"}
			if err := s.Wrap(cmd, cmd.Start)(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil || b.String() != "env-secret argument-secret\n" {
				t.Errorf("the environment and arguments: %q %v", b.String(), err)
			}
			if strings.Contains(strings.Join(cmd.Args, " "), "secret") {
				t.Errorf("the first program's arguments: %q", cmd.Args)
			}
			cmd = exec.Command("/bin/pwd")
			b.Reset()
			cmd.Stdout, cmd.Stderr, cmd.Dir = &b, &b, "/usr/share"
			if err := s.Wrap(cmd, cmd.Start)(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil || b.String() != "/usr/share\n" {
				t.Errorf("a directory: %q %v", b.String(), err)
			}
		})
	}
}
