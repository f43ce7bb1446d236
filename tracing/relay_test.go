package tracing

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// relaySample is a Relay of every kind: sent or refused, ok or failed,
// alone or in a cluster, an Agent's or the console's.
func relaySamples() map[string]Relay {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	base := Relay{Agent: "bot", ReqID: "req-1", Computer: "pc", Tool: "fs__read", Office: "o1",
		Start: t0, Sent: t0.Add(time.Millisecond), End: t0.Add(5 * time.Millisecond), Outcome: OutcomeOK}
	failed := base
	failed.ReqID, failed.Outcome, failed.Code, failed.Node, failed.Console = "req-2", OutcomeTimeout, 4408, "node-a", true
	refused := base
	refused.ReqID, refused.Sent, refused.Outcome, refused.Code, refused.Message = "req-3", time.Time{}, OutcomeError, 404, "Computer not found"
	return map[string]Relay{"ok": base, "failed": failed, "refused": refused}
}

// TestRelayPaths checks that the two ways a Relay becomes spans agree:
// a Provider's record, read back from its Recorder, and the SDK spans a
// foreign provider gets (RecordRelay's emit).
func TestRelayPaths(t *testing.T) {
	for name, r := range relaySamples() {
		t.Run(name, func(t *testing.T) {
			rec := NewRecorder(0, 0)
			tr, err := New(context.Background(), Options{Service: "hub", Recorder: rec, Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			r1 := r
			RecordRelay(tr.Provider, &r1)
			fast, _ := rec.Trace(TraceID(r.Agent, r.ReqID))

			rec2 := NewRecorder(0, 0)
			sdk := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSpanProcessor(rec2))
			defer sdk.Shutdown(context.Background())
			r2 := r
			RecordRelay(sdk, &r2)
			slow, _ := rec2.Trace(TraceID(r.Agent, r.ReqID))

			want := 3
			if r.Sent.IsZero() {
				want = 2
			}
			if len(fast) != want || len(slow) != want {
				t.Fatalf("spans: provider %d, SDK %d; want %d", len(fast), len(slow), want)
			}
			relayID := SpanID(HopHub, r.Agent, r.ReqID).String()
			for i := range fast {
				f, s := fast[i], slow[i]
				// The SDK path draws its own ids below the relay span,
				// and knows no service name here.
				if f.Name != SpanHubRelay {
					if f.ParentID != relayID || s.ParentID != relayID {
						t.Errorf("%s: parents %s %s, want %s", f.Name, f.ParentID, s.ParentID, relayID)
					}
					f.SpanID, s.SpanID = "", ""
				}
				f.Service, s.Service, f.size, s.size = "", "", 0, 0
				if !reflect.DeepEqual(f, s) {
					t.Errorf("span %d:\nprovider %+v\nSDK      %+v", i, f, s)
				}
			}
			relay := fast[0]
			if relay.Name != SpanHubRelay || relay.SpanID != relayID || relay.ParentID != SpanID(HopAgent, r.Agent, r.ReqID).String() {
				t.Errorf("relay span = %+v", relay)
			}
			if relay.Attributes[string(AttrOutcome)] != r.Outcome || (r.Outcome != OutcomeOK) != (relay.Status == "error") {
				t.Errorf("relay outcome = %+v", relay)
			}
			if r.Outcome != OutcomeOK && relay.StatusMessage != StatusText(r.Outcome, r.Code, r.Message) {
				t.Errorf("relay status = %q", relay.StatusMessage)
			}
		})
	}
}

// TestRelaySampling checks that a Provider's sampler decides for the
// hub's records as it would for its spans.
func TestRelaySampling(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		kept bool
		how  relaySampling // asked once at New, or for every record
	}{
		{nil, true, relaysAll},
		{map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, false, relaysNone},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_off"}, true, relaysAll}, // the Agent's span is the sampled parent
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, true, relaysAll},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, false, relaysAsk},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1"}, true, relaysAsk},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "two"}, true, relaysAsk},
		{map[string]string{"OTEL_TRACES_SAMPLER": "no such sampler"}, true, relaysAll},
	} {
		rec := NewRecorder(0, 0)
		tr, err := New(context.Background(), Options{Recorder: rec, Getenv: func(k string) string { return tc.env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		if p := tr.Provider.(*Provider); p.relays != tc.how {
			t.Errorf("%v: relay sampling %d, want %d", tc.env, p.relays, tc.how)
		}
		r := relaySamples()["ok"]
		RecordRelay(tr.Provider, &r)
		spans, _ := rec.Trace(TraceID(r.Agent, r.ReqID))
		if (spans != nil) != tc.kept {
			t.Errorf("%v: kept %v, want %v", tc.env, spans != nil, tc.kept)
		}
		_ = tr.Shutdown(context.Background())
	}
	// A ratio between 0 and 1 keeps some traces and drops others, by
	// their ids: each record is asked for.
	rec := NewRecorder(0, 0)
	env := map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"}
	tr, err := New(context.Background(), Options{Recorder: rec, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	kept := 0
	for i := range 200 {
		r := relaySamples()["ok"]
		r.ReqID = fmt.Sprint("req-", i)
		RecordRelay(tr.Provider, &r)
		if spans, _ := rec.Trace(TraceID(r.Agent, r.ReqID)); spans != nil {
			kept++
		}
	}
	if kept < 50 || kept > 150 {
		t.Errorf("ratio 0.5 kept %d of 200 calls", kept)
	}
}

// TestRelayBounds checks that a Relay's strings are cut before they are
// kept, and that its ids are those of the whole names.
func TestRelayBounds(t *testing.T) {
	rec := NewRecorder(0, 0)
	tr, err := New(context.Background(), Options{Recorder: rec, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	r := relaySamples()["refused"]
	r.ReqID = strings.Repeat("r", 10000)
	r.Message = strings.Repeat("m", 10000)
	r.Tool = "a" + strings.Repeat("é", 150) // 301 bytes: a cut at 256 falls inside a character
	msg := r.Message
	id := TraceID(r.Agent, r.ReqID)
	relayID := SpanID(HopHub, r.Agent, r.ReqID).String()
	RecordRelay(tr.Provider, &r)
	spans, _ := rec.Trace(id)
	if len(spans) != 2 || spans[0].SpanID != relayID {
		t.Fatalf("spans = %+v", spans)
	}
	if len(r.Message) > maxStatusText || unsafe.StringData(r.Message) == unsafe.StringData(msg) {
		t.Errorf("the kept message is %d bytes of the original's", len(r.Message)) // it would pin the whole original
	}
	if tool := spans[0].Attributes[string(AttrTool)].(string); !utf8.ValidString(tool) || len(tool) > maxAttrString+len("…") {
		t.Errorf("tool cut to %q", tool)
	}
	for _, s := range spans {
		if len(s.StatusMessage) > maxStatusText+len(" (error_code 404)") || s.size > 2*maxSpanBytes {
			t.Errorf("%s: status %d bytes, size %d", s.Name, len(s.StatusMessage), s.size)
		}
		for k, v := range s.Attributes {
			if str, ok := v.(string); ok && len(str) > maxAttrString+len("…") {
				t.Errorf("%s: attribute %s has %d bytes", s.Name, k, len(str))
			}
		}
	}
}

// BenchmarkRecordRelay measures what a relayed call's spans cost the hub
// when exported: the Provider's record (the hub's path) against the same
// three spans made with the SDK (the path of any other provider), both
// into the same batch processor, whose export discards. Every batch is
// flushed and waited for, so that the export's work (ids, encoding) is
// counted and no span is dropped.
func BenchmarkRecordRelay(b *testing.B) {
	discard := func(context.Context, []byte) error { return nil }
	env := envOf(map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "1000000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512"})
	newBoth := func() (*Provider, *batcher) {
		bat := newBatcher(discard, nil, env, defaultBSP)
		res := resource.NewSchemaless(attribute.String("service.name", "hub"))
		sdk := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSpanProcessor(bat), sdktrace.WithResource(res))
		sampler, fixed := samplerFromEnv(env)
		return &Provider{TracerProvider: sdk, sampler: sampler, relays: relaySamplingOf(sampler, fixed), res: res, exp: bat}, bat
	}
	r := relaySamples()["ok"]
	for _, tc := range []struct {
		name string
		tp   func(p *Provider) trace.TracerProvider
	}{
		{"provider", func(p *Provider) trace.TracerProvider { return p }},
		{"sdk", func(p *Provider) trace.TracerProvider { return p.TracerProvider }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, bat := newBoth()
			defer bat.Shutdown(context.Background())
			tp := tc.tp(p)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c := r
				c.ReqID = "req-" + strconv.Itoa(i)
				RecordRelay(tp, &c)
				if i%170 == 169 { // 510 spans
					if err := bat.ForceFlush(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
			if d := bat.dropped.Load(); d != 0 {
				b.Fatalf("%d spans dropped", d)
			}
		})
	}
}
