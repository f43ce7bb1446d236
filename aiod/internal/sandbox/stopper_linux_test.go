package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStopperCannotHang: a process of the sandbox that stops whatever
// it may (kill(-1, SIGSTOP) in a loop) cannot make a start hang, nor the
// daemon: a fork of the daemon is root until it has executed setid
// (spawn_linux.go), so the stopper reaches the new process only once
// the start has returned. Plain and whole machines, with setid's static
// and Go forms.
func TestStopperCannotHang(t *testing.T) {
	for i, c := range []struct {
		machine, goForm bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("machine=%v go=%v", c.machine, c.goForm), func(t *testing.T) {
			forceGoForms = c.goForm
			defer func() { forceGoForms = false }()
			var s *Sandbox
			if c.machine {
				s, _, _ = newMachine(t, 2_100_900_000+i*SystemIDs)
			} else {
				s, _ = newSandbox(t, Config{})
			}
			stopper := exec.Command("/usr/bin/python3", "-c", "import os, time\nprint('go', flush=True)\nend = time.time() + 60\nwhile time.time() < end:\n    try: os.kill(-1, 19)\n    except OSError: pass\n")
			out, err := stopper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Wrap(stopper, stopper.Start)(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stopper.Process.Kill(); _ = stopper.Wait() }()
			if line, err := bufio.NewReader(out).ReadString('\n'); line != "go\n" {
				t.Fatalf("the stopper: %q %v", line, err)
			}
			stopped := 0
			for i := range 30 {
				cmd := exec.Command("/bin/sleep", "5")
				started := make(chan error, 1)
				go func() { started <- s.Wrap(cmd, cmd.Start)() }()
				select {
				case err := <-started:
					if err != nil {
						t.Fatalf("start %d: %v", i, err)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("start %d did not return", i)
				}
				// The stopper may have stopped it since: the case met.
				for range 200 {
					stat, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
					if st, _, ok := statState(string(stat)); ok && (st == 'T' || st == 't') {
						stopped++
						break
					}
					time.Sleep(time.Millisecond)
				}
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if stopped == 0 {
				t.Error("the stopper stopped none of the new processes: the case was not met")
			}
		})
	}
}

// statState reads the state and the parent's PID of a /proc/PID/stat
// line (the command name, in parentheses, may hold spaces and
// parentheses: the fields follow its last ")").
func statState(stat string) (state byte, ppid int, ok bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}
