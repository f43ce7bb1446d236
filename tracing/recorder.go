package tracing

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Span is one ended span as the console, the hub's trace API and
// "a2c call --json --trace" show it.
type Span struct {
	TraceID string `json:"trace_id"`
	Name    string `json:"name"`
	SpanID  string `json:"span_id"`
	// ParentID is the parent's span id, empty for a root. The parent may
	// be missing from a trace: a hop that did not trace, or whose spans
	// went to a collector only.
	ParentID   string    `json:"parent_id"`
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	// Service is the service.name of the process that made the span.
	Service string `json:"service,omitempty"`
	// Status is "error" for a failed hop (StatusMessage says why), else
	// "ok".
	Status        string         `json:"status"`
	StatusMessage string         `json:"status_message,omitempty"`
	Attributes    map[string]any `json:"attributes,omitempty"`
}

// Recorder bounds: the most recent traces kept, the spans kept per trace,
// the longest string attribute kept.
const (
	DefaultMaxTraces = 4096
	DefaultMaxSpans  = 256
	maxAttrString    = 1024
)

// Recorder is a span processor that keeps the spans of the most recent
// traces in memory, for the console and the hub's trace API. It is
// bounded: past maxTraces the oldest trace goes, past maxSpans a trace
// keeps its first spans and counts the rest as dropped. It adds one map
// insertion under a mutex per ended span.
type Recorder struct {
	maxTraces, maxSpans int

	mu      sync.Mutex
	traces  map[trace.TraceID]*recorded
	order   []trace.TraceID // ring of trace ids in arrival order
	next    int             // the ring's oldest slot once full
	dropped int64
}

type recorded struct {
	spans   []Span
	dropped int
}

// NewRecorder returns a recorder of at most maxTraces traces of at most
// maxSpans spans each (<= 0: the defaults).
func NewRecorder(maxTraces, maxSpans int) *Recorder {
	if maxTraces <= 0 {
		maxTraces = DefaultMaxTraces
	}
	if maxSpans <= 0 {
		maxSpans = DefaultMaxSpans
	}
	return &Recorder{maxTraces: maxTraces, maxSpans: maxSpans, traces: make(map[trace.TraceID]*recorded)}
}

// Add records spans made elsewhere (received over OTLP, for example).
// Spans with an invalid trace id are ignored, and so is a span whose
// span id the trace already holds: a process that both records a span
// and exports it to this one does not show it twice.
func (r *Recorder) Add(spans ...Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range spans {
		id, err := trace.TraceIDFromHex(s.TraceID)
		if err != nil {
			continue
		}
		if t := r.traces[id]; t != nil && slices.ContainsFunc(t.spans, func(x Span) bool { return x.SpanID == s.SpanID }) {
			continue
		}
		r.addLocked(id, s)
	}
}

func (r *Recorder) addLocked(id trace.TraceID, s Span) {
	t := r.traces[id]
	if t == nil {
		if len(r.order) < r.maxTraces {
			r.order = append(r.order, id)
		} else {
			delete(r.traces, r.order[r.next])
			r.order[r.next] = id
			r.next = (r.next + 1) % r.maxTraces
		}
		t = &recorded{}
		r.traces[id] = t
	}
	if len(t.spans) >= r.maxSpans {
		t.dropped++
		r.dropped++
		return
	}
	t.spans = append(t.spans, s)
}

// Trace returns the recorded spans of trace id, ordered by [ByStart],
// and how many of its spans were dropped; nil when none is recorded.
func (r *Recorder) Trace(id trace.TraceID) (spans []Span, dropped int) {
	r.mu.Lock()
	t := r.traces[id]
	if t != nil {
		spans = slices.Clone(t.spans)
		dropped = t.dropped
	}
	r.mu.Unlock()
	slices.SortStableFunc(spans, ByStart)
	return spans, dropped
}

// ByStart orders spans by start time, and the longer first of two that
// start together: a parent before the child that starts with it.
func ByStart(a, b Span) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	return cmp.Compare(b.DurationMS, a.DurationMS)
}

// OnStart implements sdktrace.SpanProcessor; spans are recorded when they
// end.
func (r *Recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd records an ended span.
func (r *Recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	sp := FromReadOnly(s)
	r.mu.Lock()
	r.addLocked(s.SpanContext().TraceID(), sp)
	r.mu.Unlock()
}

// Shutdown implements sdktrace.SpanProcessor.
func (r *Recorder) Shutdown(context.Context) error { return nil }

// ForceFlush implements sdktrace.SpanProcessor.
func (r *Recorder) ForceFlush(context.Context) error { return nil }

// FromReadOnly converts an SDK span to a [Span].
func FromReadOnly(s sdktrace.ReadOnlySpan) Span {
	sp := Span{
		TraceID:    s.SpanContext().TraceID().String(),
		Name:       s.Name(),
		SpanID:     s.SpanContext().SpanID().String(),
		Start:      s.StartTime(),
		DurationMS: float64(s.EndTime().Sub(s.StartTime())) / float64(time.Millisecond),
		Status:     "ok",
	}
	if p := s.Parent(); p.IsValid() {
		sp.ParentID = p.SpanID().String()
	}
	if st := s.Status(); st.Code == codes.Error {
		sp.Status, sp.StatusMessage = "error", st.Description
	}
	if res := s.Resource(); res != nil {
		if v, ok := res.Set().Value("service.name"); ok {
			sp.Service = v.AsString()
		}
	}
	if attrs := s.Attributes(); len(attrs) > 0 {
		sp.Attributes = make(map[string]any, len(attrs))
		for _, kv := range attrs {
			sp.Attributes[string(kv.Key)] = attrValue(kv.Value)
		}
	}
	return sp
}

func attrValue(v attribute.Value) any {
	if v.Type() == attribute.STRING {
		s := v.AsString()
		if len(s) > maxAttrString {
			s = s[:maxAttrString] + "…"
		}
		return s
	}
	return v.AsInterface()
}
