package code

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNode(t *testing.T) {
	h := newHarness(t, Config{MaxSessions: 2, NodeGrace: 500 * time.Millisecond})
	js := func(id, code string, extra ...any) (runData, reply) { return h.exec("javascript", id, code, extra...) }

	t.Run("state across cells", func(t *testing.T) {
		r, _ := js("s1", "globalThis.n = 41")
		if o := r.out(t, 0); o.OutputType != OutputExecuteResult || o.Data["text/plain"] != "41" {
			t.Fatalf("%+v", o.keys)
		}
		r, _ = js("s1", "console.log(n + 1); console.error('warn')")
		if *r.Stdout != "42\n" || *r.Stderr != "warn\n" || *r.ExecutionCount != 2 || r.Language != JavaScript {
			t.Fatalf("%+v", r)
		}
		r, _ = js("s1", "await new Promise(r => setTimeout(() => r(n), 10))")
		if r.out(t, 0).Data["text/plain"] != "41" {
			t.Errorf("top-level await: %+v", r)
		}
	})

	t.Run("error", func(t *testing.T) {
		r, rp := js("s1", "throw new TypeError('bad')")
		o := r.out(t, 0)
		if rp.Success || r.Status != StatusError || r.ExitCode != 1 || o.Ename != "TypeError" || o.Evalue != "bad" ||
			!strings.Contains(strings.Join(o.Traceback, "\n"), "evalmachine.<anonymous>") {
			t.Fatalf("%s", rp.raw)
		}
	})

	t.Run("timeout resets the session", func(t *testing.T) {
		r, rp := js("s1", "while (true) {}", "timeout", 1)
		want := "execution timed out after 1000ms; session state was reset"
		if r.Status != StatusTimeout || r.ExitCode != 1 || r.out(t, 0).Evalue != want || *r.Stderr != want+"\n" {
			t.Fatalf("%s", rp.raw)
		}
		if r, _ = js("s1", "typeof n"); r.out(t, 0).Data["text/plain"] != "'undefined'" || *r.ExecutionCount != 1 {
			t.Errorf("after reset: %+v", r)
		}
	})

	t.Run("one-off leaks nothing", func(t *testing.T) {
		js("", "globalThis.leak = 1")
		if r, _ := js("", "typeof leak"); r.out(t, 0).Data["text/plain"] != "'undefined'" || r.SessionID != nil {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("stateful generates an id", func(t *testing.T) {
		r, _ := js("", "1", "stateful", true)
		if r.SessionID == nil || *r.SessionID == "" {
			t.Fatalf("%+v", r)
		}
		h.do("DELETE", "/v2/code/sessions/"+*r.SessionID, nil)
	})

	t.Run("two sessions at once, then the cap", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, id := range []string{"s1", "s2"} {
			wg.Go(func() {
				if r, _ := js(id, "await new Promise(r => setTimeout(r, 100)); console.log('"+id+"')"); *r.Stdout != id+"\n" {
					t.Errorf("%s: %+v", id, r)
				}
			})
		}
		wg.Wait()
		_, rp := h.run(map[string]any{"language": "node", "code": "1", "session_id": "s3"}, http.StatusTooManyRequests)
		if rp.Message != "Maximum number of sessions (2) reached" {
			t.Errorf("%s", rp.raw)
		}
	})

	t.Run("runs as another user", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root")
		}
		if r, _ := js("", "process.getuid()", "user", "nobody", "cwd", "/"); r.Status != StatusOK || r.out(t, 0).Data["text/plain"] != "65534" {
			t.Errorf("%+v", r)
		}
	})

	t.Run("v1 shapes", func(t *testing.T) {
		rp := h.do("POST", "/v1/nodejs/execute", map[string]any{"code": "console.log(1)", "session_id": "s1", "stdin": "ignored"})
		var d struct {
			Language, Stdout string
			Stderr           *string
			Outputs          []map[string]any
		}
		rp.data(t, &d)
		if d.Language != JavaScript || d.Stdout != "1\n" || d.Stderr == nil || *d.Stderr != "" || len(d.Outputs[0]) != 9 {
			t.Fatalf("%s", rp.raw)
		}
		if rp = h.do("GET", "/v1/nodejs/sessions/s1", nil); !strings.Contains(rp.raw, `"max_idle_time":1800000`) {
			t.Errorf("%s", rp.raw)
		}
		if rp = h.do("GET", "/v1/nodejs/sessions", nil); !strings.Contains(rp.raw, `"s2":{`) {
			t.Errorf("%s", rp.raw)
		}
		if rp = h.do("DELETE", "/v1/nodejs/sessions/s2", nil); !strings.Contains(rp.raw, `"deleted":true`) {
			t.Errorf("%s", rp.raw)
		}
		if rp = h.do("POST", "/v1/nodejs/sessions", map[string]any{"session_id": "s2"}); !strings.Contains(rp.raw, `"created":true`) {
			t.Errorf("%s", rp.raw)
		}
		if rp = h.do("DELETE", "/v2/code/sessions", nil); !strings.Contains(rp.raw, `"cleaned_sessions":2`) {
			t.Errorf("%s", rp.raw)
		}
	})
}

func TestIdleReclaim(t *testing.T) {
	h := newHarness(t, Config{SessionIdle: 200 * time.Millisecond})
	h.run(map[string]any{"language": "js", "code": "1", "session_id": "idle"}, http.StatusOK)
	deadline := time.Now().Add(5 * time.Second)
	for len(h.p.e.Sessions("")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle session not reclaimed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
