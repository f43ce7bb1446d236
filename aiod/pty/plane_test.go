package pty

import (
	"errors"
	"net/http"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// TestFullTableIs400: a full table with nothing to evict refuses with
// the shared ErrLimit kind, which every route that creates a terminal
// answers 400 with the same envelope (the published evict-or-400), not
// the table's 429.
func TestFullTableIs400(t *testing.T) {
	h := newHarness(t, Config{MaxSessions: 1}, nil)
	h.session(map[string]any{"id": "only"}) // persistent: never evicted
	const msg = "Maximum number of terminal sessions (1) reached"
	const hint = "close a terminal (DELETE /v2/pty/sessions/{id}) or create expiring ones"
	for _, c := range []struct{ method, path string }{
		{"POST", "/v2/pty/sessions"},
		{"POST", "/v1/shell/sessions/create"},
		{"POST", "/v1/shell/exec"},
		{"GET", "/v1/shell/terminal-url"},
		{"GET", "/v2/pty/ws"},
		{"GET", "/v1/shell/ws"},
	} {
		var body any
		if c.path == "/v1/shell/exec" {
			body = map[string]any{"command": "true"}
		}
		st, r, raw := h.Do(c.method, c.path, body)
		if st != http.StatusBadRequest || r.Success || r.Message != msg || r.Hint == nil || *r.Hint != hint || string(r.Data) != "null" {
			t.Errorf("%s %s: %d %s", c.method, c.path, st, raw)
		}
	}
	_, err := h.p.Engine().Create(Options{})
	if !errors.Is(err, ErrLimit) || !errors.Is(err, api.ErrLimit) || api.Status(err) != http.StatusTooManyRequests {
		t.Errorf("engine refusal %v: want the shared ErrLimit kind", err)
	}
}

// TestCloseGoneIs200: closing a terminal that is gone answers 200 with
// success false and the not-found message on both paths; everything
// else answers its kind's status (404).
func TestCloseGoneIs200(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for _, path := range []string{"/v2/pty/sessions/", "/v1/shell/sessions/"} {
		id := h.session(nil)
		h.OK("DELETE", path+id, nil, nil)
		if got := h.Fails(http.StatusOK, "DELETE", path+id, nil); got != "Session not found: "+id {
			t.Errorf("DELETE %s%s again: %q", path, id, got)
		}
		h.Fails(http.StatusNotFound, "GET", "/v2/pty/sessions/"+id, nil)
	}
}
