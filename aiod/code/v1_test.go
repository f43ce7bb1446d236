package code

import (
	"net/http"
	"strings"
	"testing"
)

// The v1 Jupyter interrupt and restart answer 501, as the published
// daemon does.
func TestJupyterInterruptRestart501(t *testing.T) {
	h := newHarness(t, Config{})
	for _, route := range []string{"interrupt", "restart"} {
		rp := h.do("POST", "/v1/jupyter/sessions/k/"+route, nil)
		if rp.status != http.StatusNotImplemented || rp.Success || !strings.Contains(rp.raw, "Session "+route+" is not supported") {
			t.Errorf("%s: %d %s", route, rp.status, rp.raw)
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
