package sio

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"sync"
)

// WebSocket opcodes (RFC 6455 §5.2), used by the client's frame writer
// here and by the event loop (loop_linux.go).
const (
	opCont   = 0x0
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
)

// This file writes the client side's WebSocket frames itself rather than
// through gorilla/websocket's message writer, which copies a message
// into a 4 KiB buffer and sends it as a fragment per buffer: a 350 KB
// client:put_blob chunk became some 85 frames, 85 write calls, and a
// reassembly on the server. Here a message is one frame, written with
// one call:
//
//   - a message the engine built for this send (frame.owned) is masked
//     in place and written with its header by writev (net.Buffers), no
//     copy at all;
//   - anything else (attachments, which belong to the caller, and the
//     engine's shared constant frames) is masked into a pooled buffer.
//
// Every frame goes out in a single write on the net.Conn (net.Buffers
// on a TCP or Unix socket is one writev under the descriptor's write
// lock; anything else, such as TLS, gets header and payload in one
// buffer), so the control frames gorilla itself writes from the reader
// goroutine (pong, close) can come between two frames but never inside
// one.

// appendClientHeader appends the header of a masked client frame of n
// payload bytes with opcode op and masking key key (at most 14 bytes).
func appendClientHeader(dst []byte, op byte, n int, key [4]byte) []byte {
	dst = append(dst, 0x80|op)
	switch {
	case n < 126:
		dst = append(dst, 0x80|byte(n))
	case n < 1<<16:
		dst = append(dst, 0x80|126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, key[:]...)
}

// newMaskKey returns a masking key from the runtime's ChaCha8 generator,
// unpredictable to the peer as RFC 6455 §5.3 asks.
func newMaskKey() [4]byte {
	var k [4]byte
	binary.LittleEndian.PutUint32(k[:], rand.Uint32())
	return k
}

// clientFrameBufs holds the buffers of copied client frames.
var clientFrameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// writeClientFrame writes f to nc as one masked client frame.
func writeClientFrame(nc net.Conn, f frame) error {
	op := byte(opText)
	if f.binary {
		op = opBinary
	}
	key := newMaskKey()
	var hdr [14]byte
	h := appendClientHeader(hdr[:0], op, len(f.data), key)
	if f.owned && len(f.data) >= 4096 {
		switch nc.(type) {
		case *net.TCPConn, *net.UnixConn:
			maskBytes(f.data, f.data, key)
			bufs := net.Buffers{h, f.data}
			_, err := bufs.WriteTo(nc)
			return err
		}
	}
	bp := clientFrameBufs.Get().(*[]byte)
	b := append((*bp)[:0], h...)
	b = append(b, f.data...)
	maskBytes(b[len(h):], b[len(h):], key)
	_, err := nc.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		clientFrameBufs.Put(bp)
	}
	return err
}

// maskBytes writes src XOR the masking key to dst (which may be src
// itself), eight bytes at a time: a client frame of hundreds of
// kilobytes is unmasked at memory speed, not a byte per step. The key
// repeats every four bytes, so a 64-bit word at an offset that is a
// multiple of 8 always meets the key doubled.
func maskBytes(dst, src []byte, key [4]byte) {
	dst = dst[:len(src)]
	k32 := uint64(binary.LittleEndian.Uint32(key[:]))
	k := k32 | k32<<32
	i := 0
	for ; i+32 <= len(src); i += 32 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k)
		binary.LittleEndian.PutUint64(dst[i+8:], binary.LittleEndian.Uint64(src[i+8:])^k)
		binary.LittleEndian.PutUint64(dst[i+16:], binary.LittleEndian.Uint64(src[i+16:])^k)
		binary.LittleEndian.PutUint64(dst[i+24:], binary.LittleEndian.Uint64(src[i+24:])^k)
	}
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ key[i&3]
	}
}
