//go:build linux

package sio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// rawWS is a hand-made WebSocket client, so tests can send frames no
// library would: fragments, unmasked frames, oversized frames.
type rawWS struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawWS {
	t.Helper()
	ws := dialRawAt(t, url, "/socket.io/?EIO=4&transport=websocket")
	if op, msg := ws.read(); op != opText || msg[0] != eOpen {
		t.Fatalf("first frame %d %q", op, msg)
	}
	return ws
}

// dialRawAt opens a WebSocket on target (a path and query) of the server
// at url and returns before reading anything.
func dialRawAt(t *testing.T, url, target string) *rawWS {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("handshake: %v %v", err, resp)
	}
	return &rawWS{t: t, conn: conn, r: r}
}

func (w *rawWS) frame(fin bool, op byte, payload []byte, masked bool) {
	b := []byte{op}
	if fin {
		b[0] |= 0x80
	}
	m := byte(0)
	if masked {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, m|byte(n))
	case n < 1<<16:
		b = append(b, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	body := append([]byte(nil), payload...)
	if masked {
		key := []byte{1, 2, 3, 4}
		b = append(b, key...)
		for i := range body {
			body[i] ^= key[i&3]
		}
	}
	if _, err := w.conn.Write(append(b, body...)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *rawWS) text(s string) { w.frame(true, opText, []byte(s), true) }

// read returns the next frame from the server (unmasked, unfragmented).
func (w *rawWS) read() (byte, []byte) {
	w.t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		w.t.Fatalf("read: %v", err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		io.ReadFull(w.r, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		io.ReadFull(w.r, l[:])
		n = binary.BigEndian.Uint64(l[:])
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(w.r, b); err != nil {
		w.t.Fatalf("read: %v", err)
	}
	return h[0] & 0x0f, b
}

// next skips pings and returns the next text message.
func (w *rawWS) next() string {
	for {
		op, b := w.read()
		if op == opText && string(b) != "2" {
			return string(b)
		}
		if op != opText {
			return string([]byte{'#', op}) + string(b)
		}
	}
}

func loopServer(t *testing.T, o Options) string {
	srv := NewServer(o)
	srv.Handle("/smcp", &echoHandler{})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return ts.URL
}

func TestLoopFrames(t *testing.T) {
	url := loopServer(t, Options{MaxPayload: 4096})
	w := dialRaw(t, url)
	w.text(`40/smcp,`)
	if got := w.next(); !strings.HasPrefix(got, `40/smcp,{"sid":`) {
		t.Fatalf("connect = %q", got)
	}
	// A fragmented text message, with a ping in the middle.
	msg := `42/smcp,1["echo",{"k":"` + strings.Repeat("x", 300) + `"}]`
	w.frame(false, opText, []byte(msg[:10]), true)
	w.frame(true, opPing, []byte("hi"), true)
	w.frame(false, opCont, []byte(msg[10:200]), true)
	w.frame(true, opCont, []byte(msg[200:]), true)
	if op, b := w.read(); op != opPong || string(b) != "hi" {
		t.Fatalf("pong = %d %q", op, b)
	}
	if got := w.next(); got != `43/smcp,1[{"k":"`+strings.Repeat("x", 300)+`"}]` {
		t.Fatalf("echo = %q", got)
	}
	// Two messages in one write, and one split across writes.
	var both bytes.Buffer
	orig := w.conn
	w.conn = &writerConn{Conn: orig, w: &both}
	w.text(`42/smcp,2["echo",1]`)
	w.text(`42/smcp,3["echo",2]`)
	w.conn = orig
	orig.Write(both.Bytes()[:5])
	time.Sleep(10 * time.Millisecond)
	orig.Write(both.Bytes()[5:])
	if a, b := w.next(), w.next(); a != `43/smcp,2[1]` || b != `43/smcp,3[2]` {
		t.Fatalf("echoes = %q %q", a, b)
	}
	// A close frame is answered with a close frame.
	w.frame(true, opClose, []byte{0x03, 0xe8}, true)
	if op, b := w.read(); op != opClose || !bytes.Equal(b, []byte{0x03, 0xe8}) {
		t.Fatalf("close = %d %v", op, b)
	}
}

type writerConn struct {
	net.Conn
	w io.Writer
}

func (c *writerConn) Write(b []byte) (int, error) { return c.w.Write(b) }

func TestLoopRefusals(t *testing.T) {
	url := loopServer(t, Options{MaxPayload: 1024})
	for _, tc := range []struct {
		name string
		send func(w *rawWS)
		code uint16
	}{
		{"unmasked", func(w *rawWS) { w.frame(true, opText, []byte("40/smcp,"), false) }, 1002},
		{"too big", func(w *rawWS) { w.frame(true, opText, make([]byte, 2000), true) }, 1009},
		{"reserved opcode", func(w *rawWS) { w.frame(true, 0x3, []byte("x"), true) }, 1002},
		{"stray continuation", func(w *rawWS) { w.frame(true, opCont, []byte("x"), true) }, 1002},
		{"fragmented ping", func(w *rawWS) { w.frame(false, opPing, []byte("x"), true) }, 1002},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := dialRaw(t, url)
			tc.send(w)
			op, b := w.read()
			if op != opClose || len(b) != 2 || binary.BigEndian.Uint16(b) != tc.code {
				t.Fatalf("got %d %v, want close %d", op, b, tc.code)
			}
			// Then the server ends the connection.
			_ = w.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := w.r.ReadByte(); err != io.EOF {
				t.Fatalf("after close: %v", err)
			}
		})
	}
}

// TestLoopSlowReader checks that a peer that never reads is cut off once
// its backlog passes MaxBuffered, without blocking the sender.
func TestLoopSlowReader(t *testing.T) {
	h := &echoHandler{socks: make(chan *Socket, 1)}
	srv := NewServer(Options{MaxBuffered: 1 << 20})
	srv.Handle("/smcp", h)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	w := dialRaw(t, ts.URL)
	w.text(`40/smcp,`)
	s := <-h.socks
	big := Message{Args: []json.RawMessage{json.RawMessage(`"` + strings.Repeat("y", 64<<10) + `"`)}}
	start := time.Now()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = s.Emit("flood", big)
	}
	if err == nil {
		t.Fatal("64 MB to a peer that does not read were all accepted")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the sender was blocked for %v", d)
	}
}

// FuzzParseWSFrame checks the frame parser on arbitrary input: no panic,
// consumption within bounds, payloads no larger than the limit.
func FuzzParseWSFrame(f *testing.F) {
	f.Add([]byte{0x81, 0x85, 1, 2, 3, 4, 'h' ^ 1, 'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1})
	f.Add([]byte{0x82, 0xfe, 0x01, 0x00, 0, 0, 0, 0})
	f.Add([]byte{0x89, 0x80, 0, 0, 0, 0})
	f.Add([]byte{0x01, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, payload, n, code := parseWSFrame(b, 1<<16)
		if n < 0 || n > len(b) || (code != 0 && n != 0) || int64(len(payload)) > 1<<16 {
			t.Fatalf("n=%d code=%d payload=%d for %d bytes", n, code, len(payload), len(b))
		}
	})
}

// FuzzLoopIngest feeds arbitrary bytes, in two reads, through the event
// loop's frame assembly and the Engine.IO and Socket.IO parsers behind it.
func FuzzLoopIngest(f *testing.F) {
	mask := func(s string) []byte {
		b := append([]byte{0x81, 0x80 | byte(len(s)), 0, 0, 0, 0}, s...)
		return b
	}
	f.Add(append(mask(`40/smcp,`), mask(`42/smcp,1["echo",{"a":1}]`)...), 3)
	f.Add(append(mask(`451-/smcp,2["echo",{"_placeholder":true,"num":0}]`), 0x82, 0x82, 0, 0, 0, 0, 1, 2), 9)
	f.Add([]byte{0x01, 0x83, 0, 0, 0, 0, '4', '0', '/', 0x80, 0x80, 0, 0, 0, 0}, 7)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		p := detachedPeer(1 << 12)
		if cut < 0 {
			cut = -cut
		}
		cut %= len(b) + 1
		if p.ingest(b[:cut]) == "" {
			p.ingest(b[cut:])
		}
		if len(p.rbuf) > 1<<12+14 {
			t.Fatalf("carried %d bytes of an incomplete frame", len(p.rbuf))
		}
		// Where the reads split the input must not matter: read whole or
		// in chunks of 1 to 13 bytes, the same messages, all within the
		// limit and text all UTF-8, and the same end.
		one, two := &wsRecorder{}, &wsRecorder{}
		endOne := (&loopPeer{c: one, fd: -1, max: 1 << 12, maxOut: 1 << 16}).ingest(b)
		p2 := &loopPeer{c: two, fd: -1, max: 1 << 12, maxOut: 1 << 16}
		chunk, endTwo := 1+cut%13, ""
		for i := 0; i < len(b) && endTwo == ""; i += chunk {
			endTwo = p2.ingest(b[i:min(i+chunk, len(b))])
		}
		if endOne != endTwo || len(one.got) != len(two.got) {
			t.Fatalf("one read: %d messages, end %q; in %d-byte reads: %d messages, end %q", len(one.got), endOne, chunk, len(two.got), endTwo)
		}
		for i, f := range one.got {
			if f.binary != two.got[i].binary || !bytes.Equal(f.data, two.got[i].data) {
				t.Fatalf("message %d differs in %d-byte reads", i, chunk)
			}
			if len(f.data) > 1<<12 || (!f.binary && !utf8.Valid(f.data)) {
				t.Fatalf("delivered %d bytes, binary %v, UTF-8 %v", len(f.data), f.binary, utf8.Valid(f.data))
			}
		}
	})
}

// wsRecorder is a wsOwner that keeps every message.
type wsRecorder struct{ got []frame }

func (r *wsRecorder) wsFrame(_ wsPeer, f frame) bool { r.got = append(r.got, f); return true }
func (r *wsRecorder) wsClosed(wsPeer, string)        {}

// detachedPeer is a loop peer with no socket (writes fail and are
// dropped) attached to a WebSocket connection of an echo server, for
// driving ingest directly.
func detachedPeer(max int64) *loopPeer {
	srv := NewServer(Options{MaxPayload: max})
	srv.Handle("/smcp", &echoHandler{})
	c := &econn{srv: srv, id: "x", poke: make(chan struct{}, 1), state: stWebSocket}
	p := &loopPeer{c: c, fd: -1, max: max, maxOut: 1 << 16}
	c.ws = p
	return p
}
