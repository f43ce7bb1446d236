package cluster

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// renderRESP writes a reply compactly: "x" a bulk string, +x a simple
// string, -x an error, :n an integer, _ a null, [..] an array, >[..] a
// push.
func renderRESP(rd *respReader, vals []respValue) string {
	var b strings.Builder
	var walk func(i int) int
	walk = func(i int) int {
		v := vals[i]
		switch v.kind {
		case '$':
			b.WriteString(strconv.Quote(string(rd.text(v))))
		case '+', '-':
			b.WriteByte(v.kind)
			b.Write(rd.text(v))
		case ':':
			b.WriteString(":" + strconv.FormatInt(v.n, 10))
		case '_':
			b.WriteByte('_')
		case '*', '>':
			if v.kind == '>' {
				b.WriteByte('>')
			}
			b.WriteByte('[')
			i++
			for k := range v.n {
				if k > 0 {
					b.WriteByte(' ')
				}
				i = walk(i)
			}
			b.WriteByte(']')
			return i
		}
		return i + 1
	}
	walk(0)
	return b.String()
}

// readAllRESP reads replies until EOF and renders each; err is the error
// that ended it (nil at a clean EOF).
func readAllRESP(r io.Reader, maxElems int) ([]string, error) {
	rd := newRESPReader(r, maxElems)
	var out []string
	for {
		vals, err := rd.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, renderRESP(rd, vals))
	}
}

var respCases = []struct {
	name, in string
	want     []string
	err      error // nil: ends cleanly
}{
	{"message", "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n", []string{`["message" "ch" "hello"]`}, nil},
	{"smessage binary payload", "*3\r\n$8\r\nsmessage\r\n$1\r\nc\r\n$4\r\n\r\n\x00\xff\r\n", []string{`["smessage" "c" "\r\n\x00\xff"]`}, nil},
	{"push frame", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$0\r\n\r\n", []string{`>["message" "ch" ""]`}, nil},
	{"confirmation", "*3\r\n$10\r\nssubscribe\r\n$3\r\na:b\r\n:1\r\n", []string{`["ssubscribe" "a:b" :1]`}, nil},
	{"pong array", "*2\r\n$4\r\npong\r\n$0\r\n\r\n", []string{`["pong" ""]`}, nil},
	{"simple, error, int", "+PONG\r\n-MOVED 3999 127.0.0.1:6381\r\n:-42\r\n", []string{"+PONG", "-MOVED 3999 127.0.0.1:6381", ":-42"}, nil},
	{"nulls", "$-1\r\n*-1\r\n_\r\n", []string{"_", "_", "_"}, nil},
	{"empty array", "*0\r\n+OK\r\n", []string{"[]", "+OK"}, nil},
	{"nested", "*2\r\n*2\r\n:0\r\n*1\r\n$1\r\nx\r\n:5\r\n", []string{`[[:0 ["x"]] :5]`}, nil},
	{"two messages", "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$1\r\n2\r\n",
		[]string{`["message" "a" "1"]`, `["message" "b" "2"]`}, nil},
	{"cut in a bulk", "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhel", nil, io.ErrUnexpectedEOF},
	{"cut in a line", "*3\r\n$7\r\nmess", nil, io.ErrUnexpectedEOF},
	{"cut between elements", "*3\r\n$7\r\nmessage\r\n", nil, io.ErrUnexpectedEOF},
	{"bulk without CRLF", "$2\r\nabXY", nil, errProtocol},
	{"bulk too long", "$67108865\r\n", nil, errProtocol},
	{"bulk negative", "$-2\r\n", nil, errProtocol},
	{"array too long", "*17\r\n", nil, errProtocol},
	{"elements in all", "*9\r\n*9\r\n", nil, errProtocol},
	{"push null", ">-1\r\n", nil, errProtocol},
	{"too deep", strings.Repeat("*1\r\n", respMaxDepth+1) + ":1\r\n", nil, errProtocol},
	{"bad integer", ":12a\r\n", nil, errProtocol},
	{"huge integer", ":1234567890123456789\r\n", nil, errProtocol},
	{"empty integer", ":\r\n", nil, errProtocol},
	{"LF only", "+OK\n", nil, errProtocol},
	{"unknown type", "~1\r\n", nil, errProtocol},
	{"null with body", "_x\r\n", nil, errProtocol},
	{"line too long", "+" + strings.Repeat("a", respBufSize) + "\r\n", nil, errProtocol},
}

func TestRESPReader(t *testing.T) {
	for _, tc := range respCases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, r io.Reader) {
				t.Helper()
				got, err := readAllRESP(r, respPubSubElems)
				if !errors.Is(err, tc.err) {
					t.Fatalf("%s: err %v, want %v", how, err, tc.err)
				}
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Fatalf("%s: got\n%s\nwant\n%s", how, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			}
			check("whole", strings.NewReader(tc.in))
			check("one byte per read", iotest.OneByteReader(strings.NewReader(tc.in)))
			if len(tc.in) > 200 {
				return
			}
			for cut := 1; cut < len(tc.in); cut++ {
				check("split at "+strconv.Itoa(cut), &splitReader{parts: []string{tc.in[:cut], tc.in[cut:]}})
			}
		})
	}
}

// splitReader returns its parts one per Read, as a network would.
type splitReader struct{ parts []string }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.parts) > 0 && s.parts[0] == "" {
		s.parts = s.parts[1:]
	}
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	return n, nil
}

// A bulk string announced as 64 MiB that never comes must not cost
// 64 MiB: the buffer grows with what arrives.
func TestRESPBulkGrowsWithData(t *testing.T) {
	rd := newRESPReader(strings.NewReader("$67108864\r\nabc"), respPubSubElems)
	if _, err := rd.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v", err)
	}
	if cap(rd.buf) > 64<<10 {
		t.Fatalf("buffer grew to %d bytes for 3 bytes of data", cap(rd.buf))
	}
	// A payload of 1 MiB + 1 is read whole, and not kept afterwards.
	big := strings.Repeat("x", respKeepBuf+1)
	rd = newRESPReader(strings.NewReader("$"+strconv.Itoa(len(big))+"\r\n"+big+"\r\n+OK\r\n"), respPubSubElems)
	vals, err := rd.next()
	if err != nil || string(rd.text(vals[0])) != big {
		t.Fatalf("big bulk: %v", err)
	}
	if _, err := rd.next(); err != nil || cap(rd.buf) > respKeepBuf {
		t.Fatalf("after a big bulk: err %v, buffer %d", err, cap(rd.buf))
	}
}

func TestRESPSkip(t *testing.T) {
	rd := newRESPReader(strings.NewReader("*3\r\n*2\r\n:1\r\n*1\r\n:2\r\n:3\r\n*0\r\n"), 100)
	vals, err := rd.next()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ at, want int }{{0, 7}, {1, 5}, {2, 3}, {3, 5}, {5, 6}, {6, 7}, {7, 7}} {
		if got := respSkip(vals, tc.at); got != tc.want {
			t.Errorf("respSkip(%d) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

func TestParseSlots(t *testing.T) {
	reply := "*3\r\n" +
		"*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*0\r\n" +
		"*4\r\n:5461\r\n:10922\r\n*3\r\n$0\r\n\r\n:7001\r\n$2\r\nid\r\n*3\r\n$1\r\nh\r\n:7004\r\n$2\r\nid\r\n" +
		"*3\r\n:10923\r\n:16383\r\n*2\r\n$1\r\n?\r\n:7002\r\n"
	rd := newRESPReader(strings.NewReader(reply), slotsMaxElems)
	vals, err := rd.next()
	if err != nil {
		t.Fatal(err)
	}
	owners, err := parseSlots(rd, vals, "10.0.0.9")
	if err != nil {
		t.Fatal(err)
	}
	for slot, want := range map[int]string{0: "127.0.0.1:7000", 5460: "127.0.0.1:7000", 5461: "10.0.0.9:7001", 10922: "10.0.0.9:7001", 10923: "", 16383: ""} {
		if owners[slot] != want {
			t.Errorf("slot %d: %q, want %q", slot, owners[slot], want)
		}
	}
	for _, bad := range []string{"-ERR This instance has cluster support disabled\r\n", ":1\r\n",
		"*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n", "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",
		"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n", "*1\r\n*2\r\n:0\r\n:1\r\n", "*2\r\n*0\r\n*0\r\n"} {
		rd := newRESPReader(strings.NewReader(bad), slotsMaxElems)
		vals, err := rd.next()
		if err != nil {
			t.Fatalf("%q: %v", bad, err)
		}
		if _, err := parseSlots(rd, vals, "h"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestKeySlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 test vector: %#x, want 0x31c3", got)
	}
	for _, tc := range []struct {
		key  string
		slot int
	}{
		// Values from CLUSTER KEYSLOT.
		{"foo", 12182}, {"a2c:{o1}:ev", 15718}, {"{o1}", 15718}, {"a2c:{}:ev", 14858},
		{"a{b}{c}", 3300}, {"a{{b}}", 6215}, {"", 0},
	} {
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

// FuzzRESP feeds the reader arbitrary bytes, in arbitrary pieces: it
// must never panic, never return values that point outside its buffer,
// and never read past a bound.
func FuzzRESP(f *testing.F) {
	for _, tc := range respCases {
		if len(tc.in) < 1000 {
			f.Add([]byte(tc.in), uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		r := io.Reader(bytes.NewReader(in))
		if chunk > 0 {
			r = &chunkReader{b: in, n: int(chunk)}
		}
		rd := newRESPReader(r, respPubSubElems)
		for {
			vals, err := rd.next()
			if err != nil {
				return
			}
			if len(vals) == 0 || respSkip(vals, 0) != len(vals) {
				t.Fatalf("reply of %d values, skip %d", len(vals), respSkip(vals, 0))
			}
			elems := int64(0)
			for _, v := range vals {
				if v.off < 0 || v.end < v.off || v.end > len(rd.buf) {
					t.Fatalf("value out of the buffer: %+v (buffer %d)", v, len(rd.buf))
				}
				if v.kind == '*' || v.kind == '>' {
					elems += v.n
				}
			}
			if elems > respPubSubElems {
				t.Fatalf("%d elements", elems)
			}
			_ = renderRESP(rd, vals)
		}
	})
}

type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// loopReader serves b again and again.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], l.b[l.off:])
		n += k
		if l.off += k; l.off == len(l.b) {
			l.off = 0
		}
	}
	return n, nil
}

// BenchmarkRESPParse is the parser alone on a stream of messages of a
// 200-byte payload (a frame of a cross-node call).
func BenchmarkRESPParse(b *testing.B) {
	payload := strings.Repeat("p", 200)
	msg := "*3\r\n$8\r\nsmessage\r\n$12\r\na2c:{n1}:ch\r\n$" + strconv.Itoa(len(payload)) + "\r\n" + payload + "\r\n"
	msg = strings.Replace(msg, "$12\r\na2c:{n1}:ch", "$11\r\na2c:{n1}:ch", 1)
	rd := newRESPReader(&loopReader{b: []byte(strings.Repeat(msg, 64))}, respPubSubElems)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		vals, err := rd.next()
		if err != nil || len(vals) != 4 || len(rd.text(vals[3])) != len(payload) {
			b.Fatalf("%v %d", err, len(vals))
		}
	}
}
