package tracing

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace encoder: it appends the protobuf wire form of an
// ExportTraceServiceRequest's parts to a byte slice, straight from the
// SDK's spans, with no intermediate messages. It fills the fields the
// SDK's own OTLP exporter fills, with the same values, so that a
// collector cannot tell the two apart (proto.Equal holds on the decoded
// requests: see encode_test.go), and it allocates nothing per span when
// the slice has room (an attribute holding a slice is the exception:
// the attribute API only hands out copies of slices).
//
// Nested messages are length-prefixed. The encoder writes each in one
// pass: encOpen reserves one byte for the length, the body is appended,
// and encClose writes the length there; a body of 128 bytes or more
// needs a longer varint, and encClose moves the body right to make room.
// Most nested messages (attributes, values, status) are shorter, so the
// move is rare below the span itself, whose body moves once, by a byte
// or two. Proto3 defaults (empty strings and bytes, zero numbers) are
// left out, as proto.Marshal leaves them out; message fields and the
// oneof in AnyValue are written when set, even empty, because they have
// presence.

// The SpanFlags bits the encoder writes.
const (
	// encFlagHasIsRemote and encFlagIsRemote are SpanFlags bits 8 and 9,
	// above the W3C trace flags: the SDK always says it knows whether
	// the parent (of a link: the linked span) is remote, and whether it
	// is.
	encFlagHasIsRemote = 0x100
	encFlagIsRemote    = 0x200
)

// otlpSpan is a span's fields for the encoder when there is no ReadOnlySpan:
// the hub records its relay spans compactly and encodes them with this.
type otlpSpan struct {
	TraceID   trace.TraceID
	SpanID    trace.SpanID
	ParentID  trace.SpanID // zero: a root
	Remote    bool         // the parent is remote (sets the span flags' "parent is remote" bits as the SDK does)
	Sampled   bool         // trace flags
	Name      string
	Kind      trace.SpanKind // sent as is: unspecified stays unspecified (the SDK makes it internal at the span's start)
	Start     time.Time
	End       time.Time
	Attrs     []attribute.KeyValue
	Status    codes.Code
	StatusMsg string // only with codes.Error, as the SDK does
}

// appendSpanField appends one Span message of an SDK span as field 2 of
// ScopeSpans: tag, length and body. It writes what the SDK's OTLP
// exporter writes, and the links' trace state besides (see encLink).
func appendSpanField(b []byte, s sdktrace.ReadOnlySpan) []byte {
	b, mark := encOpenSpan(b)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = encBytes(b, pbSpanTraceID, tid[:])
	b = encBytes(b, pbSpanSpanID, sid[:])
	b = encTraceState(b, pbSpanTraceState, sc.TraceState())
	parent := s.Parent()
	if pid := parent.SpanID(); pid.IsValid() {
		b = encBytes(b, pbSpanParentID, pid[:])
	}
	b = encString(b, pbSpanName, s.Name())
	b = encVarint(b, pbSpanKind, encKind(s.SpanKind()))
	b = encFixed64(b, pbSpanStart, encTime(s.StartTime()))
	b = encFixed64(b, pbSpanEnd, encTime(s.EndTime()))
	b = encAttrs(b, pbSpanAttrs, s.Attributes())
	b = encVarint(b, pbSpanDroppedAttrs, encCount(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = encEvent(b, &e)
	}
	b = encVarint(b, pbSpanDroppedEvents, encCount(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = encLink(b, &l)
	}
	b = encVarint(b, pbSpanDroppedLinks, encCount(s.DroppedLinks()))
	st := s.Status()
	b = encStatus(b, st.Code, st.Description)
	b = encFixed32(b, pbSpanFlags, encFlags(sc.TraceFlags(), parent.IsRemote()))
	return encCloseSpan(b, mark)
}

// appendOTLPSpanField does the same for an otlpSpan.
func appendOTLPSpanField(b []byte, s *otlpSpan) []byte {
	b, mark := encOpenSpan(b)
	b = encBytes(b, pbSpanTraceID, s.TraceID[:])
	b = encBytes(b, pbSpanSpanID, s.SpanID[:])
	if s.ParentID.IsValid() {
		b = encBytes(b, pbSpanParentID, s.ParentID[:])
	}
	b = encString(b, pbSpanName, s.Name)
	b = encVarint(b, pbSpanKind, encKind(s.Kind))
	b = encFixed64(b, pbSpanStart, encTime(s.Start))
	b = encFixed64(b, pbSpanEnd, encTime(s.End))
	b = encAttrs(b, pbSpanAttrs, s.Attrs)
	msg := ""
	if s.Status == codes.Error {
		msg = s.StatusMsg
	}
	b = encStatus(b, s.Status, msg)
	var tf trace.TraceFlags
	if s.Sampled {
		tf = trace.FlagsSampled
	}
	b = encFixed32(b, pbSpanFlags, encFlags(tf, s.Remote))
	return encCloseSpan(b, mark)
}

// appendResourceSpans appends field 1 of ExportTraceServiceRequest (tag, length, body): the ResourceSpans of res
// (its attributes and schema URL; nil res: an empty Resource) holding ONE ScopeSpans for scope, whose spans are
// the concatenation of spanFields (each part a run of appendSpanField/appendOTLPSpanField outputs).
//
// The spans are copied once: the two lengths in front of them are
// computed from their size, so they are never moved.
func appendResourceSpans(b []byte, res *resource.Resource, scope instrumentation.Scope, spanFields ...[]byte) []byte {
	spans := 0
	for _, f := range spanFields {
		spans += len(f)
	}
	b = encTag(b, pbRequestResourceSpans, protowire.BytesType)
	// head1 is the ResourceSpans body up to the ScopeSpans length,
	// head2 the ScopeSpans body up to its spans: both are written at
	// once, then moved right by the size of the lengths that go in
	// front of them.
	head1 := len(b)
	b, mark := encOpen(b, pbResourceSpansResource)
	if res != nil {
		for it := res.Iter(); it.Next(); {
			b = encKeyValue(b, pbResourceAttrs, it.Attribute())
		}
	}
	b = encClose(b, mark)
	if res != nil {
		b = encString(b, pbResourceSpansSchemaURL, res.SchemaURL())
	}
	b = encTag(b, pbResourceSpansScope, protowire.BytesType)
	head2 := len(b)
	if scope != (instrumentation.Scope{}) {
		b, mark = encOpen(b, pbScopeSpansScope)
		b = encString(b, pbScopeName, scope.Name)
		b = encString(b, pbScopeVersion, scope.Version)
		for it := scope.Attributes.Iter(); it.Next(); {
			b = encKeyValue(b, pbScopeAttrs, it.Attribute())
		}
		b = encClose(b, mark)
	}
	b = encString(b, pbScopeSpansSchemaURL, scope.SchemaURL)
	end := len(b)

	ssLen := uint64(end - head2 + spans)
	ssSize := protowire.SizeVarint(ssLen)
	rsLen := uint64(head2-head1+ssSize) + ssLen
	rsSize := protowire.SizeVarint(rsLen)
	b = encGrow(b, rsSize+ssSize+spans)
	b = b[:end+rsSize+ssSize]
	copy(b[head2+rsSize+ssSize:], b[head2:end])
	copy(b[head1+rsSize:], b[head1:head2])
	protowire.AppendVarint(b[:head1], rsLen)
	protowire.AppendVarint(b[:head2+rsSize], ssLen)
	for _, f := range spanFields {
		b = append(b, f...)
	}
	return b
}

// encGrow returns b with room for n more bytes, as append would make it.
func encGrow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(b, make([]byte, n)...)[:len(b)]
}

// encOpen appends the tag of message field num and one byte for its
// length; the body follows. It returns where the body starts, for
// encClose.
func encOpen(b []byte, num protowire.Number) ([]byte, int) {
	b = encTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// encOpenSpan is encOpen for a span: two bytes for its length, which is
// nearly always from 128 to 16383 (see encCloseSpan).
func encOpenSpan(b []byte) ([]byte, int) {
	b = encTag(b, pbScopeSpansSpans, protowire.BytesType)
	b = append(b, 0, 0)
	return b, len(b)
}

// encCloseSpan is encClose for encOpenSpan's two bytes.
func encCloseSpan(b []byte, mark int) []byte {
	if n := len(b) - mark; n >= 0x80 && n < 0x4000 {
		b[mark-2], b[mark-1] = byte(n)|0x80, byte(n>>7)
		return b
	}
	return encCloseIn(b, mark, 2)
}

// encClose writes the length of the body that starts at mark (after
// encOpen's byte), moving the body right when the length needs more than
// that byte.
func encClose(b []byte, mark int) []byte {
	if n := len(b) - mark; n < 0x80 {
		b[mark-1] = byte(n)
		return b
	}
	return encCloseIn(b, mark, 1)
}

// encCloseIn writes the length of the body that starts at mark in front
// of it, where room bytes were kept for it. The body moves (right or
// left) when the length's varint is not room bytes long, so that the
// encoding stays minimal.
func encCloseIn(b []byte, mark, room int) []byte {
	n := len(b) - mark
	k := protowire.SizeVarint(uint64(n))
	if k != room {
		to := mark - room + k // where the body starts now
		if k > room {
			b = append(b, make([]byte, k-room)...)
		}
		copy(b[to:], b[mark:mark+n])
		b = b[:to+n]
	}
	protowire.AppendVarint(b[:mark-room], uint64(n))
	return b
}

// encTag appends a field's tag: one byte for the fields below 16, the
// most common case, written without protowire's general varint code
// (which took a third of the time of a span before this).
func encTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ))
	}
	return protowire.AppendTag(b, num, typ)
}

// encUvarint appends v as a varint, a small one in one step.
func encUvarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// encLenString appends s with its length in front.
func encLenString(b []byte, s string) []byte {
	return append(encUvarint(b, uint64(len(s))), s...)
}

// encLenBytes appends v with its length in front.
func encLenBytes(b []byte, v []byte) []byte {
	return append(encUvarint(b, uint64(len(v))), v...)
}

// encBytes appends bytes field num, unless v is empty.
func encBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = encTag(b, num, protowire.BytesType)
	return encLenBytes(b, v)
}

// encString appends string field num, unless v is empty.
func encString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = encTag(b, num, protowire.BytesType)
	return encLenString(b, v)
}

// encVarint appends varint field num, unless v is zero.
func encVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = encTag(b, num, protowire.VarintType)
	return encUvarint(b, v)
}

// encFixed64 appends fixed64 field num, unless v is zero.
func encFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = encTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// encFixed32 appends fixed32 field num, unless v is zero.
func encFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = encTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// encTime is t in Unix nanoseconds, 0 before 1970 (and for the zero
// time), as the SDK's exporter has it.
func encTime(t time.Time) uint64 {
	return uint64(max(0, t.UnixNano()))
}

// encCount is a dropped count as a uint32, clamped as the SDK clamps it.
func encCount(n int) uint64 {
	return uint64(min(max(n, 0), math.MaxUint32))
}

// encKind is the OTLP Span.SpanKind of k: the two enums have the same
// numbers; an unknown kind is SPAN_KIND_UNSPECIFIED.
func encKind(k trace.SpanKind) uint64 {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return 0
	}
	return uint64(k)
}

// encFlags is the Span.flags (or Link.flags) of a span with trace flags
// tf whose parent (linked span) is remote or not.
func encFlags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | encFlagHasIsRemote
	if remote {
		f |= encFlagIsRemote
	}
	return f
}

// encTraceState appends trace state ts as string field num, in its W3C
// form (the form of TraceState.String, without building the string).
func encTraceState(b []byte, num protowire.Number, ts trace.TraceState) []byte {
	if ts.Len() == 0 {
		return b
	}
	n := -1 // no comma before the first member
	ts.Walk(func(k, v string) bool {
		n += len(k) + len(v) + 2
		return true
	})
	b = encTag(b, num, protowire.BytesType)
	b = encUvarint(b, uint64(n))
	first := true
	ts.Walk(func(k, v string) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, k...)
		b = append(b, '=')
		b = append(b, v...)
		return true
	})
	return b
}

// encStatus appends the span's Status. The SDK's exporter always sends
// one, even unset, and so does this.
func encStatus(b []byte, c codes.Code, msg string) []byte {
	var code uint64
	switch c {
	case codes.Ok:
		code = pbStatusOK
	case codes.Error:
		code = pbStatusError
	}
	b, mark := encOpen(b, pbSpanStatus)
	b = encString(b, pbStatusMessage, msg)
	b = encVarint(b, pbStatusCode, code)
	return encClose(b, mark)
}

// encEvent appends a span event.
func encEvent(b []byte, e *sdktrace.Event) []byte {
	b, mark := encOpen(b, pbSpanEvents)
	b = encFixed64(b, pbEventTime, encTime(e.Time))
	b = encString(b, pbEventName, e.Name)
	b = encAttrs(b, pbEventAttrs, e.Attributes)
	b = encVarint(b, pbEventDroppedAttrs, encCount(e.DroppedAttributeCount))
	return encClose(b, mark)
}

// encLink appends a span link. Unlike the SDK's exporter (1.47), it
// sends the linked span's trace state too: OTLP has a field for it, and
// a receiver may need it to follow the link.
func encLink(b []byte, l *sdktrace.Link) []byte {
	b, mark := encOpen(b, pbSpanLinks)
	sc := l.SpanContext
	tid, sid := sc.TraceID(), sc.SpanID()
	// Sent even when zero, as the SDK's exporter does.
	b = encTag(b, pbLinkTraceID, protowire.BytesType)
	b = encLenBytes(b, tid[:])
	b = encTag(b, pbLinkSpanID, protowire.BytesType)
	b = encLenBytes(b, sid[:])
	b = encTraceState(b, pbLinkTraceState, sc.TraceState())
	b = encAttrs(b, pbLinkAttrs, l.Attributes)
	b = encVarint(b, pbLinkDroppedAttrs, encCount(l.DroppedAttributeCount))
	b = encFixed32(b, pbLinkFlags, encFlags(sc.TraceFlags(), sc.IsRemote()))
	return encClose(b, mark)
}

// encAttrs appends attributes as repeated KeyValue field num.
func encAttrs(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		b = encKeyValue(b, num, kv)
	}
	return b
}

// encKeyValue appends one attribute as KeyValue field num. Its value is
// always there, as the SDK's exporter sends it: an empty AnyValue for an
// attribute with no value.
func encKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	if kv.Value.Type() == attribute.STRING {
		// The common case, with both lengths known before the bytes:
		// KeyValue{key, AnyValue{string_value}}, nothing to move.
		v := kv.Value.AsString()
		anyLen := 1 + protowire.SizeBytes(len(v))
		kvLen := 1 + protowire.SizeBytes(len(kv.Key)) + 1 + protowire.SizeBytes(anyLen)
		b = encTag(b, num, protowire.BytesType)
		b = encUvarint(b, uint64(kvLen))
		b = append(b, byte(protowire.EncodeTag(pbKeyValueKey, protowire.BytesType)))
		b = encLenString(b, string(kv.Key))
		b = append(b, byte(protowire.EncodeTag(pbKeyValueValue, protowire.BytesType)))
		b = encUvarint(b, uint64(anyLen))
		b = append(b, byte(protowire.EncodeTag(pbAnyString, protowire.BytesType)))
		return encLenString(b, v)
	}
	b, mark := encOpen(b, num)
	b = encString(b, pbKeyValueKey, string(kv.Key))
	b = encValue(b, pbKeyValueValue, kv.Value)
	return encClose(b, mark)
}

// encValue appends v as AnyValue field num, mapping the attribute types
// as the SDK's exporter does: slices of scalars are ArrayValues of
// scalars, a map is a KeyValueList, no value (EMPTY) is an AnyValue with
// none, and a type this code does not know is the string "INVALID". The
// oneof's field is written even when its value is the zero value: it is
// what says which type the value has.
func encValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, mark := encOpen(b, num)
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.BOOL:
		b = encTag(b, pbAnyBool, protowire.VarintType)
		b = encUvarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = encTag(b, pbAnyInt, protowire.VarintType)
		b = encUvarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = encTag(b, pbAnyDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = encTag(b, pbAnyString, protowire.BytesType)
		b = encLenString(b, v.AsString())
	case attribute.BYTESLICE:
		b = encTag(b, pbAnyBytes, protowire.BytesType)
		b = encLenBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		var m int
		b, m = encOpen(b, pbAnyArray)
		for _, x := range v.AsBoolSlice() {
			b = append(b, byte(protowire.EncodeTag(pbListValues, protowire.BytesType)), 2,
				byte(protowire.EncodeTag(pbAnyBool, protowire.VarintType)), byte(protowire.EncodeBool(x)))
		}
		b = encClose(b, m)
	case attribute.INT64SLICE:
		var m int
		b, m = encOpen(b, pbAnyArray)
		for _, x := range v.AsInt64Slice() {
			b = append(b, byte(protowire.EncodeTag(pbListValues, protowire.BytesType)), byte(1+protowire.SizeVarint(uint64(x))),
				byte(protowire.EncodeTag(pbAnyInt, protowire.VarintType)))
			b = encUvarint(b, uint64(x))
		}
		b = encClose(b, m)
	case attribute.FLOAT64SLICE:
		var m int
		b, m = encOpen(b, pbAnyArray)
		for _, x := range v.AsFloat64Slice() {
			b = append(b, byte(protowire.EncodeTag(pbListValues, protowire.BytesType)), 9,
				byte(protowire.EncodeTag(pbAnyDouble, protowire.Fixed64Type)))
			b = protowire.AppendFixed64(b, math.Float64bits(x))
		}
		b = encClose(b, m)
	case attribute.STRINGSLICE:
		var m int
		b, m = encOpen(b, pbAnyArray)
		for _, x := range v.AsStringSlice() {
			var mv int
			b, mv = encOpen(b, pbListValues)
			b = encTag(b, pbAnyString, protowire.BytesType)
			b = encLenString(b, x)
			b = encClose(b, mv)
		}
		b = encClose(b, m)
	case attribute.SLICE:
		var m int
		b, m = encOpen(b, pbAnyArray)
		for _, x := range v.AsSlice() {
			b = encValue(b, pbListValues, x)
		}
		b = encClose(b, m)
	case attribute.MAP:
		var m int
		b, m = encOpen(b, pbAnyKvlist)
		b = encAttrs(b, pbListValues, v.AsMap())
		b = encClose(b, m)
	default:
		b = encTag(b, pbAnyString, protowire.BytesType)
		b = encLenString(b, "INVALID")
	}
	return encClose(b, mark)
}
