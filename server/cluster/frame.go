package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Kind says what a [Frame] carries.
type Kind byte

// The frame kinds. Values are part of the wire format between nodes: add
// new ones at the end, never renumber.
const (
	// KindRequest is a client:* request from an Agent on the sending node
	// to the Computer whose sid is Frame.To; Frame.Call names it and
	// Frame.Timeout bounds the receiving node's own wait.
	KindRequest Kind = 1
	// KindAnswer is the Computer's answer to the request Frame.Call, for
	// the Agent whose sid is Frame.To.
	KindAnswer Kind = 2
	// KindBroadcast is an event for every member of Frame.Office held by
	// the receiving node except the sid in Frame.To (the sender; "" skips
	// nobody): notify:* and the cancel of a tool call.
	KindBroadcast Kind = 3
	// KindGone tells the node that sent request Frame.Call that its target
	// is no longer held by the receiving node (it left, or never was): the
	// caller ends the call with the "Computer disconnected" answer at
	// once instead of at its deadline.
	KindGone Kind = 4
	kindEnd  Kind = 5
)

// frameVersion is the first byte of every unsealed frame. A node drops a
// frame of another version (a rolling upgrade runs one frame version at a
// time). On the wire between nodes with a key, frames are sealed (version
// 0xA2, see auth.go); DecodeFrame reads the frame once its seal is
// checked and removed.
const frameVersion = 0xA1

// MaxField bounds each string field of a frame (node id, sid, office,
// event name): a frame from Redis is not trusted to be well-formed.
const MaxField = 1024

// Frame is one message between two nodes, published on the receiver's
// node channel. Payload is opaque here: the Socket.IO arguments as the
// server layer encodes them, relayed byte for byte.
//
// Wire format (all integers unsigned LEB128 varints, strings length-
// prefixed with a varint, each at most [MaxField] bytes):
//
//	0xA1 kind from to office event call timeout_ms payload...
//
// The payload is the rest of the message, with no length prefix, so a
// frame costs its payload plus a few dozen bytes. Between nodes that
// share a key ([Config].Key) the frame travels sealed: version 0xA2 and
// a 40-byte trailer after the payload (see the package documentation).
type Frame struct {
	Kind Kind
	// From is the sending node's id: where an answer goes back.
	From string
	// To is the sid of the destination member (the sid to skip for a
	// broadcast).
	To string
	// Office is the office the traffic belongs to; a node delivers a frame
	// only to a member it holds in this office, so nothing crosses offices
	// even if a frame is misrouted.
	Office string
	// Event is the Socket.IO event name (client:tool_call, notify:...).
	Event string
	// Call identifies a request on its sending node; its answer carries
	// the same value.
	Call uint64
	// TimeoutMS is the request's deadline in milliseconds, for the
	// receiving node's own wait (0 for other kinds).
	TimeoutMS uint64
	Payload   []byte
}

// ErrFrame is returned (wrapped) for a message that is not a valid frame.
var ErrFrame = errors.New("cluster: malformed frame")

// AppendFrame appends the encoding of f to b.
func AppendFrame(b []byte, f *Frame) []byte {
	b = append(b, frameVersion, byte(f.Kind))
	for _, s := range [...]string{f.From, f.To, f.Office, f.Event} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, f.Call)
	b = binary.AppendUvarint(b, f.TimeoutMS)
	return append(b, f.Payload...)
}

// frameLen is the length of f's encoding by AppendFrame.
func frameLen(f *Frame) int {
	n := 2 + uvarintLen(f.Call) + uvarintLen(f.TimeoutMS) + len(f.Payload)
	for _, s := range [...]string{f.From, f.To, f.Office, f.Event} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	return n
}

// uvarintLen is the length of x's uvarint encoding.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// DecodeFrame parses one unsealed frame. The Payload aliases b. It checks
// the version, the kind, every length, that each string field is within
// [MaxField], and the fields themselves, so that a hostile frame can name
// nothing this node would keep state for: From must be a node id (1 to
// 128 letters, digits, '-', '_', '.'); To must be a sid of that form (or
// empty for a broadcast, which then skips nobody); Office and Event must
// be present on a request and a broadcast; every string must be valid
// UTF-8 without control characters. It never panics on any input.
func DecodeFrame(b []byte) (Frame, error) {
	var f Frame
	if len(b) < 2 || b[0] != frameVersion {
		return f, fmt.Errorf("%w: bad version", ErrFrame)
	}
	f.Kind = Kind(b[1])
	if f.Kind == 0 || f.Kind >= kindEnd {
		return f, fmt.Errorf("%w: kind %d", ErrFrame, f.Kind)
	}
	b = b[2:]
	var fields [4]string
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > MaxField || n > uint64(len(b)-k) {
			return Frame{}, fmt.Errorf("%w: field %d", ErrFrame, i)
		}
		fields[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	f.From, f.To, f.Office, f.Event = fields[0], fields[1], fields[2], fields[3]
	if err := f.check(); err != nil {
		return Frame{}, err
	}
	var k int
	if f.Call, k = binary.Uvarint(b); k <= 0 {
		return Frame{}, fmt.Errorf("%w: call id", ErrFrame)
	}
	b = b[k:]
	if f.TimeoutMS, k = binary.Uvarint(b); k <= 0 {
		return Frame{}, fmt.Errorf("%w: timeout", ErrFrame)
	}
	f.Payload = b[k:]
	return f, nil
}

// check validates the string fields of a decoded frame (see DecodeFrame).
func (f *Frame) check() error {
	switch {
	case !validID(f.From):
		return fmt.Errorf("%w: from: not a node id", ErrFrame)
	case f.To == "" && f.Kind != KindBroadcast, f.To != "" && !validID(f.To):
		return fmt.Errorf("%w: to: not a sid", ErrFrame)
	case (f.Kind == KindRequest || f.Kind == KindBroadcast) && (f.Office == "" || f.Event == ""):
		return fmt.Errorf("%w: no office or event", ErrFrame)
	case !printable(f.Office):
		return fmt.Errorf("%w: office: not printable text", ErrFrame)
	case !printable(f.Event):
		return fmt.Errorf("%w: event: not printable text", ErrFrame)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters
// (Unicode category Cc), the rule smcp applies to names and offices.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return printableUTF8(s)
		case c < 0x20 || c == 0x7f:
			return false
		}
	}
	return true
}

func printableUTF8(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// frameOverhead is what [FrameCost] adds to a frame's own bytes for the
// memory that holds it while it waits: its queue entry, its Frame, the
// Redis command around it and the seal.
const frameOverhead = 256

// FrameCost is what f counts against the node's backlog
// ([Config].MaxBacklog) while it waits to be published: its payload and
// string fields plus a fixed frameOverhead. Every queue of frames to
// other nodes, the node's own and the server's, counts frames this way.
func FrameCost(f *Frame) int64 {
	return int64(frameOverhead + len(f.Payload) + len(f.From) + len(f.To) + len(f.Office) + len(f.Event))
}
