package tracing

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ScopeHub is the instrumentation scope of the hub's spans.
const ScopeHub = "github.com/a2c-smcp/a2c-go/server"

// Relay is the hub's record of one tool call it relayed: the source of
// the call's three hub spans, a2c.hub.relay (from receipt to the answer)
// with a2c.hub.queue (until the request leaves for the Computer) and
// a2c.hub.wire (from then to the answer) below it.
//
// The hub fills a Relay as the call goes and hands it over once, with
// [RecordRelay], when the call ends: it holds no span objects while the
// call runs. A [Provider] then queues a copy for export (the exporting
// goroutine derives the ids and encodes the spans) and keeps one in its
// [Recorder], where it becomes spans only when someone reads the trace.
// On the relay's path this costs a copy under a mutex (and a hash with a
// Recorder, or with a sampler that reads the trace id), against several
// microseconds for three SDK spans (BenchmarkRecordRelay).
type Relay struct {
	// Agent and ReqID name the call (see [TraceID]).
	Agent, ReqID string
	// Computer, Tool and Office are the call's target, tool and office.
	Computer, Tool, Office string
	// Node is the hub node in a cluster, empty for a hub alone.
	Node string
	// Console marks a call the hub's console made.
	Console bool
	// Start is when the hub received the call; Sent when the request
	// left for the Computer (zero: never sent, the hub refused the call);
	// End when the answer (or the refusal) was ready.
	Start, Sent, End time.Time
	// Outcome is one of the Outcome* values; Code the call's A2C error
	// code (0 when none); Message the status text of a failed call (the
	// hub's own words or a protocol error's message, see [StatusText]).
	Outcome string
	Code    int
	Message string
}

// RecordRelay hands the record of a relayed call to tp. A [Provider]
// (the one [New] builds) samples it as it would sample the relay span,
// then exports it and keeps it in its Recorder without making SDK spans;
// any other provider gets the three spans started and ended with the
// record's times, as if the hub had made them as the call went.
func RecordRelay(tp trace.TracerProvider, r *Relay) {
	if p, ok := tp.(*Provider); ok {
		p.recordRelay(r)
		return
	}
	if tp != nil {
		r.emit(tp.Tracer(ScopeHub))
	}
}

// relaySpans are a Relay's spans in the encoder's form: relay, queue and
// (when the call was sent) wire.
type relaySpans struct {
	spans [3]otlpSpan
	n     int
}

// relayAttrs is room for the relay span's attributes. It is apart from
// relaySpans, which points into it: a struct pointing into itself would
// always be allocated on the heap, and the relay's path allocates none.
type relayAttrs [9]attribute.KeyValue

// bound cuts a Relay's strings before the Recorder keeps them: they come
// from the Agent (req_id, names) and the Computer (an error's message),
// and a span's strings are cut to maxAttrString bytes wherever it comes
// from. The Agent's name and the req_id feed the derived ids: bound them
// only once the ids are known.
func (r *Relay) bound() {
	r.Agent, r.ReqID = cut(r.Agent, maxAttrString), cut(r.ReqID, maxAttrString)
	r.boundRest()
}

// boundRest cuts the strings no id depends on, so that what waits for
// export is small (the export cuts the others, after deriving the ids).
// A cut string is a copy: the long original is let go.
func (r *Relay) boundRest() {
	for _, s := range []*string{&r.Computer, &r.Tool, &r.Office, &r.Node} {
		*s = cut(*s, maxAttrString)
	}
	if len(r.Message) > maxStatusText {
		r.Message = strings.Clone(Cut(r.Message, maxStatusText))
	}
}

// relayIDs are the ids of a Relay's spans: the derived trace id, relay
// span id and Agent's span id (the relay's parent), and random ids for
// queue and wire, drawn once so that the export and the Recorder agree.
type relayIDs struct {
	trace                     trace.TraceID
	relay, agent, queue, wire trace.SpanID
}

// newRelayIDs derives (and draws) the ids of r's spans. It must run
// before [Relay.bound]: the ids are those of the whole Agent name and
// req_id, as the other hops derive them.
func newRelayIDs(r *Relay) relayIDs {
	var ids relayIDs
	ids.derive(r)
	ids.draw()
	return ids
}

// derive sets the derived ids of r's spans: the trace id, the relay
// span's and its parent's, the Agent's (one hash, see deriveCall). As
// newRelayIDs, it must see r before [Relay.bound].
func (ids *relayIDs) derive(r *Relay) {
	c := deriveCall(r.Agent, r.ReqID)
	ids.trace, ids.relay, ids.agent = c.trace, c.hub, c.agent
}

// derived reports whether derive has run.
func (ids *relayIDs) derived() bool { return ids.relay.IsValid() }

// draw sets the random ids, of the queue and wire spans.
func (ids *relayIDs) draw() { ids.queue, ids.wire = randomSpanIDFast(), randomSpanIDFast() }

// drawn reports whether draw has run.
func (ids *relayIDs) drawn() bool { return ids.queue.IsValid() }

// spans returns r's spans, with ids, filling attrs with the relay span's
// attributes. (It returns them rather than fill a pointer, for a span
// stored through a pointer would put attrs on the heap.)
func (r *Relay) spans(attrs *relayAttrs, ids *relayIDs) (out relaySpans) {
	a := attrs[:0]
	a = append(a,
		AttrReqID.String(r.ReqID),
		AttrAgent.String(r.Agent),
		AttrComputer.String(r.Computer),
		AttrTool.String(r.Tool),
		AttrOffice.String(r.Office))
	if r.Node != "" {
		a = append(a, AttrNode.String(r.Node))
	}
	if r.Console {
		a = append(a, AttrConsole.Bool(true))
	}
	a = append(a, AttrOutcome.String(r.Outcome))
	if r.Code != 0 {
		a = append(a, AttrErrorCode.Int(r.Code))
	}
	status, msg := codes.Unset, ""
	if r.Outcome != OutcomeOK {
		status, msg = codes.Error, StatusText(r.Outcome, r.Code, r.Message)
	}
	out.spans[0] = otlpSpan{
		TraceID: ids.trace, SpanID: ids.relay, ParentID: ids.agent, Remote: true, Sampled: true,
		Name: SpanHubRelay, Kind: trace.SpanKindServer, Start: r.Start, End: r.End,
		Attrs: a, Status: status, StatusMsg: msg,
	}
	queueEnd := r.Sent
	if queueEnd.IsZero() {
		queueEnd = r.End
	}
	out.spans[1] = otlpSpan{
		TraceID: ids.trace, SpanID: ids.queue, ParentID: ids.relay, Sampled: true,
		Name: SpanHubQueue, Kind: trace.SpanKindInternal, Start: r.Start, End: queueEnd,
	}
	out.n = 2
	if !r.Sent.IsZero() {
		out.spans[2] = otlpSpan{
			TraceID: ids.trace, SpanID: ids.wire, ParentID: ids.relay, Sampled: true,
			Name: SpanHubWire, Kind: trace.SpanKindClient, Start: r.Sent, End: r.End,
			Status: status, StatusMsg: msg,
		}
		out.n = 3
	}
	return out
}

// randomSpanIDFast is a random span id for a span no other process
// names: math/rand's generator, as the SDK's own id generator uses, is
// enough for ids that need only be unique.
func randomSpanIDFast() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		v := rand.Uint64()
		for i := range id {
			id[i] = byte(v >> (8 * i))
		}
	}
	return id
}

// emit makes r's spans with a tracer of a provider that is not ours:
// started and ended with the record's times, the relay span with the
// derived ids when the provider uses [IDGenerator].
func (r *Relay) emit(tr trace.Tracer) {
	var attrs relayAttrs
	ids := newRelayIDs(r)
	rs := r.spans(&attrs, &ids)
	relay := &rs.spans[0]
	ctx, span := Start(context.Background(), tr, HopHub, r.Agent, r.ReqID, relay.Name,
		trace.WithTimestamp(relay.Start), trace.WithSpanKind(relay.Kind), trace.WithAttributes(relay.Attrs...))
	for i := 1; i < rs.n; i++ {
		c := &rs.spans[i]
		_, child := tr.Start(ctx, c.Name, trace.WithTimestamp(c.Start), trace.WithSpanKind(c.Kind))
		if c.Status == codes.Error {
			child.SetStatus(codes.Error, c.StatusMsg)
		}
		child.End(trace.WithTimestamp(c.End))
	}
	if relay.Status == codes.Error {
		span.SetStatus(codes.Error, relay.StatusMsg)
	}
	span.End(trace.WithTimestamp(relay.End))
}
