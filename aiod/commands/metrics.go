package commands

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Status label of command_exec_total for a command that could not be
// started.
const metricSpawnError = "error"

// metrics are the plane's Prometheus series; a nil *metrics (no
// Config.Registerer) records nothing.
type metrics struct {
	exec     *prometheus.CounterVec
	duration prometheus.Histogram
	sessions prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	if reg == nil {
		return nil
	}
	return &metrics{
		exec: register(reg, log, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "command_exec_total",
			Help: "Commands run, by final status (completed, timed_out; a killed command is completed), or error when the process could not be started.",
		}, []string{"status"})),
		duration: register(reg, log, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "command_exec_duration_seconds",
			Help:    "Command run times, from spawn to exit.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600},
		})),
		sessions: register(reg, log, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "command_sessions",
			Help: "Live commands sessions (v2, v1 bash and v1 shell).",
		})),
	}
}

// register registers c, or returns the collector already registered
// under its name (a second engine on the same registry shares it).
func register[T prometheus.Collector](reg prometheus.Registerer, log *slog.Logger, c T) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	log.Warn("commands: metric not registered", "error", err.Error())
	return c
}

// ended counts a command that exited with status after d.
func (m *metrics) ended(status string, d time.Duration) {
	if m != nil {
		m.exec.WithLabelValues(status).Inc()
		m.duration.Observe(d.Seconds())
	}
}

// failed counts a command that could not be started.
func (m *metrics) failed() {
	if m != nil {
		m.exec.WithLabelValues(metricSpawnError).Inc()
	}
}

// setSessions records the number of live sessions.
func (m *metrics) setSessions(n int) {
	if m != nil {
		m.sessions.Set(float64(n))
	}
}
