//go:build linux

package sio

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// maskedFrame is one client frame of payload, masked with key.
func maskedFrame(fin bool, op byte, payload []byte, key [4]byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i&3])
	}
	return b
}

func TestMaskBytes(t *testing.T) {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	for n := 0; n < 100; n++ {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		want := make([]byte, n)
		for i := range src {
			want[i] = src[i] ^ key[i&3]
		}
		dst := make([]byte, n)
		maskBytes(dst, src, key)
		if !bytes.Equal(dst, want) {
			t.Fatalf("n=%d: %x, want %x", n, dst, want)
		}
		maskBytes(src, src, key) // in place
		if !bytes.Equal(src, want) {
			t.Fatalf("n=%d in place: %x, want %x", n, src, want)
		}
	}
}

// bigStream is a run of client frames around large ones (which get a
// buffer of their own) and the messages they carry.
func bigStream() (stream []byte, want [][]byte) {
	key := [4]byte{9, 8, 7, 6}
	msg := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + (byte(i)+seed)%26
		}
		b[0] = eNoop // the connection ignores it; the recorder keeps it
		return b
	}
	add := func(fin bool, op byte, p []byte) { stream = append(stream, maskedFrame(fin, op, p, key)...) }
	for i, n := range []int{10, 300 << 10, 5, ownBufFrame, ownBufFrame - 1, 70 << 10, 1} {
		p := msg(n, byte(i))
		add(true, opText, p)
		want = append(want, p)
	}
	// A fragmented message whose fragments are large.
	p := msg(200<<10, 3)
	add(false, opBinary, p[:100<<10])
	add(true, opCont, p[100<<10:])
	want = append(want, p)
	return stream, want
}

func checkMessages(t *testing.T, got []frame, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].data, want[i]) {
			t.Fatalf("message %d: %d bytes differ from the %d sent", i, len(got[i].data), len(want[i]))
		}
	}
}

// TestLoopIngestLargeFrames feeds large frames in pieces of many sizes:
// every message arrives whole and in order, whether a frame's rest comes
// in the same piece as its start, in later ones, or together with the
// next frames.
func TestLoopIngestLargeFrames(t *testing.T) {
	stream, want := bigStream()
	for _, piece := range []int{1 << 30, 64 << 10, 10000, 4099, 100} {
		rec := &wsRecorder{}
		p := &loopPeer{c: rec, fd: -1, max: 1 << 20, maxOut: 1 << 16}
		for i := 0; i < len(stream); i += piece {
			if end := p.ingest(stream[i:min(i+piece, len(stream))]); end != "" {
				t.Fatalf("piece %d: ended: %s", piece, end)
			}
		}
		if p.rbuf != nil || p.want != 0 {
			t.Fatalf("piece %d: %d bytes left over (want %d)", piece, len(p.rbuf), p.want)
		}
		checkMessages(t, rec.got, want)
	}
}

// TestLoopReadLargeFrames runs the loop's reads on a real socket, which a
// writer fills in random pieces: a large frame's rest is read straight
// into its own buffer, and nothing past its end.
func TestLoopReadLargeFrames(t *testing.T) {
	stream, want := bigStream()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	o := Options{}
	o.defaults()
	l, err := newLoop(o)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(l.epfd)
	defer unix.Close(l.wakefd)
	rec := &wsRecorder{}
	p := &loopPeer{c: rec, l: l, fd: fds[0], max: 1 << 20, maxOut: 1 << 16}
	done := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < len(stream); {
			n := min(1+rng.IntN(100<<10), len(stream)-i)
			m, err := unix.Write(fds[1], stream[i:i+n])
			if err != nil {
				done <- err
				return
			}
			i += m
		}
		done <- nil
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.got) < len(want) && time.Now().Before(deadline) {
		l.readable(p)
		if p.dead {
			t.Fatal("peer released")
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkMessages(t, rec.got, want)
	unix.Close(fds[0])
}

// TestLoopSendVecPartial sends large frames through a small socket
// buffer: what writev does not place is kept, in order, and the reader
// gets exactly the encoded frames.
func TestLoopSendVecPartial(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
	p := &loopPeer{c: &wsRecorder{}, fd: fds[0], max: 1 << 20, maxOut: 4 << 20}
	big := bytes.Repeat([]byte("0123456789"), 30<<10)
	fs := []frame{{data: big}, {data: []byte("att"), binary: true}, {data: big[:70<<10], binary: true}}
	want := appendWSFrames(nil, fs)
	want = appendWSFrames(want, []frame{{data: []byte("4small")}})
	if err := p.send(fs, true); err != nil {
		t.Fatal(err)
	}
	if len(p.out) == 0 {
		t.Fatal("a 16 KiB socket buffer took 370 KB at once")
	}
	if err := p.send([]frame{{data: []byte("4small")}}, true); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		n, err := unix.Read(fds[1], buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
		p.flushOut()
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d (equal prefix: %v)", len(got), len(want), bytes.HasPrefix(want, got))
	}
}
