package sandbox

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestTmpfsFilled: under --memory 512MiB, filling /tmp (400 MiB) and
// then /dev/shm (300 MiB) ends in ENOSPC for the writer; the sandbox's
// init and a session started before go on (the scenario: each
// was sized to the whole limit, together they were over it, and the
// sandbox started again with every session lost).
func TestTmpfsFilled(t *testing.T) {
	s, _ := newSandbox(t, Config{Memory: 512 << 20})
	if s.cg == nil {
		t.Skip("no cgroups here:", s.warnings)
	}
	inst := s.cur
	// A session: a shell that answers each line it reads.
	sess := exec.Command("/bin/sh", "-c", `while read l; do echo "got $l"; done`)
	in, _ := sess.StdinPipe()
	outp, _ := sess.StdoutPipe()
	sess.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.Wrap(sess, sess.Start)(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = sess.Wait() }()
	lines := bufio.NewReader(outp)
	ask := func(q string) string {
		if _, err := io.WriteString(in, q+"\n"); err != nil {
			return err.Error()
		}
		l, err := lines.ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return l
	}
	if got := ask("one"); got != "got one\n" {
		t.Fatalf("session: %q", got)
	}
	out, err := run(t, s, "dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>&1 | head -1; dd if=/dev/zero of=/dev/shm/fill bs=1M count=300 2>&1 | head -1; echo done")
	t.Logf("writer: %q %v", out, err)
	if strings.Count(out, "No space left on device") != 2 || !strings.HasSuffix(out, "done\n") {
		t.Errorf("the writer: %q %v; want ENOSPC from both", out, err)
	}
	select {
	case <-inst.done:
		t.Fatal("init exited")
	default:
	}
	if s.cur != inst {
		t.Error("the sandbox started again")
	}
	if got := ask("two"); got != "got two\n" {
		t.Errorf("the session after the writer: %q", got)
	}
	if out, err := run(t, s, "ls /tmp /dev/shm && rm /tmp/fill /dev/shm/fill && echo x > /tmp/y && cat /tmp/y"); err != nil || !strings.HasSuffix(out, "x\n") {
		t.Errorf("after removing the files: %q %v", out, err)
	}
}
