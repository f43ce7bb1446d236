package launch

// This file holds the few JSON scans the CDP multiplexer (cdpmux.go)
// makes on the messages it routes. They read untrusted input (a
// WebSocket client's messages, and Chromium's, which a page shapes) and
// never panic: every index is checked against the message's length, and
// nesting is counted, not recursed into.

import (
	"bytes"
	"strconv"
)

// member is one top-level member of a JSON object: its key as written
// between the quotes (keys with a backslash are reported as such, see
// [members]) and the spans of the whole member and of its value.
type member struct {
	key                  []byte
	start, valStart, end int
}

// members splits msg, one JSON object, into its top-level members. It
// follows strings (with their escapes) and counts nesting only as far
// as it must to find where each value ends; it does not check numbers,
// literals or how brackets pair (Chromium rejects what is not JSON; the
// multiplexer also runs json.Valid on a client's message first). ok is
// false when msg is not an object of that shape, with nothing but
// whitespace after it.
func members(msg []byte) (ms []member, ok bool) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return nil, false
	}
	i = skipSpace(msg, i+1)
	if i < len(msg) && msg[i] == '}' {
		return nil, skipSpace(msg, i+1) == len(msg)
	}
	for {
		if i >= len(msg) || msg[i] != '"' {
			return nil, false
		}
		start := i
		kend, good := stringEnd(msg, i)
		if !good {
			return nil, false
		}
		key := msg[i+1 : kend-1]
		i = skipSpace(msg, kend)
		if i >= len(msg) || msg[i] != ':' {
			return nil, false
		}
		i = skipSpace(msg, i+1)
		vstart := i
		vend, good := valueEnd(msg, i)
		if !good {
			return nil, false
		}
		ms = append(ms, member{key: key, start: start, valStart: vstart, end: vend})
		i = skipSpace(msg, vend)
		if i >= len(msg) {
			return nil, false
		}
		switch msg[i] {
		case ',':
			i = skipSpace(msg, i+1)
		case '}':
			if skipSpace(msg, i+1) != len(msg) {
				return nil, false
			}
			return ms, true
		default:
			return nil, false
		}
	}
}

// skipSpace is the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at b[i] (a
// quote).
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++ // the escaped byte; \uXXXX's digits hold no quote
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// valueEnd is the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && !bytes.ContainsRune([]byte(",}] \t\n\r"), rune(b[j])) {
		j++
	}
	return j, j > i
}

// sessionTail is the session id Chromium appended to msg, or "".
//
// Invariant (checked against Chromium 156, and what its DevTools
// session code does for every message of a flattened session): the
// message of a session ends with `,"sessionId":"<id>"}`, the id being
// hexadecimal, and a message of the root connection ends with the close
// of its params, result or error object (`}}`). So the tail names the
// session without a scan of the message, which may be a screenshot of
// hundreds of MiB. A message of any other shape is scanned whole
// ([topSession]).
func sessionTail(msg []byte) (string, bool) {
	const key = `,"sessionId":"`
	if len(msg) < len(key)+3 || msg[len(msg)-1] != '}' || msg[len(msg)-2] != '"' {
		return "", false
	}
	from := max(0, len(msg)-2-len(key)-maxSessionID)
	k := bytes.LastIndex(msg[from:len(msg)-2], []byte(key))
	if k < 0 {
		return "", false
	}
	id := msg[from+k+len(key) : len(msg)-2]
	if !plainID(id) {
		return "", false
	}
	return string(id), true
}

// maxSessionID bounds a session id (Chromium's are 32 hex digits).
const maxSessionID = 128

// plainID reports whether b is a non-empty session or target id as
// Chromium makes them: letters, digits and '-', at most maxSessionID.
func plainID(b []byte) bool {
	if len(b) == 0 || len(b) > maxSessionID {
		return false
	}
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// topSession is msg's top-level sessionId, found by a scan of the whole
// message: the slow path of [sessionTail].
func topSession(msg []byte) string {
	ms, ok := members(msg)
	if !ok {
		return ""
	}
	for _, m := range ms {
		if string(m.key) == "sessionId" {
			v := msg[m.valStart:m.end]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && plainID(v[1:len(v)-1]) {
				return string(v[1 : len(v)-1])
			}
			return ""
		}
	}
	return ""
}

// headID is the id of a response that starts `{"id":N,` (Chromium
// writes the id first) and the index just past N. ok is false for any
// other start (an event).
func headID(msg []byte) (id int64, end int, ok bool) {
	rest, found := bytes.CutPrefix(msg, []byte(`{"id":`))
	if !found {
		return 0, 0, false
	}
	n := 0
	for n < len(rest) && n < 20 && ('0' <= rest[n] && rest[n] <= '9' || n == 0 && rest[n] == '-') {
		n++
	}
	if n == 0 || n >= len(rest) || (rest[n] != ',' && rest[n] != '}') {
		return 0, 0, false
	}
	id, err := strconv.ParseInt(string(rest[:n]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return id, len(msg) - len(rest) + n, true
}
