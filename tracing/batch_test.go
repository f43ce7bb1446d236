package tracing

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// countExporter records the batches it is sent: the spans of each
// request, decoded.
type countExporter struct {
	mu       sync.Mutex
	batches  []int
	exported chan int
	shut     bool
}

func (e *countExporter) send(_ context.Context, body []byte) error {
	spans, err := DecodeOTLP(body)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.batches = append(e.batches, len(spans))
	e.mu.Unlock()
	if e.exported != nil {
		e.exported <- len(spans)
	}
	return nil
}

func (e *countExporter) close() {
	e.mu.Lock()
	e.shut = true
	e.mu.Unlock()
}

// batcherFor starts a batcher that exports to e.
func batcherFor(e *countExporter, getenv func(string) string) *batcher {
	return newBatcher(e.send, e.close, getenv, defaultBSP)
}

func (e *countExporter) total() (n int, batches []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.batches {
		n += b
	}
	return n, append([]int(nil), e.batches...)
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// spans ends n sampled spans through a provider whose only processor is b.
func endSpans(t *testing.T, b *batcher, n int) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	tr := tp.Tracer("t")
	for range n {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
}

func TestBatcherSettings(t *testing.T) {
	tests := []struct {
		env                map[string]string
		delay, timeout     time.Duration
		maxQueue, maxBatch int
	}{
		{nil, 5 * time.Second, 30 * time.Second, 2048, 512},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BSP_EXPORT_TIMEOUT": "2000", "OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"},
			100 * time.Millisecond, 2 * time.Second, 10, 4},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "-1", "OTEL_BSP_MAX_QUEUE_SIZE": "x", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"}, 5 * time.Second, 30 * time.Second, 2048, 512},
		{map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "8", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64"}, 5 * time.Second, 30 * time.Second, 8, 8},
	}
	for _, tt := range tests {
		b := batcherFor(&countExporter{}, envOf(tt.env))
		if b.delay != tt.delay || b.timeout != tt.timeout || b.maxQueue != tt.maxQueue || b.maxBatch != tt.maxBatch {
			t.Errorf("env %v: delay %v timeout %v queue %d batch %d", tt.env, b.delay, b.timeout, b.maxQueue, b.maxBatch)
		}
		_ = b.Shutdown(context.Background())
	}
}

// TestBatcherFullBatch: a full batch is exported at once, long before the
// schedule delay.
func TestBatcherFullBatch(t *testing.T) {
	exp := &countExporter{exported: make(chan int, 16)}
	b := batcherFor(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5"}))
	defer b.Shutdown(context.Background())
	endSpans(t, b, 5)
	select {
	case n := <-exp.exported:
		if n != 5 {
			t.Fatalf("exported a batch of %d, want 5", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch was not exported")
	}
}

// TestBatcherQueueBound: past the queue's size spans are dropped and
// counted; the flush exports the rest in batches of at most maxBatch.
func TestBatcherQueueBound(t *testing.T) {
	exp := &countExporter{}
	b := batcherFor(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"}))
	// Hold the exporter off: fill the queue between two kicks. The kick
	// at 4 exports at most what is queued then; count what is dropped.
	endSpans(t, b, 40)
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, batches := exp.total()
	if n+int(b.dropped.Load()) != 40 {
		t.Fatalf("exported %d + dropped %d, want 40", n, b.dropped.Load())
	}
	for _, size := range batches {
		if size > 4 {
			t.Fatalf("a batch of %d, over the maximum of 4 (%v)", size, batches)
		}
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !exp.shut {
		t.Fatal("the exporter was not shut down")
	}
}

// TestBatcherShutdownFlushes: what is queued is exported at Shutdown, and
// a span ended after it is dropped.
func TestBatcherShutdownFlushes(t *testing.T) {
	exp := &countExporter{}
	b := batcherFor(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000"}))
	endSpans(t, b, 7)
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := exp.total(); n != 7 {
		t.Fatalf("exported %d at shutdown, want 7", n)
	}
	endSpans(t, b, 1)
	if n, _ := exp.total(); n != 7 || b.dropped.Load() != 1 {
		t.Fatalf("after shutdown: exported %d, dropped %d", n, b.dropped.Load())
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatalf("flush after shutdown: %v", err)
	}
}

// TestBatcherUnsampled: spans that are not sampled are not queued.
func TestBatcherUnsampled(t *testing.T) {
	exp := &countExporter{}
	b := batcherFor(exp, envOf(nil))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: TraceID("a", "r"), SpanID: SpanID(HopAgent, "a", "r"), Remote: true}))
	_, s := tp.Tracer("t").Start(ctx, "s", trace.WithSpanKind(trace.SpanKindServer))
	s.End()
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, _ := exp.total()
	if want := 1; n != want { // AlwaysSample records it
		t.Fatalf("exported %d, want %d", n, want)
	}
	exp2 := &countExporter{}
	b2 := batcherFor(exp2, envOf(nil))
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b2), sdktrace.WithSampler(sdktrace.NeverSample()))
	_, s2 := tp2.Tracer("t").Start(context.Background(), "s")
	s2.End()
	_ = b2.Shutdown(context.Background())
	if n, _ := exp2.total(); n != 0 {
		t.Fatalf("an unsampled span was exported")
	}
}

// TestBatcherRequest checks the requests a batcher sends when SDK spans
// of two providers (two resources) and the hub's relay records share its
// queue: one ResourceSpans per resource and scope, every span once, in
// requests of at most the batch size, and a body the official protobuf
// types read.
func TestBatcherRequest(t *testing.T) {
	var bodies [][]byte
	var mu sync.Mutex
	send := func(_ context.Context, body []byte) error {
		mu.Lock()
		bodies = append(bodies, append([]byte(nil), body...))
		mu.Unlock()
		return nil
	}
	b := newBatcher(send, nil, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "7"}), defaultBSP)
	resA := resource.NewSchemaless(attribute.String("service.name", "a"))
	resB := resource.NewSchemaless(attribute.String("service.name", "b"))
	tpA := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithResource(resA))
	tpB := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithResource(resB))
	for i := range 3 {
		_, s := tpA.Tracer("one").Start(context.Background(), fmt.Sprint("a", i))
		s.End()
		_, s = tpB.Tracer("two").Start(context.Background(), fmt.Sprint("b", i))
		s.End()
		r := relaySamples()["ok"]
		r.ReqID = fmt.Sprint("req-", i)
		ids := newRelayIDs(&r)
		if i != 1 {
			ids = relayIDs{} // as the hub with no Recorder: export derives and draws them
		}
		b.addRelay(resA, &r, &ids)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 3 + 3 + 9 spans in requests of at most 7 (when the batches are
	// cut depends on when the exporting goroutine runs).
	names := map[string]int{}
	var hub []*tracepb.Span
	for i, body := range bodies {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		n := 0
		groups := map[string]bool{}
		for _, rs := range req.ResourceSpans {
			svc := rs.Resource.Attributes[0].Value.GetStringValue()
			if len(rs.ScopeSpans) != 1 {
				t.Fatalf("request %d: %d ScopeSpans in one ResourceSpans", i, len(rs.ScopeSpans))
			}
			key := svc + "/" + rs.ScopeSpans[0].Scope.GetName()
			if groups[key] {
				t.Errorf("request %d: group %s twice", i, key)
			}
			groups[key] = true
			for _, sp := range rs.ScopeSpans[0].Spans {
				names[key+"/"+sp.Name]++
				n++
				if rs.ScopeSpans[0].Scope.GetName() == ScopeHub {
					hub = append(hub, sp)
				}
			}
		}
		if n == 0 || n > 7 {
			t.Errorf("request %d holds %d spans, want 1 to 7", i, n)
		}
	}
	want := map[string]int{
		"a/one/a0": 1, "a/one/a1": 1, "a/one/a2": 1, "b/two/b0": 1, "b/two/b1": 1, "b/two/b2": 1,
		"a/" + ScopeHub + "/" + SpanHubRelay: 3, "a/" + ScopeHub + "/" + SpanHubQueue: 3, "a/" + ScopeHub + "/" + SpanHubWire: 3,
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("spans exported = %v\nwant %v", names, want)
	}
	checkRelayIDs(t, hub)
}

// checkRelayIDs checks the ids of exported relay spans (of calls whose
// Agent is relaySamples'): the derived ones for each relay span, and
// valid random ones for queue and wire, whose parent is their trace's
// relay span.
func checkRelayIDs(t *testing.T, spans []*tracepb.Span) {
	t.Helper()
	agent := relaySamples()["ok"].Agent
	relays := map[string][]byte{} // trace id → relay span id
	for _, sp := range spans {
		if sp.Name != SpanHubRelay {
			continue
		}
		var req string
		for _, kv := range sp.Attributes {
			if kv.Key == string(AttrReqID) {
				req = kv.Value.GetStringValue()
			}
		}
		tid, relay, parent := TraceID(agent, req), SpanID(HopHub, agent, req), SpanID(HopAgent, agent, req)
		if !bytes.Equal(sp.TraceId, tid[:]) || !bytes.Equal(sp.SpanId, relay[:]) || !bytes.Equal(sp.ParentSpanId, parent[:]) {
			t.Errorf("relay span of %q: trace %x span %x parent %x", req, sp.TraceId, sp.SpanId, sp.ParentSpanId)
		}
		relays[string(sp.TraceId)] = sp.SpanId
	}
	for _, sp := range spans {
		if sp.Name == SpanHubRelay {
			continue
		}
		var sid trace.SpanID
		copy(sid[:], sp.SpanId)
		if len(sp.SpanId) != 8 || !sid.IsValid() || relays[string(sp.TraceId)] == nil || !bytes.Equal(sp.ParentSpanId, relays[string(sp.TraceId)]) {
			t.Errorf("%s span: trace %x span %x parent %x", sp.Name, sp.TraceId, sp.SpanId, sp.ParentSpanId)
		}
	}
}

// TestBatcherByteBound: past maxQueueBytes of queued spans (encoded or
// relay records), spans are dropped and counted, whatever the count bound
// allows.
func TestBatcherByteBound(t *testing.T) {
	exp := &countExporter{}
	b := batcherFor(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000"}))
	big := relaySamples()["ok"]
	big.ReqID = strings.Repeat("x", maxQueueBytes)
	ids := newRelayIDs(&big)
	b.addRelay(nil, &big, &ids)
	b.addRelay(nil, &big, &ids) // 3 spans dropped
	endSpans(t, b, 3)           // 3 more
	if got := b.dropped.Load(); got != 6 {
		t.Fatalf("dropped %d, want 6 (the queue held %d bytes)", got, b.q.bytes())
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := exp.total(); n != 3 {
		t.Fatalf("exported %d spans, want the first relay's 3", n)
	}
}

// TestBatcherShutdownDeadline: a collector that never answers cannot hold
// Shutdown past its caller's deadline, and the export it was in is cut
// short, after which the uploader is closed.
func TestBatcherShutdownDeadline(t *testing.T) {
	started := make(chan struct{}, 1)
	closed := make(chan struct{})
	send := func(ctx context.Context, _ []byte) error {
		started <- struct{}{}
		<-ctx.Done() // a collector that never answers
		return ctx.Err()
	}
	b := newBatcher(send, func() { close(closed) }, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_EXPORT_TIMEOUT": "3600000"}), defaultBSP)
	endSpans(t, b, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := b.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown returned before its export ended")
	}
	<-started
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the export went on, and the uploader was not closed, after Shutdown gave up")
	}
	<-b.done
}

// TestBatcherExportMemory: an export reuses the memory of the one before
// (the queue, the request's body and its scratch space): at a few
// hundred batches a second, growing them anew for every batch was most
// of the hub's garbage with tracing on. What is left is the export's
// context.
func TestBatcherExportMemory(t *testing.T) {
	b := newBatcher(func(context.Context, []byte) error { return nil }, nil, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000"}), defaultBSP)
	defer b.Shutdown(context.Background())
	res := resource.NewSchemaless(attribute.String("service.name", "hub"))
	r := relaySamples()["ok"]
	fill := func() {
		for range 150 { // 450 spans: one request of maxBatch 512
			ids := newRelayIDs(&r)
			b.addRelay(res, &r, &ids)
		}
	}
	// export runs on the batcher's goroutine, asleep until its timer
	// fires in an hour; here the test is that goroutine.
	fill()
	if err := b.export(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		fill()
		if err := b.export(); err != nil {
			t.Fatal(err)
		}
	}); n > 4 {
		t.Errorf("an export of 450 spans allocates %v times, want at most 4 (its context)", n)
	}
}
