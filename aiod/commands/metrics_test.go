package commands

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, Config{Registerer: reg}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "m"}, nil)
	h.run(map[string]any{"command": "exit 3", "session": "m"})
	h.run(map[string]any{"command": "true"})
	h.run(map[string]any{"command": "sleep 30", "hard_timeout": 0.1})
	d := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", nil, nil)
	h.waitDone(d.CommandID)
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "/no/such/program", "shell": "none"})
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "cwd": "/nonexistent"})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"command_exec_total", []string{"status", "completed"}, 3}, // exit 3, true, and the kill
		{"command_exec_total", []string{"status", "timed_out"}, 1},
		{"command_exec_total", []string{"status", "error"}, 2},
		{"command_exec_duration_seconds", nil, 4},
		{"command_sessions", nil, float64(len(h.p.e.Sessions()))},
	} {
		if got := planetest.MetricValue(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	h.OK("DELETE", "/v2/commands/sessions/m", nil, nil)
	if got, want := planetest.MetricValue(t, reg, "command_sessions"), float64(len(h.p.e.Sessions())); got != want || want < 1 {
		t.Errorf("command_sessions after a close = %v", got)
	}
	// A second plane on the same registry shares the series.
	p2 := New(Config{Registerer: reg, Workspace: t.TempDir()})
	defer closePlane(t, p2)
	if _, err := p2.Engine().Run(context.Background(), Request{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the second plane's count", func() bool {
		return planetest.MetricValue(t, reg, "command_exec_total", "status", "completed") == 4
	})
}
