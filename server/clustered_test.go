package server

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/a2c-smcp/a2c-go/internal/sio"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    sio.Message
	}{
		{"empty", sio.Message{}},
		{"one argument", sio.Message{Args: []json.RawMessage{json.RawMessage(`{"req_id":"r1","params":{"a":[1,2]}}`)}}},
		{"several arguments", sio.Message{Args: []json.RawMessage{json.RawMessage(`true`), json.RawMessage(`null`), json.RawMessage(`"x"`)}}},
		{"binary attachments", sio.Message{
			Args:        []json.RawMessage{json.RawMessage(`{"data":{"_placeholder":true,"num":0},"more":{"_placeholder":true,"num":1}}`)},
			Attachments: [][]byte{{0, 1, 2, 255}, {}},
		}},
		{"whitespace kept", sio.Message{Args: []json.RawMessage{json.RawMessage(" {\"a\" : 1 }\n")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := appendMessage(nil, tc.m)
			got, err := decodeMessage(b, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Args) != len(tc.m.Args) || len(got.Attachments) != len(tc.m.Attachments) {
				t.Fatalf("got %d args %d attachments, want %d %d", len(got.Args), len(got.Attachments), len(tc.m.Args), len(tc.m.Attachments))
			}
			for i := range got.Args {
				if string(got.Args[i]) != string(tc.m.Args[i]) {
					t.Errorf("arg %d: %q, want %q (bytes must be relayed unchanged)", i, got.Args[i], tc.m.Args[i])
				}
			}
			for i := range got.Attachments {
				if !reflect.DeepEqual([]byte(got.Attachments[i]), []byte(tc.m.Attachments[i])) {
					t.Errorf("attachment %d: %v, want %v", i, got.Attachments[i], tc.m.Attachments[i])
				}
			}
		})
	}
}

func TestMessageMalformed(t *testing.T) {
	uv := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	valid := appendMessage(nil, sio.Message{Args: []json.RawMessage{json.RawMessage(`{"a":1}`)}})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"nothing", nil},
		{"truncated", valid[:len(valid)-2]},
		{"no attachment count", valid[:len(valid)-1]},
		{"trailing bytes", append(append([]byte{}, valid...), 0)},
		{"too many arguments", uv(nil, maxParts+1)},
		{"argument longer than the rest", append(uv(uv(nil, 1), 100), `{}`...)},
		{"huge length", uv(uv(nil, 1), 1<<62)},
		{"argument not JSON", append(append(uv(uv(nil, 1), 3), `{a}`...), 0)},
		{"overlong varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := decodeMessage(tc.b, false); err == nil {
				t.Fatalf("accepted %q as %+v", tc.b, m)
			}
			// A sealed frame skips the JSON check only: every framing
			// error is still refused.
			if m, err := decodeMessage(tc.b, true); err == nil && tc.name != "argument not JSON" {
				t.Fatalf("sealed: accepted %q as %+v", tc.b, m)
			}
		})
	}
}

// FuzzDecodeMessage: a payload between nodes comes from Redis and is not
// trusted. Decoding never panics, and what decodes survives a round trip
// unchanged (a message is relayed byte for byte).
func FuzzDecodeMessage(f *testing.F) {
	f.Add(appendMessage(nil, sio.Message{Args: []json.RawMessage{json.RawMessage(`{"x":1}`)}, Attachments: [][]byte{{1, 2}}}))
	f.Add(appendMessage(nil, sio.Message{}))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b, false)
		if err != nil {
			return
		}
		again, err := decodeMessage(appendMessage(nil, m), false)
		if err != nil {
			t.Fatalf("re-encoding of a decoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(again), normal(m)) {
			t.Fatalf("round trip changed %+v into %+v", m, again)
		}
	})
}

// normal makes empty and nil slices compare equal.
func normal(m sio.Message) [][]byte {
	var out [][]byte
	for _, a := range m.Args {
		out = append(out, append([]byte("a"), a...))
	}
	for _, a := range m.Attachments {
		out = append(out, append([]byte("b"), a...))
	}
	return out
}

// TestSerialOrder: a member's operations run one at a time, in the order
// they were queued, whatever goroutines queue them.
func TestSerialOrder(t *testing.T) {
	var q serial
	var mu sync.Mutex
	var got []int
	running := 0
	done := make(chan struct{})
	const n = 2000
	for i := range n {
		q.do(func() {
			mu.Lock()
			running++
			if running != 1 {
				t.Errorf("%d operations ran at once", running)
			}
			got = append(got, i)
			mu.Unlock()
			mu.Lock()
			running--
			mu.Unlock()
			if i == n-1 {
				close(done)
			}
		})
	}
	<-done
	for i, v := range got {
		if v != i {
			t.Fatalf("operation %d ran at position %d", v, i)
		}
	}
	for q.busy() {
		// The goroutine ends once the queue is empty.
		q.mu.Lock()
		r := q.running
		q.mu.Unlock()
		if !r {
			break
		}
	}
}
