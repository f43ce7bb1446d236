package smcp

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Result-level marker keys of [CallToolResult].Meta.
const (
	// MetaTimeout is true when the call ended because it ran out of time.
	MetaTimeout = "a2c_timeout"
	// MetaCancelled is true when the call ended because the Agent cancelled it.
	MetaCancelled = "a2c_cancelled"
	// MetaCancelReason says why a call was cancelled; see [CancelReasonAgentRequested].
	MetaCancelReason = "a2c_cancel_reason"
	// MetaErrorCode holds an error code for a tool-level failure, for
	// example [CodeToolAuthorizationRequired].
	MetaErrorCode = "error_code"
	// MetaMCPServer holds the bundle_id of the failing server whenever
	// [MetaErrorCode] is set.
	MetaMCPServer = "mcp_server"
	// MetaAuthHint holds an {action?, message?} object for 4006 and 4007.
	MetaAuthHint = "auth_hint"
)

// Item-level keys, found in the _meta object of one content item whose
// binary data was replaced by a blob handle.
const (
	MetaBlobHandle = "a2c_blob_handle"
	MetaTotalSize  = "a2c_total_size"
	MetaSHA256     = "a2c_sha256"
)

// CancelReasonAgentRequested is the value of [MetaCancelReason] for a call
// cancelled through [EventCancelToolCall].
const CancelReasonAgentRequested = "agent_requested"

// CancelledText is the text content of [CancelledResult].
const CancelledText = "Tool call cancelled"

// CallToolResult is the MCP tools/call result, the answer to [EventToolCall]
// in every outcome: success, failure, timeout and cancellation.
//
// A2C markers live in Meta, encoded under the key "meta". Decoding accepts
// "meta" and "_meta" and merges both into Meta ("meta" wins on a conflict),
// so readers need not care which spelling the producer used. Other
// top-level fields are not kept.
type CallToolResult struct {
	// Content holds MCP content items (text, image, audio, resource) as raw
	// JSON. A nil Content encodes as an empty array.
	Content []json.RawMessage
	// StructuredContent is the MCP structured result, if any.
	StructuredContent json.RawMessage
	// IsError marks a failed, timed-out or cancelled call.
	IsError bool
	// Meta holds result-level markers such as [MetaTimeout].
	Meta map[string]any
}

type callToolResultOut struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
	Meta              map[string]any    `json:"meta,omitzero"`
}

// MarshalJSON encodes r with its markers under "meta".
func (r CallToolResult) MarshalJSON() ([]byte, error) {
	out := callToolResultOut(r)
	if out.Content == nil {
		out.Content = []json.RawMessage{}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes an MCP CallToolResult, reading markers from "meta"
// and "_meta".
func (r *CallToolResult) UnmarshalJSON(b []byte) error {
	var in struct {
		callToolResultOut
		UnderMeta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = CallToolResult(in.callToolResultOut)
	if in.UnderMeta != nil {
		merged := in.UnderMeta
		for k, v := range r.Meta {
			merged[k] = v
		}
		r.Meta = merged
	}
	return nil
}

// Marker returns the result-level marker key and whether it is present.
func (r *CallToolResult) Marker(key string) (any, bool) {
	v, ok := r.Meta[key]
	return v, ok
}

// Timeout reports whether r is marked as timed out ([MetaTimeout] true, or
// the legacy key "timeout" true).
func (r *CallToolResult) Timeout() bool {
	return r.flag(MetaTimeout) || r.flag("timeout")
}

// Cancelled reports whether r is marked as cancelled ([MetaCancelled] true).
func (r *CallToolResult) Cancelled() bool { return r.flag(MetaCancelled) }

// ErrorCode returns the integer under [MetaErrorCode], or 0 when it is
// absent or not an integer.
func (r *CallToolResult) ErrorCode() int {
	v, _ := r.Marker(MetaErrorCode)
	switch n := v.(type) {
	case float64:
		if n == math.Trunc(n) && math.Abs(n) <= math.MaxInt32 {
			return int(n)
		}
	case int:
		return n
	case int64:
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return int(n)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 32); err == nil {
			return int(i)
		}
	}
	return 0
}

// Text returns the text of r's text content items, joined by newlines.
func (r *CallToolResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		var item struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &item) == nil && item.Type == "text" {
			parts = append(parts, item.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (r *CallToolResult) flag(key string) bool {
	v, _ := r.Marker(key)
	b, _ := v.(bool)
	return b
}

// TextContent returns an MCP text content item carrying text.
func TextContent(text string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", text})
	return b
}

// TimeoutResult returns the result of a call that ran out of time: isError,
// msg as its text, and [MetaTimeout] true.
func TimeoutResult(msg string) CallToolResult {
	return CallToolResult{
		Content: []json.RawMessage{TextContent(msg)},
		IsError: true,
		Meta:    map[string]any{MetaTimeout: true},
	}
}

// CancelledResult returns the result of a call the Agent cancelled: isError,
// the text [CancelledText], [MetaCancelled] true and [MetaCancelReason]
// [CancelReasonAgentRequested].
func CancelledResult() CallToolResult {
	return CallToolResult{
		Content: []json.RawMessage{TextContent(CancelledText)},
		IsError: true,
		Meta: map[string]any{
			MetaCancelled:    true,
			MetaCancelReason: CancelReasonAgentRequested,
		},
	}
}

// ToolErrorResult returns a failed result whose [MetaErrorCode] is code (for
// example [CodeToolNotFound]) and whose text is msg. For 4006 and 4007 the
// caller adds [MetaMCPServer] and, if it has one, [MetaAuthHint].
func ToolErrorResult(code int, msg string) CallToolResult {
	return CallToolResult{
		Content: []json.RawMessage{TextContent(msg)},
		IsError: true,
		Meta:    map[string]any{MetaErrorCode: code},
	}
}
