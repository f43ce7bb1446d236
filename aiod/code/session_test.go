package code

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartFailureFreesSlot: a session whose runtime cannot start on
// its first run is dropped, so it does not hold a slot under the cap.
func TestStartFailureFreesSlot(t *testing.T) {
	t.Run("node with a cwd that is gone", func(t *testing.T) {
		e := NewEngine(Config{Workspace: t.TempDir(), MaxSessions: 1})
		defer e.Close(t.Context())
		s, err := e.session(JavaScript, "bad", filepath.Join(t.TempDir(), "removed"), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.runIn(t.Context(), s, &Result{Code: "1", Language: JavaScript, Outputs: []Output{}}, time.Second)
		if err != nil || res.Status != StatusError || len(res.Outputs) != 1 || res.Outputs[0].Ename != "ProcessError" ||
			res.Outputs[0].Evalue != "the node process could not be started" {
			t.Fatalf("%+v %v", res, err)
		}
		if ss := e.Sessions(""); len(ss) != 0 {
			t.Errorf("sessions after a failed start: %+v", ss)
		}
		if _, err := e.session(JavaScript, "good", e.cfg.Workspace, nil, 0); err != nil {
			t.Errorf("the slot was not freed: %v", err)
		}
		// a run queued behind the failed start gets the same answer
		if res, err := e.runIn(t.Context(), s, &Result{Code: "1", Language: JavaScript, Outputs: []Output{}}, time.Second); err != nil ||
			res.Status != StatusError || res.Outputs[0].Ename != "ProcessError" {
			t.Errorf("queued behind: %+v %v", res, err)
		}
	})

	t.Run("python whose kernel exits at once", func(t *testing.T) {
		// passes the probe (imports "ipykernel"), then exits as a kernel
		py := filepath.Join(t.TempDir(), "python3")
		script := "#!/bin/sh\nif [ \"$1\" = -c ]; then echo 3.12.0; exit 0; fi\necho no kernel here >&2\nexit 1\n"
		if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, Config{Python: py, MaxKernelSessions: 1})
		for _, id := range []string{"a", "b", "a"} {
			r, rp := h.exec("python", id, "1")
			if r.Status != StatusError || r.out(t, 0).Ename != "ProcessError" || r.out(t, 0).Evalue != "the python kernel could not be started" {
				t.Fatalf("%s: %s", id, rp.raw)
			}
			if rp = h.do("GET", "/v2/code/sessions", nil); !strings.Contains(rp.raw, `"sessions":{}`) {
				t.Errorf("%s: %s", id, rp.raw)
			}
		}
		if rp := h.do("POST", "/v2/code/sessions", map[string]any{"language": "python", "session_id": "c"}); rp.status != http.StatusServiceUnavailable {
			t.Errorf("create: %s", rp.raw)
		}
		if rp := h.do("GET", "/v2/code/sessions", nil); !strings.Contains(rp.raw, `"sessions":{}`) {
			t.Errorf("after create: %s", rp.raw)
		}
	})
}

// TestAgeSeconds counts from the session's creation, not its last use.
func TestAgeSeconds(t *testing.T) {
	e := NewEngine(Config{Workspace: t.TempDir()})
	s, err := e.session(JavaScript, "old", e.cfg.Workspace, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.created, s.lastUsed = now.Add(-90*time.Second), now.Add(-time.Second)
	i := e.info(s)
	if i.AgeSeconds < 90 || i.AgeSeconds > 92 || i.CreatedAt != s.created.UnixMilli() || i.LastUsed != s.lastUsed.UnixMilli() {
		t.Errorf("%+v", i)
	}
}

// TestSecretsHidden: the daemon's API keys never reach a run's
// environment; the rest of it does.
func TestSecretsHidden(t *testing.T) {
	t.Setenv("AIO_API_KEY", "secret-aio-key")
	t.Setenv("SANDBOX_API_KEY", "secret-sandbox-key")
	t.Setenv("AIOD_TEST_VISIBLE", "visible")
	h := newHarness(t, Config{})
	for _, c := range []struct{ lang, id, code, want string }{
		{"python", "", "import os\nprint([os.environ.get(k) for k in ('AIO_API_KEY', 'SANDBOX_API_KEY', 'AIOD_TEST_VISIBLE')])",
			"[None, None, 'visible']\n"},
		{"python", "env", "import os\nprint(sorted(k for k, v in os.environ.items() if 'secret' in v or k.endswith('API_KEY')))", "[]\n"},
		{"javascript", "", "console.log(JSON.stringify(['AIO_API_KEY', 'SANDBOX_API_KEY', 'AIOD_TEST_VISIBLE'].map(k => process.env[k] ?? null)))",
			"[null,null,\"visible\"]\n"},
		{"javascript", "env", "console.log(JSON.stringify(Object.keys(process.env).filter(k => /secret/.test(process.env[k]) || k.endsWith('API_KEY'))))",
			"[]\n"},
	} {
		r, rp := h.exec(c.lang, c.id, c.code)
		if r.Status != StatusOK || *r.Stdout != c.want || strings.Contains(rp.raw, "secret-") {
			t.Errorf("%s %q: %s", c.lang, c.id, rp.raw)
		}
	}
}
