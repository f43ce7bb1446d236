package cluster

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{Kind: KindRequest, From: "n1", To: "sid", Office: "o", Event: "client:tool_call", Call: 1, TimeoutMS: 35000, Payload: []byte(`[{"a":1}]`)},
		{Kind: KindAnswer, From: "n2", To: "sid", Office: "o", Call: 1<<64 - 1, Payload: []byte{}},
		{Kind: KindBroadcast, From: "n2", Office: "o{x}", Event: "notify:update_config"},
		{Kind: KindGone, From: "n", To: strings.Repeat("s", 128), Call: 7},
		{Kind: KindBroadcast, From: "n.1_x-y", To: "sid", Office: "Büro 7 · ü", Event: "notify:update_tool_list"},
	}
	for _, f := range frames {
		b := AppendFrame(nil, &f)
		got, err := DecodeFrame(b)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		if got.Payload == nil {
			got.Payload = []byte{}
		}
		if f.Payload == nil {
			f.Payload = []byte{}
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("got %+v, want %+v", got, f)
		}
	}
}

func TestFrameRejects(t *testing.T) {
	good := AppendFrame(nil, &Frame{Kind: KindRequest, From: "n", To: "s", Office: "o", Event: "e", Call: 1})
	long := AppendFrame(nil, &Frame{Kind: KindRequest, From: strings.Repeat("n", MaxField+1)})
	field := func(f Frame) []byte { return AppendFrame(nil, &f) }
	req := Frame{Kind: KindRequest, From: "n", To: "s", Office: "o", Event: "e", Call: 1}
	with := func(change func(*Frame)) []byte { f := req; change(&f); return field(f) }
	bad := map[string][]byte{
		"from empty":          with(func(f *Frame) { f.From = "" }),
		"from not an id":      with(func(f *Frame) { f.From = "n{x}" }),
		"from too long":       with(func(f *Frame) { f.From = strings.Repeat("n", 129) }),
		"to empty (request)":  with(func(f *Frame) { f.To = "" }),
		"to not a sid":        with(func(f *Frame) { f.To = "s|x" }),
		"answer to nobody":    with(func(f *Frame) { f.Kind, f.To = KindAnswer, "" }),
		"office empty":        with(func(f *Frame) { f.Office = "" }),
		"event empty":         with(func(f *Frame) { f.Event = "" }),
		"broadcast no office": with(func(f *Frame) { f.Kind, f.Office = KindBroadcast, "" }),
		"office control":      with(func(f *Frame) { f.Office = "o\n" }),
		"office DEL":          with(func(f *Frame) { f.Office = "o\x7f" }),
		"office C1 control":   with(func(f *Frame) { f.Office = "o\u0085" }),
		"office not UTF-8":    with(func(f *Frame) { f.Office = "o\xff" }),
		"event control":       with(func(f *Frame) { f.Event = "client:\x00tool_call" }),
		"empty":               nil,
		"version":             append([]byte{0xA2}, good[1:]...),
		"kind 0":              append([]byte{frameVersion, 0}, good[2:]...),
		"kind 9":              append([]byte{frameVersion, 9}, good[2:]...),
		"truncated":           good[:5],
		"no call":             good[:len(good)-2],
		"too long":            long,
		"huge len":            {frameVersion, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range bad {
		if _, err := DecodeFrame(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeFrame: frames come from Redis, which is not trusted blindly.
// A frame that decodes names only valid ids and printable text, and
// re-encodes to one that decodes to the same frame.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, &Frame{Kind: KindRequest, From: "n1", To: "sid", Office: "o", Event: "client:tool_call", Call: 3, TimeoutMS: 1000, Payload: []byte("[1]")}))
	f.Add(AppendFrame(nil, &Frame{Kind: KindBroadcast, From: "n1", Office: "Büro", Event: "notify:update_config"}))
	f.Add([]byte{frameVersion, 2, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeFrame(b)
		if err != nil {
			return
		}
		if !validID(fr.From) || (fr.To != "" && !validID(fr.To)) || !printable(fr.Office) || !printable(fr.Event) {
			t.Fatalf("accepted fields %q %q %q %q", fr.From, fr.To, fr.Office, fr.Event)
		}
		again, err := DecodeFrame(AppendFrame(nil, &fr))
		if err != nil {
			t.Fatalf("re-encoded frame rejected: %v", err)
		}
		if again.Kind != fr.Kind || again.From != fr.From || again.To != fr.To || again.Office != fr.Office ||
			again.Event != fr.Event || again.Call != fr.Call || again.TimeoutMS != fr.TimeoutMS || !bytes.Equal(again.Payload, fr.Payload) {
			t.Fatalf("%+v != %+v", again, fr)
		}
	})
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		in   string
		want Event
		ok   bool
	}{
		{"+3|sid1|computer|n1|7|0.4.0|my|name", Event{Office: "o", Enter: true, Version: 3, Member: Member{SID: "sid1", Role: "computer", Name: "my|name", Node: "n1", Version: "0.4.0", Epoch: 7}}, true},
		{"-12|s|agent|n|1||A", Event{Office: "o", Version: 12, Member: Member{SID: "s", Role: "agent", Name: "A", Node: "n", Epoch: 1}}, true},
		{"!12|s|agent|n|0||A", Event{Office: "o", Version: 12, Swept: true, Member: Member{SID: "s", Role: "agent", Name: "A", Node: "n"}}, true},
		{"*1|s|agent|n|1||A", Event{}, false},
		{"+0|s|agent|n|1||A", Event{}, false},
		{"+x|s|agent|n|1||A", Event{}, false},
		{"+1|s|boss|n|1||A", Event{}, false},
		{"+1|s|agent|n|1||", Event{}, false},
		{"+1|s s|agent|n|1||A", Event{}, false},
		{"+1|s|agent|n{x}|1||A", Event{}, false},
		{"+1|s|agent|n|-1||A", Event{}, false},
		{"+1|s|agent|n|x||A", Event{}, false},
		{"+1|s|agent|n||A", Event{}, false},
		{"+1|s|agent", Event{}, false},
		{"+1|s|agent|n|1|A", Event{}, false},
		{"", Event{}, false},
	}
	for _, tt := range tests {
		got, err := parseEvent("o", tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("%q: %+v %v", tt.in, got, err)
		}
	}
}

// FuzzParseEvent: membership events come from Redis too. A parsed event
// re-encodes (as the scripts build it) to one that parses the same.
func FuzzParseEvent(f *testing.F) {
	f.Add("+3|sid1|computer|n1|2|0.4.0|name")
	f.Add("-1|s|agent|n|1||A")
	f.Fuzz(func(t *testing.T, s string) {
		ev, err := parseEvent("o", s)
		if err != nil {
			return
		}
		sign := "-"
		if ev.Enter {
			sign = "+"
		} else if ev.Swept {
			sign = "!"
		}
		again, err := parseEvent("o", sign+itoa(ev.Version)+"|"+ev.Member.SID+"|"+encodeMember(ev.Member))
		if err != nil || again != ev {
			t.Fatalf("%q: %+v, again %+v %v", s, ev, again, err)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestTags(t *testing.T) {
	seen := map[string]string{}
	for _, office := range []string{"o", "{}", "~7b7d", "a}b", "x{", "~", "{"} {
		k := officeKeys(office)[0]
		if prev, ok := seen[k]; ok {
			t.Fatalf("offices %q and %q share key %q", prev, office, k)
		}
		seen[k] = office
		// Every key of an office has the same non-empty hash tag.
		tagOf := func(k string) string {
			i := strings.IndexByte(k, '{')
			j := strings.IndexByte(k[i+1:], '}')
			return k[i+1 : i+1+j]
		}
		ks := append(officeKeys(office), officeChannel(office))
		for _, x := range ks {
			if tg := tagOf(x); tg == "" || tg != tagOf(ks[0]) {
				t.Fatalf("office %q: key %q tag %q", office, x, tg)
			}
		}
	}
}

// TestFrameLen: the length computed before encoding (appendPublish
// writes it ahead of the frame) is the length AppendFrame writes, at
// every varint boundary.
func TestFrameLen(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, f := range []*Frame{
		{Kind: KindRequest},
		{Kind: KindAnswer, From: "n", To: "s", Office: "o", Event: "e", Call: 127, TimeoutMS: 128, Payload: []byte("xy")},
		{Kind: KindBroadcast, From: long, To: long[:127], Office: long[:128], Event: "e", Call: 1 << 63, TimeoutMS: 1<<14 - 1},
		{Kind: KindGone, Call: 1<<64 - 1, TimeoutMS: 1 << 14, Payload: make([]byte, 1<<16)},
	} {
		if got, want := frameLen(f), len(AppendFrame(nil, f)); got != want {
			t.Errorf("frameLen(%+v) = %d, want %d", f.Call, got, want)
		}
	}
}
