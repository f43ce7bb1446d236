package mcp

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// unknownToolLabel is the tool label of calls to names no tool or
// upstream carries: counted under one label, so that clients sending
// arbitrary names cannot grow the metric without bound.
const unknownToolLabel = "(unknown)"

// metrics counts tool calls by tool and outcome (ok, error for isError,
// cancelled, protocol_error for an upstream's JSON-RPC error,
// unknown_tool) and times them. The tool label is a built-in's name,
// "upstream:<name>" for every call forwarded to that upstream, or
// [unknownToolLabel].
type metrics struct {
	calls *prometheus.CounterVec
	dur   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_tool_calls_total",
			Help: "MCP tool calls by tool and outcome (ok, error, cancelled, protocol_error, unknown_tool)."}, []string{"tool", "outcome"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcp_tool_call_duration_seconds",
			Help: "MCP tool call durations by tool.", Buckets: prometheus.DefBuckets}, []string{"tool"}),
	}
	if reg != nil {
		m.calls = register(reg, m.calls)
		m.dur = register(reg, m.dur)
	}
	return m
}

// register registers c, or returns the collector already registered
// under its name (a second server on the same registry shares it).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) observe(tool, outcome string, d time.Duration) {
	m.calls.WithLabelValues(tool, outcome).Inc()
	m.dur.WithLabelValues(tool).Observe(d.Seconds())
}
