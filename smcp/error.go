package smcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Error codes of the flat ErrorPayload ([Error].Code).
const (
	CodeBadRequest   = 400 // schema or field validation failure; missing or invalid a2c_version
	CodeUnauthorized = 401 // authentication failure
	CodeForbidden    = 403 // operation not permitted
	CodeNotFound     = 404 // tool, Computer or configuration missing
	CodeTimeout      = 408 // the call exceeded its deadline
	CodeInternal     = 500 // a fault of the Server or the Computer

	CodeToolNotFound              = 4001 // exposed tool name not in the Computer's mapping
	CodeToolDisabled              = 4002 // tool disabled
	CodeToolExecutionFailed       = 4003 // generic tool failure, including upstream 5xx and network errors
	CodeToolTimeout               = 4004 // tool timed out (never used for cancellation)
	CodeToolRequiresConfirmation  = 4005 // tool needs user confirmation
	CodeToolAuthorizationRequired = 4006 // upstream never authorised, or answered 401
	CodeToolAuthorizationFailed   = 4007 // upstream answered 403, refresh failed, revoked, scope too small
	CodeVersionMismatch           = 4008 // handshake only: incompatible a2c_version; see [VersionMismatch]
	CodeMCPServerNotFound         = 4014 // unknown bundle_id, or a valid but absent skill name; see [MCPServerNotFound]
	CodeCapabilityNotSupported    = 4015 // the MCP server lacks a capability; see [CapabilityNotSupported]
	CodeInvalidSkillName          = 4016 // skill name fails the lexer; see [InvalidSkillName]
	CodeSkillNotAccessible        = 4017 // skill resource refused; see [SkillNotAccessible]
	CodeBlobNotAccessible         = 4018 // blob handle refused; see [BlobNotAccessible]
	CodeBlobWriteFailed           = 4019 // client:put_blob chunk refused (0.4.0); see [BlobWriteFailed]
	CodeRoomFull                  = 4101 // the office already has an Agent
	CodeRoomNotFound              = 4102 // the office does not exist
	CodeNotInRoom                 = 4103 // the sender has not joined an office
	CodeCrossRoom                 = 4104 // the target is in another office
)

// CloseVersionMismatch is the WebSocket close code a Server may use to refuse
// a direct WebSocket connection with an incompatible version when it cannot
// answer with HTTP 400. It is NOT an ErrorPayload code and never appears in
// [Error].Code; clients must not treat it as [CodeVersionMismatch].
const CloseVersionMismatch = 4900

// Values of details.reason for [CodeSkillNotAccessible] and
// [CodeBlobNotAccessible]. Both are open sets: readers must tolerate others.
const (
	ReasonTraversal     = "traversal"      // 4017: rel_path escapes the package
	ReasonForbidden     = "forbidden"      // 4017, 4018: credential file, or authorisation re-check failed
	ReasonNotFound      = "not_found"      // 4017: no such file in the package
	ReasonTooLarge      = "too_large"      // 4017: over the size cap; details.total_size is set
	ReasonInvalidHandle = "invalid_handle" // 4018: malformed or unknown handle
	ReasonGone          = "gone"           // 4018: the source disappeared
	ReasonRange         = "range"          // 4018: chunk_offset < 0 or > total_size; 4019: out of order, or wrong final size

	// Values of details.reason for [CodeBlobWriteFailed] only (besides
	// ReasonForbidden, ReasonRange and ReasonTooLarge).
	ReasonInvalidUpload      = "invalid_upload"      // unknown, malformed, foreign or expired upload_id
	ReasonInvalidDeclaration = "invalid_declaration" // first-chunk fields missing or bad, or repeated later
	ReasonBusy               = "busy"                // too many uploads at once
	ReasonIntegrity          = "integrity"           // sha256 mismatch at the end
	ReasonIOError            = "io_error"            // disk, permission or filesystem failure
)

var codeNames = map[int]string{
	CodeBadRequest:                "Bad Request",
	CodeUnauthorized:              "Unauthorized",
	CodeForbidden:                 "Forbidden",
	CodeNotFound:                  "Not Found",
	CodeTimeout:                   "Timeout",
	CodeInternal:                  "Internal Error",
	CodeToolNotFound:              "Tool Not Found",
	CodeToolDisabled:              "Tool Disabled",
	CodeToolExecutionFailed:       "Tool Execution Failed",
	CodeToolTimeout:               "Tool Timeout",
	CodeToolRequiresConfirmation:  "Tool Requires Confirmation",
	CodeToolAuthorizationRequired: "Tool Authorization Required",
	CodeToolAuthorizationFailed:   "Tool Authorization Failed",
	CodeVersionMismatch:           "Protocol Version Mismatch",
	CodeMCPServerNotFound:         "MCP Server Not Found",
	CodeCapabilityNotSupported:    "MCP Capability Not Supported",
	CodeInvalidSkillName:          "Invalid Skill Name",
	CodeSkillNotAccessible:        "Skill Resource Not Accessible",
	CodeBlobNotAccessible:         "Blob Not Accessible",
	CodeBlobWriteFailed:           "Blob Write Failed",
	CodeRoomFull:                  "Room Full",
	CodeRoomNotFound:              "Room Not Found",
	CodeNotInRoom:                 "Not In Room",
	CodeCrossRoom:                 "Cross Room Access",
}

// CodeName returns the specification's name of an ErrorPayload code, such
// as "Not In Room" for [CodeNotInRoom], or "" for a code it does not define
// (including [CloseVersionMismatch]).
func CodeName(code int) string { return codeNames[code] }

// Error is the flat ErrorPayload: the protocol's error object, sent as the
// first ack argument of a client:* event or as the HTTP 400 body of a
// refused handshake. There is no {"error": {...}} envelope.
//
// Besides Code, Message and Details, an ErrorPayload carries top-level fields
// that depend on its code. Error encodes only the ones relevant to Code:
//
//   - 4008: ServerVersion, ClientVersion, MinSupported, MaxSupported (always
//     all four);
//   - 4014: MCPServer and MCPServerName;
//   - 4015: MCPServer, MCPServerName and Capability.
//
// For 4014 and 4015 both server fields are written, each filled from the
// other when empty (0.3.0 names the field mcp_server, the older error
// chapter mcp_server_name); they are omitted only when both are empty.
// Decoding fills both from whichever is present.
//
// Top-level fields Error has no field for, or that are not relevant to Code,
// are kept in Extra and written back after the known fields, so that
// decoding and re-encoding loses nothing.
//
// *Error implements error; [Error.Is] matches by code, so
// errors.Is(err, &Error{Code: CodeNotInRoom}) tests for a 4103.
type Error struct {
	Code    int
	Message string
	// Details is diagnostic only: Agents must not show it to end users, and
	// it must never hold secrets.
	Details map[string]any

	// Fields of a 4008.
	ServerVersion string
	ClientVersion string
	MinSupported  string
	MaxSupported  string

	// Fields of a 4014 and a 4015: the server's bundle_id under its 0.3.0
	// name (mcp_server) and its earlier name (mcp_server_name).
	MCPServer     string
	MCPServerName string
	// Capability is the missing capability of a 4015, such as "resources".
	Capability string

	// Extra holds the other top-level fields, keyed by name.
	Extra map[string]json.RawMessage
}

// Error returns "smcp <code>: <message>", using [CodeName] when Message is
// empty.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = CodeName(e.Code)
	}
	return "smcp " + strconv.Itoa(e.Code) + ": " + msg
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && e != nil && t.Code == e.Code
}

// Reason returns details.reason when it is a string, or "".
func (e *Error) Reason() string {
	s, _ := e.Details["reason"].(string)
	return s
}

// MarshalJSON encodes e as a flat ErrorPayload: code, message, the fields
// relevant to the code, details (when non-nil), then Extra sorted by key.
// An Extra key that names an already written field is skipped.
func (e Error) MarshalJSON() ([]byte, error) {
	e.fillServerNames()
	var buf bytes.Buffer
	written := map[string]bool{}
	put := func(name, v string) {
		buf.WriteString(`,"` + name + `":`)
		writeJSONString(&buf, v)
		written[name] = true
	}
	putNonEmpty := func(name, v string) {
		if v != "" {
			put(name, v)
		}
	}
	buf.WriteString(`{"code":` + strconv.Itoa(e.Code))
	put("message", e.Message)
	written["code"] = true
	switch e.Code {
	case CodeVersionMismatch:
		put("server_version", e.ServerVersion)
		put("client_version", e.ClientVersion)
		put("min_supported", e.MinSupported)
		put("max_supported", e.MaxSupported)
	case CodeMCPServerNotFound, CodeCapabilityNotSupported:
		putNonEmpty("mcp_server", e.MCPServer)
		putNonEmpty("mcp_server_name", e.MCPServerName)
		if e.Code == CodeCapabilityNotSupported {
			putNonEmpty("capability", e.Capability)
		}
	}
	if e.Details != nil {
		b, err := json.Marshal(e.Details)
		if err != nil {
			return nil, fmt.Errorf("smcp: encoding error details: %w", err)
		}
		buf.WriteString(`,"details":`)
		buf.Write(b)
		written["details"] = true
	}
	keys := make([]string, 0, len(e.Extra))
	for k := range e.Extra {
		if !written[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		buf.WriteByte(',')
		writeJSONString(&buf, k)
		buf.WriteByte(':')
		if err := json.Compact(&buf, e.Extra[k]); err != nil {
			return nil, fmt.Errorf("smcp: encoding error field %s: %w", quoteShort(k, 64), err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON decodes a flat ErrorPayload. It fails unless b is a JSON
// object whose "code" is an integer; other fields of the wrong type are kept
// in Extra rather than rejected.
func (e *Error) UnmarshalJSON(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil || top == nil {
		return errors.New("smcp: ErrorPayload is not a JSON object")
	}
	code, ok := parseCode(top["code"])
	if !ok {
		return errors.New(`smcp: ErrorPayload has no integer "code"`)
	}
	delete(top, "code")
	*e = Error{Code: code}
	if raw, ok := top["message"]; ok && json.Unmarshal(raw, &e.Message) == nil {
		delete(top, "message")
	}
	if raw, ok := top["details"]; ok {
		var d map[string]any
		if json.Unmarshal(raw, &d) == nil && d != nil {
			e.Details = d
			delete(top, "details")
		}
	}
	// take moves a string-valued field from top into dst.
	take := func(name string, dst *string) {
		if raw, ok := top[name]; ok && !isNull(raw) && json.Unmarshal(raw, dst) == nil {
			delete(top, name)
		}
	}
	switch code {
	case CodeVersionMismatch:
		take("server_version", &e.ServerVersion)
		take("client_version", &e.ClientVersion)
		take("min_supported", &e.MinSupported)
		take("max_supported", &e.MaxSupported)
	case CodeMCPServerNotFound, CodeCapabilityNotSupported:
		take("mcp_server", &e.MCPServer)
		take("mcp_server_name", &e.MCPServerName)
		if code == CodeCapabilityNotSupported {
			take("capability", &e.Capability)
		}
		e.fillServerNames()
	}
	if len(top) > 0 {
		e.Extra = top
	}
	return nil
}

// fillServerNames copies MCPServer and MCPServerName into each other when
// one is empty, for the codes that carry them.
func (e *Error) fillServerNames() {
	if e.Code != CodeMCPServerNotFound && e.Code != CodeCapabilityNotSupported {
		return
	}
	if e.MCPServer == "" {
		e.MCPServer = e.MCPServerName
	}
	if e.MCPServerName == "" {
		e.MCPServerName = e.MCPServer
	}
}

// DecodeError reports whether raw is a flat ErrorPayload, that is, a JSON
// object whose top-level "code" is an integer literal within the int32
// range, and returns it decoded. It
// never panics. A {"error": {...}} envelope is not an ErrorPayload, nor is
// a CallToolResult or any other answer.
func DecodeError(raw []byte) (*Error, bool) {
	var e Error
	if err := e.UnmarshalJSON(raw); err != nil {
		return nil, false
	}
	return &e, true
}

// parseCode accepts a JSON integer literal that fits an int32.
func parseCode(raw json.RawMessage) (int, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // encoding a string cannot fail
	buf.Write(b)
}

// NewError returns an *Error with code and msg; an empty msg is replaced by
// [CodeName](code).
func NewError(code int, msg string) *Error {
	if msg == "" {
		msg = CodeName(code)
	}
	return &Error{Code: code, Message: msg}
}

// VersionMismatch returns the 4008 ErrorPayload for a client speaking client
// to a server speaking server. The supported range is derived from server:
// for 0.x it is MAJOR.MINOR.0 to MAJOR.MINOR.999; from 1.0 on it is
// MAJOR.0.0 to MAJOR.MINOR.999. If server does not parse, both bounds are
// server itself.
func VersionMismatch(server, client string) *Error {
	lo, hi := server, server
	if v, err := ParseVersion(server); err == nil {
		if v.Major == 0 {
			lo = Version{0, v.Minor, 0}.String()
		} else {
			lo = Version{v.Major, 0, 0}.String()
		}
		hi = Version{v.Major, v.Minor, 999}.String()
	}
	return &Error{
		Code:          CodeVersionMismatch,
		Message:       "Protocol version mismatch",
		ServerVersion: server,
		ClientVersion: client,
		MinSupported:  lo,
		MaxSupported:  hi,
	}
}

// MCPServerNotFound returns the 4014 ErrorPayload for an unknown bundle_id.
func MCPServerNotFound(bundleID string) *Error {
	return &Error{
		Code:          CodeMCPServerNotFound,
		Message:       "MCP Server not registered",
		MCPServer:     bundleID,
		MCPServerName: bundleID,
	}
}

// CapabilityNotSupported returns the 4015 ErrorPayload for a server,
// named by bundle_id, that does not declare capability (such as "resources").
func CapabilityNotSupported(bundleID, capability string) *Error {
	return &Error{
		Code:          CodeCapabilityNotSupported,
		Message:       "MCP Server does not support '" + capability + "' capability",
		MCPServer:     bundleID,
		MCPServerName: bundleID,
		Capability:    capability,
	}
}

// InvalidSkillName returns the 4016 ErrorPayload for a skill name that fails
// the lexer. details.name carries at most [MaxNameLen] bytes of name.
func InvalidSkillName(name string) *Error {
	return &Error{
		Code:    CodeInvalidSkillName,
		Message: "Invalid skill name format",
		Details: map[string]any{"name": truncate(name, MaxNameLen)},
	}
}

// SkillNotAccessible returns the 4017 ErrorPayload with details.reason set
// to reason (one of the Reason constants) and the entries of details (such
// as "rel_path" or "total_size") copied in. details is not modified.
func SkillNotAccessible(reason string, details map[string]any) *Error {
	d := make(map[string]any, len(details)+1)
	for k, v := range details {
		d[k] = v
	}
	d["reason"] = reason
	return &Error{Code: CodeSkillNotAccessible, Message: "Skill resource not accessible", Details: d}
}

// BlobNotAccessible returns the 4018 ErrorPayload with details.reason set to
// reason (one of the Reason constants).
func BlobNotAccessible(reason string) *Error {
	return &Error{
		Code:    CodeBlobNotAccessible,
		Message: "Blob not accessible",
		Details: map[string]any{"reason": reason},
	}
}

// BlobWriteFailed returns the 4019 ErrorPayload of a refused
// client:put_blob chunk, with details.reason set to reason (one of the
// Reason constants) and the entries of details (such as "upload_id",
// "chunk_offset" or "total_size") copied in. details is not modified.
func BlobWriteFailed(reason string, details map[string]any) *Error {
	d := make(map[string]any, len(details)+1)
	for k, v := range details {
		d[k] = v
	}
	d["reason"] = reason
	return &Error{Code: CodeBlobWriteFailed, Message: "Blob write failed", Details: d}
}

// internalPayload is what Encode sends when a value cannot be encoded.
var internalPayload = json.RawMessage(`{"code":500,"message":"internal error"}`)

// Encode returns v as JSON for the wire, or a flat 500 ErrorPayload if v
// cannot be encoded (which is a bug, never the peer's input), so that an
// answer is always sent.
func Encode(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return internalPayload
	}
	return b
}
