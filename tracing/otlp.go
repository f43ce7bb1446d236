package tracing

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Bounds on what an OTLP request may put in a [Recorder], on top of the
// bounds of one span: the input is untrusted (any process that holds the
// hub's token may send it), so it is cut to size rather than refused,
// and what is cut is skipped on the wire, never decoded.
const (
	// maxOTLPSpans is the most spans kept of one request (the
	// OpenTelemetry SDKs send at most 512 at a time, a hub of ours 4096:
	// see hubBSP).
	maxOTLPSpans = 4096
	// otlpBudget is how many bytes of spans one request may decode to,
	// per byte of the request (see spanCost), plus otlpBudgetBase: the
	// decoder then allocates a small multiple of its input at most.
	otlpBudget     = 6
	otlpBudgetBase = 256 << 10
)

// errOTLP is a body that is not an ExportTraceServiceRequest.
var errOTLP = errors.New("tracing: OTLP request: malformed protobuf")

// DecodeOTLP parses the body of an OTLP/HTTP trace export
// (POST /v1/traces, Content-Type application/x-protobuf: an
// ExportTraceServiceRequest) and returns its spans, for a [Recorder]: ids
// in lowercase hex, the service.name of each span's resource as its
// Service, the error status as Status "error". A span whose trace id or
// span id is not a valid one (wrong length, all zero) is left out; a
// parent span id that is not valid makes the span a root. The start is
// UTC; an end before the start counts as a zero duration. Each span is
// cut to the bounds of one span (see [Recorder]); spans past 4,096, or
// past about six times the body's size in memory, are left out.
//
// It reads the protobuf wire format itself rather than decoding the
// whole message: what it leaves out (attributes past the bounds, items
// of long arrays, span events and links) is skipped, not allocated, so
// decoding a body costs at most a small multiple of its size. A body
// that is not well-formed protobuf where it reads is an error.
func DecodeOTLP(body []byte) ([]Span, error) {
	n := 0
	err := fields(body, func(num protowire.Number, typ protowire.Type, rs []byte, _ uint64) error {
		if num != pbRequestResourceSpans || typ != protowire.BytesType {
			return nil
		}
		return fields(rs, func(num protowire.Number, typ protowire.Type, ss []byte, _ uint64) error {
			if num != pbResourceSpansScope || typ != protowire.BytesType {
				return nil
			}
			return fields(ss, func(num protowire.Number, typ protowire.Type, _ []byte, _ uint64) error {
				if num == pbScopeSpansSpans && typ == protowire.BytesType {
					n++
				}
				return nil
			})
		})
	})
	if err != nil || n == 0 {
		return nil, err
	}
	d := &otlpDecoder{bud: budget{left: otlpBudget*len(body) + otlpBudgetBase}}
	d.out = make([]Span, 0, min(n, maxOTLPSpans, d.bud.left/spanCost))
	err = fields(body, func(num protowire.Number, typ protowire.Type, rs []byte, _ uint64) error {
		if num != pbRequestResourceSpans || typ != protowire.BytesType {
			return nil
		}
		return d.resourceSpans(rs)
	})
	if err != nil {
		return nil, err
	}
	if len(d.out) == 0 {
		return nil, nil
	}
	return d.out, nil
}

// otlpDecoder decodes one request within its budget.
type otlpDecoder struct {
	bud budget
	out []Span
}

func (d *otlpDecoder) resourceSpans(b []byte) error {
	service := ""
	err := fields(b, func(num protowire.Number, typ protowire.Type, res []byte, _ uint64) error {
		if num != pbResourceSpansResource || typ != protowire.BytesType {
			return nil
		}
		return fields(res, func(num protowire.Number, typ protowire.Type, kv []byte, _ uint64) error {
			if num != pbResourceAttrs || typ != protowire.BytesType {
				return nil
			}
			key, val, err := keyValue(kv)
			if err != nil || string(key) != "service.name" {
				return err
			}
			// The last string value wins, as in a decoded message.
			return fields(val, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == pbAnyString && typ == protowire.BytesType && d.bud.take(stringCost+min(len(v), maxAttrString+len("…"))) {
					service = cutBytes(v, maxAttrString)
				}
				return nil
			})
		})
	})
	if err != nil {
		return err
	}
	return fields(b, func(num protowire.Number, typ protowire.Type, ss []byte, _ uint64) error {
		if num != pbResourceSpansScope || typ != protowire.BytesType {
			return nil
		}
		return fields(ss, func(num protowire.Number, typ protowire.Type, s []byte, _ uint64) error {
			if num != pbScopeSpansSpans || typ != protowire.BytesType {
				return nil
			}
			return d.span(s, service)
		})
	})
}

// span decodes one span and adds it, if it is valid and fits.
func (d *otlpDecoder) span(b []byte, service string) error {
	var tid, sid, pid, name, msg []byte
	var start, end, code uint64
	nattrs := 0
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == pbSpanTraceID && typ == protowire.BytesType:
			tid = v
		case num == pbSpanSpanID && typ == protowire.BytesType:
			sid = v
		case num == pbSpanParentID && typ == protowire.BytesType:
			pid = v
		case num == pbSpanName && typ == protowire.BytesType:
			name = v
		case num == pbSpanStart && typ == protowire.Fixed64Type:
			start = x
		case num == pbSpanEnd && typ == protowire.Fixed64Type:
			end = x
		case num == pbSpanAttrs && typ == protowire.BytesType:
			nattrs++
		case num == pbSpanStatus && typ == protowire.BytesType:
			// Occurrences merge, as in a decoded message.
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == pbStatusMessage && typ == protowire.BytesType:
					msg = v
				case num == pbStatusCode && typ == protowire.VarintType:
					code = x
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(tid) != 16 || len(sid) != 8 || allZero(tid) || allZero(sid) || len(d.out) >= maxOTLPSpans {
		return nil
	}
	if code != pbStatusError {
		msg = nil
	}
	size := spanCost + len(service) + min(len(name), maxAttrString+len("…")) + min(len(msg), maxAttrString+len("…"))
	if !d.bud.take(size) {
		return nil
	}
	sp := Span{
		TraceID: hex.EncodeToString(tid),
		SpanID:  hex.EncodeToString(sid),
		Name:    cutBytes(name, maxAttrString),
		Service: service,
		Status:  "ok",
	}
	if len(pid) == 8 && !allZero(pid) {
		sp.ParentID = hex.EncodeToString(pid)
	}
	sp.Start = time.Unix(0, clampNanos(start)).UTC()
	if end > start {
		sp.DurationMS = float64(clampNanos(end-start)) / float64(time.Millisecond)
	}
	if code == pbStatusError {
		sp.Status, sp.StatusMessage = "error", cutBytes(msg, maxAttrString)
	}
	attrBytes := 0
	if nattrs > 0 {
		attrBytes, err = d.attributes(b, &sp, nattrs)
		if err != nil {
			return err
		}
	}
	sp.size = spanCost + len(sp.Name) + len(sp.Service) + len(sp.StatusMessage) + attrBytes
	d.out = append(d.out, sp)
	return nil
}

// attributes decodes the n attributes of span b into sp, within the
// bounds of one span and the request's budget; it returns their size.
func (d *otlpDecoder) attributes(b []byte, sp *Span, n int) (int, error) {
	room := min(maxSpanBytes, d.bud.left)
	if room < mapCost+entryCost {
		sp.DroppedAttributes = n
		return 0, nil
	}
	bud := budget{left: room - mapCost}
	// The attributes kept, before the map of their exact size: a map
	// grown one insertion at a time leaves as much again behind.
	var kept [maxSpanAttrs]struct {
		key string
		val any
	}
	nkept := 0
	err := fields(b, func(num protowire.Number, typ protowire.Type, kv []byte, _ uint64) error {
		if num != pbSpanAttrs || typ != protowire.BytesType {
			return nil
		}
		key, val, err := keyValue(kv)
		if err != nil {
			return err
		}
		if nkept >= maxSpanAttrs {
			sp.DroppedAttributes++
			return nil
		}
		save := bud
		if !bud.take(entryCost + min(len(key), maxAttrString+len("…"))) {
			sp.DroppedAttributes++
			return nil
		}
		v, ok, err := d.value(val, 0, &bud)
		switch {
		case err != nil:
			return err
		case v == nil:
			bud = save
			if !ok {
				sp.DroppedAttributes++
			}
		default:
			kept[nkept].key, kept[nkept].val = cutBytes(key, maxAttrString), v
			nkept++
		}
		return nil
	})
	if err != nil || nkept == 0 {
		return 0, err
	}
	attrs := make(map[string]any, nkept)
	for _, kv := range kept[:nkept] {
		attrs[kv.key] = kv.val
	}
	sp.Attributes = attrs
	used := room - bud.left
	d.bud.left -= used
	return used, nil
}

// value decodes an AnyValue at depth (0: an attribute's own) within bud.
// It returns nil for a value left out: with kept true for an empty one
// or one nested too deep (left out silently), false for one that does
// not fit.
func (d *otlpDecoder) value(b []byte, depth int, bud *budget) (any, bool, error) {
	// The oneof's last field wins, as in a decoded message.
	var which protowire.Number
	var v []byte
	var x uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, fv []byte, fx uint64) error {
		want := protowire.BytesType
		switch num {
		case pbAnyBool, pbAnyInt:
			want = protowire.VarintType
		case pbAnyDouble:
			want = protowire.Fixed64Type
		}
		if num >= pbAnyString && num <= pbAnyBytes && typ == want {
			which, v, x = num, fv, fx
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	switch which {
	case pbAnyString:
		if !bud.take(stringCost + min(len(v), maxAttrString+len("…"))) {
			return nil, false, nil
		}
		return cutBytes(v, maxAttrString), true, nil
	case pbAnyBool, pbAnyInt, pbAnyDouble:
		if !bud.take(scalarCost) {
			return nil, false, nil
		}
		switch f := math.Float64frombits(x); {
		case which == pbAnyBool:
			return x != 0, true, nil
		case which == pbAnyInt:
			return int64(x), true, nil
		case math.IsNaN(f) || math.IsInf(f, 0):
			return fmt.Sprint(f), true, nil // JSON has no NaN or Inf
		default:
			return f, true, nil
		}
	case pbAnyBytes:
		v = v[:min(len(v), maxAttrString/2)]
		if !bud.take(stringCost + 2*len(v)) {
			return nil, false, nil
		}
		return hex.EncodeToString(v), true, nil
	case pbAnyArray, pbAnyKvlist:
		return d.list(v, which == pbAnyKvlist, depth, bud)
	}
	return nil, true, nil
}

// list decodes an ArrayValue (or a KeyValueList, when kv) at depth: its
// first items that fit, at most maxOTLPItems; the rest is skipped.
func (d *otlpDecoder) list(b []byte, kv bool, depth int, bud *budget) (any, bool, error) {
	if depth > maxOTLPDepth {
		return nil, true, nil
	}
	n := 0
	if err := fields(b, func(num protowire.Number, typ protowire.Type, _ []byte, _ uint64) error {
		if num == pbListValues && typ == protowire.BytesType {
			n++
		}
		return nil
	}); err != nil {
		return nil, false, err
	}
	c := min(n, maxOTLPItems)
	var arr []any
	var obj map[string]any
	if kv {
		if !bud.take(mapCost) {
			return nil, false, nil
		}
		obj = make(map[string]any, c)
	} else {
		if !bud.take(listCost + c*itemCost) {
			return nil, false, nil
		}
		arr = make([]any, 0, c)
	}
	full := false
	err := fields(b, func(num protowire.Number, typ protowire.Type, item []byte, _ uint64) error {
		if full || num != pbListValues || typ != protowire.BytesType {
			return nil
		}
		if len(arr)+len(obj) >= c {
			full = true
			return nil
		}
		var key []byte
		if kv {
			var err error
			if key, item, err = keyValue(item); err != nil {
				return err
			}
		}
		save := *bud
		if kv && !bud.take(entryCost+min(len(key), maxAttrString+len("…"))) {
			full = true
			return nil
		}
		ev, kept, err := d.value(item, depth+1, bud)
		switch {
		case err != nil:
			return err
		case ev == nil:
			*bud = save
			full = !kept
		case kv:
			obj[cutBytes(key, maxAttrString)] = ev
		default:
			arr = append(arr, ev)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if kv {
		return obj, true, nil
	}
	return arr, true, nil
}

// keyValue reads a KeyValue's key and value (the value's bytes, an
// AnyValue); the last of each wins.
func keyValue(b []byte) (key, val []byte, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == pbKeyValueKey && typ == protowire.BytesType:
			key = v
		case num == pbKeyValueValue && typ == protowire.BytesType:
			val = v
		}
		return nil
	})
	return key, val, err
}

// fields calls f with each field of the protobuf message b: its number,
// its wire type, and its bytes (length-delimited) or its value (varint,
// fixed32, fixed64). A malformed message, or a group (OTLP has none), is
// errOTLP; so is an error of f.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num < protowire.MinValidNumber {
			return errOTLP
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			return errOTLP
		}
		if n < 0 {
			return errOTLP
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// cut bounds s to n bytes, marking the cut, without splitting a UTF-8
// sequence (an exported span's strings must stay valid: OTLP receivers
// that check refuse the whole request). A cut string is a new one: it
// never keeps a long original in memory.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// cutBytes is cut of a string of b's bytes, in one allocation.
func cutBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(n + len("…"))
	sb.Write(b[:n])
	sb.WriteString("…")
	return sb.String()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// clampNanos converts OTLP's unsigned nanoseconds to time's signed ones.
func clampNanos(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
