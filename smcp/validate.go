package smcp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Limits enforced by the Validate methods. Lengths are in bytes.
const (
	// MaxNameLen bounds agent, computer, name and office_id.
	MaxNameLen = 256
	// MaxReqIDLen bounds req_id.
	MaxReqIDLen = 256
	// MaxToolNameLen bounds tool_name, mcp_server and the skill name.
	MaxToolNameLen = 512
	// MaxOpaqueLen bounds window, cursor, rel_path and blob_handle.
	MaxOpaqueLen = 4096
	// MinTimeout and MaxTimeout bound ToolCallReq.Timeout, in seconds.
	MinTimeout = 1
	MaxTimeout = 3600
)

// Validator is implemented by every payload that has edge validation.
type Validator interface {
	// Validate returns nil or a 400 [*Error] naming the offending field.
	Validate() error
}

// invalid returns the 400 error for field. problem must not contain input.
func invalid(field, problem string) *Error {
	return &Error{Code: CodeBadRequest, Message: `invalid payload: field "` + field + `" ` + problem}
}

// checkText checks a string field: non-empty when required, at most max
// bytes, valid UTF-8 and free of control characters (Unicode category Cc).
func checkText(field, v string, max int, required bool) *Error {
	switch {
	case v == "":
		if required {
			return invalid(field, "must not be empty")
		}
		return nil
	case len(v) > max:
		return invalid(field, "must be at most "+strconv.Itoa(max)+" bytes")
	case !utf8.ValidString(v):
		return invalid(field, "must be valid UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return invalid(field, "must not contain control characters")
		}
	}
	return nil
}

func checkOptText(field string, v *string, max int) *Error {
	if v == nil {
		return nil
	}
	return checkText(field, *v, max, false)
}

// first returns the first non-nil error as an error, or a nil error.
func first(errs ...*Error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func checkCall(agent, reqID, computer string) []*Error {
	return []*Error{
		checkText("agent", agent, MaxNameLen, true),
		checkText("req_id", reqID, MaxReqIDLen, true),
		checkText("computer", computer, MaxNameLen, true),
	}
}

// Validate checks that agent and req_id are present, short enough, valid
// UTF-8 and free of control characters.
func (d AgentCallData) Validate() error {
	return first(
		checkText("agent", d.Agent, MaxNameLen, true),
		checkText("req_id", d.ReqID, MaxReqIDLen, true),
	)
}

// Validate checks agent, req_id and computer like [AgentCallData.Validate],
// tool_name (at most [MaxToolNameLen] bytes), that timeout lies in
// [MinTimeout]..[MaxTimeout], and that params, when present and not null,
// is a JSON object.
func (r ToolCallReq) Validate() error {
	errs := append(checkCall(r.Agent, r.ReqID, r.Computer),
		checkText("tool_name", r.ToolName, MaxToolNameLen, true))
	if r.Timeout < MinTimeout || r.Timeout > MaxTimeout {
		errs = append(errs, invalid("timeout", "must be between "+
			strconv.Itoa(MinTimeout)+" and "+strconv.Itoa(MaxTimeout)))
	}
	if len(r.Params) > 0 {
		p := bytes.TrimSpace(r.Params)
		if string(p) != "null" && (len(p) == 0 || p[0] != '{' || !json.Valid(p)) {
			errs = append(errs, invalid("params", "must be a JSON object"))
		}
	}
	return first(errs...)
}

// Validate checks agent, req_id and computer.
func (r GetToolsReq) Validate() error { return first(checkCall(r.Agent, r.ReqID, r.Computer)...) }

// Validate checks agent, req_id and computer.
func (r GetComputerConfigReq) Validate() error {
	return first(checkCall(r.Agent, r.ReqID, r.Computer)...)
}

// Validate checks agent, req_id and computer, and window when present (at
// most [MaxOpaqueLen] bytes, no control characters; it may be empty).
// Any desktop_size is accepted: the protocol defines a size <= 0 to yield
// an empty list.
func (r GetDesktopReq) Validate() error {
	return first(append(checkCall(r.Agent, r.ReqID, r.Computer),
		checkOptText("window", r.Window, MaxOpaqueLen))...)
}

// Validate checks agent, req_id and computer, that mcp_server is present (at
// most [MaxToolNameLen] bytes), and cursor when present. mcp_server is not
// required to be a valid bundle_id: an unknown one is the Computer's 4014.
func (r GetResourcesReq) Validate() error {
	return first(append(checkCall(r.Agent, r.ReqID, r.Computer),
		checkText("mcp_server", r.MCPServer, MaxToolNameLen, true),
		checkOptText("cursor", r.Cursor, MaxOpaqueLen))...)
}

// Validate checks agent, req_id and computer.
func (r GetSkillsReq) Validate() error { return first(checkCall(r.Agent, r.ReqID, r.Computer)...) }

// Validate checks agent, req_id and computer only. name and rel_path are
// the Computer's to judge, whatever they hold (empty, too long, control
// characters): a name that fails the skill-name lexer is its 4016 and a
// rel_path the sandbox refuses its 4017, never a 400 from a server on the
// way.
func (r GetSkillReq) Validate() error {
	return first(checkCall(r.Agent, r.ReqID, r.Computer)...)
}

// Validate checks agent, req_id and computer, and that blob_handle is
// present (at most [MaxOpaqueLen] bytes). chunk_offset and max_chunk_bytes
// are not range-checked: a negative or too large offset is the Computer's
// 4018 "range", and max_chunk_bytes is a hint the Computer clamps.
func (r GetBlobReq) Validate() error {
	return first(append(checkCall(r.Agent, r.ReqID, r.Computer),
		checkText("blob_handle", r.BlobHandle, MaxOpaqueLen, true))...)
}

// Validate checks that role is "agent" or "computer" and that name and
// office_id are present, at most [MaxNameLen] bytes, valid UTF-8 and free of
// control characters.
func (r EnterOfficeReq) Validate() error {
	var role *Error
	if !r.Role.Valid() {
		role = invalid("role", `must be "agent" or "computer"`)
	}
	return first(
		role,
		checkText("name", r.Name, MaxNameLen, true),
		checkText("office_id", r.OfficeID, MaxNameLen, true),
	)
}

// Validate checks office_id like [EnterOfficeReq.Validate].
func (r LeaveOfficeReq) Validate() error {
	return first(checkText("office_id", r.OfficeID, MaxNameLen, true))
}

// Validate checks agent, req_id and office_id.
func (r ListRoomReq) Validate() error {
	return first(
		checkText("agent", r.Agent, MaxNameLen, true),
		checkText("req_id", r.ReqID, MaxReqIDLen, true),
		checkText("office_id", r.OfficeID, MaxNameLen, true),
	)
}

// Validate checks that computer is present, at most [MaxNameLen] bytes,
// valid UTF-8 and free of control characters.
func (r ComputerRef) Validate() error {
	return first(checkText("computer", r.Computer, MaxNameLen, true))
}

// Validate checks office_id and that exactly one of computer and agent is
// set, each like [ComputerRef.Validate].
func (n OfficeNotification) Validate() error {
	var who *Error
	if (n.Computer == "") == (n.Agent == "") {
		who = NewError(CodeBadRequest, `invalid payload: exactly one of fields "computer" and "agent" must be set`)
	}
	return first(
		checkText("office_id", n.OfficeID, MaxNameLen, true),
		who,
		checkText("computer", n.Computer, MaxNameLen, false),
		checkText("agent", n.Agent, MaxNameLen, false),
	)
}

// truncate returns at most max bytes of s, cut at a UTF-8 boundary when s
// is valid there.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	return s[:i]
}

// quoteShort quotes at most max bytes of s as a printable-ASCII Go string
// literal, followed by "..." when s was cut.
func quoteShort(s string, max int) string {
	t := truncate(s, max)
	q := strconv.QuoteToASCII(t)
	if len(t) < len(s) {
		q += "..."
	}
	return q
}

// escapeShort is quoteShort without the quotes, with "..." inside.
func escapeShort(s string, max int) string {
	t := truncate(s, max)
	q := strconv.QuoteToASCII(t)
	q = q[1 : len(q)-1]
	if len(t) < len(s) {
		q += "..."
	}
	return q
}
