package pty

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestExecBasics(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(nil)
	r := h.exec(id, map[string]any{"command": "echo hi"})
	if r.Status != StatusCompleted || code(r.ExitCode) != "0" || r.Output != "hi" || r.Command == nil || *r.Command != "echo hi" {
		t.Fatalf("%+v", r)
	}
	if len(r.Console) != 1 || r.Console[0] != (ConsoleRecord{PS1: "$ ", Command: "echo hi", Output: "hi"}) {
		t.Fatalf("console %+v", r.Console)
	}
	if r = h.exec(id, map[string]any{"command": "false"}); r.Status != StatusCompleted || code(r.ExitCode) != "1" || r.Output != "" {
		t.Fatalf("%+v", r)
	}
	// $? is the previous command's status, as when a user types the line.
	if r = h.exec(id, map[string]any{"command": "echo $?"}); r.Output != "1" {
		t.Fatalf("$? after false: %+v", r)
	}
	if r = h.exec(id, map[string]any{"command": "printf shell-doc-ok"}); r.Output != "shell-doc-ok" {
		t.Fatalf("%+v", r)
	}
	// State persists; quoting, multi-line and non-ASCII commands type safely.
	h.exec(id, map[string]any{"command": "cd /tmp && X='it''s'"})
	if r = h.exec(id, map[string]any{"command": "pwd; echo \"$X\" a!b"}); r.Output != "/tmp\nits a!b" {
		t.Fatalf("%q", r.Output)
	}
	if r = h.exec(id, map[string]any{"command": "cat <<'EOF'\nline 1\n\tété 'q' \\ \"d\"\nEOF"}); r.Output != "line 1\n\tété 'q' \\ \"d\"" || code(r.ExitCode) != "0" {
		t.Fatalf("%q", r.Output)
	}
	if r = h.exec(id, map[string]any{"command": "if then"}); r.Status != StatusCompleted || code(r.ExitCode) != "2" || !strings.Contains(r.Output, "syntax error") {
		t.Fatalf("%+v", r)
	}
}

func TestExecBusyAndTimeouts(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(nil)
	start := time.Now()
	r := h.exec(id, map[string]any{"command": "sleep 5", "async": true})
	if r.Status != StatusRunning || r.ExitCode != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("%+v", r)
	}
	if msg := h.Fails(400, "POST", "/v2/pty/sessions/"+id+"/exec", map[string]any{"command": "true"}); msg != "Session already has a running command" {
		t.Fatal(msg)
	}
	running(t, "sleep 5", 1)
	h.OK("POST", "/v2/pty/sessions/"+id+"/input", map[string]any{"input": "\u0003"}, nil)
	var st struct{ Status string }
	h.OK("POST", "/v1/shell/wait", map[string]any{"id": id, "seconds": 5}, &st)
	if st.Status != StatusCompleted {
		t.Fatal(st)
	}
	// timeout: the call returns, the command runs on.
	r = h.exec(id, map[string]any{"command": "sleep 0.6; echo late", "timeout": 0.1})
	if r.Status != StatusRunning || r.ExitCode != nil {
		t.Fatalf("%+v", r)
	}
	h.OK("POST", "/v1/shell/wait", map[string]any{"id": id, "seconds": 5}, &st)
	h.OK("GET", "/v2/pty/sessions/"+id+"/screen", nil, &r)
	if r.Status != StatusCompleted || r.Output != "late" || code(r.ExitCode) != "0" || r.Command != nil {
		t.Fatalf("%+v", r)
	}
	// hard_timeout and no_change_timeout: ^C, exit_code null, still usable.
	r = h.exec(id, map[string]any{"command": "sleep 30", "hard_timeout": 0.3})
	if r.Status != StatusHard || r.ExitCode != nil {
		t.Fatalf("%+v", r)
	}
	r = h.exec(id, map[string]any{"command": "echo a; sleep 30", "no_change_timeout": 1})
	if r.Status != StatusNoChange || r.ExitCode != nil || r.Output != "a" {
		t.Fatalf("%+v", r)
	}
	if r = h.exec(id, map[string]any{"command": "echo still"}); r.Output != "still" || code(r.ExitCode) != "0" {
		t.Fatalf("%+v", r)
	}
	gone(t, "sleep 30")
}

// TestExecSh: with sh the typed line prints the markers; other shells
// refuse exec with 501 but still run.
func TestExecSh(t *testing.T) {
	h := newHarness(t, Config{Shell: "/bin/sh"}, nil)
	id := h.session(nil)
	if r := h.exec(id, map[string]any{"command": "echo hi; cd /tmp"}); r.Output != "hi" || code(r.ExitCode) != "0" {
		t.Fatalf("%+v", r)
	}
	if r := h.exec(id, map[string]any{"command": "pwd\nfalse"}); r.Output != "/tmp" || code(r.ExitCode) != "1" {
		t.Fatalf("%+v", r)
	}
	o := newHarness(t, Config{Shell: "/bin/cat"}, nil)
	oid := o.session(nil)
	o.Fails(501, "POST", "/v2/pty/sessions/"+oid+"/exec", map[string]any{"command": "true"})
	o.OK("POST", "/v2/pty/sessions/"+oid+"/input", map[string]any{"input": "typed", "press_enter": true}, nil)
	var r Result
	eventually(t, "cat echoes nothing", func() bool {
		o.OK("GET", "/v2/pty/sessions/"+oid+"/screen", nil, &r)
		return strings.Count(r.Output, "typed") == 2 // the tty's echo, then cat's
	})
}

// TestExecIgnoresEarlierLine: a line typed just before an exec, which
// the shell has not read yet when the exec types its own, is not taken
// for the exec's command: its output and its end marker belong to that
// earlier line. The shell is stopped so that the exec surely finds it
// "at the prompt" with the earlier line still unread.
func TestExecIgnoresEarlierLine(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(nil)
	s, err := h.p.e.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(s.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := sync.OnceFunc(func() { _ = syscall.Kill(s.pid, syscall.SIGCONT) })
	t.Cleanup(cont)
	if _, err := h.p.e.Input(id, "sleep 0.2; echo typed-before", true); err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() {
		r, err := h.p.e.Exec(context.Background(), id, ExecRequest{Command: "echo mine-$((40+2))", Timeout: 20 * time.Second})
		if err != nil {
			r.Status = err.Error()
		}
		done <- r
	}()
	eventually(t, "the exec never typed its line", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cur != nil && s.cur.written
	})
	cont()
	r := <-done
	if r.Status != StatusCompleted || r.Output != "mine-42" || code(r.ExitCode) != "0" {
		t.Fatalf("%+v", r)
	}
}

// TestExecUnderLoad: with every core busy and a line typed just before
// each exec, every exec answers its own output, many times over.
func TestExecUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	var stop atomic.Bool
	var spin sync.WaitGroup
	for range runtime.NumCPU() {
		spin.Go(func() {
			for !stop.Load() { // busy on purpose
			}
		})
	}
	t.Cleanup(func() { stop.Store(true); spin.Wait() })
	for range runtime.NumCPU() {
		burn := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := burn.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = burn.Process.Kill(); _ = burn.Wait() })
	}
	h := newHarness(t, Config{}, nil)
	e := h.p.e
	id := h.session(nil)
	for i := range 40 {
		if _, err := e.Input(id, fmt.Sprintf("echo typed-%d", i), true); err != nil {
			t.Fatal(err)
		}
		r, err := e.Exec(context.Background(), id, ExecRequest{Command: fmt.Sprintf("echo mine-%d", i), Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("mine-%d", i); r.Status != StatusCompleted || r.Output != want || code(r.ExitCode) != "0" {
			t.Fatalf("exec %d: %+v", i, r)
		}
	}
}

// TestExecIntoForegroundProgram: an exec while a program an earlier exec
// left in the foreground (a REPL) holds the terminal is typed for that
// program as it is (no id line reaches it), and the shell's next end
// marker, when the program exits, ends the exec that made it exit; the
// shell's own execs work again afterwards.
func TestExecIntoForegroundProgram(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.interruptWait = 300 * time.Millisecond })
	id := h.session(nil)
	// The REPL ignores SIGINT (inherited as ignored, which CPython keeps),
	// so the ^C of a no_change_timeout never ends it, however slowly it
	// starts under load.
	if r := h.exec(id, map[string]any{"command": `sh -c "trap '' INT; exec python3 -q"`, "no_change_timeout": 1}); r.Status == StatusCompleted {
		t.Fatalf("the REPL ended at once: %+v", r)
	}
	r := h.exec(id, map[string]any{"command": "print(6*7)", "no_change_timeout": 3})
	if !strings.Contains(r.Output, "42") || strings.Contains(r.Output, "__aio_exec") || strings.Contains(r.Output, "Error") {
		t.Fatalf("typed into the REPL: %+v", r)
	}
	if r := h.exec(id, map[string]any{"command": "exit()", "no_change_timeout": 5}); r.Status != StatusCompleted || code(r.ExitCode) != "0" {
		t.Fatalf("exit(): %+v", r)
	}
	if r := h.exec(id, map[string]any{"command": "echo back-$((1+1))"}); r.Status != StatusCompleted || r.Output != "back-2" {
		t.Fatalf("after the REPL: %+v", r)
	}
}
