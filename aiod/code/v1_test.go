package code

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The v1 Jupyter interrupt ends the running cell with KeyboardInterrupt
// and keeps the session's state; restart keeps the id and loses the
// state.
func TestJupyterInterruptRestart(t *testing.T) {
	h := newHarness(t, Config{})
	if !h.p.e.pythonProbe().ok {
		t.Skip("no python with ipykernel")
	}
	h.exec("python", "k", "x = 21")
	done := make(chan runData, 1)
	go func() {
		var r runData
		rp := h.do("POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "k",
			"code": "import time\ntime.sleep(60)", "timeout": 120})
		_ = json.Unmarshal(rp.Data, &r)
		done <- r
	}()
	waitFor(t, "the cell to run", func() bool {
		s, err := h.p.e.Session(Python, "k")
		return err == nil && s.State == "executing"
	})
	rp := h.do("POST", "/v1/jupyter/sessions/k/interrupt", nil)
	if rp.status != 200 || !rp.Success || !strings.Contains(rp.raw, `"interrupted":true`) {
		t.Fatalf("interrupt: %s", rp.raw)
	}
	select {
	case r := <-done:
		if r.Status != StatusError || len(r.Outputs) == 0 || r.out(t, len(r.Outputs)-1).Ename != "KeyboardInterrupt" {
			t.Fatalf("interrupted run: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupt did not end the cell")
	}
	if r, _ := h.exec("python", "k", "x"); r.out(t, 0).Data["text/plain"] != "21" {
		t.Fatalf("state lost by an interrupt: %+v", r)
	}
	if rp = h.do("POST", "/v1/jupyter/sessions/k/interrupt", nil); !strings.Contains(rp.raw, `"interrupted":false`) {
		t.Errorf("idle interrupt: %s", rp.raw)
	}

	if rp = h.do("POST", "/v1/jupyter/sessions/k/restart", nil); rp.status != 200 || !rp.Success {
		t.Fatalf("restart: %s", rp.raw)
	}
	if r, _ := h.exec("python", "k", "x"); r.Status != StatusError || r.out(t, 0).Ename != "NameError" {
		t.Fatalf("state kept across a restart: %+v", r)
	}
	for _, route := range []string{"interrupt", "restart"} {
		if rp = h.do("POST", "/v1/jupyter/sessions/nope/"+route, nil); rp.status != http.StatusNotFound {
			t.Errorf("%s of an unknown session: %d", route, rp.status)
		}
	}
}

// The v1 max_idle_time replaces the idle limit of the session it
// creates, and the session says so.
func TestNodeMaxIdleTime(t *testing.T) {
	h := newHarness(t, Config{})
	if !h.p.e.nodeProbe().ok {
		t.Skip("no node")
	}
	rp := h.do("POST", "/v1/nodejs/sessions", map[string]any{"session_id": "short", "max_idle_time": 100})
	if rp.status != 200 || !strings.Contains(rp.raw, `"max_idle_time":100`) {
		t.Fatalf("create: %s", rp.raw)
	}
	h.do("POST", "/v1/nodejs/sessions", map[string]any{"session_id": "default"})
	waitFor(t, "the short session to be reclaimed", func() bool {
		h.p.e.reclaim()
		_, err := h.p.e.Session(JavaScript, "short")
		return err != nil
	})
	if _, err := h.p.e.Session(JavaScript, "default"); err != nil {
		t.Fatal("a session with the plane's idle limit was reclaimed")
	}
}
