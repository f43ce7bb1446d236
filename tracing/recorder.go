package tracing

import (
	"cmp"
	"context"
	"fmt"
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
	// DroppedAttributes counts the attributes left out past the bounds
	// of one span (at most 32 attributes, in about 4 KiB).
	DroppedAttributes int `json:"dropped_attributes,omitempty"`

	// size is the span's approximate size in memory (see spanCost), 0
	// until bound has run.
	size int
}

// Recorder bounds: the most recent traces kept, the spans kept per
// trace, and the approximate bytes all of them may take.
const (
	DefaultMaxTraces = 4096
	DefaultMaxSpans  = 256
	DefaultMaxBytes  = 64 << 20
)

// Bounds on one span, wherever it comes from (this process's spans or
// another's over OTLP): its name, service and status message are cut to
// maxAttrString bytes, and it keeps at most maxSpanAttrs attributes in
// maxSpanBytes (strings cut to maxAttrString bytes, arrays and key-value
// lists to maxOTLPItems items and maxOTLPDepth levels); the rest is left
// out and counted in DroppedAttributes.
const (
	maxAttrString = 256
	maxSpanAttrs  = 32
	maxSpanBytes  = 4 << 10
	maxOTLPDepth  = 4  // nesting of array and key-value list attributes
	maxOTLPItems  = 64 // items kept per array or key-value list attribute
)

// Approximate costs in memory, in bytes, of a span's parts: they are
// what the byte bounds count, close to what the Go runtime allocates for
// them (a Span with its hex ids; a map and each of its entries; a slice
// and each of its items; a string boxed in an interface, plus its bytes;
// a number or a bool).
const (
	spanCost   = 256
	traceCost  = 128 // a trace's entry in the Recorder
	mapCost    = 64
	entryCost  = 48
	listCost   = 40
	itemCost   = 16
	stringCost = 16
	scalarCost = 8
)

// budget is what is left of a byte bound.
type budget struct{ left int }

// take spends n bytes of b, if b has them.
func (b *budget) take(n int) bool {
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// attrSet builds a span's attributes within the bounds of one span.
type attrSet struct {
	m       map[string]any
	bud     budget
	dropped int
}

func newAttrSet(hint int) *attrSet {
	a := &attrSet{bud: budget{left: maxSpanBytes - mapCost}}
	a.m = make(map[string]any, min(hint, 8)) // the byte bound may keep few
	return a
}

// add adds the attribute key = v, bounded; one past the span's bounds is
// dropped. An empty value (nil) is left out.
func (a *attrSet) add(key string, v any) {
	if v == nil {
		return
	}
	if len(a.m) >= maxSpanAttrs {
		a.dropped++
		return
	}
	key = cut(key, maxAttrString)
	save := a.bud
	if !a.bud.take(entryCost + len(key)) {
		a.dropped++
		return
	}
	bv, ok := boundValue(v, 0, &a.bud)
	if !ok {
		a.bud = save
		a.dropped++
		return
	}
	a.m[key] = bv
}

// bytes is what the set takes, its map included.
func (a *attrSet) bytes() int {
	if len(a.m) == 0 {
		return 0
	}
	return maxSpanBytes - a.bud.left
}

// boundValue bounds an attribute's value at depth (0: the attribute's
// own) within bud: strings are cut, arrays and key-value lists keep their
// first items that fit, nesting past maxOTLPDepth is left out. ok is
// false when the value does not fit at all.
func boundValue(v any, depth int, bud *budget) (any, bool) {
	switch x := v.(type) {
	case string:
		x = cut(x, maxAttrString)
		return x, bud.take(stringCost + len(x))
	case bool, int, int64, float64:
		return x, bud.take(scalarCost)
	case []string:
		return boundList(len(x), func(i int) any { return x[i] }, depth, bud)
	case []int64:
		return boundList(len(x), func(i int) any { return x[i] }, depth, bud)
	case []bool:
		return boundList(len(x), func(i int) any { return x[i] }, depth, bud)
	case []float64:
		return boundList(len(x), func(i int) any { return x[i] }, depth, bud)
	case []any:
		return boundList(len(x), func(i int) any { return x[i] }, depth, bud)
	case map[string]any:
		if depth > maxOTLPDepth || !bud.take(mapCost) {
			return nil, false
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make(map[string]any, min(len(x), maxOTLPItems))
		for _, k := range keys {
			if len(out) >= maxOTLPItems {
				break
			}
			ck := cut(k, maxAttrString)
			save := *bud
			if !bud.take(entryCost + len(ck)) {
				break
			}
			ev, ok := boundValue(x[k], depth+1, bud)
			if !ok {
				*bud = save
				break
			}
			out[ck] = ev
		}
		return out, true
	case nil:
		return nil, false
	}
	// Another type (from a caller of Recorder.Add): its text.
	s := cut(fmt.Sprint(v), maxAttrString)
	return s, bud.take(stringCost + len(s))
}

// boundList bounds a list of n items, item(i) each.
func boundList(n int, item func(int) any, depth int, bud *budget) (any, bool) {
	if depth > maxOTLPDepth {
		return nil, false
	}
	c := min(n, maxOTLPItems)
	if !bud.take(listCost + c*itemCost) {
		return nil, false
	}
	out := make([]any, 0, c)
	for i := 0; i < n && len(out) < c; i++ {
		ev, ok := boundValue(item(i), depth+1, bud)
		if !ok {
			break
		}
		out = append(out, ev)
	}
	return out, true
}

// bound cuts s to the bounds of one span and sets its size: attributes
// are taken in key order. A span that came out of the decoder or
// FromReadOnly is bounded already.
func (s *Span) bound() {
	if s.size != 0 {
		return
	}
	attrBytes := 0
	if len(s.Attributes) > 0 {
		keys := make([]string, 0, len(s.Attributes))
		for k := range s.Attributes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		a := newAttrSet(len(keys))
		for _, k := range keys {
			a.add(k, s.Attributes[k])
		}
		s.Attributes, attrBytes = a.m, a.bytes()
		s.DroppedAttributes += a.dropped
	}
	s.boundWith(attrBytes)
}

// boundWith cuts s's strings and sets its size, its attributes (bounded
// already) taking attrBytes.
func (s *Span) boundWith(attrBytes int) {
	s.Name, s.Service = cut(s.Name, maxAttrString), cut(s.Service, maxAttrString)
	s.StatusMessage = cut(s.StatusMessage, maxAttrString)
	if len(s.Attributes) == 0 {
		s.Attributes = nil
	}
	s.size = spanCost + len(s.Name) + len(s.Service) + len(s.StatusMessage) + attrBytes
}

// Recorder is a span processor that keeps the spans of the most recent
// traces in memory, for the console and the hub's trace API. It is
// bounded: every span is cut to the bounds of one span (32 attributes in
// about 4 KiB, strings of 256 bytes); past maxTraces traces, or past
// DefaultMaxBytes of spans (approximately), the oldest traces go; past
// maxSpans a trace keeps its first spans and counts the rest as dropped.
// It adds one map insertion under a mutex per ended span.
type Recorder struct {
	maxTraces, maxSpans int
	maxBytes            int

	mu     sync.Mutex
	traces map[trace.TraceID]*recorded
	order  []trace.TraceID // ring of trace ids in arrival order
	head   int             // the ring's oldest slot
	count  int             // trace ids in the ring
	bytes  int             // approximate size of every trace held
}

// recorded is one trace: the spans of this process and others, and the
// hub's relay records, kept compact and turned into spans when read.
type recorded struct {
	spans   []Span
	relays  []relayRec
	n       int // spans held, the relays' included
	dropped int
	bytes   int
}

// relayRec is a Relay as a Recorder keeps it.
type relayRec struct {
	r       Relay
	ids     relayIDs
	service string
}

// relayCost is a relayRec's approximate size in memory, its strings
// aside.
const relayCost = 384

// has reports whether the trace holds a span with id spanID (lowercase
// hex).
func (t *recorded) has(spanID string) bool {
	if slices.ContainsFunc(t.spans, func(x Span) bool { return x.SpanID == spanID }) {
		return true
	}
	for i := range t.relays {
		ids := &t.relays[i].ids
		for _, id := range [...]trace.SpanID{ids.relay, ids.queue, ids.wire} {
			if id.String() == spanID {
				return true
			}
		}
	}
	return false
}

// NewRecorder returns a recorder of at most maxTraces traces of at most
// maxSpans spans each (<= 0: the defaults), in about DefaultMaxBytes.
func NewRecorder(maxTraces, maxSpans int) *Recorder {
	if maxTraces <= 0 {
		maxTraces = DefaultMaxTraces
	}
	if maxSpans <= 0 {
		maxSpans = DefaultMaxSpans
	}
	return &Recorder{maxTraces: maxTraces, maxSpans: maxSpans, maxBytes: DefaultMaxBytes, traces: make(map[trace.TraceID]*recorded)}
}

// Add records spans made elsewhere (received over OTLP, for example),
// cut to the bounds of one span. Spans with an invalid trace id are
// ignored, and so is a span whose span id the trace already holds: a
// process that both records a span and exports it to this one does not
// show it twice.
func (r *Recorder) Add(spans ...Span) {
	for i := range spans {
		spans[i].bound()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range spans {
		id, err := trace.TraceIDFromHex(s.TraceID)
		if err != nil {
			continue
		}
		if t := r.traces[id]; t != nil && t.has(s.SpanID) {
			continue
		}
		r.addLocked(id, s)
	}
}

// addLocked records s, a bounded span, in trace id (see reserveLocked).
func (r *Recorder) addLocked(id trace.TraceID, s Span) {
	t := r.reserveLocked(id, 1, s.size)
	if t == nil {
		return
	}
	t.spans = append(t.spans, s)
}

// addRelay records a relay record (bounded already, see Relay.bound),
// as compact as it came: it becomes spans when the trace is read.
func (r *Recorder) addRelay(rel *Relay, ids *relayIDs, service string) {
	n := 2
	if !rel.Sent.IsZero() {
		n = 3
	}
	size := relayCost + len(rel.Agent) + len(rel.ReqID) + len(rel.Computer) + len(rel.Tool) + len(rel.Office) + len(rel.Node) + len(rel.Message)
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.reserveLocked(ids.trace, n, size); t != nil {
		t.relays = append(t.relays, relayRec{r: *rel, ids: *ids, service: service})
	}
}

// reserveLocked makes room in trace id for n spans of size bytes in all
// and returns the trace, or nil when they are dropped: a new trace
// evicts the oldest past maxTraces, and the oldest traces go until the
// spans fit in maxBytes (they are dropped when only their own trace is
// left to evict).
func (r *Recorder) reserveLocked(id trace.TraceID, n, size int) *recorded {
	t := r.traces[id]
	if t == nil {
		if r.order == nil {
			r.order = make([]trace.TraceID, r.maxTraces)
		}
		if r.count == r.maxTraces {
			r.evictLocked()
		}
		r.order[(r.head+r.count)%r.maxTraces] = id
		r.count++
		t = &recorded{bytes: traceCost}
		r.bytes += traceCost
		r.traces[id] = t
	}
	if t.n+n > r.maxSpans {
		t.dropped += n
		return nil
	}
	for r.bytes+size > r.maxBytes && r.count > 1 && r.order[r.head] != id {
		r.evictLocked()
	}
	if r.bytes+size > r.maxBytes {
		t.dropped += n
		return nil
	}
	t.n += n
	t.bytes += size
	r.bytes += size
	return t
}

// evictLocked forgets the oldest trace.
func (r *Recorder) evictLocked() {
	old := r.order[r.head]
	if t := r.traces[old]; t != nil {
		r.bytes -= t.bytes
	}
	delete(r.traces, old)
	r.order[r.head] = trace.TraceID{}
	r.head = (r.head + 1) % r.maxTraces
	r.count--
}

// Trace returns the recorded spans of trace id, ordered by [ByStart],
// and how many of its spans were dropped; nil when none is recorded.
func (r *Recorder) Trace(id trace.TraceID) (spans []Span, dropped int) {
	var relays []relayRec
	r.mu.Lock()
	t := r.traces[id]
	if t != nil && t.n > 0 {
		spans = make([]Span, len(t.spans), t.n)
		copy(spans, t.spans)
		relays = slices.Clone(t.relays)
		dropped = t.dropped
	}
	r.mu.Unlock()
	for i := range relays {
		spans = relays[i].appendSpans(spans)
	}
	slices.SortStableFunc(spans, ByStart)
	return spans, dropped
}

// ByStart orders spans by start time, and the longer first of two that
// start together, and a parent before its child when they start and end
// together.
func ByStart(a, b Span) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	if c := cmp.Compare(b.DurationMS, a.DurationMS); c != 0 {
		return c
	}
	switch {
	case b.ParentID != "" && b.ParentID == a.SpanID:
		return -1
	case a.ParentID != "" && a.ParentID == b.SpanID:
		return 1
	}
	return 0
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

// FromReadOnly converts an SDK span to a [Span], cut to the bounds of
// one span.
func FromReadOnly(s sdktrace.ReadOnlySpan) Span {
	sp := Span{
		TraceID: s.SpanContext().TraceID().String(),
		Name:    s.Name(),
		SpanID:  s.SpanContext().SpanID().String(),
		Status:  "ok",
	}
	sp.setTimes(s.StartTime(), s.EndTime())
	if p := s.Parent(); p.IsValid() {
		sp.ParentID = p.SpanID().String()
	}
	if st := s.Status(); st.Code == codes.Error {
		sp.Status, sp.StatusMessage = "error", st.Description
	}
	sp.Service = serviceName(s.Resource())
	sp.setAttrs(s.Attributes(), s.DroppedAttributes())
	return sp
}

// appendSpans appends the spans of a relay record to spans.
func (rr *relayRec) appendSpans(spans []Span) []Span {
	var attrs relayAttrs
	rs := rr.r.spans(&attrs, &rr.ids)
	tid := rr.ids.trace.String()
	for i := range rs.n {
		p := &rs.spans[i]
		sp := Span{TraceID: tid, Name: p.Name, SpanID: p.SpanID.String(), Service: rr.service, Status: "ok"}
		sp.setTimes(p.Start, p.End)
		if p.ParentID.IsValid() {
			sp.ParentID = p.ParentID.String()
		}
		if p.Status == codes.Error {
			sp.Status, sp.StatusMessage = "error", p.StatusMsg
		}
		sp.setAttrs(p.Attrs, 0)
		spans = append(spans, sp)
	}
	return spans
}

// setTimes sets s's start and duration.
func (s *Span) setTimes(start, end time.Time) {
	s.Start = start
	s.DurationMS = float64(end.Sub(start)) / float64(time.Millisecond)
}

// setAttrs sets s's attributes (dropped: those its maker left out
// already) and bounds s: see [Span.bound].
func (s *Span) setAttrs(attrs []attribute.KeyValue, dropped int) {
	s.DroppedAttributes = dropped
	if len(attrs) == 0 {
		s.bound()
		return
	}
	a := newAttrSet(len(attrs))
	for _, kv := range attrs {
		a.add(string(kv.Key), kv.Value.AsInterface())
	}
	s.Attributes = a.m
	s.DroppedAttributes += a.dropped
	s.boundWith(a.bytes())
}
