package sio

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodePacket checks that any input either fails cleanly or decodes
// to a packet whose re-encoding decodes to the same packet.
func FuzzDecodePacket(f *testing.F) {
	for _, s := range []string{
		`0/smcp,{"token":"x"}`, `0`, `1/smcp,`, `2/smcp,12["client:tool_call",{"a":1}]`,
		`3/smcp,12[{"ok":true},null]`, `451-/smcp,3["e",{"_placeholder":true,"num":0}]`,
		`4/smcp,{"message":"no"}`, `2["x"]`, `6` + "1-0[]", `2/smcp,`, `3/a,[]`, `2/x,999999999999999999[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePacket(b)
		if err != nil {
			return
		}
		switch p.typ {
		case pEvent, pBinaryEvent:
			name, args, err := splitArgs(p.data, true)
			if err != nil {
				return
			}
			_ = checkPlaceholders(args, p.attachments) // never panics
			att := make([][]byte, p.attachments)
			out := encodeEvent(nil, p.nsp, p.id, name, Message{Args: args, Attachments: att})
			q, err := decodePacket(out)
			if err != nil {
				t.Fatalf("re-encoded %q does not decode: %v", out, err)
			}
			name2, args2, err := splitArgs(q.data, true)
			if err != nil || name2 != name || len(args2) != len(args) || q.nsp != p.nsp || q.id != p.id || q.attachments != p.attachments {
				t.Fatalf("round trip changed %q into %q", b, out)
			}
			for i := range args {
				if !jsonEqual(args[i], args2[i]) {
					t.Fatalf("argument %d changed: %s vs %s", i, args[i], args2[i])
				}
			}
		case pAck, pBinaryAck:
			_, args, err := splitArgs(p.data, false)
			if err != nil {
				return
			}
			out := encodeAck(nil, p.nsp, p.id, Message{Args: args, Attachments: make([][]byte, p.attachments)})
			if _, err := decodePacket(out); err != nil {
				t.Fatalf("re-encoded %q does not decode: %v", out, err)
			}
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// FuzzDecodePayload checks the long-polling payload splitter: it never
// panics, and what it accepts re-encodes to an equivalent payload.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{"4hello\x1e2\x1ebAQID", "6", "b", "\x1e", "40/smcp,{}", "bAA==\x1e3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := decodePayload(b)
		if err != nil {
			return
		}
		again, err := decodePayload(encodePayload(fs))
		if err != nil || len(again) != len(fs) {
			t.Fatalf("round trip of %q failed: %v", b, err)
		}
		for i := range fs {
			if fs[i].binary != again[i].binary || !bytes.Equal(fs[i].data, again[i].data) {
				t.Fatalf("frame %d changed", i)
			}
		}
	})
}

// FuzzSplitArray checks the array splitter against encoding/json.
func FuzzSplitArray(f *testing.F) {
	for _, s := range []string{`[]`, `[1]`, ` [ "a,]" , {"b":[1,{"c":"\""}]}, null ,true] `, `[[],[[]],{}]`, `["\\",1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []json.RawMessage
		if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '[' || json.Unmarshal(b, &want) != nil || !json.Valid(b) {
			return
		}
		got, ok := splitArray(b)
		if !ok || len(got) != len(want) {
			t.Fatalf("splitArray(%q) = %q, %v; want %q", b, got, ok, want)
		}
		for i := range want {
			if !bytes.Equal(bytes.TrimSpace(want[i]), got[i]) {
				t.Fatalf("element %d: got %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// splitArray is the element splitter scanJSON replaced, kept as the
// reference FuzzSplitArray and FuzzValidJSON hold it to: it returns the
// elements of a JSON array that json.Valid has accepted, as subslices of
// data.
// splitArray returns the elements of a JSON array that json.Valid has
// accepted, as subslices of data (no copy).
func splitArray(data []byte) ([]json.RawMessage, bool) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return out, true
	}
	for i < len(data) {
		start := i
		depth := 0
	value:
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				for i++; i < len(data) && data[i] != '"'; i++ {
					if data[i] == '\\' {
						i++
					}
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					break value
				}
				depth--
			case ',':
				if depth == 0 {
					break value
				}
			}
		}
		end := i
		for end > start && isWS(data[end-1]) {
			end--
		}
		out = append(out, json.RawMessage(data[start:end]))
		if i >= len(data) || data[i] == ']' {
			return out, true
		}
		i = skipWS(data, i+1)
	}
	return nil, false
}

// FuzzValidJSON holds the engine's validator to encoding/json: validJSON
// accepts exactly what json.Valid accepts, and on an accepted array
// scanJSON splits exactly as splitArray does. Peers send it anything, so
// this is the check that matters.
func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONCases {
		f.Add([]byte(s.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := json.Valid(b)
		var elems []json.RawMessage
		if got := scanJSON(b, &elems); got != want {
			t.Fatalf("scanJSON(%q) = %v, json.Valid %v", b, got, want)
		}
		if got := validJSON(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
		}
		if !want {
			return
		}
		if ref, isArray := splitArray(b); isArray {
			if len(ref) != len(elems) {
				t.Fatalf("%q: %d elements, want %d", b, len(elems), len(ref))
			}
			for i := range ref {
				if !bytes.Equal(ref[i], elems[i]) {
					t.Fatalf("%q: element %d = %q, want %q", b, i, elems[i], ref[i])
				}
			}
		} else if len(elems) != 0 {
			t.Fatalf("%q is no array but gave elements %q", b, elems)
		}
	})
}
