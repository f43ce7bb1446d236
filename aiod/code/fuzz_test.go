package code

import (
	"bytes"
	"encoding/json"
	"testing"
)

var fuzzKey = []byte("0123456789abcdef")

// FuzzDecode feeds arbitrary frames to the wire decoder: it never
// panics, and accepts only frames signed with the key.
func FuzzDecode(f *testing.F) {
	m, _ := newMessage("s", "execute_request", map[string]any{"code": "1"}, &header{MsgID: "p"})
	frames, _ := m.encode(fuzzKey)
	f.Add(bytes.Join(append([][]byte{[]byte("topic")}, frames...), []byte{0}), true)
	f.Add([]byte("<IDS|MSG>\x00sig\x00{}\x00{}\x00{}\x00{}"), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, raw []byte, resign bool) {
		frames := bytes.Split(raw, []byte{0})
		if resign { // make the signature right, so parsing goes deeper
			for i, fr := range frames {
				if bytes.Equal(fr, delimiter) && len(frames)-i >= 6 {
					frames[i+1] = sign(fuzzKey, frames[i+2], frames[i+3], frames[i+4], frames[i+5])
					break
				}
			}
		}
		m, err := decode(frames, fuzzKey)
		if err != nil {
			return
		}
		if !json.Valid(m.Content) {
			t.Fatalf("accepted invalid content %q", m.Content)
		}
		if _, err := decode(frames, []byte("another key")); err == nil {
			t.Fatalf("accepted a message signed with another key")
		}
	})
}

func TestWireRoundTrip(t *testing.T) {
	m, _ := newMessage("sess", "execute_request", map[string]any{"code": "print(1)"}, nil)
	frames, err := m.encode(fuzzKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(append([][]byte{[]byte("identity")}, frames...), fuzzKey)
	if err != nil || got.Header != m.Header || string(got.Content) != string(m.Content) {
		t.Fatalf("%+v %v", got, err)
	}
	frames[5] = []byte(`{"code":"evil"}`)
	if _, err := decode(frames, fuzzKey); err == nil {
		t.Fatal("tampered content accepted")
	}
}
