package pool

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// poolMetrics is the pool's Prometheus collector: counters of creates
// and resumes, and at each scrape one series per sandbox read from its
// cgroups (the workspace's size is left to the metrics route, as walking
// every workspace per scrape would cost too much).
type poolMetrics struct {
	p         *Pool
	creates   *prometheus.CounterVec
	createDur *prometheus.HistogramVec
	resumes   prometheus.Counter

	sandboxes, cpu, memory, pids, memLimit *prometheus.Desc
}

func newPoolMetrics(p *Pool) *poolMetrics {
	labels := []string{"id", "office"}
	return &poolMetrics{p: p,
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aiod_pool_creates_total",
			Help: "Sandboxes created, by source: warm (claimed from the warm pool) or cold."}, []string{"source"}),
		createDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "aiod_pool_create_duration_seconds",
			Help: "Time from a create's admission to its sandbox running, by source.", Buckets: []float64{.005, .01, .02, .05, .1, .2, .5, 1, 2, 5}},
			[]string{"source"}),
		resumes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "aiod_pool_resumes_total", Help: "Sandboxes resumed, explicitly or on use."}),
		sandboxes: prometheus.NewDesc("aiod_pool_sandboxes", "Sandboxes by state (warm: started and unclaimed).", []string{"state"}, nil),
		cpu:       prometheus.NewDesc("aiod_pool_sandbox_cpu_seconds_total", "CPU time a sandbox's processes have used.", labels, nil),
		memory:    prometheus.NewDesc("aiod_pool_sandbox_memory_bytes", "Memory a sandbox uses (its cgroup's charge).", labels, nil),
		memLimit:  prometheus.NewDesc("aiod_pool_sandbox_memory_limit_bytes", "A sandbox's memory limit.", labels, nil),
		pids:      prometheus.NewDesc("aiod_pool_sandbox_pids", "Processes and threads in a sandbox.", labels, nil),
	}
}

func (m *poolMetrics) created(source string, took time.Duration) {
	m.creates.WithLabelValues(source).Inc()
	m.createDur.WithLabelValues(source).Observe(took.Seconds())
}

func (m *poolMetrics) resumed() { m.resumes.Inc() }

// Describe implements prometheus.Collector.
func (m *poolMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.creates.Describe(ch)
	m.createDur.Describe(ch)
	m.resumes.Describe(ch)
	for _, d := range []*prometheus.Desc{m.sandboxes, m.cpu, m.memory, m.memLimit, m.pids} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the counters, then a reading
// of every sandbox's cgroups (none of which resumes it).
func (m *poolMetrics) Collect(ch chan<- prometheus.Metric) {
	m.creates.Collect(ch)
	m.createDur.Collect(ch)
	m.resumes.Collect(ch)
	p := m.p
	p.mu.Lock()
	boxes := make([]*box, 0, len(p.boxes))
	for _, b := range p.boxes {
		boxes = append(boxes, b)
	}
	warm := len(p.warm)
	for _, ws := range p.warmT {
		warm += len(ws)
	}
	p.mu.Unlock()
	states := map[State]int{Starting: 0, Running: 0, Paused: 0}
	for _, b := range boxes {
		b.mu.Lock()
		st, sb, office := b.state, b.sb, b.office
		b.mu.Unlock()
		states[st]++
		if sb == nil {
			continue
		}
		u, err := sb.Usage()
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.cpu, prometheus.CounterValue, float64(u.CPUUsageNs)/1e9, b.id, office)
		ch <- prometheus.MustNewConstMetric(m.memory, prometheus.GaugeValue, float64(u.MemoryBytes), b.id, office)
		ch <- prometheus.MustNewConstMetric(m.memLimit, prometheus.GaugeValue, float64(u.MemoryLimitBytes), b.id, office)
		ch <- prometheus.MustNewConstMetric(m.pids, prometheus.GaugeValue, float64(u.Pids), b.id, office)
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(m.sandboxes, prometheus.GaugeValue, float64(n), string(st))
	}
	ch <- prometheus.MustNewConstMetric(m.sandboxes, prometheus.GaugeValue, float64(warm), "warm")
}
