package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// This file authenticates the frames between nodes. Whoever can PUBLISH
// on a node's channel could otherwise make that node run anything: an
// attacker with write access to Redis captured a client:tool_call frame,
// changed its arguments, published it again and a Computer ran it. The
// nodes of a cluster now share a key (Config.Key), and every frame leaves
// sealed:
//
//	0xA2 kind from to office event call timeout_ms payload... boot seq ms mac
//
// that is the frame of frame.go with the version byte 0xA2 and a fixed
// 40-byte trailer: the sender's boot id (8 random bytes drawn when the
// node starts), its sequence number (8 bytes, big-endian, +1 per frame
// the node seals, from 1), the sender's clock in unix milliseconds (8
// bytes) and the MAC: HMAC-SHA256 with the key, truncated to its first
// 16 bytes, over the channel the frame is published on (its length as a
// uvarint, then its bytes) followed by every byte of the frame before
// the MAC. A receiver checks, in this order, before it parses anything:
//
//  1. the MAC (in constant time): a frame changed by one bit, sealed with
//     another key, or published on another channel than the one it was
//     sealed for (a request for node B replayed on node C's channel, a
//     broadcast for one office on another office's) is refused ("mac");
//  2. the clock: a frame sealed more than clockWindow (30 s) before or
//     after the receiver's clock is refused ("stale"), so a captured frame
//     is worthless half a minute later whatever else happens;
//  3. the sequence: per boot id and channel, a sliding window of
//     replayWindow (4096) sequence numbers records which were seen; a
//     number seen before, or older than the window, is refused ("replay").
//     A sender numbers its frames with one counter for every channel, and
//     frames of two channels may arrive out of order (on a Redis Cluster
//     they come on two connections from two shards): one window per
//     channel keeps a late frame of one channel from being judged by the
//     numbers another channel brought. The MAC binds the channel, so a
//     frame's number is only ever checked in its own channel's window.
//     State is bounded: at most maxWindows (sender, channel) windows are
//     kept (only frames whose MAC holds create one), the one used least
//     recently is forgotten first.
//
// A frame of version 0xA1 (unsealed) is refused ("unsealed") when a key is
// set, and is the only kind accepted without one; anything else that is
// not a frame of either version is refused ("malformed"). Refusals are
// counted by reason ([Node.Refused]) and logged at Warn at most once per
// refusalLogEvery and reason, with the count since the last line and no
// byte of the frame.
//
// Costs: one HMAC per frame on each side, about a microsecond for a
// frame of a few hundred bytes, and no allocation: the keyed HMAC states
// are reused through a sync.Pool (an HMAC's Reset restores the keyed
// state without rehashing the key).

// Sealed frame layout.
const (
	sealedVersion = 0xA2
	// macSize is the MAC's length: HMAC-SHA256 truncated to 128 bits.
	macSize = 16
	// sealSize is the trailer a sealed frame carries: boot id, sequence
	// number, unix milliseconds and MAC.
	sealSize = 8 + 8 + 8 + macSize
	// MinKeySize is the shortest [Config].Key accepted.
	MinKeySize = 16
)

// Receiver limits.
const (
	// clockWindow is how far a frame's seal time may lie from the
	// receiver's clock, either way: the nodes' clocks must agree within
	// it (NTP keeps them within milliseconds).
	clockWindow = 30 * time.Second
	// replayWindow is how many sequence numbers behind the highest seen
	// from one sender are remembered; older ones are refused. Frames of
	// one sender may arrive out of order (several subscriptions on a
	// Redis Cluster, a retried batch), never by this much.
	replayWindow = 4096
	// maxWindows bounds the (sender boot id, channel) windows kept:
	// about 600 bytes each.
	maxWindows = 8192
	// refusalLogEvery spaces the Warn lines of one refusal reason.
	refusalLogEvery = 10 * time.Second
	// resealAfter: a frame written again (a retry after a broken
	// connection) or written late from the publisher's backlog is sealed
	// again if its seal is older than this, so it carries a fresh time
	// and a fresh sequence number: a retry is not a replay, and a
	// receiver that saw the first copy would otherwise count it as one.
	resealAfter = time.Second
)

// refusal is why a frame was refused; the values index Refusals' counts.
type refusal int

const (
	refusedMAC refusal = iota
	refusedStale
	refusedReplay
	refusedUnsealed
	refusedMalformed
	refusalEnd
)

// refusalNames are the reasons as the metric's label and the log say them.
var refusalNames = [refusalEnd]string{"mac", "stale", "replay", "unsealed", "malformed"}

// Refusals counts the frames a node refused since it started, by reason.
// See [Node.Refused].
type Refusals struct {
	// MAC: the MAC did not match (the frame was changed, sealed with
	// another key, published on another channel than it was sealed for),
	// or a sealed frame reached a node that has no key.
	MAC uint64
	// Stale: sealed more than 30 s before or after the receiver's clock.
	Stale uint64
	// Replay: a sequence number already seen from that sender, or older
	// than the window of 4096.
	Replay uint64
	// Unsealed: a frame without a seal while the node has a key.
	Unsealed uint64
	// Malformed: not a frame at all, or one that does not parse.
	Malformed uint64
}

// All yields each reason, as the metric label names it ("mac", "stale",
// "replay", "unsealed", "malformed"), with its count.
func (r Refusals) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for i, v := range [refusalEnd]uint64{r.MAC, r.Stale, r.Replay, r.Unsealed, r.Malformed} {
			if !yield(refusalNames[i], v) {
				return
			}
		}
	}
}

// Refused returns how many frames the node has refused, by reason.
func (n *Node) Refused() Refusals { return n.seal.refused() }

// Authenticated reports whether the node has a cluster key: every frame
// it accepts was then sealed by a node holding the key, which built the
// frame from what its own client sent and its own checks passed. The
// server re-checks less of such a frame (see server/clustered.go).
func (n *Node) Authenticated() bool { return n.seal.key }

// sealer seals the frames a node sends and opens the ones it receives. A
// nil key seals nothing and opens only unsealed frames. Safe for
// concurrent use.
type sealer struct {
	key  bool
	boot [8]byte
	seq  atomic.Uint64
	macs sync.Pool // *macState
	now  func() time.Time
	log  *slog.Logger

	mu      sync.Mutex
	windows map[windowKey]*window
	tick    uint64 // orders the windows by last use, for eviction

	counts  [refusalEnd]atomic.Uint64
	logged  [refusalEnd]atomic.Uint64 // counts[i] when reason i was last logged
	logNext [refusalEnd]atomic.Int64  // unix nanoseconds before which reason i is not logged
}

// macState is one keyed HMAC and the scratch it needs, reused.
type macState struct {
	h   hash.Hash
	buf []byte // the channel's length and bytes
	sum [sha256.Size]byte
}

func newSealer(key []byte, log *slog.Logger) *sealer {
	s := &sealer{key: len(key) > 0, now: time.Now, log: log, windows: make(map[windowKey]*window)}
	_, _ = rand.Read(s.boot[:])
	if s.key {
		k := append([]byte(nil), key...)
		s.macs.New = func() any { return &macState{h: hmac.New(sha256.New, k)} }
	}
	return s
}

// mac computes the MAC of msg published on ch into st.sum[:macSize].
func (st *macState) mac(ch string, msg []byte) []byte {
	st.buf = binary.AppendUvarint(st.buf[:0], uint64(len(ch)))
	st.buf = append(st.buf, ch...)
	st.h.Reset()
	st.h.Write(st.buf)
	st.h.Write(msg)
	return st.h.Sum(st.sum[:0])[:macSize]
}

// seal turns the unsealed frame b[at:] (as AppendFrame wrote it, the
// end of b) into a sealed frame for channel ch, in place, and returns b
// with the trailer appended. Without a key it returns b unchanged.
func (s *sealer) seal(b []byte, at int, ch string) []byte {
	if !s.key {
		return b
	}
	b[at] = sealedVersion
	b = append(b, s.boot[:]...)
	b = binary.BigEndian.AppendUint64(b, s.seq.Add(1))
	b = binary.BigEndian.AppendUint64(b, uint64(s.now().UnixMilli()))
	st := s.macs.Get().(*macState)
	b = append(b, st.mac(ch, b[at:])...)
	s.macs.Put(st)
	return b
}

// size is the length of f as appendFrame writes it.
func (s *sealer) size(f *Frame) int {
	if s.key {
		return frameLen(f) + sealSize
	}
	return frameLen(f)
}

// appendFrame appends f sealed for channel ch (unsealed without a key),
// growing b once to the exact size.
func (s *sealer) appendFrame(b []byte, ch string, f *Frame) []byte {
	at := len(b)
	return s.seal(AppendFrame(slices.Grow(b, s.size(f)), f), at, ch)
}

// reseal seals again, in place, the sealed frame f (its whole length,
// trailer included) when its seal is older than resealAfter: a new
// sequence number, the time now, the MAC. It reports whether it did.
func (s *sealer) reseal(f []byte, ch string) bool {
	if !s.key || len(f) < 2+sealSize || f[0] != sealedVersion {
		return false
	}
	t := f[len(f)-sealSize:]
	now := s.now().UnixMilli()
	if now-int64(binary.BigEndian.Uint64(t[16:24])) < resealAfter.Milliseconds() {
		return false
	}
	binary.BigEndian.PutUint64(t[8:16], s.seq.Add(1))
	binary.BigEndian.PutUint64(t[16:24], uint64(now))
	st := s.macs.Get().(*macState)
	copy(t[24:], st.mac(ch, f[:len(f)-macSize]))
	s.macs.Put(st)
	return true
}

// open checks a frame received on channel ch and returns the bytes for
// DecodeFrame: for a sealed frame, msg without its trailer and with the
// version byte set back to 0xA1, in place (the caller owns msg and
// reads it no more). It reports false, after counting and (rate-limited)
// logging the refusal, when the frame must be dropped.
func (s *sealer) open(ch string, msg []byte) ([]byte, bool) {
	switch {
	case len(msg) < 2:
		return nil, s.refuse(refusedMalformed, ch)
	case msg[0] == frameVersion:
		if s.key {
			return nil, s.refuse(refusedUnsealed, ch)
		}
		return msg, true
	case msg[0] != sealedVersion || len(msg) < 2+sealSize:
		return nil, s.refuse(refusedMalformed, ch)
	case !s.key:
		// Sealed by a node with a key: a node without one cannot tell a
		// genuine frame from a forged one.
		return nil, s.refuse(refusedMAC, ch)
	}
	body := len(msg) - sealSize
	t := msg[body:]
	st := s.macs.Get().(*macState)
	ok := hmac.Equal(st.mac(ch, msg[:len(msg)-macSize]), t[24:])
	s.macs.Put(st)
	if !ok {
		return nil, s.refuse(refusedMAC, ch)
	}
	at := time.UnixMilli(int64(binary.BigEndian.Uint64(t[16:24])))
	if d := s.now().Sub(at); d > clockWindow || d < -clockWindow {
		return nil, s.refuse(refusedStale, ch)
	}
	if !s.fresh(windowKey{[8]byte(t[:8]), ch}, binary.BigEndian.Uint64(t[8:16])) {
		return nil, s.refuse(refusedReplay, ch)
	}
	msg = msg[:body]
	msg[0] = frameVersion
	return msg, true
}

// window is the replay state of one sender: the highest sequence number
// seen and, for the replayWindow numbers up to it, which were seen (bit
// seq%replayWindow).
type window struct {
	top  uint64
	bits [replayWindow / 64]uint64
	used uint64 // sealer.tick at its last use
}

// windowKey names a replay window: a sender's boot id and the channel.
type windowKey struct {
	boot [8]byte
	ch   string
}

// fresh records seq in window k and reports whether it was new.
func (s *sealer) fresh(k windowKey, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	w := s.windows[k]
	if w == nil {
		if len(s.windows) >= maxWindows {
			s.evictLocked()
		}
		w = &window{top: seq}
		w.set(seq)
		w.used = s.tick
		s.windows[k] = w
		return true
	}
	w.used = s.tick
	return w.accept(seq)
}

// evictLocked forgets the window used least recently. A window forgotten
// and used again starts anew: what its sender published on its channel
// up to 30 s ago could be replayed once, which takes more than maxWindows
// live (sender, channel) pairs.
func (s *sealer) evictLocked() {
	var oldest windowKey
	first := true
	var used uint64
	for b, w := range s.windows {
		if first || w.used < used {
			oldest, used, first = b, w.used, false
		}
	}
	delete(s.windows, oldest)
}

func (w *window) set(seq uint64)      { w.bits[seq/64%(replayWindow/64)] |= 1 << (seq % 64) }
func (w *window) has(seq uint64) bool { return w.bits[seq/64%(replayWindow/64)]&(1<<(seq%64)) != 0 }

// accept records seq and reports whether it is new: above the highest
// seen (the window slides up to it), or within the window and not seen.
func (w *window) accept(seq uint64) bool {
	switch {
	case seq > w.top:
		if seq-w.top >= replayWindow {
			clear(w.bits[:])
		} else {
			// Clear the bits of top+1..seq: they now stand for new numbers.
			for i := w.top + 1; i <= seq; {
				if i%64 == 0 && seq-i >= 63 {
					w.bits[i/64%(replayWindow/64)] = 0
					i += 64
					continue
				}
				w.bits[i/64%(replayWindow/64)] &^= 1 << (i % 64)
				i++
			}
		}
		w.top = seq
		w.set(seq)
		return true
	case w.top-seq >= replayWindow || w.has(seq):
		return false
	default:
		w.set(seq)
		return true
	}
}

// refuse counts a refused frame and logs it, at most once per
// refusalLogEvery and reason. It returns false, for open's callers.
func (s *sealer) refuse(r refusal, ch string) bool {
	total := s.counts[r].Add(1)
	now := s.now().UnixNano()
	next := s.logNext[r].Load()
	if now < next || !s.logNext[r].CompareAndSwap(next, now+int64(refusalLogEvery)) {
		return false
	}
	since := total - s.logged[r].Swap(total)
	s.log.Warn("frames from Redis refused: not from a node of this cluster, or replayed",
		"reason", refusalNames[r], "channel", ch, "since_last_line", since, "total", total)
	return false
}

// refused is the snapshot of the counts.
func (s *sealer) refused() Refusals {
	var c [refusalEnd]uint64
	for i := range c {
		c[i] = s.counts[i].Load()
	}
	return Refusals{MAC: c[refusedMAC], Stale: c[refusedStale], Replay: c[refusedReplay], Unsealed: c[refusedUnsealed], Malformed: c[refusedMalformed]}
}

// open is the receivers' entry: see sealer.open. A frame that fails
// DecodeFrame afterwards is counted with dropFrame.
func (n *Node) open(ch string, msg []byte) ([]byte, bool) { return n.seal.open(ch, msg) }

// dropFrame counts and logs (rate-limited) a frame that passed open but
// does not parse, or does not belong where it arrived.
func (n *Node) dropFrame(ch string) { n.seal.refuse(refusedMalformed, ch) }

// isFrame reports whether a message starting with b is a frame (sealed or
// not) rather than an office event (which starts with '+', '-' or '!').
func isFrame(b byte) bool { return b == frameVersion || b == sealedVersion }
