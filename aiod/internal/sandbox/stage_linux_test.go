package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestStageArgs: what stageArgs writes, parseStage reads back; what
// cannot be written is refused.
func TestStageArgs(t *testing.T) {
	cases := []struct {
		name      string
		fds       [3]int
		argv, env []string
		wantErr   bool
	}{
		{"plain", [3]int{3, 4, 5}, []string{"/bin/sh", "-c", "echo hi"}, []string{"A=1", "PATH=/usr/bin"}, false},
		{"no env", [3]int{5, 6, 7}, []string{"x"}, nil, false},
		{"a placeholder in argv", [3]int{3, 4, 5}, []string{"a", "-", ""}, []string{"-"}, false},
		{"many", [3]int{3, 4, 127}, slices.Repeat([]string{"a"}, 300), []string{"B=2"}, false},
		{"low descriptor", [3]int{2, 4, 5}, []string{"x"}, nil, true},
		{"high descriptor", [3]int{3, 4, 128}, []string{"x"}, nil, true},
		{"no argv", [3]int{3, 4, 5}, nil, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args, err := stageArgs(c.fds, "/work dir", "/bin/prog", c.argv, c.env)
			if (err != nil) != c.wantErr {
				t.Fatalf("stageArgs: %v, want error %v", err, c.wantErr)
			}
			if err != nil {
				return
			}
			for _, a := range args {
				if strings.IndexByte(a, 0) >= 0 {
					t.Fatalf("an argument holds a NUL: %q", a)
				}
			}
			sp, err := parseStage(args)
			if err != nil {
				t.Fatal(err)
			}
			if sp.fds != c.fds || sp.dir != "/work dir" || sp.path != "/bin/prog" || !slices.Equal(sp.argv, c.argv) || len(sp.env) != len(c.env) || !slices.Equal(sp.env, c.env) && len(c.env) > 0 {
				t.Errorf("parsed %+v, want %v %v %v", sp, c.fds, c.argv, c.env)
			}
		})
	}
	for _, bad := range [][]string{nil, {"x"}, {"\x83\x84\x85\x81\x80\x80", "/"}, {"\x83\x84\x85\x85\x80\x80", "/", "/p", "a"}, {"\x03\x84\x85\x81\x80\x80", "/", "/p", "a", "-"}} {
		if _, err := parseStage(bad); err == nil {
			t.Errorf("parseStage(%q) took it", bad)
		}
	}
}

// FuzzParseStage: no argument list makes parseStage panic, and what it
// takes has its parts where stageArgs puts them.
func FuzzParseStage(f *testing.F) {
	f.Add("\x83\x84\x85\x82\x80\x80", "/", "/p", "a b", 2)
	f.Fuzz(func(t *testing.T, ctl, dir, path, rest string, n int) {
		args := append([]string{ctl, dir, path}, strings.Fields(rest)...)
		if n > 0 && n < len(args) {
			args = args[:n]
		}
		sp, err := parseStage(args)
		if err != nil {
			return
		}
		if len(sp.argv) == 0 || 4+len(sp.argv)+len(sp.env) != len(args) {
			t.Fatalf("%q: %+v", args, sp)
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
			forceGoStage = form.goForm
			defer func() { forceGoStage = false }()
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
