package sio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Socket.IO protocol v5 packet types.
const (
	pConnect      = '0'
	pDisconnect   = '1'
	pEvent        = '2'
	pAck          = '3'
	pConnectError = '4'
	pBinaryEvent  = '5'
	pBinaryAck    = '6'
)

// maxAttachments bounds the attachment count a peer may announce, so a
// forged header cannot make us wait for (or allocate) millions of frames.
const maxAttachments = 64

// errMalformed is the root of every packet decoding error.
var errMalformed = errors.New("sio: malformed packet")

// packet is one decoded Socket.IO packet. Data is the raw JSON that follows
// the header; for events it is the whole array including the name.
type packet struct {
	typ         byte
	attachments int
	nsp         string
	id          int64 // -1 when the packet carries no ack id
	data        []byte
}

// decodePacket parses the text form of a Socket.IO packet:
//
//	<type>[<attachments>-][<nsp>,][<id>][<json>]
//
// It never panics; anything it cannot read is reported with errMalformed.
func decodePacket(b []byte) (packet, error) {
	p := packet{nsp: "/", id: -1}
	if len(b) == 0 || b[0] < pConnect || b[0] > pBinaryAck {
		return p, fmt.Errorf("%w: unknown type", errMalformed)
	}
	p.typ = b[0]
	i := 1
	if p.typ == pBinaryEvent || p.typ == pBinaryAck {
		j := bytes.IndexByte(b[i:], '-')
		if j <= 0 || j > 3 {
			return p, fmt.Errorf("%w: bad attachment count", errMalformed)
		}
		n, err := strconv.Atoi(string(b[i : i+j]))
		if err != nil || n < 0 || n > maxAttachments {
			return p, fmt.Errorf("%w: bad attachment count", errMalformed)
		}
		p.attachments = n
		i += j + 1
	}
	if i < len(b) && b[i] == '/' {
		j := bytes.IndexByte(b[i:], ',')
		if j < 0 {
			j = len(b) - i
		}
		if j > 256 || !utf8.Valid(b[i:i+j]) {
			return p, fmt.Errorf("%w: bad namespace", errMalformed)
		}
		p.nsp = string(b[i : i+j])
		i += j
		if i < len(b) {
			i++ // the comma
		}
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i > start {
		if i-start > 15 {
			return p, fmt.Errorf("%w: bad ack id", errMalformed)
		}
		id, _ := strconv.ParseInt(string(b[start:i]), 10, 64)
		p.id = id
	}
	p.data = b[i:]
	switch p.typ {
	case pEvent, pBinaryEvent, pAck, pBinaryAck:
		if len(p.data) == 0 || p.data[0] != '[' {
			return p, fmt.Errorf("%w: payload is not an array", errMalformed)
		}
		if (p.typ == pAck || p.typ == pBinaryAck) && p.id < 0 {
			return p, fmt.Errorf("%w: ack without id", errMalformed)
		}
	case pConnect, pConnectError:
		if len(p.data) > 0 && p.data[0] != '{' {
			return p, fmt.Errorf("%w: payload is not an object", errMalformed)
		}
	case pDisconnect:
		if len(p.data) > 0 {
			return p, fmt.Errorf("%w: disconnect with payload", errMalformed)
		}
	}
	return p, nil
}

// splitArgs splits a JSON array into its raw elements. For an event the
// first element must be a string, which is returned as the name. The
// elements are subslices of data: no copy.
//
// It is on the receiving path of every event and acknowledgement, on both
// sides, and validates the whole array (as json.Valid would) in the same
// pass that splits it: see scanJSON.
func splitArgs(data []byte, event bool) (string, []json.RawMessage, error) {
	args := make([]json.RawMessage, 0, 4)
	if !scanJSON(data, &args) {
		return "", nil, fmt.Errorf("%w: invalid JSON", errMalformed)
	}
	if i := skipWS(data, 0); i >= len(data) || data[i] != '[' {
		return "", nil, fmt.Errorf("%w: payload is not an array", errMalformed)
	}
	if !event {
		return "", args, nil
	}
	if len(args) == 0 || len(args[0]) == 0 || args[0][0] != '"' {
		return "", nil, fmt.Errorf("%w: event without a name", errMalformed)
	}
	name, err := eventName(args[0])
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return name, args[1:], nil
}

// eventName decodes the JSON string of an event name, without
// encoding/json when it is plain ASCII with no escapes (always, in
// practice).
func eventName(raw json.RawMessage) (string, error) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 && isASCII(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var name string
	err := json.Unmarshal(raw, &name)
	return name, err
}

// appendHeader writes the packet header: type, attachment count,
// namespace and ack id.
func appendHeader(dst []byte, typ byte, attachments int, nsp string, id int64) []byte {
	if attachments > 0 {
		switch typ {
		case pEvent:
			typ = pBinaryEvent
		case pAck:
			typ = pBinaryAck
		}
	}
	dst = append(dst, typ)
	if typ == pBinaryEvent || typ == pBinaryAck {
		dst = strconv.AppendInt(dst, int64(attachments), 10)
		dst = append(dst, '-')
	}
	if nsp != "/" && nsp != "" {
		dst = append(dst, nsp...)
		dst = append(dst, ',')
	}
	if id >= 0 {
		dst = strconv.AppendInt(dst, id, 10)
	}
	return dst
}

// messageBuf returns an empty Engine.IO message, eMessage alone, with room
// for a packet of namespace nsp, event name (none for an ack) and the
// arguments of m, so that encoding it allocates once: a relayed packet
// can be hundreds of kilobytes.
func messageBuf(nsp, name string, m Message) []byte {
	n := 1 + 32 + len(nsp) + 2 + len(name) // type, header, brackets, name
	for _, a := range m.Args {
		n += 1 + max(len(a), 4) // comma and value (or null)
	}
	return append(getMsgBuf(n), eMessage)
}

// The buffers of large outgoing messages are pooled by size class
// (minPooledMsg << k): relaying a 350 KB client:put_blob chunk would
// otherwise allocate (and zero, and soon collect) one per chunk on every
// hop. A buffer returns to its pool only where the engine knows the
// message has been handed to the kernel (or copied) and nothing else
// refers to it: see releaseFrames.
const minPooledMsg = 64 << 10

var msgBufs [6]sync.Pool // 64 KiB to 2 MiB

// msgClass is the size class of a message of n bytes, or -1 when n is
// too small or too large to pool.
func msgClass(n int) int {
	if n < minPooledMsg {
		return -1
	}
	for k := range msgBufs {
		if n <= minPooledMsg<<k {
			return k
		}
	}
	return -1
}

// getMsgBuf returns an empty buffer with room for n bytes.
func getMsgBuf(n int) []byte {
	k := msgClass(n)
	if k < 0 {
		return make([]byte, 0, n)
	}
	if p, _ := msgBufs[k].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, minPooledMsg<<k)
}

// releaseFrames returns the buffers of the engine's own messages in fs
// (frame.owned) to their pools. The caller guarantees that the frames
// have been written or copied, and that nothing refers to them any more.
func releaseFrames(fs []frame) {
	for _, f := range fs {
		if !f.owned {
			continue
		}
		c := cap(f.data)
		if k := msgClass(c); k >= 0 && c == minPooledMsg<<k {
			b := f.data[:0]
			msgBufs[k].Put(&b)
		}
	}
}

// encodeEvent builds an EVENT (or BINARY_EVENT) packet. Args must each be
// valid JSON; they are copied verbatim.
func encodeEvent(dst []byte, nsp string, id int64, name string, m Message) []byte {
	dst = appendHeader(dst, pEvent, len(m.Attachments), nsp, id)
	dst = append(dst, '[')
	dst = appendString(dst, name)
	for _, a := range m.Args {
		dst = append(dst, ',')
		dst = appendRaw(dst, a)
	}
	return append(dst, ']')
}

// encodeAck builds an ACK (or BINARY_ACK) packet answering id.
func encodeAck(dst []byte, nsp string, id int64, m Message) []byte {
	dst = appendHeader(dst, pAck, len(m.Attachments), nsp, id)
	dst = append(dst, '[')
	for i, a := range m.Args {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRaw(dst, a)
	}
	return append(dst, ']')
}

func appendRaw(dst []byte, a json.RawMessage) []byte {
	if len(a) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, a...)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			simple = false
			break
		}
	}
	if simple {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// checkPlaceholders checks the arguments of a binary packet against its
// attachments as socket.io-parser reads them: every object whose
// "_placeholder" is true stands for attachment "num", which must be an
// integer in [0, n). A packet that fails would make a reference client
// drop its connection ("illegal attachments"), so it is refused here
// rather than relayed. An attachment no placeholder refers to is
// accepted, as the reference parser accepts it.
func checkPlaceholders(args []json.RawMessage, n int) error {
	for _, a := range args {
		// Only an argument that names a placeholder (possibly through a
		// \u escape in the key) needs decoding.
		if !bytes.Contains(a, []byte("_placeholder")) && !bytes.Contains(a, []byte(`\u`)) {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(a))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("%w: %v", errMalformed, err)
		}
		if err := walkPlaceholders(v, n); err != nil {
			return err
		}
	}
	return nil
}

func walkPlaceholders(v any, n int) error {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			if err := walkPlaceholders(x, n); err != nil {
				return err
			}
		}
	case map[string]any:
		if v["_placeholder"] == true {
			num, ok := v["num"].(json.Number)
			i, err := strconv.ParseInt(string(num), 10, 64)
			if !ok || err != nil || i < 0 || i >= int64(n) {
				return fmt.Errorf("%w: placeholder out of range", errMalformed)
			}
			return nil
		}
		for _, x := range v {
			if err := walkPlaceholders(x, n); err != nil {
				return err
			}
		}
	}
	return nil
}
