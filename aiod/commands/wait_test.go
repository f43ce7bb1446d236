package commands

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestInteractivePythonUnderLoad replays the documented interactive
// example (python3 -u -i -q in async mode, a statement and a print
// written to stdin before the interpreter reads, then bounded reads with
// wait=true that follow both offsets) many times while the CPUs are
// busy: goroutines of this process spinning and CPU-burning child
// processes. No input may be lost and every wait must end on new output.
func TestInteractivePythonUnderLoad(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if testing.Short() {
		t.Skip("a load test")
	}
	var stop atomic.Bool
	var spinners sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		spinners.Add(1)
		go func() {
			defer spinners.Done()
			for n := 0; !stop.Load(); n++ {
				if n%1_000_000 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	var burners []*exec.Cmd
	for range 1 {
		b := exec.Command("sh", "-c", "while :; do :; done")
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		burners = append(burners, b)
	}
	t.Cleanup(func() {
		stop.Store(true)
		spinners.Wait()
		for _, b := range burners {
			_ = b.Process.Kill()
			_ = b.Wait()
		}
	})

	h := newHarness(t, Config{}, nil)
	for i := range 5 {
		replayInteractive(t, h, py, "x = 6 * 7\nprint(x)\n", i)
	}
}

// TestInteractivePythonSlowStatement: the same replay where the
// interpreter takes a while between its first prompt and the output (a
// slow statement first): waits that follow both offsets keep waiting for
// new output rather than end at once on the prompts already read.
func TestInteractivePythonSlowStatement(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	h := newHarness(t, Config{}, nil)
	replayInteractive(t, h, py, "import time; time.sleep(0.5)\nx = 6 * 7\nprint(x)\n", 0)
}

// replayInteractive is the documented example: input written before the
// interpreter reads it, then at most 20 reads with wait=true following
// the stdout offset and the stderr_offset (the ">>> " prompts are on
// stderr: a read that named no stderr_offset would end at once on them,
// as the published default of 0 says).
func replayInteractive(t *testing.T, h *harness, py, input string, run int) {
	t.Helper()
	d := h.run(map[string]any{"command": py + " -u -i -q", "mode": "async"})
	h.OK("POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": input}, nil)
	out, errOff := "", 0
	for range 20 {
		var o outputData
		h.OK("GET", fmt.Sprintf("/v2/commands/%s?wait=true&wait_timeout=2&offset=%d&stderr_offset=%d", d.CommandID, len(out), errOff), nil, &o)
		out += o.Stdout
		errOff += len(o.Stderr)
		if strings.Contains(out, "42\n") { // print writes "42" and "\n" apart under -u
			break
		}
	}
	if out != "42\n" {
		t.Fatalf("run %d: stdout %q", run, out)
	}
	h.OK("POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": "exit()\n"}, nil)
	if o := h.waitDone(d.CommandID); o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "0" {
		t.Fatalf("run %d: %+v", run, o.Command)
	}
}

// TestWaitStderrOffsetDefault: stderr past stderr_offset ends a wait;
// stderr_offset defaults to 0, so a wait that names none ends at once
// on stderr already written (answered from 0), with the command still
// running.
func TestWaitStderrOffsetDefault(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "echo prompt >&2; sleep 2; echo out", "mode": "async"})
	var o outputData
	h.OK("GET", "/v2/commands/"+d.CommandID+"?wait=true&wait_timeout=5&stderr_offset=0", nil, &o)
	if o.Stderr != "prompt\n" || o.Command.Status != StatusRunning {
		t.Fatalf("stderr past the given offset ends the wait: %+v", o)
	}
	h.OK("GET", "/v2/commands/"+d.CommandID+"?wait=true&wait_timeout=5", nil, &o)
	if o.Stdout != "" || o.Stderr != "prompt\n" || o.Command.Status != StatusRunning {
		t.Fatalf("a wait without stderr_offset did not end on the stderr already there: %+v", o)
	}
	h.OK("GET", "/v2/commands/"+d.CommandID+"?wait=true&wait_timeout=5&stderr_offset=7", nil, &o)
	if o.Stdout != "out\n" {
		t.Fatalf("a wait past all stderr ends on new stdout: %+v", o)
	}
}
