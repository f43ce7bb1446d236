package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON-RPC 2.0 error codes /mcp answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	// codeServerError is the implementation-defined server error: a
	// batch element left unrun because the batch's answer is full, a
	// session refused because too many are open.
	codeServerError = -32000
	// codeSessionNotFound answers a request naming a streamable-HTTP
	// session that does not exist (or expired), with HTTP 404.
	codeSessionNotFound = -32001
)

// served are the requests /mcp answers, on every path: the lifecycle's
// and the tools capability's, the only capability initialize declares.
// Any other request (prompts, resources, logging, completions, or a
// method no revision names) is -32601 on the plain path and on a
// session alike: a server answers only what it declares, and the Go
// SDK's sessions would otherwise answer prompts/list, resources/list
// and logging/setLevel with empty results while the plain path refused
// them.
var served = map[string]bool{"initialize": true, "ping": true, "tools/list": true, "tools/call": true}

// methodNotFound is the answer to a request for a method /mcp does not
// serve, worded as the Go SDK words it on a session (its JSON-RPC layer
// rewrites any -32601 a handler returns to this text), so that the two
// paths answer the same bytes.
func methodNotFound(method string) *rpcError {
	return &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method not found: %q", method)}
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// response is one JSON-RPC response. ID is the request's id as it was
// sent (null when it could not be read); exactly one of Result and Error
// is set.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// message is one decoded element of a POST body: a request (ID set), a
// notification (no id member), or something /mcp only acknowledges (a
// client's response to a server request, which the stateless path never
// sends). A message that is not a valid request carries the error to
// answer in Invalid.
type message struct {
	ID      json.RawMessage // nil: a notification
	Method  string
	Params  json.RawMessage // nil when absent
	Invalid *rpcError
	// Response marks an object with result or error and no method.
	Response bool
	// fields is Params read into its members, by paramFields, once.
	fields map[string]json.RawMessage
}

// paramFields is the message's params as its members, keys exact (a
// struct would match "NAME" for "name"); empty when params is not an
// object. It reads them once for every reader of the message.
func (m *message) paramFields() map[string]json.RawMessage {
	if m.fields == nil {
		_ = json.Unmarshal(m.Params, &m.fields)
		if m.fields == nil {
			m.fields = map[string]json.RawMessage{}
		}
	}
	return m.fields
}

// isCall reports whether the message expects an answer.
func (m *message) isCall() bool { return m.ID != nil }

// parseBody decodes a POST body into its messages. A body that is not
// JSON is a parse error (-32700), answered with id null; a batch (a JSON
// array) yields one message per element; an empty one, or one of more
// than [MaxBatch] elements, is an invalid request (-32600, id null).
// Each element is validated on its own, so one bad element of a batch
// does not spoil the others.
func parseBody(body []byte) (msgs []message, batch bool, perr *rpcError) {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil, false, &rpcError{Code: codeParseError, Message: "Parse error: the body is not valid JSON"}
	}
	if len(body) > 0 && body[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(body, &elems); err != nil {
			return nil, false, &rpcError{Code: codeParseError, Message: "Parse error: the body is not valid JSON"}
		}
		if len(elems) == 0 {
			return nil, false, &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: empty batch"}
		}
		if len(elems) > MaxBatch {
			return nil, false, &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("Invalid Request: batch too large (%d elements; at most %d)", len(elems), MaxBatch)}
		}
		msgs = make([]message, len(elems))
		for i, e := range elems {
			msgs[i] = parseMessage(e)
		}
		return msgs, true, nil
	}
	return []message{parseMessage(body)}, false, nil
}

// parseMessage validates one JSON-RPC object: jsonrpc "2.0", a string
// method, an id that is a string or a number (MCP forbids null), params
// an object or an array when present.
func parseMessage(raw json.RawMessage) message {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return message{ID: nullID, Invalid: &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: not a JSON-RPC object"}}
	}
	var m message
	id, hasID := obj["id"]
	if hasID {
		m.ID = compact(id)
		if !validID(m.ID) {
			m.ID = nullID
			m.Invalid = &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: id must be a string or a number"}
			return m
		}
	}
	if v, ok := obj["jsonrpc"]; !ok || string(compact(v)) != `"2.0"` {
		if !hasID {
			m.ID = nullID
		}
		m.Invalid = &rpcError{Code: codeInvalidRequest, Message: `Invalid Request: jsonrpc must be "2.0"`}
		return m
	}
	method, hasMethod := obj["method"]
	if !hasMethod {
		_, hasResult := obj["result"]
		_, hasError := obj["error"]
		if hasID && (hasResult || hasError) {
			m.Response = true
			return m
		}
		if !hasID {
			m.ID = nullID
		}
		m.Invalid = &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: method is missing"}
		return m
	}
	if err := json.Unmarshal(method, &m.Method); err != nil {
		if !hasID {
			m.ID = nullID
		}
		m.Invalid = &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: method must be a string"}
		return m
	}
	if p, ok := obj["params"]; ok {
		p = compact(p)
		if len(p) == 0 || (p[0] != '{' && p[0] != '[') {
			if !hasID {
				m.ID = nullID
			}
			m.Invalid = &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: params must be an object or an array"}
			return m
		}
		m.Params = p
	}
	return m
}

// validID reports whether a compacted id is a JSON string or number.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"':
		return true
	case c == '-' || (c >= '0' && c <= '9'):
		return true
	}
	return false
}

// compact strips insignificant white space, so that ids compare byte for
// byte whatever the client's formatting.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// idKey is the key of an in-flight request in the cancellation table.
func idKey(id json.RawMessage) string { return string(compact(id)) }

// marshal encodes v; the values marshalled here (results of our own
// types, raw upstream answers already checked to be JSON) cannot fail.
func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
