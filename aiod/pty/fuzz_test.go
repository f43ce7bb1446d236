package pty

import (
	"bytes"
	"testing"
)

// FuzzDecodeFrame: any client message decodes without panicking, into a
// frame the handler can apply.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{`{"type":"input","data":"ls\n"}`, `{"type":"resize","cols":120,"rows":40}`,
		`{"type":"resize","data":{"cols":1e9,"rows":-3}}`, `{"type":"resize"}`, `{"type":"ping","timestamp":1}`,
		`{"type":"ping"}`, `{"type":"input","data":5}`, `{"type":"other"}`, `{`, `plain text`, "", `null`, `{"type":null}`} {
		f.Add(false, []byte(s))
	}
	f.Add(true, []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, binary bool, msg []byte) {
		fr := decodeFrame(binary, msg)
		switch fr.kind {
		case frameResize:
			if fr.cols < 1 || fr.rows < 1 || fr.cols > 0xffff || fr.rows > 0xffff {
				t.Fatalf("size %dx%d", fr.cols, fr.rows)
			}
		case framePing:
			if len(fr.timestamp) == 0 {
				t.Fatal("ping without timestamp")
			}
		case frameInput:
			if binary && !bytes.Equal(fr.data, msg) {
				t.Fatal("binary input altered")
			}
		default:
			t.Fatalf("kind %d", fr.kind)
		}
	})
}

// FuzzFilter: markers split anywhere across reads are found, and the
// plain bytes come out whole and in order.
func FuzzFilter(f *testing.F) {
	f.Add([]byte("a\x1b]6973;n0nce;E;0\x07b"), uint8(3))
	f.Add([]byte("\x1b]6973;n0nce;S\x07\xc3\xa9\x1b[0m"), uint8(1))
	f.Add([]byte("x\x1b]6973;n0nce;S;12\x07y\x1b]6973;n0nce;E;-1;12\x07\x1b]6973;n0nce;E;0;\x07"), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		fl := filter{prefix: []byte(markerOSC + "n0nce;")}
		var out []byte
		marks := 0
		data := func(b []byte) { out = append(out, b...) }
		mark := func(byte, int, string) { marks++ }
		step := int(cut%16) + 1
		for i := 0; i < len(in); i += step {
			fl.feed(in[i:min(i+step, len(in))], data, mark)
		}
		fl.flush(data)
		whole := filter{prefix: fl.prefix}
		var want []byte
		wantMarks := 0
		whole.feed(in, func(b []byte) { want = append(want, b...) }, func(byte, int, string) { wantMarks++ })
		whole.flush(func(b []byte) { want = append(want, b...) })
		if !bytes.Equal(out, want) || marks != wantMarks {
			t.Fatalf("split %d: %q (%d marks), whole: %q (%d)", step, out, marks, want, wantMarks)
		}
	})
}
