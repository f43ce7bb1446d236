package tracing

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// countExporter records the batches it is given.
type countExporter struct {
	mu       sync.Mutex
	batches  []int
	exported chan int
	shut     bool
}

func (e *countExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	e.batches = append(e.batches, len(spans))
	e.mu.Unlock()
	if e.exported != nil {
		e.exported <- len(spans)
	}
	return nil
}

func (e *countExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.shut = true
	e.mu.Unlock()
	return nil
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
		b := newBatcher(&countExporter{}, envOf(tt.env))
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
	b := newBatcher(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5"}))
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
	b := newBatcher(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"}))
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
	b := newBatcher(exp, envOf(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000"}))
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
	b := newBatcher(exp, envOf(nil))
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
	b2 := newBatcher(exp2, envOf(nil))
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b2), sdktrace.WithSampler(sdktrace.NeverSample()))
	_, s2 := tp2.Tracer("t").Start(context.Background(), "s")
	s2.End()
	_ = b2.Shutdown(context.Background())
	if n, _ := exp2.total(); n != 0 {
		t.Fatalf("an unsampled span was exported")
	}
}
