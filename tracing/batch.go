package tracing

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the span processor in front of the OTLP/HTTP upload. It
// does what the SDK's BatchSpanProcessor does (a bounded queue, batches
// of at most maxBatch spans, an export every delay or when a batch is
// full, drops counted when the queue is full) and reads the same
// OTEL_BSP_* variables, with two differences that matter on the hub:
//
//   - It does not wake its goroutine for every span. The SDK's processor
//     hands each ended span over a channel, one wake-up per span, which
//     on the hub cost more than the span itself. Here an ended span is
//     appended under a mutex; the goroutine sleeps until its timer fires
//     or a batch is full.
//   - It queues spans encoded. A span is written in OTLP's protobuf form
//     when it ends (see encode.go), into one growing buffer, and the SDK
//     span is let go at once: no per-span objects wait in the queue, no
//     proto structs are built to export them, and the hub's relay
//     records (see [Relay]) join the same queue without becoming SDK
//     spans at all.
//
// The queue is bounded in spans (OTEL_BSP_MAX_QUEUE_SIZE) and in bytes
// (maxQueueBytes), whatever the spans hold. The goroutine is owned by
// the batcher: Shutdown stops it (after a last export within the
// caller's deadline, cut short past it) and waits for it.
type batcher struct {
	send     func(ctx context.Context, body []byte) error // one export request
	close    func()                                       // at Shutdown, after the last send
	maxQueue int
	maxBatch int
	delay    time.Duration
	timeout  time.Duration

	// abortCtx bounds every export with the batcher's life: Shutdown
	// cancels it (abort) when its caller stops waiting for the last one.
	abortCtx context.Context
	abort    context.CancelFunc

	mu      sync.Mutex
	q       encQueue // the spans queued, encoded
	spare   encQueue // the previous queue's memory, reused by the next
	groups  map[groupKey]*group
	stopped bool
	// relayGroup is the group of the last relay records queued (a
	// provider has one resource), so that each record need not hash a
	// groupKey to find it.
	relayGroup *group

	kick     chan struct{}   // a batch is full (1-buffered, never blocks)
	flushes  chan chan error // ForceFlush asks for an export and waits for its error
	stop     chan struct{}
	done     chan struct{}
	dropped  atomic.Int64
	reported int64 // drops already reported (the goroutine's own)

	// body and parts are export's scratch space (the goroutine's own),
	// kept from one export to the next: a request's body is tens of KiB,
	// and growing a new one for every batch was, at a few hundred
	// batches a second, garbage enough to double the hub's collections.
	body  []byte
	parts [][]byte
}

// maxQueueBytes bounds the encoded spans a batcher queues: spans whose
// attributes are huge are dropped (and counted) rather than held.
const maxQueueBytes = 16 << 20

// maxKeptBytes is the most memory an export keeps for the next one (the
// queue's buffer, the request's body): a burst that grew them past it
// must not pin them for good.
const maxKeptBytes = maxQueueBytes / 4

// encQueue is a queue of encoded spans: buf holds them one after the
// other (each one ScopeSpans' field 2, tag and length included), spans
// says where each starts and which resource and scope it belongs to. The
// hub's relay records wait as they came, in relays, and are encoded by
// export, off the relay's path.
type encQueue struct {
	buf        []byte
	spans      []queued
	relays     []queuedRelay
	n          int // spans queued, the relays' included
	relayBytes int // the relays' approximate size
}

// queuedRelay is a relay record waiting for export: a copy of the whole
// record (bound at export, and its ids derived and drawn there unless
// the caller set them), in group g.
type queuedRelay struct {
	r   Relay
	ids relayIDs
	g   *group
}

// bytes is the queue's approximate size, for maxQueueBytes.
func (q *encQueue) bytes() int { return len(q.buf) + q.relayBytes }

type queued struct {
	g        *group
	from, to int // buf[from:to]
}

// group is the resource and instrumentation scope spans share in a
// request (one ResourceSpans with one ScopeSpans per group).
type group struct {
	res   *resource.Resource
	scope instrumentation.Scope
}

// groupKey identifies a group: a provider has one resource, and a scope
// is its name, version, schema URL and attributes.
type groupKey struct {
	res                   *resource.Resource
	name, version, schema string
	attrs                 attribute.Distinct
}

// bspDefaults are what the OTEL_BSP_* variables default to.
type bspDefaults struct {
	delay, timeout  time.Duration
	queue, maxBatch int
}

// defaultBSP are OpenTelemetry's defaults.
var defaultBSP = bspDefaults{delay: 5 * time.Second, timeout: 30 * time.Second, queue: 2048, maxBatch: 512}

// hubBSP are a hub's defaults ([Options].Hub): a batch and a queue
// eight times OpenTelemetry's. A hub at full load ends tens of thousands
// of spans a second, and much of an export's cost (the HTTP round trip,
// the goroutines it wakes, the scheduling around them) is paid per
// request, not per span: bench/RESULTS.md has the hub's CPU per call at
// each size. 4096 of the hub's spans (about 110 bytes each) make a
// request of about 450 KiB, as many spans as a [Recorder]'s OTLP
// receiver keeps of one request (maxOTLPSpans); the Collector's own batch
// processor sends 8192 a batch.
var hubBSP = bspDefaults{delay: defaultBSP.delay, timeout: defaultBSP.timeout, queue: 16384, maxBatch: 4096}

// newBatcher starts a batcher that exports with send (and calls closeFn,
// if any, at Shutdown), with the OTEL_BSP_* settings that getenv gives,
// def where they are unset (malformed or non-positive values keep the
// defaults; a batch is never larger than the queue).
func newBatcher(send func(context.Context, []byte) error, closeFn func(), getenv func(string) string, def bspDefaults) *batcher {
	ms := func(name string, def time.Duration) time.Duration {
		if n, err := strconv.Atoi(strings.TrimSpace(getenv(name))); err == nil && n > 0 {
			return time.Duration(n) * time.Millisecond
		}
		return def
	}
	count := func(name string, def int) int {
		if n, err := strconv.Atoi(strings.TrimSpace(getenv(name))); err == nil && n > 0 {
			return n
		}
		return def
	}
	b := &batcher{
		send:     send,
		close:    closeFn,
		delay:    ms("OTEL_BSP_SCHEDULE_DELAY", def.delay),
		timeout:  ms("OTEL_BSP_EXPORT_TIMEOUT", def.timeout),
		maxQueue: count("OTEL_BSP_MAX_QUEUE_SIZE", def.queue),
		maxBatch: count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", def.maxBatch),
		groups:   make(map[groupKey]*group),
		kick:     make(chan struct{}, 1),
		flushes:  make(chan chan error),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	b.maxBatch = min(b.maxBatch, b.maxQueue)
	b.abortCtx, b.abort = context.WithCancel(context.Background())
	go b.run()
	return b
}

// OnStart implements sdktrace.SpanProcessor.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span for export, encoded, or counts it dropped
// when the queue is full. It never blocks on the exporter.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	sc := s.InstrumentationScope()
	key := groupKey{res: s.Resource(), name: sc.Name, version: sc.Version, schema: sc.SchemaURL, attrs: sc.Attributes.Equivalent()}
	b.mu.Lock()
	if !b.roomLocked(1) {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	g := b.groupLocked(key, s.Resource(), sc)
	from := len(b.q.buf)
	b.q.buf = appendSpanField(b.q.buf, s)
	b.q.spans = append(b.q.spans, queued{g: g, from: from, to: len(b.q.buf)})
	full := b.countLocked(1)
	b.mu.Unlock()
	if full {
		b.kickNow()
	}
}

// addRelay queues a relay record of the resource res (scope ScopeHub):
// a copy of r, as it is, with ids (those the caller needed; export
// derives and draws the others). It costs the relay's path a copy under
// a mutex; export does the rest.
func (b *batcher) addRelay(res *resource.Resource, r *Relay, ids *relayIDs) {
	n := 2
	if !r.Sent.IsZero() {
		n = 3
	}
	size := relayCost + len(r.Agent) + len(r.ReqID) + len(r.Computer) + len(r.Tool) + len(r.Office) + len(r.Node) + len(r.Message)
	b.mu.Lock()
	if !b.roomLocked(n) {
		b.mu.Unlock()
		b.dropped.Add(int64(n))
		return
	}
	g := b.relayGroup
	if g == nil || g.res != res {
		g = b.groupLocked(groupKey{res: res, name: ScopeHub}, res, instrumentation.Scope{Name: ScopeHub})
		b.relayGroup = g
	}
	b.q.relays = append(b.q.relays, queuedRelay{r: *r, ids: *ids, g: g})
	b.q.relayBytes += size
	full := b.countLocked(n)
	b.mu.Unlock()
	if full {
		b.kickNow()
	}
}

// countLocked counts n more spans queued and reports whether the queue
// just reached a full batch.
func (b *batcher) countLocked(n int) bool {
	before := b.q.n
	b.q.n += n
	return before < b.maxBatch && b.q.n >= b.maxBatch
}

// roomLocked reports whether n more spans may be queued.
func (b *batcher) roomLocked(n int) bool {
	return !b.stopped && b.q.n+n <= b.maxQueue && b.q.bytes() < maxQueueBytes
}

// groupLocked returns the group of key, made once.
func (b *batcher) groupLocked(key groupKey, res *resource.Resource, sc instrumentation.Scope) *group {
	g := b.groups[key]
	if g == nil {
		g = &group{res: res, scope: sc}
		b.groups[key] = g
	}
	return g
}

// kickNow tells the goroutine a batch is full, never waiting.
func (b *batcher) kickNow() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run exports the queue every delay, when a batch is full, on a flush,
// and a last time at stop.
func (b *batcher) run() {
	defer close(b.done)
	defer b.abort() // releases abortCtx
	t := time.NewTimer(b.delay)
	defer t.Stop()
	for {
		var ack chan error
		select {
		case <-b.stop:
			// The last export: Shutdown cuts it short (abort) when its
			// caller's deadline passes first. Then the uploader goes.
			if err := b.export(); err != nil {
				otel.Handle(err)
			}
			if b.close != nil {
				b.close()
			}
			return
		case ack = <-b.flushes:
		case <-b.kick:
		case <-t.C:
		}
		err := b.export()
		b.reportDrops()
		switch {
		case ack != nil:
			ack <- err // ForceFlush's caller reports it
		case err != nil:
			otel.Handle(err) // as the SDK's processor does
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(b.delay)
	}
}

// reportDrops tells OpenTelemetry's error handler (as the SDK's
// processor does) how many spans a full queue dropped since the last
// report.
func (b *batcher) reportDrops() {
	if d := b.dropped.Load(); d > b.reported {
		otel.Handle(fmt.Errorf("tracing: %d spans dropped: the export queue (OTEL_BSP_MAX_QUEUE_SIZE %d) was full", d-b.reported, b.maxQueue))
		b.reported = d
	}
}

// export sends what is queued, in requests of at most maxBatch spans,
// each within the export timeout, and returns the first error. It runs
// on the batcher's goroutine only.
func (b *batcher) export() error {
	b.mu.Lock()
	q := b.q
	b.q, b.spare = b.spare, encQueue{}
	b.mu.Unlock()
	// The relay records become spans here, on this goroutine.
	var attrs relayAttrs
	for i := range q.relays {
		qr := &q.relays[i]
		if !qr.ids.derived() {
			qr.ids.derive(&qr.r) // from the whole names, before bound
		}
		if !qr.ids.drawn() {
			qr.ids.draw()
		}
		qr.r.bound()
		rs := qr.r.spans(&attrs, &qr.ids)
		for j := range rs.n {
			from := len(q.buf)
			q.buf = appendOTLPSpanField(q.buf, &rs.spans[j])
			q.spans = append(q.spans, queued{g: qr.g, from: from, to: len(q.buf)})
		}
	}
	clear(q.relays) // let their strings go
	var first error
	for rest := q.spans; len(rest) > 0; {
		n := min(len(rest), b.maxBatch)
		b.body, b.parts = appendRequest(b.body[:0], b.parts, q.buf, rest[:n])
		ctx, cancel := context.WithTimeout(b.abortCtx, b.timeout)
		if err := b.send(ctx, b.body); err != nil && first == nil {
			first = err
		}
		cancel()
		rest = rest[n:]
	}
	clear(b.parts[:cap(b.parts)]) // let the queue's memory go with the queue
	// Keep the memory for the next export, up to maxKeptBytes.
	if cap(b.body) > maxKeptBytes {
		b.body, b.parts = nil, nil
	}
	if cap(q.buf) <= maxKeptBytes {
		b.mu.Lock()
		if b.spare.buf == nil {
			b.spare = encQueue{buf: q.buf[:0], spans: q.spans[:0], relays: q.relays[:0]}
		}
		b.mu.Unlock()
	}
	return first
}

// appendRequest appends to body an ExportTraceServiceRequest of spans
// (parts of buf): one ResourceSpans per group, in the order the groups
// first appear. parts is scratch space, returned for reuse. A request
// holds a handful of groups (a process has one resource and a few
// tracers), so a pass per group is cheap.
func appendRequest(body []byte, parts [][]byte, buf []byte, spans []queued) ([]byte, [][]byte) {
	var seen [8]*group
	groups := seen[:0]
	for _, s := range spans {
		if !slices.Contains(groups, s.g) {
			groups = append(groups, s.g)
		}
	}
	for _, g := range groups {
		parts = parts[:0]
		for _, s := range spans {
			if s.g == g {
				parts = append(parts, buf[s.from:s.to])
			}
		}
		body = appendResourceSpans(body, g.res, g.scope, parts...)
	}
	return body, parts
}

// ForceFlush exports what is queued now and waits for it, or for ctx; it
// returns the export's error.
func (b *batcher) ForceFlush(ctx context.Context) error {
	ack := make(chan error, 1)
	select {
	case b.flushes <- ack:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ack:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, stops the goroutine and the exporter.
// Spans ended after it are dropped.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	already := b.stopped
	b.stopped = true
	b.mu.Unlock()
	if !already {
		close(b.stop)
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		b.abort() // the goroutine ends its export now, and closes the uploader
		return ctx.Err()
	}
}
