package code

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// protocolVersion is the Jupyter messaging protocol version spoken.
const protocolVersion = "5.3"

// delimiter separates the routing identities from a message's body.
var delimiter = []byte("<IDS|MSG>")

// header is a Jupyter message header (also the parent_header).
type header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// message is one Jupyter message. Content and Metadata stay raw until a
// consumer decodes the fields it reads.
type message struct {
	Header   header
	Parent   header
	Metadata json.RawMessage
	Content  json.RawMessage
}

// errWire is the kind of every decoding failure.
var errWire = errors.New("jupyter wire")

// newID returns a random version-4 UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// newMessage builds a request of msgType in session with content.
func newMessage(session, msgType string, content any, parent *header) (*message, error) {
	c, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("%w: content: %w", errWire, err)
	}
	m := &message{Header: header{MsgID: newID(), Session: session, Username: "aiod",
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), MsgType: msgType, Version: protocolVersion},
		Metadata: json.RawMessage("{}"), Content: c}
	if parent != nil {
		m.Parent = *parent
	}
	return m, nil
}

// sign is the hex HMAC-SHA256 of the four signed frames.
func sign(key []byte, frames ...[]byte) []byte {
	mac := hmac.New(sha256.New, key)
	for _, f := range frames {
		mac.Write(f)
	}
	return []byte(hex.EncodeToString(mac.Sum(nil)))
}

// encode returns the message's frames: delimiter, signature, header,
// parent_header, metadata, content.
func (m *message) encode(key []byte) ([][]byte, error) {
	h, err := json.Marshal(m.Header)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", errWire, err)
	}
	p := []byte("{}")
	if m.Parent.MsgID != "" {
		if p, err = json.Marshal(m.Parent); err != nil {
			return nil, fmt.Errorf("%w: parent: %w", errWire, err)
		}
	}
	md, c := orEmpty(m.Metadata), orEmpty(m.Content)
	return [][]byte{delimiter, sign(key, h, p, md, c), h, p, md, c}, nil
}

func orEmpty(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

// decode parses received frames: any routing identities (or a PUB
// topic), the delimiter, a signature checked against key, and the four
// JSON parts; buffers after them are ignored. It never panics.
func decode(frames [][]byte, key []byte) (*message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("%w: %d frames, no complete message", errWire, len(frames))
	}
	sig, h, p, md, c := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if !hmac.Equal(sig, sign(key, h, p, md, c)) {
		return nil, fmt.Errorf("%w: bad signature", errWire)
	}
	m := &message{Metadata: json.RawMessage(md), Content: json.RawMessage(c)}
	if err := json.Unmarshal(h, &m.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %w", errWire, err)
	}
	if err := json.Unmarshal(p, &m.Parent); err != nil {
		return nil, fmt.Errorf("%w: parent_header: %w", errWire, err)
	}
	if !json.Valid(c) || !json.Valid(md) {
		return nil, fmt.Errorf("%w: content or metadata is not JSON", errWire)
	}
	return m, nil
}
