package pty

import (
	"testing"
)

// TestNoChangeZeroMeansNever: no_change_timeout 0 on create means never,
// as on exec and PATCH, not "interrupt at once".
func TestNoChangeZeroMeansNever(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.OK("POST", "/v2/pty/sessions", map[string]any{"id": "z0", "no_change_timeout": 0}, nil)
	var r struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
	}
	h.OK("POST", "/v2/pty/sessions/z0/exec", map[string]any{"command": "sleep 0.3; echo quick"}, &r)
	if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
}
