package pty

import (
	"bytes"
	"encoding/json"
)

// Client frame kinds.
const (
	frameInput  = iota // bytes to type into the terminal
	frameResize        // new size
	framePing          // answer with pong
)

// clientFrame is one decoded client WebSocket message.
type clientFrame struct {
	kind       int
	data       []byte
	cols, rows int
	timestamp  json.RawMessage // the ping's, echoed in the pong
}

// Size a resize frame falls back to when it lacks cols or rows.
const (
	resizeCols = 80
	resizeRows = 24
)

// decodeFrame decodes a client message. A binary message is raw input;
// a text message is a JSON control frame (input, resize, ping) or, in
// any other shape, raw input typed as it is. It never fails.
func decodeFrame(binary bool, msg []byte) clientFrame {
	raw := clientFrame{kind: frameInput, data: msg}
	if binary || !bytes.HasPrefix(bytes.TrimSpace(msg), []byte("{")) {
		return raw
	}
	var f struct {
		Type      string          `json:"type"`
		Data      json.RawMessage `json:"data"`
		Cols      json.RawMessage `json:"cols"`
		Rows      json.RawMessage `json:"rows"`
		Timestamp json.RawMessage `json:"timestamp"`
	}
	if json.Unmarshal(msg, &f) != nil {
		return raw
	}
	switch f.Type {
	case "input":
		var s string
		if json.Unmarshal(f.Data, &s) == nil {
			return clientFrame{kind: frameInput, data: []byte(s)}
		}
	case "resize":
		var nested struct {
			Cols json.RawMessage `json:"cols"`
			Rows json.RawMessage `json:"rows"`
		}
		if f.Cols == nil && f.Rows == nil && json.Unmarshal(f.Data, &nested) == nil {
			f.Cols, f.Rows = nested.Cols, nested.Rows
		}
		return clientFrame{kind: frameResize, cols: dim(f.Cols, resizeCols), rows: dim(f.Rows, resizeRows)}
	case "ping":
		ts := f.Timestamp
		if len(ts) == 0 {
			ts = json.RawMessage("null")
		}
		return clientFrame{kind: framePing, timestamp: ts}
	}
	return raw
}

// dim reads a size: a positive number (clamped to 65535), else def.
func dim(v json.RawMessage, def int) int {
	var n float64
	if json.Unmarshal(v, &n) != nil || n < 1 {
		return def
	}
	return int(min(n, 0xffff))
}
