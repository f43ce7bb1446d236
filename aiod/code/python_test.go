package code

import (
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// png1x1 is a 1x1 PNG, base64.
const png1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// TestPython runs on real kernels, reusing session "a" across subtests.
func TestPython(t *testing.T) {
	h := newHarness(t, Config{MaxKernelSessions: 2, InterruptGrace: time.Second, MaxOutputChars: 1000})
	a := func(code string, extra ...any) (runData, reply) { return h.exec("python", "a", code, extra...) }

	t.Run("state across cells", func(t *testing.T) {
		a("x = 21")
		r, _ := a("print(x * 2)")
		if *r.Stdout != "42\n" || *r.ExecutionCount != 2 || r.Status != StatusOK || r.ExitCode != 0 || *r.SessionID != "a" {
			t.Fatalf("%+v", r)
		}
		if o := r.out(t, 0); o.OutputType != OutputStream || o.Name != "stdout" || len(o.keys) != 3 {
			t.Errorf("stream output %+v", o.keys)
		}
		r, _ = a("x")
		if o := r.out(t, 0); o.OutputType != OutputExecuteResult || o.Data["text/plain"] != "21" {
			t.Errorf("execute_result %+v", o.keys)
		}
	})

	t.Run("1/0", func(t *testing.T) {
		r, rp := a("1/0")
		o := r.out(t, 0)
		if rp.Success || r.Status != StatusError || r.ExitCode != 1 || o.OutputType != OutputError ||
			o.Ename != "ZeroDivisionError" || o.Evalue == "" || len(o.Traceback) == 0 {
			t.Fatalf("%s", rp.raw)
		}
		if *r.Stderr != "" {
			t.Errorf("stderr %q, want \"\" on v2", *r.Stderr)
		}
	})

	t.Run("print then raise", func(t *testing.T) {
		r, _ := a("print('before')\nraise ValueError('boom')")
		if len(r.Outputs) != 2 || r.out(t, 0).Text != "before\n" || r.out(t, 1).Ename != "ValueError" {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("rich output", func(t *testing.T) {
		r, rp := a("import base64\nfrom IPython.display import Image, HTML, display\ndisplay(HTML('<b>x</b>'))\n" +
			"display(Image(data=base64.b64decode('" + png1x1 + "')))")
		if len(r.Outputs) != 2 || r.out(t, 0).OutputType != OutputDisplayData || r.out(t, 0).Data["text/html"] != "<b>x</b>" ||
			r.out(t, 1).Data["image/png"] == nil {
			t.Fatalf("%s", rp.raw)
		}
		if !strings.Contains(rp.raw, `"<b>x</b>"`) {
			t.Errorf("html escaped: %s", rp.raw)
		}
	})

	t.Run("timeout interrupts and keeps state", func(t *testing.T) {
		start := time.Now()
		r, rp := a("while True: pass", "timeout", 1)
		if rp.Success || r.Status != StatusTimeout || r.ExitCode != 1 || time.Since(start) > 5*time.Second {
			t.Fatalf("%s", rp.raw)
		}
		if r.out(t, 0).Ename != "KeyboardInterrupt" || !strings.Contains(*r.Stderr, "execution timed out after 1000ms and was interrupted") {
			t.Errorf("%s", rp.raw)
		}
		if r, _ = a("print(x)"); *r.Stdout != "21\n" {
			t.Errorf("after the interrupt: %+v", r)
		}
	})

	t.Run("output cap", func(t *testing.T) {
		r, _ := a("import sys, time\nprint('a' * 5000)\nsys.stdout.flush()\ntime.sleep(0.05)\nprint('after')")
		if len(r.Outputs) < 2 || r.out(t, 0).Text != strings.Repeat("a", 1000) ||
			r.out(t, 1).Text != "[output truncated at 1000 characters]\n" || !strings.Contains(*r.Stdout, "after") {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("v1 shapes", func(t *testing.T) {
		rp := h.do("POST", "/v1/code/execute", map[string]any{"language": "python", "code": "print(x)", "session_id": "a"})
		var d struct {
			Stdout, Stderr *string
			Outputs        []map[string]any
		}
		rp.data(t, &d)
		if !rp.Success || *d.Stdout != "21\n" || d.Stderr != nil || len(d.Outputs) != 1 || len(d.Outputs[0]) != 9 {
			t.Fatalf("%s", rp.raw)
		}
		rp = h.do("POST", "/v1/jupyter/execute", map[string]any{"code": "x + 1", "session_id": "a"})
		var j struct {
			KernelName string `json:"kernel_name"`
			MsgID      string `json:"msg_id"`
			Outputs    []map[string]any
		}
		rp.data(t, &j)
		if j.KernelName != KernelName || j.MsgID == "" || len(j.Outputs) != 1 || j.Outputs[0]["text"] != nil || len(j.Outputs[0]) != 9 {
			t.Fatalf("%s", rp.raw)
		}
		rp = h.do("POST", "/v1/code/execute", map[string]any{"language": "python", "code": ""})
		rp.data(t, &d)
		if rp.status != 200 || !rp.Success || len(d.Outputs) != 0 {
			t.Errorf("empty code on v1: %s", rp.raw)
		}
		if rp = h.do("POST", "/v1/jupyter/execute", map[string]any{"code": "1", "cwd": "/no/such/dir"}); rp.Success || !strings.Contains(rp.raw, "DirectoryError") {
			t.Errorf("jupyter cwd: %s", rp.raw)
		}
		if rp = h.do("POST", "/v1/jupyter/execute", map[string]any{"code": "1", "kernel_name": "ir"}); rp.status != 422 ||
			rp.Errors[0].Message != "unknown kernel 'ir'; available: python3" {
			t.Errorf("kernel_name: %s", rp.raw)
		}
		if rp = h.do("GET", "/v1/jupyter/sessions", nil); !strings.Contains(rp.raw, `"a":{`) {
			t.Errorf("jupyter sessions: %s", rp.raw)
		}
	})

	t.Run("user it cannot become", func(t *testing.T) {
		r, _ := h.run(map[string]any{"language": "python", "code": "1", "user": "no-such-user-aiod"}, http.StatusOK)
		if o := r.out(t, 0); r.Status != StatusError || o.Ename != "ProcessError" {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("two sessions at once, then the cap", func(t *testing.T) {
		var wg sync.WaitGroup
		got := make([]string, 2)
		for i, id := range []string{"a", "b"} {
			wg.Go(func() {
				r, _ := h.run(map[string]any{"language": "python", "code": "import time; time.sleep(0.2); print('" + id + "')", "session_id": id}, http.StatusOK)
				got[i] = *r.Stdout
			})
		}
		wg.Wait()
		if got[0] != "a\n" || got[1] != "b\n" {
			t.Fatalf("%q", got)
		}
		_, rp := h.run(map[string]any{"language": "python", "code": "1", "session_id": "c"}, http.StatusTooManyRequests)
		if rp.Message != "Maximum number of kernel sessions (2) reached" {
			t.Errorf("%s", rp.raw)
		}
	})

	t.Run("ignored interrupt restarts the kernel", func(t *testing.T) {
		r, rp := h.run(map[string]any{"language": "python", "session_id": "b", "timeout": 1,
			"code": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"}, http.StatusOK)
		if r.Status != StatusTimeout || !strings.Contains(*r.Stderr, "session state was reset") {
			t.Fatalf("%s", rp.raw)
		}
		r, _ = h.run(map[string]any{"language": "python", "session_id": "b", "code": "print('back')"}, http.StatusOK)
		if *r.Stdout != "back\n" || *r.ExecutionCount != 1 {
			t.Errorf("after restart: %+v", r)
		}
	})

	t.Run("one-off leaks nothing", func(t *testing.T) {
		h.run(map[string]any{"language": "python", "code": "leak = 1"}, http.StatusOK)
		r, _ := h.run(map[string]any{"language": "python", "code": "leak"}, http.StatusOK)
		if r.Status != StatusError || r.out(t, 0).Ename != "NameError" || r.SessionID != nil {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("sessions routes and close", func(t *testing.T) {
		rp := h.do("GET", "/v2/code/sessions/a", nil)
		var s SessionInfo
		rp.data(t, &s)
		if s.KernelName != KernelName || s.MaxIdleTime != nil || s.State != "idle" || s.Language != Python {
			t.Errorf("%s", rp.raw)
		}
		sb, _ := h.p.e.reg.Get(Python, "b")
		k := sb.rt.(*kernel)
		if !k.alive(2 * time.Second) {
			t.Error("heartbeat unanswered")
		}
		if rp = h.do("DELETE", "/v2/code/sessions/a", nil); !strings.Contains(rp.raw, `"deleted":true`) {
			t.Errorf("%s", rp.raw)
		}
		if rp = h.do("DELETE", "/v2/code/sessions/a", nil); rp.status != 200 || !strings.Contains(rp.raw, `"deleted":false`) {
			t.Errorf("%s", rp.raw)
		}
		if rp = h.do("GET", "/v2/code/sessions/a", nil); rp.status != http.StatusNotFound {
			t.Errorf("%s", rp.raw)
		}
		if err := h.p.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(k.cmd.Process.Pid, 0); err != syscall.ESRCH {
			t.Errorf("kernel pid %d after Close: %v", k.cmd.Process.Pid, err)
		}
	})
}
