package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// encSDKBody exports spans with the SDK's OTLP/HTTP exporter to a server
// on 127.0.0.1 and returns the body it sent.
func encSDKBody(t *testing.T, spans []sdktrace.ReadOnlySpan) []byte {
	t.Helper()
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Encoding") == "" {
			select {
			case bodies <- body:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.NoCompression),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(ctx) }()
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-bodies:
		return body
	default:
		t.Fatal("the exporter sent no uncompressed POST /v1/traces")
		return nil
	}
}

// encOurBody encodes spans as a request with our encoder: one
// ResourceSpans per (resource, scope), in order of first appearance,
// each span given as its own part.
func encOurBody(spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		res    *resource.Resource
		scope  instrumentation.Scope
		fields [][]byte
	}
	var groups []*group
	for _, s := range spans {
		i := slices.IndexFunc(groups, func(g *group) bool {
			return g.res == s.Resource() && g.scope == s.InstrumentationScope()
		})
		if i < 0 {
			i = len(groups)
			groups = append(groups, &group{res: s.Resource(), scope: s.InstrumentationScope()})
		}
		groups[i].fields = append(groups[i].fields, appendSpanField(nil, s))
	}
	var req []byte
	for _, g := range groups {
		req = appendResourceSpans(req, g.res, g.scope, g.fields...)
	}
	return req
}

// encUnmarshal decodes an ExportTraceServiceRequest.
func encUnmarshal(t *testing.T, body []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return req
}

// encFlatten turns a request into one ResourceSpans per span, each with
// one ScopeSpans, sorted by span id: the grouping of spans is the
// exporter's business, not the encoding's. A missing Resource is an
// empty one (our encoder always sends one).
func encFlatten(req *coltracepb.ExportTraceServiceRequest) []*tracepb.ResourceSpans {
	var out []*tracepb.ResourceSpans
	for _, rs := range req.ResourceSpans {
		res := rs.Resource
		if res == nil {
			res = &resourcepb.Resource{}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				out = append(out, &tracepb.ResourceSpans{
					Resource:  res,
					SchemaUrl: rs.SchemaUrl,
					ScopeSpans: []*tracepb.ScopeSpans{{
						Scope: ss.Scope, SchemaUrl: ss.SchemaUrl, Spans: []*tracepb.Span{sp},
					}},
				})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *tracepb.ResourceSpans) int {
		return bytes.Compare(a.ScopeSpans[0].Spans[0].SpanId, b.ScopeSpans[0].Spans[0].SpanId)
	})
	return out
}

// encCheckParity checks that our encoding of spans means what the SDK's
// exporter sends for them, and returns ours, decoded.
func encCheckParity(t *testing.T, spans []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	sdk := encUnmarshal(t, encSDKBody(t, spans))
	ours := encUnmarshal(t, encOurBody(spans))

	// Links: we send the linked span's trace state, the SDK does not.
	want := map[string]string{}
	for _, s := range spans {
		for _, l := range s.Links() {
			sid := l.SpanContext.SpanID()
			want[string(sid[:])] = l.SpanContext.TraceState().String()
		}
	}
	for _, rs := range ours.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				for _, l := range sp.Links {
					if ts := want[string(l.SpanId)]; l.TraceState != ts {
						t.Errorf("span %q: link %x: trace state %q, want %q", sp.Name, l.SpanId, l.TraceState, ts)
					}
					l.TraceState = ""
				}
			}
		}
	}

	a, b := encFlatten(sdk), encFlatten(ours)
	if len(a) != len(b) || len(a) != len(spans) {
		t.Fatalf("SDK sent %d spans, we encoded %d, of %d", len(a), len(b), len(spans))
	}
	for i := range a {
		if proto.Equal(a[i], b[i]) {
			continue
		}
		// Show the span alone when it is what differs.
		var x, y proto.Message = a[i], b[i]
		if sa, sb := a[i].ScopeSpans[0].Spans[0], b[i].ScopeSpans[0].Spans[0]; !proto.Equal(sa, sb) {
			x, y = sa, sb
		}
		t.Errorf("span %d differs:\nSDK:  %s\nours: %s", i, encText(x), encText(y))
	}
	return ours
}

func encText(m proto.Message) string {
	s := prototext.MarshalOptions{Multiline: true}.Format(m)
	if len(s) > 8000 {
		s = s[:8000] + "…"
	}
	return s
}

// encInvalidValue is an attribute value of a type no SDK version knows
// (the SDK's exporter sends the string "INVALID" for one). Value's first
// field is its Type; ok is false when that is no longer so.
func encInvalidValue() (attribute.Value, bool) {
	var v attribute.Value
	*(*attribute.Type)(unsafe.Pointer(&v)) = 1000
	return v, v.Type() == 1000
}

// encSampler samples every span but those named "unsampled", which it
// records only.
type encSampler struct{}

func (encSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	d := sdktrace.RecordAndSample
	if p.Name == "unsampled" {
		d = sdktrace.RecordOnly
	}
	return sdktrace.SamplingResult{Decision: d, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

func (encSampler) Description() string { return "encSampler" }

// encAllTypes is an attribute of every type, with zero values and long
// ones.
func encAllTypes(t *testing.T) []attribute.KeyValue {
	kvs := []attribute.KeyValue{
		attribute.Bool("bool.true", true),
		attribute.Bool("bool.false", false),
		attribute.Int("int", 42),
		attribute.Int64("int64.zero", 0),
		attribute.Int64("int64.neg", math.MinInt64),
		attribute.Float64("float.zero", 0),
		attribute.Float64("float", -1.5),
		attribute.Float64("float.nan", math.NaN()),
		attribute.Float64("float.inf", math.Inf(1)),
		attribute.String("string", "héllo"),
		attribute.String("string.empty", ""),
		attribute.String("string.long", strings.Repeat("x", 300)),
		attribute.BoolSlice("bools", []bool{true, false, true}),
		attribute.BoolSlice("bools.empty", []bool{}),
		attribute.IntSlice("ints", []int{1, -1, 0, math.MaxInt64}),
		attribute.Int64Slice("int64s", []int64{math.MinInt64, 7}),
		attribute.Float64Slice("floats", []float64{0, 2.25, math.Inf(-1)}),
		attribute.StringSlice("strings", []string{"a", "", strings.Repeat("y", 200)}),
		attribute.StringSlice("strings.many", slices.Repeat([]string{"abcdefgh"}, 40)),
		attribute.ByteSlice("bytes", []byte{0, 1, 2, 0xff}),
		attribute.ByteSlice("bytes.empty", nil),
		attribute.Slice("slice", attribute.StringValue("s"), attribute.IntValue(1),
			attribute.SliceValue(attribute.BoolValue(true)), attribute.MapValue(attribute.String("k", "v")), attribute.Value{}),
		attribute.Slice("slice.empty"),
		attribute.Map("map", attribute.String("b", "2"), attribute.Int("a", 1),
			attribute.Map("nested", attribute.Float64("f", 1)), attribute.KeyValue{Key: "none"}),
		attribute.Map("map.empty"),
		{Key: "empty"},
	}
	if v, ok := encInvalidValue(); ok {
		kvs = append(kvs, attribute.KeyValue{Key: "invalid", Value: v})
	} else {
		t.Log("attribute.Value's layout changed: no invalid-type attribute")
	}
	return kvs
}

// TestEncodeParity encodes spans of a real provider, with every feature
// the SDK has, and checks that they decode to what the SDK's OTLP/HTTP
// exporter sends for the same spans.
func TestEncodeParity(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = -1
	limits.AttributeCountLimit = 40
	limits.EventCountLimit = 3
	limits.LinkCountLimit = 3
	limits.AttributePerEventCountLimit = 2
	limits.AttributePerLinkCountLimit = 2
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "a2c-server"), attribute.String("host.name", "h1"),
		attribute.Int("pid", 4242), attribute.StringSlice("process.command_args", []string{"a2c", "server"}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSampler(encSampler{}), sdktrace.WithRawSpanLimits(limits))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	// A second provider: another resource (no schema URL).
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "other"))),
		sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp2.Shutdown(context.Background()) }()

	full := tp.Tracer("github.com/a2c-smcp/a2c-go/tracing/test", trace.WithInstrumentationVersion("1.2.3"),
		trace.WithSchemaURL("https://opentelemetry.io/schemas/1.20.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x"), attribute.Int("scope.n", 3)))
	bare := tp.Tracer("")
	other := tp2.Tracer("other")

	ts, err := trace.ParseTraceState("vendor=abc,other=k1:v1")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	linkTS, _ := trace.ParseTraceState("l=1")
	// The SDK keeps the newest links and events past its limits.
	links := []trace.Link{
		{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0xaa, 2}, SpanID: trace.SpanID{0xbb, 2}, TraceFlags: trace.FlagsSampled})}, // dropped: the oldest
		{SpanContext: remote.WithTraceState(linkTS), Attributes: []attribute.KeyValue{
			attribute.String("link.a", "1"), attribute.Int("link.b", 2), attribute.Bool("link.c", true)}},
		{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0xaa, 1}, SpanID: trace.SpanID{0xbb, 1}})}, // not sampled, local
		{SpanContext: trace.SpanContext{}, Attributes: []attribute.KeyValue{attribute.String("why", "no context")}},
	}

	start := time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	ctx, root := full.Start(ctx, "all-types", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(start), trace.WithLinks(links...), trace.WithAttributes(encAllTypes(t)...))
	root.SetAttributes(attribute.Int("over.1", 1), attribute.Int("over.2", 2)) // past the limit: dropped
	for i := range 20 {
		root.SetAttributes(attribute.Int("fill."+string(rune('a'+i)), i))
	}
	root.AddEvent("dropped: the oldest")
	root.AddEvent("with attributes", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(
		attribute.String("e.a", "1"), attribute.StringSlice("e.b", []string{"x"}), attribute.Int("e.c", 3)))
	root.AddEvent("", trace.WithTimestamp(start.Add(2*time.Millisecond)))
	root.RecordError(errors.New("boom"), trace.WithTimestamp(start.Add(3*time.Millisecond)))
	root.SetStatus(codes.Error, "it failed")

	_, child := full.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start.Add(time.Millisecond)))
	child.AddLink(trace.Link{SpanContext: root.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("after", "start")}})
	child.SetStatus(codes.Ok, "ignored by the SDK")
	child.End(trace.WithTimestamp(start.Add(5 * time.Millisecond)))

	for _, k := range []trace.SpanKind{trace.SpanKindUnspecified, trace.SpanKindInternal, trace.SpanKindServer,
		trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer} {
		_, s := full.Start(ctx, "kind "+k.String(), trace.WithSpanKind(k))
		s.End()
	}
	_, uns := bare.Start(context.Background(), "unsampled")
	uns.SetStatus(codes.Error, "")
	uns.End()
	_, old := bare.Start(ctx, "before 1970", trace.WithTimestamp(time.Unix(-10, 0)))
	old.End(trace.WithTimestamp(time.Unix(-5, 0)))
	_, o := other.Start(ctx, "other resource", trace.WithSpanKind(trace.SpanKindProducer))
	o.End()
	root.End(trace.WithTimestamp(start.Add(10 * time.Millisecond)))

	spans := rec.Ended()
	if len(spans) != 11 {
		t.Fatalf("%d spans", len(spans))
	}
	// The spans have what the test says they have.
	r := spans[len(spans)-1]
	if r.DroppedAttributes() == 0 || r.DroppedEvents() == 0 || r.DroppedLinks() == 0 ||
		r.Events()[0].DroppedAttributeCount == 0 || r.Links()[0].DroppedAttributeCount == 0 || r.Links()[0].SpanContext.TraceState().Len() == 0 {
		t.Fatalf("no dropped counts: %d %d %d", r.DroppedAttributes(), r.DroppedEvents(), r.DroppedLinks())
	}
	ours := encCheckParity(t, spans)
	if n := len(ours.ResourceSpans); n != 3 {
		t.Errorf("%d ResourceSpans, want 3 (one per resource and scope)", n)
	}
}

// TestEncodeEdges checks edge cases against the SDK's exporter, with
// spans made as no provider would make them.
func TestEncodeEdges(t *testing.T) {
	tid := trace.TraceID{0xfd, 0x1a, 0xa8, 0x1b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	huge := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	invalid, ok := encInvalidValue()
	if !ok {
		t.Fatal("attribute.Value's layout changed")
	}
	res := resource.NewSchemaless(attribute.String("service.name", "edge"))
	tests := []struct {
		name  string
		stub  tracetest.SpanStub
		check func(t *testing.T, sp *tracepb.Span)
	}{
		{"no attributes, nil resource, no scope", tracetest.SpanStub{Name: "bare", SpanContext: sc, StartTime: start, EndTime: start},
			func(t *testing.T, sp *tracepb.Span) {
				if len(sp.Attributes) != 0 || sp.ParentSpanId != nil {
					t.Errorf("attributes %v, parent %x", sp.Attributes, sp.ParentSpanId)
				}
			}},
		{"empty attribute slice", tracetest.SpanStub{SpanContext: sc, Attributes: []attribute.KeyValue{}, Resource: res}, nil},
		{"empty strings", tracetest.SpanStub{SpanContext: sc, Resource: res, Attributes: []attribute.KeyValue{
			attribute.String("", ""), attribute.String("k", ""), attribute.StringSlice("", []string{""})},
			Events:               []sdktrace.Event{{}},
			Links:                []sdktrace.Link{{}},
			Status:               sdktrace.Status{Code: codes.Error},
			InstrumentationScope: instrumentation.Scope{Name: ""},
		}, func(t *testing.T, sp *tracepb.Span) {
			if len(sp.Attributes) != 3 || sp.Attributes[0].Value.GetValue() == nil {
				t.Errorf("attributes %v", sp.Attributes)
			}
		}},
		{"huge strings", tracetest.SpanStub{Name: huge, SpanContext: sc, Resource: res, Attributes: []attribute.KeyValue{
			attribute.String(huge, huge), attribute.StringSlice("list", []string{huge, "x"})},
			Events: []sdktrace.Event{{Name: huge, Attributes: []attribute.KeyValue{attribute.String("h", huge)}}},
			Status: sdktrace.Status{Code: codes.Error, Description: huge},
		}, func(t *testing.T, sp *tracepb.Span) {
			if sp.Name != huge || sp.Attributes[0].Key != huge || sp.Attributes[0].Value.GetStringValue() != huge ||
				sp.Status.Message != huge {
				t.Error("a huge string was cut")
			}
		}},
		{"zero parent, remote", tracetest.SpanStub{SpanContext: sc, Parent: trace.SpanContext{}.WithRemote(true), Resource: res},
			func(t *testing.T, sp *tracepb.Span) {
				if sp.ParentSpanId != nil || sp.Flags != 0x301 {
					t.Errorf("parent %x, flags %#x", sp.ParentSpanId, sp.Flags)
				}
			}},
		{"invalid attribute type", tracetest.SpanStub{SpanContext: sc, Resource: res, Attributes: []attribute.KeyValue{
			{Key: "invalid", Value: invalid}, attribute.Slice("in.slice", invalid), {Key: "empty"}}},
			func(t *testing.T, sp *tracepb.Span) {
				if v := sp.Attributes[0].Value.GetStringValue(); v != "INVALID" {
					t.Errorf("invalid type sent as %q", v)
				}
				if sp.Attributes[2].Value == nil || sp.Attributes[2].Value.Value != nil {
					t.Errorf("empty value sent as %v", sp.Attributes[2].Value)
				}
			}},
		{"zero times, unknown kind, clamped counts", tracetest.SpanStub{SpanContext: sc, Resource: res, SpanKind: trace.SpanKind(42),
			DroppedAttributes: -3, DroppedEvents: 1 << 40, DroppedLinks: math.MaxUint32,
			Events: []sdktrace.Event{{Name: "e", DroppedAttributeCount: 1 << 33}}},
			func(t *testing.T, sp *tracepb.Span) {
				if sp.StartTimeUnixNano != 0 || sp.Kind != 0 || sp.DroppedAttributesCount != 0 || sp.DroppedEventsCount != math.MaxUint32 {
					t.Errorf("start %d, kind %v, dropped %d %d", sp.StartTimeUnixNano, sp.Kind, sp.DroppedAttributesCount, sp.DroppedEventsCount)
				}
			}},
		{"scope with attributes only", tracetest.SpanStub{SpanContext: sc, Resource: resource.Empty(),
			InstrumentationScope: instrumentation.Scope{Attributes: attribute.NewSet(attribute.Bool("b", false))}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ours := encCheckParity(t, []sdktrace.ReadOnlySpan{tc.stub.Snapshot()})
			if t.Failed() {
				return
			}
			if tc.check != nil {
				tc.check(t, ours.ResourceSpans[0].ScopeSpans[0].Spans[0])
			}
		})
	}
}

// TestEncodeOTLPSpan checks an otlpSpan's encoding field by field, with
// the SDK's exporter (for the same span as a ReadOnlySpan), and with our
// decoder.
func TestEncodeOTLPSpan(t *testing.T) {
	start := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)
	tid := trace.TraceID{0xfd, 0x1a, 0xa8, 0x1b, 0x9a, 0x1f, 0x01, 0xaa, 0xb4, 0xc2, 0xed, 0x72, 0x8f, 0xdd, 0x1c, 0x4a}
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "a2c-server"))
	scope := instrumentation.Scope{Name: "github.com/a2c-smcp/a2c-go/server", Version: "0.9.0"}
	tests := []struct {
		name    string
		span    otlpSpan
		want    *tracepb.Span
		decoded Span
	}{
		{
			name: "error with remote parent",
			span: otlpSpan{
				TraceID: tid, SpanID: trace.SpanID{0x42, 0xb0, 0xc5, 0x0a, 0x51, 0x4b, 0xe4, 0x93},
				ParentID: trace.SpanID{0x32, 0x67, 0xa9, 0xd7, 0x9f, 0xda, 0xcd, 0x8c}, Remote: true, Sampled: true,
				Name: SpanHubRelay, Kind: trace.SpanKindServer, Start: start, End: start.Add(2500 * time.Microsecond),
				Attrs: []attribute.KeyValue{attribute.String("a2c.tool", "b__t"), attribute.Int("a2c.error_code", 408),
					attribute.Bool("ok", false), attribute.Float64("f", 0.5)},
				Status: codes.Error, StatusMsg: "timeout",
			},
			want: &tracepb.Span{
				TraceId: tid[:], SpanId: mustHex("42b0c50a514be493"), ParentSpanId: mustHex("3267a9d79fdacd8c"),
				Flags: 0x301, Name: SpanHubRelay, Kind: tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.UnixNano()) + 2_500_000,
				Attributes: []*commonpb.KeyValue{str("a2c.tool", "b__t"),
					{Key: "a2c.error_code", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 408}}},
					{Key: "ok", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{}}},
					{Key: "f", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.5}}}},
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "timeout"},
			},
			decoded: Span{
				TraceID: "fd1aa81b9a1f01aab4c2ed728fdd1c4a", SpanID: "42b0c50a514be493", ParentID: "3267a9d79fdacd8c",
				Name: SpanHubRelay, Start: start, DurationMS: 2.5, Service: "a2c-server", Status: "error", StatusMessage: "timeout",
				Attributes: map[string]any{"a2c.tool": "b__t", "a2c.error_code": int64(408), "ok": false, "f": 0.5},
			},
		},
		{
			name: "ok root, not sampled, message ignored",
			span: otlpSpan{
				TraceID: tid, SpanID: trace.SpanID{1}, Name: "root", Start: start, End: start,
				Status: codes.Ok, StatusMsg: "not sent",
			},
			want: &tracepb.Span{
				TraceId: tid[:], SpanId: mustHex("0100000000000000"), Flags: 0x100, Name: "root",
				StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.UnixNano()),
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
			},
			decoded: Span{
				TraceID: "fd1aa81b9a1f01aab4c2ed728fdd1c4a", SpanID: "0100000000000000",
				Name: "root", Start: start, Service: "a2c-server", Status: "ok",
			},
		},
		{
			name: "unset, local parent, long attribute",
			span: otlpSpan{
				TraceID: tid, SpanID: trace.SpanID{2}, ParentID: trace.SpanID{1}, Sampled: true, Name: "long",
				Kind: trace.SpanKindClient, Start: start, End: start.Add(time.Second),
				Attrs:     []attribute.KeyValue{attribute.String("long", strings.Repeat("z", 200))},
				StatusMsg: "not sent",
			},
			want: &tracepb.Span{
				TraceId: tid[:], SpanId: mustHex("0200000000000000"), ParentSpanId: mustHex("0100000000000000"),
				Flags: 0x101, Name: "long", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(time.Second).UnixNano()),
				Attributes: []*commonpb.KeyValue{str("long", strings.Repeat("z", 200))},
				Status:     &tracepb.Status{},
			},
			decoded: Span{
				TraceID: "fd1aa81b9a1f01aab4c2ed728fdd1c4a", SpanID: "0200000000000000", ParentID: "0100000000000000",
				Name: "long", Start: start, DurationMS: 1000, Service: "a2c-server", Status: "ok",
				Attributes: map[string]any{"long": strings.Repeat("z", 200)},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := appendResourceSpans(nil, res, scope, appendOTLPSpanField(nil, &tc.span))
			req := encUnmarshal(t, body)
			if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 ||
				len(req.ResourceSpans[0].ScopeSpans[0].Spans) != 1 {
				t.Fatalf("request: %s", encText(req))
			}
			rs := req.ResourceSpans[0]
			if rs.SchemaUrl != res.SchemaURL() || len(rs.Resource.Attributes) != 1 ||
				rs.ScopeSpans[0].Scope.GetName() != scope.Name || rs.ScopeSpans[0].Scope.GetVersion() != scope.Version {
				t.Errorf("resource or scope: %s", encText(rs))
			}
			if got := rs.ScopeSpans[0].Spans[0]; !proto.Equal(got, tc.want) {
				t.Errorf("span:\n got %s\nwant %s", encText(got), encText(tc.want))
			}

			// The same span as the SDK would have it.
			s := tc.span
			tf := trace.TraceFlags(0)
			if s.Sampled {
				tf = trace.FlagsSampled
			}
			var parent trace.SpanContext
			if s.ParentID.IsValid() {
				parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.TraceID, SpanID: s.ParentID, Remote: s.Remote})
			}
			desc := ""
			if s.Status == codes.Error {
				desc = s.StatusMsg
			}
			stub := tracetest.SpanStub{
				Name: s.Name, SpanKind: s.Kind, StartTime: s.Start, EndTime: s.End, Attributes: s.Attrs,
				SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.TraceID, SpanID: s.SpanID, TraceFlags: tf}),
				Parent:      parent, Status: sdktrace.Status{Code: s.Status, Description: desc},
				Resource: res, InstrumentationScope: scope,
			}
			sdk := encUnmarshal(t, encSDKBody(t, []sdktrace.ReadOnlySpan{stub.Snapshot()}))
			if a, b := encFlatten(sdk), encFlatten(req); len(a) != 1 || len(b) != 1 || !proto.Equal(a[0], b[0]) {
				t.Errorf("differs from the SDK's:\nSDK:  %s\nours: %s", encText(sdk), encText(req))
			}

			// Our decoder reads it back.
			spans, err := DecodeOTLP(body)
			if err != nil || len(spans) != 1 {
				t.Fatalf("DecodeOTLP: %v, %d spans", err, len(spans))
			}
			got := spans[0]
			got.size = 0
			if !reflect.DeepEqual(got, tc.decoded) {
				t.Errorf("decoded:\n got %+v\nwant %+v", got, tc.decoded)
			}
		})
	}
}

// TestEncodeConcatenation checks that a request is a concatenation of
// ResourceSpans and that spanFields may be split anywhere between spans.
func TestEncodeConcatenation(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "cat"))
	var one, two []byte
	var all [][]byte
	for i := range 300 {
		s := &otlpSpan{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(i), byte(i >> 8), 1}, Name: "s",
			Attrs: []attribute.KeyValue{attribute.Int("i", i)}}
		f := appendOTLPSpanField(nil, s)
		all = append(all, f)
		if i < 100 {
			one = append(one, f...)
		} else {
			two = append(two, f...)
		}
	}
	a := appendResourceSpans(nil, res, instrumentation.Scope{Name: "x"}, one, two)
	b := appendResourceSpans(make([]byte, 0, 8), res, instrumentation.Scope{Name: "x"}, all...)
	if !bytes.Equal(a, b) {
		t.Fatal("the parts change the encoding")
	}
	req := encUnmarshal(t, append(append([]byte{}, a...), appendResourceSpans(nil, nil, instrumentation.Scope{})...))
	if len(req.ResourceSpans) != 2 || len(req.ResourceSpans[0].ScopeSpans[0].Spans) != 300 ||
		req.ResourceSpans[1].Resource == nil || len(req.ResourceSpans[1].ScopeSpans[0].Spans) != 0 {
		t.Fatalf("request: %d ResourceSpans", len(req.ResourceSpans))
	}
	if _, err := DecodeOTLP(a); err != nil {
		t.Fatal(err)
	}
	// Appending to a prefix leaves the prefix alone.
	prefix := []byte("prefix")
	c := appendResourceSpans(prefix, res, instrumentation.Scope{Name: "x"}, all...)
	if !bytes.Equal(c[:6], prefix) || !bytes.Equal(c[6:], a) {
		t.Fatal("appending to a prefix changed it or the encoding")
	}
}

// encBenchSpans is a typical hub span with 7 string attributes, as a
// ReadOnlySpan of a real provider and as an otlpSpan.
func encBenchSpans() (sdktrace.ReadOnlySpan, *otlpSpan) {
	attrs := []attribute.KeyValue{
		attribute.String("a2c.agent", "agent-7f3a"), attribute.String("a2c.req_id", "3b1f9a2c-7e4d-4c1b-9f00-1a2b3c4d5e6f"),
		attribute.String("a2c.office", "office-main"), attribute.String("a2c.computer", "computer-12"),
		attribute.String("a2c.tool", "browser__navigate"), attribute.String("a2c.node", "node1"),
		attribute.String("a2c.outcome", "ok"),
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	_, s := tp.Tracer("bench").Start(ctx, SpanHubRelay, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	s.SetStatus(codes.Error, "timeout")
	s.End()
	ro := rec.Ended()[0]
	return ro, &otlpSpan{
		TraceID: ro.SpanContext().TraceID(), SpanID: ro.SpanContext().SpanID(), ParentID: remote.SpanID(),
		Remote: true, Sampled: true, Name: ro.Name(), Kind: ro.SpanKind(), Start: ro.StartTime(), End: ro.EndTime(),
		Attrs: attrs, Status: codes.Error, StatusMsg: "timeout",
	}
}

// TestEncodeNoAllocs checks that a span with events, links and scalar
// attributes costs no allocation when the buffer has room. (An attribute
// holding a slice or a map costs one: the attribute API copies it.)
func TestEncodeNoAllocs(t *testing.T) {
	ro, op := encBenchSpans()
	ts, _ := trace.ParseTraceState("a=1,b=2")
	stub := tracetest.SpanStubFromReadOnlySpan(ro)
	stub.SpanContext = stub.SpanContext.WithTraceState(ts)
	stub.Events = []sdktrace.Event{{Name: "e", Time: time.Now(), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}}}
	stub.Links = []sdktrace.Link{{SpanContext: stub.SpanContext, Attributes: []attribute.KeyValue{attribute.Bool("b", true)}}}
	stub.Attributes = append(stub.Attributes, attribute.String("long", strings.Repeat("l", 500)),
		attribute.Int64("n", -1), attribute.Float64("f", 1), attribute.Bool("b", true))
	full := stub.Snapshot()
	buf := make([]byte, 0, 64<<10)
	fields := appendSpanField(appendOTLPSpanField(nil, op), full)
	for name, f := range map[string]func(){
		"ReadOnlySpan":  func() { buf = appendSpanField(buf[:0], ro) },
		"full":          func() { buf = appendSpanField(buf[:0], full) },
		"otlpSpan":      func() { buf = appendOTLPSpanField(buf[:0], op) },
		"ResourceSpans": func() { buf = appendResourceSpans(buf[:0], nil, instrumentation.Scope{Name: "s"}, fields) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per span", name, n)
		}
	}
}

func BenchmarkEncodeSpan(b *testing.B) {
	ro, op := encBenchSpans()
	buf := make([]byte, 0, 4096)
	b.Run("ReadOnlySpan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = appendSpanField(buf[:0], ro)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("otlpSpan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = appendOTLPSpanField(buf[:0], op)
		}
		b.SetBytes(int64(len(buf)))
	})
	// What the SDK's exporter does for the same span, less its
	// transform: proto.Marshal of the message it builds.
	b.Run("proto.Marshal", func(b *testing.B) {
		var m tracepb.Span
		f := appendSpanField(nil, ro)
		_, _, n := protowire.ConsumeTag(f)
		body, _ := protowire.ConsumeBytes(f[n:])
		if err := proto.Unmarshal(body, &m); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], &m)
		}
	})
}

// TestEncCloseLengths checks both ways a length is written in front of a
// body, for the sizes where its varint changes length: the bytes are
// tag, minimal varint, body, whatever room was kept.
func TestEncCloseLengths(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 1<<21 - 1, 1 << 21} {
		body := bytes.Repeat([]byte{0xab}, n)
		for name, enc := range map[string]func([]byte) []byte{
			"encOpen": func(b []byte) []byte {
				b, mark := encOpen(b, pbScopeSpansSpans)
				return encClose(append(b, body...), mark)
			},
			"encOpenSpan": func(b []byte) []byte {
				b, mark := encOpenSpan(b)
				return encCloseSpan(append(b, body...), mark)
			},
		} {
			got := enc([]byte{0x01}) // something before, left alone
			want := protowire.AppendBytes(protowire.AppendTag([]byte{0x01}, pbScopeSpansSpans, protowire.BytesType), body)
			if !bytes.Equal(got, want) {
				t.Errorf("%s, %d bytes: %d bytes written, want %d (head % x, want % x)", name, n, len(got), len(want), got[:min(6, len(got))], want[:min(6, len(want))])
			}
		}
	}
}
