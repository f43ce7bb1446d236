package sio

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// Engine.IO protocol v4 packet types.
const (
	eOpen    = '0'
	eClose   = '1'
	ePing    = '2'
	ePong    = '3'
	eMessage = '4'
	eUpgrade = '5'
	eNoop    = '6'
)

// recordSep separates packets in a long-polling payload.
const recordSep = '\x1e'

// frame is one Engine.IO packet on its way out. Text frames hold the
// packet type byte followed by the data; binary frames hold raw bytes.
type frame struct {
	data   []byte
	binary bool
	op     byte // a WebSocket control opcode, for the event loop's own frames
	// owned marks data the engine built for this one send and no one
	// reads after it: a client may mask it in place (see wsframe.go).
	owned bool
}

var (
	framePing  = frame{data: []byte{ePing}}
	frameNoop  = frame{data: []byte{eNoop}}
	frameClose = frame{data: []byte{eClose}}
)

// messageFrames turns one Engine.IO message (eMessage followed by the
// Socket.IO packet, built in place by the sender so that a large packet
// is never copied to gain its type byte) and its attachments into
// frames: the text message followed by one binary message each.
func messageFrames(msg []byte, att [][]byte) []frame {
	fs := make([]frame, 0, 1+len(att))
	fs = append(fs, frame{data: msg, owned: true})
	for _, a := range att {
		fs = append(fs, frame{data: a, binary: true})
	}
	return fs
}

// encodePayload joins frames for the long-polling transport; binary frames
// travel as "b" followed by standard base64.
func encodePayload(fs []frame) []byte {
	n := 0
	for _, f := range fs {
		if f.binary {
			n += 2 + base64.StdEncoding.EncodedLen(len(f.data))
		} else {
			n += 1 + len(f.data)
		}
	}
	out := make([]byte, 0, n)
	for i, f := range fs {
		if i > 0 {
			out = append(out, recordSep)
		}
		if f.binary {
			out = append(out, 'b')
			out = base64.StdEncoding.AppendEncode(out, f.data)
		} else {
			out = append(out, f.data...)
		}
	}
	return out
}

// decodePayload splits a long-polling payload into frames. It never panics.
func decodePayload(b []byte) ([]frame, error) {
	var fs []frame
	for len(b) > 0 || fs == nil {
		var part []byte
		if i := bytes.IndexByte(b, recordSep); i >= 0 {
			part, b = b[:i], b[i+1:]
		} else {
			part, b = b, nil
		}
		if len(part) == 0 {
			return nil, fmt.Errorf("%w: empty packet in payload", errMalformed)
		}
		if part[0] == 'b' {
			raw, err := base64.StdEncoding.DecodeString(string(part[1:]))
			if err != nil {
				return nil, fmt.Errorf("%w: bad base64 packet", errMalformed)
			}
			fs = append(fs, frame{data: raw, binary: true})
			continue
		}
		fs = append(fs, frame{data: part})
	}
	return fs, nil
}

// openPacket is the JSON body of the Engine.IO OPEN packet.
type openPacket struct {
	SID          string   `json:"sid"`
	Upgrades     []string `json:"upgrades"`
	PingInterval int64    `json:"pingInterval"`
	PingTimeout  int64    `json:"pingTimeout"`
	MaxPayload   int64    `json:"maxPayload"`
}

func openFrame(sid string, upgrades []string, interval, timeout time.Duration, max int64) frame {
	b, _ := json.Marshal(openPacket{
		SID:          sid,
		Upgrades:     upgrades,
		PingInterval: interval.Milliseconds(),
		PingTimeout:  timeout.Milliseconds(),
		MaxPayload:   max,
	})
	return frame{data: append([]byte{eOpen}, b...)}
}

// newID returns a random 20-character URL-safe identifier.
func newID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
