package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Relay outcomes, the "outcome" label of a2c_relayed_calls_total.
const (
	outcomeOK      = "ok"      // the Computer answered
	outcomeTimeout = "timeout" // the relay deadline passed
	outcomeGone    = "gone"    // the Computer left before answering
	outcomeRefused = "refused" // the server answered with an ErrorPayload
	outcomeDropped = "dropped" // the Agent left before the answer
)

// metrics holds the server's Prometheus collectors in a private registry.
type metrics struct {
	reg         *prometheus.Registry
	connections prometheus.Gauge
	offices     prometheus.Gauge
	members     *prometheus.GaugeVec
	relayed     *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	handshakes  *prometheus.CounterVec
	inFlight    prometheus.Gauge
	// consoleDropped counts the call-log events a slow console stream
	// lost (calls.go).
	consoleDropped prometheus.Counter

	// Children resolved once, so the relay path does no label lookups.
	byEvent map[string]*eventMetrics

	// cluster is set once, when the server joins a cluster.
	cluster atomic.Pointer[clusterMetrics]
}

type eventMetrics struct {
	outcome map[string]prometheus.Counter
	latency prometheus.Observer
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "a2c_connections", Help: "Sockets connected to the /smcp namespace.",
		}),
		offices: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "a2c_offices", Help: "Offices with at least one member.",
		}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "a2c_office_members", Help: "Members of offices, by role.",
		}, []string{"role"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2c_relayed_calls_total", Help: "client:* requests handled, by event and outcome.",
		}, []string{"event", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "a2c_relay_duration_seconds",
			Help:    "Time from receiving a client:* request to relaying the Computer's answer.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"event"}),
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2c_handshakes_refused_total", Help: "Connections refused before joining, by reason.",
		}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "a2c_relays_in_flight", Help: "client:* requests waiting for a Computer.",
		}),
		consoleDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "a2c_console_events_dropped_total", Help: "Call events a console's live stream lost because its page did not keep up.",
		}),
		byEvent: make(map[string]*eventMetrics),
	}
	m.reg.MustRegister(m.connections, m.offices, m.members, m.relayed, m.latency, m.handshakes, m.inFlight, m.consoleDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The WebSocket event loops count their own work (process-wide, as
	// the loops serve every sio.Server in the process); read at scrape.
	m.reg.MustRegister(loopCollector{
		duration: prometheus.NewDesc("a2c_sio_loop_iteration_duration_seconds",
			"Time the WebSocket event loop took per iteration (one wake-up and the events it handled).", nil, nil),
	}, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "a2c_sio_loop_slow_iterations_total",
		Help: "WebSocket event-loop iterations that took longer than 10ms; every WebSocket on that loop waited meanwhile.",
	}, func() float64 { return float64(sio.ReadLoopStats().SlowIterations) }))
	for _, ev := range smcp.ClientEvents() {
		em := &eventMetrics{outcome: make(map[string]prometheus.Counter), latency: m.latency.WithLabelValues(ev)}
		for _, o := range []string{outcomeOK, outcomeTimeout, outcomeGone, outcomeRefused, outcomeDropped} {
			em.outcome[o] = m.relayed.WithLabelValues(ev, o)
		}
		m.byEvent[ev] = em
	}
	return m
}

func (m *metrics) relayDone(event, outcome string, start time.Time) {
	em := m.byEvent[event]
	if em == nil {
		return
	}
	em.outcome[outcome].Inc()
	if outcome == outcomeOK {
		em.latency.Observe(time.Since(start).Seconds())
	}
}

func (m *metrics) rejected(reason string) { m.handshakes.WithLabelValues(reason).Inc() }

// loopCollector exposes sio's event-loop iteration durations as a
// histogram, built at scrape time from the counters sio keeps (sio does
// not import Prometheus).
type loopCollector struct{ duration *prometheus.Desc }

func (c loopCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.duration }

func (c loopCollector) Collect(ch chan<- prometheus.Metric) {
	st := sio.ReadLoopStats()
	buckets := make(map[float64]uint64, len(sio.LoopIterationBuckets))
	var n uint64
	for i, le := range sio.LoopIterationBuckets {
		n += st.Durations[i]
		buckets[le.Seconds()] = n
	}
	n += st.Durations[len(sio.LoopIterationBuckets)]
	ch <- prometheus.MustNewConstHistogram(c.duration, n, st.Total.Seconds(), buckets)
}

// clusterMetrics are the metrics of a clustered server: which node this
// is, the frames it exchanges with other nodes, and its Redis commands'
// latency and errors. They are registered only when the server joins a
// cluster, so a server that runs alone exports none of them.
type clusterMetrics struct {
	frames    *prometheus.CounterVec
	framesOut [5]prometheus.Counter // by cluster.Kind
	framesIn  [5]prometheus.Counter
	redis     *prometheus.HistogramVec
	redisErrs *prometheus.CounterVec
	// byCmd caches each command's children: command -> redisCmdMetrics.
	// The commands are a small fixed set (the package's own).
	byCmd   sync.Map
	dropped prometheus.Counter
}

// frameKinds names the frame kinds for the "kind" label, by cluster.Kind.
var frameKinds = [...]string{1: "request", 2: "answer", 3: "broadcast", 4: "gone"}

// clustered registers the cluster metrics for node id.
func (m *metrics) clustered(id string, s *Server) {
	c := &clusterMetrics{
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2c_cluster_frames_total", Help: "Frames exchanged with other nodes of the cluster, by direction (out, in) and kind (request, answer, broadcast, gone).",
		}, []string{"direction", "kind"}),
		redis: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "a2c_cluster_redis_duration_seconds",
			Help:    "Time each Redis command (or pipeline) of the cluster took, by command.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"command"}),
		redisErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2c_cluster_redis_errors_total", Help: "Redis commands of the cluster that failed (unreachable, timeout, error reply), by command.",
		}, []string{"command"}),
	}
	c.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "a2c_cluster_frames_failed_total", Help: "Frames to other nodes that could not be sent (Redis unavailable, or the node's backlog of frames full); each ended its call with the usual answer (or the backlog's 500).",
	})
	for k := 1; k < len(frameKinds); k++ {
		c.framesOut[k] = c.frames.WithLabelValues("out", frameKinds[k])
		c.framesIn[k] = c.frames.WithLabelValues("in", frameKinds[k])
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "a2c_cluster_node_info", Help: "Always 1; its label is this server's node id in the cluster.",
		ConstLabels: prometheus.Labels{"node": id},
	})
	info.Set(1)
	m.reg.MustRegister(c.frames, c.redis, c.redisErrs, c.dropped, info, clusterMembers{s: s, desc: prometheus.NewDesc("a2c_cluster_members",
		"Members of the offices where this node holds members, by the node that holds each one and role (this node's view of the cluster).",
		[]string{"node", "role"}, nil)}, clusterRefused{s: s, desc: prometheus.NewDesc("a2c_cluster_frames_refused_total",
		"Frames from Redis this node refused, by reason: mac (changed, forged, sealed with another key or for another channel), stale (sealed more than 30 s from this node's clock), replay (seen before), unsealed (no seal while a cluster key is set), malformed.",
		[]string{"reason"}, nil)}, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "a2c_cluster_subscription_breaks_total",
		Help: "This node's Redis subscription connections that broke while carrying channels (dropped by Redis, killed, or a network failure); the frames and office events published until each was made again were lost (the offices are reloaded).",
	}, func() float64 {
		if h := s.hub; h != nil && h.node != nil {
			return float64(h.node.SubscriptionBreaks())
		}
		return 0
	}))
	m.cluster.Store(c)
}

func (m *metrics) frameOut(k cluster.Kind) {
	if c := m.cluster.Load(); c != nil && int(k) < len(c.framesOut) && c.framesOut[k] != nil {
		c.framesOut[k].Inc()
	}
}

func (m *metrics) frameIn(k cluster.Kind) {
	if c := m.cluster.Load(); c != nil && int(k) < len(c.framesIn) && c.framesIn[k] != nil {
		c.framesIn[k].Inc()
	}
}

func (m *metrics) frameDropped() {
	if c := m.cluster.Load(); c != nil {
		c.dropped.Inc()
	}
}

// redisObserved is the node's Observe hook.
func (m *metrics) redisObserved(cmd string, d time.Duration, err error) {
	c := m.cluster.Load()
	if c == nil {
		return
	}
	o, ok := c.byCmd.Load(cmd)
	if !ok {
		o, _ = c.byCmd.LoadOrStore(cmd, redisCmdMetrics{c.redis.WithLabelValues(cmd), c.redisErrs.WithLabelValues(cmd)})
	}
	rm := o.(redisCmdMetrics)
	rm.latency.Observe(d.Seconds())
	if err != nil {
		rm.errs.Inc()
	}
}

// redisCmdMetrics are one command's children of the Redis metrics,
// resolved once (a label lookup hashes the label on every call, and a
// cross-node call reports two commands per node).
type redisCmdMetrics struct {
	latency prometheus.Observer
	errs    prometheus.Counter
}

// clusterMembers counts, at scrape time, the members of the offices this
// node follows by the node that holds each: with the members gauge it
// shows where every member of the cluster sits.
type clusterMembers struct {
	s    *Server
	desc *prometheus.Desc
}

func (c clusterMembers) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c clusterMembers) Collect(ch chan<- prometheus.Metric) {
	h := c.s.hub
	if h == nil {
		return
	}
	for k, n := range h.node.Census() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.Node, string(k.Role))
	}
}

// clusterRefused reads, at scrape time, the node's counts of refused
// frames (cluster.Node.Refused): a frame that fails its seal is an attack
// or a misconfigured node, worth an alert.
type clusterRefused struct {
	s    *Server
	desc *prometheus.Desc
}

func (c clusterRefused) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c clusterRefused) Collect(ch chan<- prometheus.Metric) {
	h := c.s.hub
	if h == nil {
		return
	}
	for reason, n := range h.node.Refused().All() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), reason)
	}
}
