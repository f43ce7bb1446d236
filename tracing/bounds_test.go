package tracing

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// bdHeap is the live heap after two collections.
func bdHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// bdAllocated is what f allocates, in bytes.
func bdAllocated(f func()) uint64 {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

func bdExport(spans ...*tracepb.Span) []byte {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}}})
	if err != nil {
		panic(err)
	}
	return b
}

func bdSpan(seq, i int) *tracepb.Span {
	tid := make([]byte, 16)
	binary.BigEndian.PutUint64(tid, uint64(seq)+1)
	binary.BigEndian.PutUint64(tid[8:], uint64(i)+1)
	sid := make([]byte, 8)
	binary.BigEndian.PutUint64(sid, uint64(i)+1)
	return &tracepb.Span{TraceId: tid, SpanId: sid, Name: "n"}
}

// bdFat is an export of spans of 128 string attributes of 1,000 bytes,
// each span in its own trace, of about size bytes.
func bdFat(seq, size int) []byte {
	val := strings.Repeat("x", 1000)
	var spans []*tracepb.Span
	for i := 0; i < size/(128*1010); i++ {
		sp := bdSpan(seq, i)
		for a := range 128 {
			sp.Attributes = append(sp.Attributes, str(fmt.Sprintf("k%d", a), val))
		}
		spans = append(spans, sp)
	}
	return bdExport(spans...)
}

// bdNested is one span whose attributes are key-value lists nested three
// deep, 64 items each, with int leaves: about size bytes.
func bdNested(size int) []byte {
	var level func(d int) *commonpb.AnyValue
	level = func(d int) *commonpb.AnyValue {
		if d == 0 {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}
		}
		kv := &commonpb.KeyValueList{}
		for i := range 64 {
			kv.Values = append(kv.Values, &commonpb.KeyValue{Key: fmt.Sprint(i), Value: level(d - 1)})
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: kv}}
	}
	one := level(3)
	sp := bdSpan(0, 0)
	per := proto.Size(&commonpb.KeyValue{Key: "0", Value: one})
	for a := range size / per {
		sp.Attributes = append(sp.Attributes, &commonpb.KeyValue{Key: fmt.Sprint(a), Value: one})
	}
	return bdExport(sp)
}

// bdEmptyValues is one attribute, an array of n empty values: 2 bytes
// each on the wire.
func bdEmptyValues(n int) []byte {
	vals := make([]*commonpb.AnyValue, n)
	for i := range vals {
		vals[i] = &commonpb.AnyValue{}
	}
	sp := bdSpan(0, 0)
	sp.Attributes = []*commonpb.KeyValue{{Key: "a", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}}}
	return bdExport(sp)
}

// bdTinySpans is an export of the smallest valid spans that fill about
// size bytes.
func bdTinySpans(size int) []byte {
	var spans []*tracepb.Span
	for i := 0; i < size/30; i++ {
		s := bdSpan(i, i)
		s.Name = ""
		spans = append(spans, s)
	}
	return bdExport(spans...)
}

// bdEmptyLists is spans of 32 attributes each, each an empty key-value
// list: a map each for a few bytes on the wire.
func bdEmptyLists(size int) []byte {
	var spans []*tracepb.Span
	for i := 0; i < size/(32*6+30); i++ {
		s := bdSpan(i, i)
		for a := range 32 {
			s.Attributes = append(s.Attributes, &commonpb.KeyValue{Key: string(rune('A' + a)), Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{}}}})
		}
		spans = append(spans, s)
	}
	return bdExport(spans...)
}

// TestDecodeOTLPAllocation: decoding any body allocates a small multiple
// of its size at most, and the Recorder then holds no more than that. A
// body of two million empty values made proto.Unmarshal allocate about
// fifty times its size.
func TestDecodeOTLPAllocation(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"empty values", bdEmptyValues(2_000_000)},
		{"nested lists", bdNested(4 << 20)},
		{"fat attributes", bdFat(0, 4<<20)},
		{"tiny spans", bdTinySpans(1 << 20)},
		{"empty lists", bdEmptyLists(1 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spans []Span
			var err error
			alloc := bdAllocated(func() { spans, err = DecodeOTLP(tc.body) })
			if err != nil || len(spans) == 0 {
				t.Fatalf("DecodeOTLP = %d spans, %v", len(spans), err)
			}
			spans = nil
			before := bdHeap()
			rec := NewRecorder(0, 0)
			spans, _ = DecodeOTLP(tc.body)
			rec.Add(spans...)
			spans = nil
			held := bdHeap() - before
			t.Logf("%d KiB: decoding allocates %d KiB (x%.1f), the Recorder holds %d KiB", len(tc.body)>>10, alloc>>10, float64(alloc)/float64(len(tc.body)), held>>10)
			if alloc > 8*uint64(len(tc.body)) {
				t.Errorf("decoding a %d KiB body allocates %d KiB", len(tc.body)>>10, alloc>>10)
			}
			if held > 8*uint64(len(tc.body)) {
				t.Errorf("a %d KiB body is held as %d KiB", len(tc.body)>>10, held>>10)
			}
			runtime.KeepAlive(rec)
		})
	}
}

// TestRecorderHeldBytes: the Recorder's idea of its size is close to the
// memory it holds, and a body of fat spans is held in about 4 KiB a
// span, not whole.
func TestRecorderHeldBytes(t *testing.T) {
	rec := NewRecorder(0, 0)
	rec.Add(Span{TraceID: hexTrace(1), SpanID: "ring"}) // allocates the ring of trace ids
	before := bdHeap()
	const requests = 8
	n, wire := 0, 0
	for i := range requests {
		b := bdFat(i, 1<<20)
		wire += len(b)
		spans, err := DecodeOTLP(b)
		if err != nil {
			t.Fatal(err)
		}
		n += len(spans)
		rec.Add(spans...)
	}
	held := bdHeap() - before
	rec.mu.Lock()
	counted := rec.bytes
	rec.mu.Unlock()
	t.Logf("%d requests, %d KiB on the wire, %d spans: the Recorder holds %d KiB, counts %d KiB", requests, wire>>10, n, held>>10, counted>>10)
	if per := held / uint64(n); per > maxSpanBytes+2048 {
		t.Errorf("%d bytes held a span", per)
	}
	if held > 2*uint64(counted) || uint64(counted) > 2*held {
		t.Errorf("the Recorder counts %d bytes and holds %d", counted, held)
	}
	runtime.KeepAlive(rec)
}

// TestRecorderByteBound: past its byte bound the Recorder forgets its
// oldest traces, and the memory it holds stays near the bound.
func TestRecorderByteBound(t *testing.T) {
	rec := NewRecorder(0, 0)
	rec.maxBytes = 1 << 20
	val := strings.Repeat("v", 200)
	before := bdHeap()
	for i := range 2000 {
		attrs := map[string]any{}
		for a := range 16 {
			attrs[fmt.Sprint("k", a)] = val
		}
		rec.Add(Span{TraceID: hexTrace(i + 1), SpanID: "s", Attributes: attrs}, Span{TraceID: hexTrace(i + 1), SpanID: "t", Attributes: attrs})
	}
	held := bdHeap() - before
	rec.mu.Lock()
	counted, traces := rec.bytes, rec.count
	rec.mu.Unlock()
	t.Logf("holds %d traces, %d KiB counted, %d KiB on the heap", traces, counted>>10, held>>10)
	if counted > rec.maxBytes || traces >= 2000 || traces < 50 {
		t.Errorf("%d traces in %d bytes, bound %d", traces, counted, rec.maxBytes)
	}
	if held > 2*uint64(rec.maxBytes) {
		t.Errorf("holds %d KiB past a bound of %d KiB", held>>10, rec.maxBytes>>10)
	}
	oldest, _ := trace.TraceIDFromHex(hexTrace(1))
	newest, _ := trace.TraceIDFromHex(hexTrace(2000))
	if s, _ := rec.Trace(oldest); s != nil {
		t.Error("the oldest trace is kept past the byte bound")
	}
	if s, _ := rec.Trace(newest); len(s) != 2 {
		t.Errorf("the newest trace = %d spans", len(s))
	}
	// A span larger than the bound's room, in the only trace: dropped.
	small := NewRecorder(0, 0)
	small.maxBytes = 1000
	small.Add(Span{TraceID: hexTrace(1), SpanID: "a", Attributes: map[string]any{"k": val, "l": val, "m": val}})
	small.Add(Span{TraceID: hexTrace(1), SpanID: "b"})
	id, _ := trace.TraceIDFromHex(hexTrace(1))
	if s, dropped := small.Trace(id); len(s) != 1 || s[0].SpanID != "b" || dropped != 1 {
		t.Errorf("small recorder = %+v, %d dropped", s, dropped)
	}
}

// TestSpanBounds: one span keeps 32 attributes in about 4 KiB, strings
// of 256 bytes, and counts what it left out, from every source.
func TestSpanBounds(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes
	attrs := map[string]any{"long": long, "list": []any{long, int64(1)}, "nested": map[string]any{"a": map[string]any{"b": true}}}
	for i := range 40 {
		attrs[fmt.Sprintf("n%02d", i)] = int64(i)
	}
	sp := Span{TraceID: hexTrace(1), SpanID: "a", Name: long, StatusMessage: long, Attributes: attrs}
	sp.bound()
	if len(sp.Attributes) != maxSpanAttrs || sp.DroppedAttributes != 43-maxSpanAttrs {
		t.Errorf("%d attributes, %d dropped", len(sp.Attributes), sp.DroppedAttributes)
	}
	if len(sp.Name) != maxAttrString+len("…") || len(sp.StatusMessage) != maxAttrString+len("…") || len(sp.Attributes["long"].(string)) != maxAttrString+len("…") {
		t.Errorf("strings not cut: %d %d", len(sp.Name), len(sp.StatusMessage))
	}
	if l := sp.Attributes["list"].([]any); len(l[0].(string)) != maxAttrString+len("…") || l[1] != int64(1) {
		t.Errorf("list = %v", l)
	}
	if sp.size <= spanCost || sp.size > spanCost+3*(maxAttrString+3)+maxSpanBytes {
		t.Errorf("size = %d", sp.size)
	}
	// Big strings: the byte bound leaves some out.
	big := map[string]any{}
	for i := range 30 {
		big[fmt.Sprint("k", i)] = long
	}
	sp = Span{TraceID: hexTrace(1), SpanID: "b", Attributes: big}
	sp.bound()
	if n := len(sp.Attributes); n < 10 || n > maxSpanBytes/maxAttrString || sp.DroppedAttributes != 30-n {
		t.Errorf("%d big attributes kept, %d dropped", n, sp.DroppedAttributes)
	}
	b, _ := json.Marshal(sp)
	if !strings.Contains(string(b), fmt.Sprintf(`"dropped_attributes":%d`, sp.DroppedAttributes)) {
		t.Errorf("JSON = %s", b)
	}

	// Over OTLP: the same bounds.
	ps := bdSpan(0, 0)
	for i := range 40 {
		ps.Attributes = append(ps.Attributes, str(fmt.Sprint("k", i), long))
	}
	spans, err := DecodeOTLP(bdExport(ps))
	if err != nil || len(spans) != 1 {
		t.Fatal(spans, err)
	}
	if n := len(spans[0].Attributes); n < 10 || n > maxSpanBytes/maxAttrString || spans[0].DroppedAttributes != 40-n {
		t.Errorf("OTLP: %d attributes kept, %d dropped", n, spans[0].DroppedAttributes)
	}
}

// TestDecodeOTLPKeepsBatches: the decoder's budget leaves a batch of
// ordinary spans whole.
func TestDecodeOTLPKeepsBatches(t *testing.T) {
	var spans []*tracepb.Span
	for i := range 512 {
		s := bdSpan(i, i)
		s.Name, s.StartTimeUnixNano, s.EndTimeUnixNano, s.ParentSpanId = SpanComputerCall, 1, 2, []byte{1, 1, 1, 1, 1, 1, 1, 1}
		for a := range 12 {
			s.Attributes = append(s.Attributes, &commonpb.KeyValue{Key: fmt.Sprint("a", a), Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}})
		}
		s.Attributes = append(s.Attributes, str("a2c.tool", "b__t"), str("a2c.agent", "a"))
		spans = append(spans, s)
	}
	got, err := DecodeOTLP(bdExport(spans...))
	if err != nil || len(got) != 512 {
		t.Fatalf("%d spans, %v", len(got), err)
	}
	for _, s := range got {
		if len(s.Attributes) != 14 || s.DroppedAttributes != 0 {
			t.Fatalf("span = %+v", s)
		}
	}
}
