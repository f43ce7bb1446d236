package cluster

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"testing"
	"time"
)

// newSealerLike is a second node's sealer with the key of s (a receiver
// that never sealed anything itself), on s's clock.
func newSealerLike(s *sealer) *sealer {
	r := newSealer(testKey, slog.New(slog.DiscardHandler))
	if !s.key {
		r = newSealer(nil, slog.New(slog.DiscardHandler))
	}
	r.now = s.now
	return r
}

// clock is a settable time for the sealers of a test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func testFrame() *Frame {
	return &Frame{Kind: KindRequest, From: "na", To: "sid1", Office: "office", Event: "client:tool_call", Call: 42, TimeoutMS: 30000,
		Payload: bytes.Repeat([]byte("x"), 150)}
}

// sealFor seals f for ch with s, as Send does.
func sealFor(s *sealer, ch string, f *Frame) []byte {
	return s.seal(AppendFrame(nil, f), 0, ch)
}

// TestOpen: what a receiver accepts and refuses, and why.
func TestOpen(t *testing.T) {
	const ch = "a2c:{nb}:ch"
	start := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		name string
		// msg builds what arrives on ch, from a sender (key testKey) and
		// the clock both share; recv may be changed (its key, its clock).
		msg  func(snd *sealer, c *clock) []byte
		recv func(r *sealer) *sealer
		want refusal // refusalEnd: accepted
	}{
		{"good", func(s *sealer, _ *clock) []byte { return sealFor(s, ch, testFrame()) }, nil, refusalEnd},
		{"flipped bit in payload", func(s *sealer, _ *clock) []byte {
			b := sealFor(s, ch, testFrame())
			b[len(b)-sealSize-3] ^= 1
			return b
		}, nil, refusedMAC},
		{"flipped bit in mac", func(s *sealer, _ *clock) []byte {
			b := sealFor(s, ch, testFrame())
			b[len(b)-1] ^= 0x80
			return b
		}, nil, refusedMAC},
		{"altered sequence", func(s *sealer, _ *clock) []byte {
			b := sealFor(s, ch, testFrame())
			b[len(b)-sealSize+15]++
			return b
		}, nil, refusedMAC},
		{"wrong key", func(s *sealer, _ *clock) []byte { return sealFor(s, ch, testFrame()) },
			func(r *sealer) *sealer {
				o := newSealer([]byte("another key of enough length!!!!"), r.log)
				o.now = r.now
				return o
			}, refusedMAC},
		{"wrong channel", func(s *sealer, _ *clock) []byte { return sealFor(s, "a2c:{nc}:ch", testFrame()) }, nil, refusedMAC},
		{"stale", func(s *sealer, c *clock) []byte {
			c.t = start.Add(-31 * time.Second)
			defer func() { c.t = start }()
			return sealFor(s, ch, testFrame())
		}, nil, refusedStale},
		{"just within the window", func(s *sealer, c *clock) []byte {
			c.t = start.Add(-29 * time.Second)
			defer func() { c.t = start }()
			return sealFor(s, ch, testFrame())
		}, nil, refusalEnd},
		{"future", func(s *sealer, c *clock) []byte {
			c.t = start.Add(31 * time.Second)
			defer func() { c.t = start }()
			return sealFor(s, ch, testFrame())
		}, nil, refusedStale},
		{"unsealed when a key is set", func(*sealer, *clock) []byte { return AppendFrame(nil, testFrame()) }, nil, refusedUnsealed},
		{"sealed, receiver without a key", func(s *sealer, _ *clock) []byte { return sealFor(s, ch, testFrame()) },
			func(r *sealer) *sealer { o := newSealer(nil, r.log); o.now = r.now; return o }, refusedMAC},
		{"unsealed, receiver without a key", func(*sealer, *clock) []byte { return AppendFrame(nil, testFrame()) },
			func(r *sealer) *sealer { o := newSealer(nil, r.log); o.now = r.now; return o }, refusalEnd},
		{"truncated", func(s *sealer, _ *clock) []byte { return sealFor(s, ch, testFrame())[:sealSize] }, nil, refusedMalformed},
		{"trailer cut", func(s *sealer, _ *clock) []byte { b := sealFor(s, ch, testFrame()); return b[:len(b)-1] }, nil, refusedMAC},
		{"empty", func(*sealer, *clock) []byte { return nil }, nil, refusedMalformed},
		{"other version", func(s *sealer, _ *clock) []byte { b := sealFor(s, ch, testFrame()); b[0] = 0xA3; return b }, nil, refusedMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: start}
			snd := newSealer(testKey, slog.New(slog.DiscardHandler))
			snd.now = c.now
			msg := tc.msg(snd, c)
			r := newSealerLike(snd)
			if tc.recv != nil {
				r = tc.recv(r)
			}
			out, ok := r.open(ch, msg)
			got := refusalEnd
			for i := range r.counts {
				if r.counts[i].Load() > 0 {
					got = refusal(i)
				}
			}
			switch {
			case tc.want == refusalEnd && (!ok || got != refusalEnd):
				t.Fatalf("refused (%v)", refusalName(got))
			case tc.want != refusalEnd && (ok || got != tc.want):
				t.Fatalf("ok=%v, refusal %s; want %s", ok, refusalName(got), refusalNames[tc.want])
			}
			if ok {
				if _, err := DecodeFrame(out); err != nil {
					t.Fatalf("opened frame does not decode: %v", err)
				}
			}
		})
	}
}

func refusalName(r refusal) string {
	if r == refusalEnd {
		return "none"
	}
	return refusalNames[r]
}

// TestOpenReplay: a frame is taken once; numbers out of order within the
// window are taken once each; one older than the window is refused.
func TestOpenReplay(t *testing.T) {
	const ch = "a2c:{nb}:ch"
	snd := newSealer(testKey, slog.New(slog.DiscardHandler))
	r := newSealerLike(snd)
	var frames [][]byte
	for range replayWindow + 10 {
		frames = append(frames, sealFor(snd, ch, testFrame()))
	}
	open := func(i int) bool { _, ok := r.open(ch, bytes.Clone(frames[i])); return ok }
	if !open(5) || open(5) {
		t.Fatal("frame 5: want taken once")
	}
	if !open(3) || !open(4) || open(3) {
		t.Fatal("frames out of order: want each taken once")
	}
	if !open(replayWindow + 5) {
		t.Fatal("frame far ahead refused")
	}
	if open(5) || open(4) {
		t.Fatal("a replay after the window slid was taken")
	}
	if open(2) {
		t.Fatal("a frame older than the window was taken")
	}
	if !open(10) {
		t.Fatal("a frame within the window, never seen, refused")
	}
	if got := r.refused().Replay; got != 5 {
		t.Fatalf("replays counted: %d, want 5", got)
	}
}

// TestWindow: the window's bits against a plain set of seen numbers.
func TestWindow(t *testing.T) {
	w := &window{top: 1}
	w.set(1)
	seen := map[uint64]bool{1: true}
	top := uint64(1)
	rng := uint64(12345)
	for range 200000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		var seq uint64
		switch rng >> 62 {
		case 0:
			seq = top + 1 + (rng>>32)%100
		case 1:
			seq = top + 1 + (rng>>32)%(2*replayWindow)
		default:
			seq = top - min(top, (rng>>32)%(replayWindow+100))
		}
		want := !seen[seq] && (seq > top || top-seq < replayWindow)
		if got := w.accept(seq); got != want {
			t.Fatalf("seq %d (top %d): accept %v, want %v", seq, top, got, want)
		}
		if want {
			seen[seq] = true
			top = max(top, seq)
		}
	}
}

// TestBootsBounded: the replay state keeps at most maxWindows windows.
func TestBootsBounded(t *testing.T) {
	const ch = "a2c:{nb}:ch"
	r := newSealer(testKey, slog.New(slog.DiscardHandler))
	for range maxWindows + 50 {
		snd := newSealer(testKey, slog.New(slog.DiscardHandler))
		if _, ok := r.open(ch, sealFor(snd, ch, testFrame())); !ok {
			t.Fatal("refused")
		}
	}
	if n := len(r.windows); n != maxWindows {
		t.Fatalf("%d windows kept, want %d", n, maxWindows)
	}
}

// TestReseal: a seal older than resealAfter is renewed (new number, new
// time, valid MAC); a fresh one is left alone.
func TestReseal(t *testing.T) {
	const ch = "a2c:{nb}:ch"
	c := &clock{t: time.UnixMilli(1_800_000_000_000)}
	snd := newSealer(testKey, slog.New(slog.DiscardHandler))
	snd.now = c.now
	r := newSealerLike(snd)
	b := sealFor(snd, ch, testFrame())
	if snd.reseal(b, ch) {
		t.Fatal("a fresh seal renewed")
	}
	if _, ok := r.open(ch, bytes.Clone(b)); !ok {
		t.Fatal("first copy refused")
	}
	c.t = c.t.Add(40 * time.Second) // a retry after a long outage
	if !snd.reseal(b, ch) {
		t.Fatal("an old seal not renewed")
	}
	if seq := binary.BigEndian.Uint64(b[len(b)-sealSize+8:]); seq != 2 {
		t.Fatalf("resealed with sequence %d, want 2", seq)
	}
	if _, ok := r.open(ch, bytes.Clone(b)); !ok {
		t.Fatalf("resealed copy refused: %+v", r.refused())
	}
}

// TestRefusalLogRateLimited: many refusals, one log line per reason per
// refusalLogEvery, without the frame's bytes.
func TestRefusalLogRateLimited(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.UnixMilli(1_800_000_000_000)}
	r := newSealer(testKey, slog.New(slog.NewTextHandler(&out, nil)))
	r.now = c.now
	msg := AppendFrame(nil, &Frame{Kind: KindRequest, From: "n", To: "s", Office: "o", Event: "SECRETPAYLOAD", Call: 1})
	for range 100 {
		r.open("ch", bytes.Clone(msg))
	}
	c.t = c.t.Add(refusalLogEvery)
	r.open("ch", bytes.Clone(msg))
	if n := bytes.Count(out.Bytes(), []byte("\n")); n != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", n, out.Bytes())
	}
	if bytes.Contains(out.Bytes(), []byte("SECRETPAYLOAD")) || bytes.Contains(out.Bytes(), testKey) {
		t.Fatalf("the log shows the frame or the key:\n%s", out.Bytes())
	}
	if !bytes.Contains(out.Bytes(), []byte("since_last_line=100 total=101")) {
		t.Fatalf("second line does not count the refusals since the first:\n%s", out.Bytes())
	}
	if got := r.refused(); got.Unsealed != 101 {
		t.Fatalf("counts %+v", got)
	}
}

// FuzzOpen: open never panics, never accepts a frame it did not seal for
// that channel, and what it accepts decodes or is refused by DecodeFrame.
func FuzzOpen(f *testing.F) {
	const ch = "a2c:{nb}:ch"
	// The same sender in every fuzzing process (seeds are made in one,
	// run in others): a fixed boot id and clock.
	snd := newSealer(testKey, slog.New(slog.DiscardHandler))
	snd.boot = [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	snd.now = (&clock{t: time.UnixMilli(1_800_000_000_000)}).now
	good := sealFor(snd, ch, testFrame())
	f.Add(good)
	f.Add(AppendFrame(nil, testFrame()))
	f.Add(good[:len(good)-sealSize])
	f.Add([]byte{sealedVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newSealerLike(snd)
		in := bytes.Clone(b)
		out, ok := r.open(ch, in)
		if !ok {
			return
		}
		// Only a frame sealed by snd (the fuzzer cannot forge a MAC):
		// good itself, taken once.
		if !bytes.Equal(b, good) {
			t.Fatalf("accepted a frame it did not seal: %x", b)
		}
		if _, err := DecodeFrame(out); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkSealOpen: one frame of about 200 bytes sealed and opened, as
// every frame between nodes is.
func BenchmarkSealOpen(b *testing.B) {
	const ch = "a2c:{nb}:ch"
	snd := newSealer(testKey, slog.New(slog.DiscardHandler))
	r := newSealerLike(snd)
	f := testFrame()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(AppendFrame(nil, f))))
	for b.Loop() {
		msg := snd.seal(AppendFrame(buf[:0], f), 0, ch)
		if _, ok := r.open(ch, msg); !ok {
			b.Fatal("refused")
		}
	}
}

// BenchmarkSeal and BenchmarkOpen: each side alone, across goroutines.
func BenchmarkSeal(b *testing.B) {
	const ch = "a2c:{nb}:ch"
	snd := newSealer(testKey, slog.New(slog.DiscardHandler))
	f := testFrame()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 512)
		for pb.Next() {
			_ = snd.seal(AppendFrame(buf[:0], f), 0, ch)
		}
	})
}

func BenchmarkOpen(b *testing.B) {
	const ch = "a2c:{nb}:ch"
	snd := newSealer(testKey, slog.New(slog.DiscardHandler))
	r := newSealerLike(snd)
	f := testFrame()
	msgs := make([][]byte, 1<<16)
	for i := range msgs {
		msgs[i] = sealFor(snd, ch, f)
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(msgs) {
			b.StopTimer()
			r = newSealerLike(snd)
			i = 0
			b.StartTimer()
		}
		if _, ok := r.open(ch, append(buf[:0], msgs[i]...)); !ok {
			b.Fatal("refused")
		}
		i++
	}
}
