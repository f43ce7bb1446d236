//go:build linux

package sio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The WebSocket layer in both modes, driven by the hand-made client of
// loop_linux_test.go so that tests can send what no library would. The
// event loop and gorilla/websocket differ in a few answers; the tables say
// where.

// goneHandler is an echo handler that reports each disconnect reason.
type goneHandler struct {
	echoHandler
	gone chan string
}

func (h *goneHandler) Disconnect(_ *Socket, reason string) { h.gone <- reason }

func wsServer(t *testing.T, o Options) (string, *goneHandler, *Server) {
	t.Helper()
	h := &goneHandler{gone: make(chan string, 16)}
	srv := NewServer(o)
	srv.Handle("/smcp", h)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return ts.URL, h, srv
}

// joined dials a WebSocket and joins /smcp.
func joined(t *testing.T, url string) *rawWS {
	t.Helper()
	w := dialRaw(t, url)
	w.text(`40/smcp,`)
	if got := w.next(); !strings.HasPrefix(got, `40/smcp,{"sid":`) {
		t.Fatalf("connect = %q", got)
	}
	return w
}

// closed reads the close frame that ends a connection and then the end
// of the stream; it returns the frame's payload.
func (w *rawWS) closed() []byte {
	w.t.Helper()
	for {
		op, b := w.read()
		if op == opClose {
			_ = w.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, w.r); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				w.t.Fatalf("after close: %v", err)
			}
			return b
		}
	}
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

func reasonOf(t *testing.T, h *goneHandler) string {
	t.Helper()
	select {
	case r := <-h.gone:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no disconnect reported")
		return ""
	}
}

func TestWSFragmentsControlAndUTF8(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			url, _, _ := wsServer(t, mode.opts)
			w := joined(t, url)
			// "é" and "€" are split across fragments, with a ping between
			// fragments that must be answered at once.
			msg := []byte(`42/smcp,1["echo","é€"]`)
			cut1 := bytes.IndexByte(msg, 0xC3) + 1 // inside "é"
			cut2 := bytes.Index(msg, []byte("€")) + 2
			w.frame(false, opText, msg[:cut1], true)
			w.frame(true, opPing, []byte("p1"), true)
			w.frame(false, opCont, msg[cut1:cut2], true)
			w.frame(true, opPong, []byte("unsolicited"), true)
			w.frame(true, opCont, msg[cut2:], true)
			if op, b := w.read(); op != opPong || string(b) != "p1" {
				t.Fatalf("pong = %d %q", op, b)
			}
			if got := w.next(); got != `43/smcp,1["é€"]` {
				t.Fatalf("echo = %q", got)
			}
		})
	}
}

func TestWSRefusals(t *testing.T) {
	const max = 1024
	for _, mode := range modes {
		opts := mode.opts
		opts.MaxPayload = max
		for _, tc := range []struct {
			name string
			send func(w *rawWS)
			code uint16
		}{
			{"invalid utf-8", func(w *rawWS) { w.frame(true, opText, []byte("42/smcp,[\"\xff\"]"), true) }, closeInvalidPayload},
			{"truncated utf-8", func(w *rawWS) { w.frame(true, opText, []byte("42/smcp,[\"\xe2\x82\"]"), true) }, closeInvalidPayload},
			{"invalid utf-8 across fragments", func(w *rawWS) {
				// Each fragment ends or starts inside a character; only
				// the whole message shows that "\xe2\x82" never ends.
				w.frame(false, opText, []byte("42/smcp,[\"\xe2"), true)
				w.frame(false, opCont, []byte("\x82"), true)
				w.frame(true, opCont, []byte("\"]"), true)
			}, closeInvalidPayload},
			{"too big", func(w *rawWS) { w.frame(true, opText, make([]byte, max+1), true) }, closeTooBig},
			{"too big in fragments", func(w *rawWS) {
				w.frame(false, opText, bytes.Repeat([]byte("a"), max/2+1), true)
				w.frame(true, opCont, bytes.Repeat([]byte("a"), max/2+1), true)
			}, closeTooBig},
			{"stray continuation", func(w *rawWS) { w.frame(true, opCont, []byte("x"), true) }, closeProtocolError},
			{"text inside a fragmented message", func(w *rawWS) {
				w.frame(false, opText, []byte("4"), true)
				w.frame(true, opText, []byte("6"), true)
			}, closeProtocolError},
		} {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				url, h, _ := wsServer(t, opts)
				w := joined(t, url)
				tc.send(w)
				if b := w.closed(); len(b) < 2 || binary.BigEndian.Uint16(b) != tc.code {
					t.Fatalf("close %v, want %d", b, tc.code)
				}
				if r := reasonOf(t, h); r != reasonTransportError {
					t.Fatalf("reason %q, want %q", r, reasonTransportError)
				}
			})
		}
	}
}

// TestWSCloseCodes sends close frames: a valid code is echoed and the
// connection ends as "transport close"; an invalid one is answered with
// 1002 (never echoed) and ends as "transport error".
func TestWSCloseCodes(t *testing.T) {
	code := func(c uint16, reason string) []byte { return append(closePayload(c), reason...) }
	for _, mode := range modes {
		gorilla := mode.opts.GoroutinePerConn
		for _, tc := range []struct {
			name    string
			payload []byte
			want    []byte // nil: 1000 or an empty close
			clean   bool
		}{
			{"none", nil, nil, true},
			{"1000", code(closeNormal, "bye"), code(closeNormal, ""), true},
			{"1001", code(closeGoingAway, ""), code(closeGoingAway, ""), true},
			{"1003", code(closeUnsupportedData, ""), code(closeUnsupportedData, ""), true},
			{"1007", code(closeInvalidPayload, ""), code(closeInvalidPayload, ""), true},
			{"1008", code(closePolicyViolation, ""), code(closePolicyViolation, ""), true},
			{"1010", code(closeMandatoryExt, ""), code(closeMandatoryExt, ""), true},
			{"1011", code(closeInternalError, ""), code(closeInternalError, ""), true},
			{"1013", code(closeTryAgainLater, ""), code(closeTryAgainLater, ""), true},
			{"3000", code(3000, ""), code(3000, ""), true},
			{"4999", code(4999, "é"), code(4999, ""), true},
			{"0", code(0, ""), code(closeProtocolError, ""), false},
			{"999", code(999, ""), code(closeProtocolError, ""), false},
			{"1004", code(1004, ""), code(closeProtocolError, ""), false},
			{"1005", code(closeNoStatus, ""), code(closeProtocolError, ""), false},
			{"1006", code(closeAbnormal, ""), code(closeProtocolError, ""), false},
			{"1015", code(closeTLSHandshake, ""), code(closeProtocolError, ""), false},
			{"1016", code(1016, ""), code(closeProtocolError, ""), false},
			{"2999", code(2999, ""), code(closeProtocolError, ""), false},
			{"5000", code(5000, ""), code(closeProtocolError, ""), false},
			{"65535", code(65535, ""), code(closeProtocolError, ""), false},
			{"one byte", []byte{0x03}, code(closeProtocolError, ""), false},
			{"reason not utf-8", code(closeNormal, "\xff"), code(closeInvalidPayload, ""), false},
		} {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				want := tc.want
				if gorilla {
					switch tc.name {
					case "one byte":
						// gorilla/websocket reads a one-byte close body as
						// "no status" and answers with an empty close.
						t.Skip("gorilla/websocket accepts a one-byte close body")
					case "reason not utf-8":
						want = code(closeProtocolError, "") // gorilla answers 1002
					}
				}
				url, h, _ := wsServer(t, mode.opts)
				w := joined(t, url)
				w.frame(true, opClose, tc.payload, true)
				got := w.closed()
				if len(got) > 2 {
					got = got[:2] // gorilla adds its own text to 1002
				}
				switch {
				case want == nil && (len(got) == 0 || bytes.Equal(got, code(closeNormal, ""))):
				case want != nil && bytes.Equal(got, want):
				default:
					t.Fatalf("answer %v, want %v", got, want)
				}
				wantReason := reasonTransportError
				if tc.clean {
					wantReason = reasonTransportClose
				}
				if r := reasonOf(t, h); r != wantReason {
					t.Fatalf("reason %q, want %q", r, wantReason)
				}
			})
		}
	}
}

// TestLoopCutPeerIdles checks that a peer cut off with output still
// queued does not keep the loop awake: once the socket's sending side is
// shut it is writable for ever, so write interest must be dropped with the
// backlog. The peer never reads, so the server cuts it when its backlog
// passes MaxBuffered; the descriptor is released two seconds later, and
// the loop must sleep through those two seconds.
func TestLoopCutPeerIdles(t *testing.T) {
	h := &goneHandler{gone: make(chan string, 1)}
	h.socks = make(chan *Socket, 1)
	srv := NewServer(Options{MaxBuffered: 256 << 10, EventLoops: 1})
	srv.Handle("/smcp", h)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	w := dialRaw(t, ts.URL)
	w.text(`40/smcp,`)
	s := <-h.socks
	big := Message{Args: []json.RawMessage{json.RawMessage(`"` + strings.Repeat("y", 32<<10) + `"`)}}
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		err = s.Emit("flood", big)
	}
	if err == nil {
		t.Fatal("a peer that does not read was never cut")
	}
	l := srv.loops.loops[0]
	before := l.iterations.Load()
	if r := reasonOf(t, h); r == "" {
		t.Fatal("no reason")
	}
	// A handful of wake-ups: the shutdown, the release. A spinning loop
	// makes hundreds of thousands in the two seconds.
	if n := l.iterations.Load() - before; n > 100 {
		t.Fatalf("the loop woke %d times while the cut peer was being released", n)
	}
}

// bigFrame is one masked binary WebSocket frame of n payload bytes.
func bigFrame(n int) []byte {
	b := []byte{0x80 | opText, 0x80 | 127}
	b = binary.BigEndian.AppendUint64(b, uint64(n))
	b = append(b, 0, 0, 0, 0) // a zero mask leaves the payload as sent
	body := bytes.Repeat([]byte("x"), n)
	body[0] = eNoop // an Engine.IO noop, which the connection ignores
	return append(b, body...)
}

// TestLoopIngestSmallReads feeds a 1 MB frame in 100-byte reads: the
// partial frame must grow geometrically, not be copied whole on each read
// (which took seconds of the loop thread).
func TestLoopIngestSmallReads(t *testing.T) {
	const size = 1 << 20
	f := bigFrame(size)
	p := detachedPeer(size)
	allocs := testing.AllocsPerRun(1, func() {
		for i := 0; i < len(f); i += 100 {
			if end := p.ingest(f[i:min(i+100, len(f))]); end != "" {
				t.Fatalf("ended: %s", end)
			}
		}
		if p.rbuf != nil {
			t.Fatalf("%d bytes left over", len(p.rbuf))
		}
	})
	// Copying on every read makes one allocation per read (10,486 here);
	// geometric growth a few dozen, plus the payload.
	if allocs > 200 {
		t.Fatalf("%v allocations for %d reads", allocs, len(f)/100)
	}
}

func BenchmarkLoopIngestSmallReads(b *testing.B) {
	const size = 1 << 20
	f := bigFrame(size)
	p := detachedPeer(size)
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < len(f); i += 100 {
			p.ingest(f[i:min(i+100, len(f))])
		}
	}
}

// TestWSLoopSlowIterationCounted lowers the slow-iteration threshold so
// that an ordinary iteration counts, and checks that the counters move.
func TestWSLoopSlowIterationCounted(t *testing.T) {
	defer slowIterationNs.Store(slowIterationNs.Load())
	url, _, _ := wsServer(t, Options{})
	w := joined(t, url)
	before := ReadLoopStats()
	slowIterationNs.Store(0)
	w.text(`42/smcp,1["echo",1]`)
	if got := w.next(); got != `43/smcp,1[1]` {
		t.Fatalf("echo = %q", got)
	}
	// The loop counts an iteration when it ends, which may be after the
	// echo it wrote has arrived here.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := ReadLoopStats()
		if after.Iterations > before.Iterations && after.SlowIterations > before.SlowIterations {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters did not move: %+v then %+v", before, after)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGorillaRefusedSocketEnds checks that a goroutine-mode WebSocket the
// connection does not take (a probe that does not match its connection)
// is closed and its reader goroutine ends, whether it sends the upgrade
// packet or nothing at all.
func TestGorillaRefusedSocketEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(w *rawWS)
	}{
		{"wrong probe", func(w *rawWS) { w.text("2probX") }},
		{"upgrade of no probe", func(w *rawWS) { w.text("5") }},
		{"silent", func(*rawWS) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewServer(Options{GoroutinePerConn: true, PingInterval: 200 * time.Millisecond, PingTimeout: 200 * time.Millisecond})
			srv.Handle("/smcp", &echoHandler{})
			// A connection that has already ended, as when it closes while
			// its probe is being accepted: it holds no probe.
			c := &econn{srv: srv, id: "gone", poke: make(chan struct{}, 1), state: stClosed}
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				acceptGorilla(srv, w, r, c, func(wsPeer) {})
			}))
			defer ts.Close()
			base := runtime.NumGoroutine()
			w := dialRawAt(t, ts.URL, "/")
			tc.send(w)
			_ = w.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, w.r); err != nil && !isReset(err) {
				t.Fatalf("the server never closed the socket: %v", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > base {
				if time.Now().After(deadline) {
					buf := make([]byte, 1<<16)
					t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
				}
				runtime.Gosched()
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// TestGorillaHeartbeatKeepsReading checks that the goroutine-mode read
// deadline never ends a peer that answers the heartbeat: it lives through
// many deadline periods and still echoes.
func TestGorillaHeartbeatKeepsReading(t *testing.T) {
	url, h, _ := wsServer(t, Options{GoroutinePerConn: true, PingInterval: 30 * time.Millisecond, PingTimeout: 30 * time.Millisecond})
	w := joined(t, url)
	_ = w.conn.SetDeadline(time.Now().Add(10 * time.Second))
	for pings := 0; pings < 20; {
		switch op, b := w.read(); {
		case op == opText && string(b) == "2":
			w.text("3")
			pings++
		case op == opClose:
			t.Fatalf("closed after %d pings: %v", pings, b)
		}
	}
	w.text(`42/smcp,1["echo",1]`)
	if got := w.next(); got != `43/smcp,1[1]` {
		t.Fatalf("echo = %q", got)
	}
	select {
	case r := <-h.gone:
		t.Fatalf("disconnected: %s", r)
	default:
	}
}

// blockingHandler is an echo handler whose "block" event holds the
// reader (on the event loop, the loop itself) for twice the slow-iteration
// threshold, as a handler that breaks the no-blocking rule would.
type blockingHandler struct{ echoHandler }

func (h *blockingHandler) Event(s *Socket, e *Event) {
	if e.Name == "block" {
		time.Sleep(2 * SlowLoopIteration) // the workload, not a synchronisation
		_ = e.Ack(Message{})
		return
	}
	h.echoHandler.Event(s, e)
}

// TestWSLoopBlockedHandlerCounted checks that an iteration held up by a
// blocking handler is counted as slow, at the real threshold.
func TestWSLoopBlockedHandlerCounted(t *testing.T) {
	srv := NewServer(Options{})
	srv.Handle("/smcp", &blockingHandler{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	w := joined(t, ts.URL)
	before := ReadLoopStats()
	counted := func() bool {
		now := ReadLoopStats()
		return now.SlowIterations > before.SlowIterations && now.Durations[3] > before.Durations[3]
	}
	// The first event can be delivered by the goroutine that admitted the
	// namespace connect (frames that arrive while a connect is decided are
	// handed over there), so a few are sent: from the second on, events
	// run on the loop. Each is counted as slow, and in the duration bucket
	// above the threshold.
	for i := 1; i <= 5 && !counted(); i++ {
		w.text(fmt.Sprintf(`42/smcp,%d["block"]`, i))
		if got, want := w.next(), fmt.Sprintf(`43/smcp,%d[]`, i); got != want {
			t.Fatalf("ack = %q, want %q", got, want)
		}
		deadline := time.Now().Add(time.Second)
		for !counted() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	if !counted() {
		t.Fatalf("no slow iteration counted: %+v then %+v", before, ReadLoopStats())
	}
	if LoopIterationBuckets[2] != SlowLoopIteration {
		t.Fatal("bucket 3 is no longer the one above SlowLoopIteration")
	}
}
