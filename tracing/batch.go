package tracing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the span processor in front of the OTLP exporter. It does
// what the SDK's BatchSpanProcessor does (a bounded queue, batches of at
// most maxBatch, an export every delay or when a batch is full, drops
// counted when the queue is full) and reads the same OTEL_BSP_*
// variables, but it does not wake its exporter for every span: the SDK's
// processor hands each ended span to its goroutine over a channel, one
// wake-up per span, which on the hub cost more than the span itself. Here
// an ended span is appended to a slice under a mutex; the exporting
// goroutine sleeps until its timer fires or a batch is full.
//
// The goroutine is owned by the batcher: Shutdown stops it (after a last
// export within the caller's deadline) and waits for it.
type batcher struct {
	exp      sdktrace.SpanExporter
	maxQueue int
	maxBatch int
	delay    time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	stopped bool

	kick     chan struct{}   // a batch is full (1-buffered, never blocks)
	flushes  chan chan error // ForceFlush asks for an export and waits for its error
	stop     chan struct{}
	done     chan struct{}
	dropped  atomic.Int64
	reported int64 // drops already reported (the goroutine's own)
}

// The defaults of the OTEL_BSP_* variables (OpenTelemetry's).
const (
	defaultBSPDelay    = 5 * time.Second
	defaultBSPTimeout  = 30 * time.Second
	defaultBSPQueue    = 2048
	defaultBSPMaxBatch = 512
)

// newBatcher starts a batcher for exp with the OTEL_BSP_* settings that
// getenv gives (malformed or non-positive values keep the defaults; a
// batch is never larger than the queue).
func newBatcher(exp sdktrace.SpanExporter, getenv func(string) string) *batcher {
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
		exp:      exp,
		delay:    ms("OTEL_BSP_SCHEDULE_DELAY", defaultBSPDelay),
		timeout:  ms("OTEL_BSP_EXPORT_TIMEOUT", defaultBSPTimeout),
		maxQueue: count("OTEL_BSP_MAX_QUEUE_SIZE", defaultBSPQueue),
		maxBatch: count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultBSPMaxBatch),
		kick:     make(chan struct{}, 1),
		flushes:  make(chan chan error),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	b.maxBatch = min(b.maxBatch, b.maxQueue)
	go b.run()
	return b
}

// OnStart implements sdktrace.SpanProcessor.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span for export, or counts it dropped when the
// queue is full. It never blocks on the exporter.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped || len(b.queue) >= b.maxQueue {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == b.maxBatch
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// run exports the queue every delay, when a batch is full, on a flush,
// and a last time at stop.
func (b *batcher) run() {
	defer close(b.done)
	t := time.NewTimer(b.delay)
	defer t.Stop()
	for {
		var ack chan error
		select {
		case <-b.stop:
			if err := b.export(); err != nil {
				otel.Handle(err)
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

// export sends what is queued, in batches of at most maxBatch, each
// within the export timeout, and returns the first error.
func (b *batcher) export() error {
	b.mu.Lock()
	q := b.queue
	b.queue = make([]sdktrace.ReadOnlySpan, 0, min(len(q), b.maxQueue))
	b.mu.Unlock()
	var first error
	for len(q) > 0 {
		n := min(len(q), b.maxBatch)
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		if err := b.exp.ExportSpans(ctx, q[:n]); err != nil && first == nil {
			first = err
		}
		cancel()
		q = q[n:]
	}
	return first
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
	case <-ctx.Done():
		return ctx.Err()
	}
	if already {
		return nil
	}
	return b.exp.Shutdown(ctx)
}
