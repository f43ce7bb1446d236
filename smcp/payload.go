package smcp

import "encoding/json"

// AgentCallData is the common head of every Agent request. On its own it is
// the payload of [EventCancelToolCall] and [NotifyCancelToolCall], where
// ReqID names the tool call to cancel.
type AgentCallData struct {
	// Agent is the sending Agent's name.
	Agent string `json:"agent"`
	// ReqID is chosen by the Agent, globally unique and never reused. It is
	// echoed by every response that carries a req_id.
	ReqID string `json:"req_id"`
}

// ClientRequest is implemented by the request payload of each client:*
// event. The Server uses it to validate a request and to find the
// Computer it must be routed to, without knowing the event's specifics.
type ClientRequest interface {
	// Validate reports a 400 [*Error] if the payload is not acceptable.
	Validate() error
	// CallData returns the request's agent and req_id.
	CallData() AgentCallData
	// Target returns the name of the Computer the request is addressed to.
	Target() string
}

// NewClientRequest returns a pointer to a zero request payload for the
// client:* event name (for example *[ToolCallReq] for [EventToolCall]), ready
// to be filled by [Decode]. It returns nil for any other name.
func NewClientRequest(event string) ClientRequest {
	switch event {
	case EventToolCall:
		return new(ToolCallReq)
	case EventGetTools:
		return new(GetToolsReq)
	case EventGetConfig:
		return new(GetComputerConfigReq)
	case EventGetDesktop:
		return new(GetDesktopReq)
	case EventGetResources:
		return new(GetResourcesReq)
	case EventGetSkills:
		return new(GetSkillsReq)
	case EventGetSkill:
		return new(GetSkillReq)
	case EventGetBlob:
		return new(GetBlobReq)
	case EventPutBlob:
		return new(PutBlobReq)
	}
	return nil
}

// ToolCallReq is the payload of [EventToolCall]. The Computer answers with a
// [CallToolResult], whatever the outcome.
type ToolCallReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
	// ToolName is the exposed name ([ExposedName]), never an LLM short name.
	ToolName string `json:"tool_name"`
	// Params is the JSON object of tool arguments, kept verbatim. Absent or
	// null means no arguments.
	Params json.RawMessage `json:"params,omitempty"`
	// Timeout is the call's budget in whole seconds, 1..[MaxTimeout].
	Timeout int `json:"timeout"`
	// Confirmed says that the Agent's side has had the call confirmed by
	// a person (an extension of this implementation; absent: false). A
	// Computer that delegates confirmation to the Agent (approval policy
	// "agent") runs a tool without auto_apply only when it is set; no
	// other policy reads it. The MCP gateway sets it only after its MCP
	// client's user accepted the call.
	Confirmed bool `json:"confirmed,omitempty"`
}

// GetToolsReq is the payload of [EventGetTools].
type GetToolsReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
}

// GetToolsRet is the successful answer to [EventGetTools]. A nil Tools
// encodes as an empty array.
type GetToolsRet struct {
	Tools []SMCPTool `json:"tools"`
	ReqID string     `json:"req_id"`
}

// MarshalJSON encodes r, writing a nil Tools as [].
func (r GetToolsRet) MarshalJSON() ([]byte, error) {
	type wire GetToolsRet
	if r.Tools == nil {
		r.Tools = []SMCPTool{}
	}
	return json.Marshal(wire(r))
}

// SMCPTool describes one tool a Computer exposes. Agents learn a tool's owner
// from BundleID and must never split Name on "__".
type SMCPTool struct {
	// Name is the exposed name, always bundle_id + "__" + (alias or original).
	Name string `json:"name"`
	// BundleID is the owning server's resolved, non-empty bundle_id; it is a
	// key of [GetComputerConfigRet].Servers.
	BundleID    string `json:"bundle_id"`
	Description string `json:"description"`
	// ParamsSchema is the tool's input JSON Schema object.
	ParamsSchema json.RawMessage `json:"params_schema"`
	// ReturnSchema is the output JSON Schema object, or null. A nil value
	// encodes as null, since the key is required.
	ReturnSchema json.RawMessage `json:"return_schema"`
	// Meta holds scalar values only; see [MetaKeyToolMeta] for the encoded
	// [ToolMeta]. Nil is omitted, an empty map encodes as {}.
	Meta map[string]any `json:"meta,omitzero"`
}

// GetComputerConfigReq is the payload of [EventGetConfig].
type GetComputerConfigReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
}

// GetComputerConfigRet is the successful answer to [EventGetConfig]. It has
// no req_id. The values are kept as raw JSON so that a relay or a newer
// Computer's fields pass through unchanged; [GetComputerConfigRet.DecodeServers]
// and [GetComputerConfigRet.DecodeInputs] give typed views.
type GetComputerConfigRet struct {
	// Inputs are the MCPServerInput objects; nil is omitted.
	Inputs []json.RawMessage `json:"inputs,omitzero"`
	// Servers maps bundle_id to an MCPServerConfig object, never holding
	// secret values. A nil map encodes as {}.
	Servers map[string]json.RawMessage `json:"servers"`
}

// MarshalJSON encodes r, writing a nil Servers as {}.
func (r GetComputerConfigRet) MarshalJSON() ([]byte, error) {
	type wire GetComputerConfigRet
	if r.Servers == nil {
		r.Servers = map[string]json.RawMessage{}
	}
	return json.Marshal(wire(r))
}

// GetDesktopReq is the payload of [EventGetDesktop].
type GetDesktopReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
	// DesktopSize caps the number of entries returned; nil means no cap and
	// a value <= 0 yields an empty list.
	DesktopSize *int `json:"desktop_size,omitempty"`
	// Window, when set, selects the windows whose URI equals it exactly.
	Window *string `json:"window,omitempty"`
}

// GetDesktopRet is the successful answer to [EventGetDesktop]. Each entry is
// a window URI, optionally followed by "\n\n" and its text. A nil Desktops
// encodes as an empty array (an unmatched window is not an error).
type GetDesktopRet struct {
	Desktops []string `json:"desktops"`
	ReqID    string   `json:"req_id"`
}

// MarshalJSON encodes r, writing a nil Desktops as [].
func (r GetDesktopRet) MarshalJSON() ([]byte, error) {
	type wire GetDesktopRet
	if r.Desktops == nil {
		r.Desktops = []string{}
	}
	return json.Marshal(wire(r))
}

// GetResourcesReq is the payload of [EventGetResources]: one page of one MCP
// server's resources/list.
type GetResourcesReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
	// MCPServer is the server's bundle_id.
	MCPServer string `json:"mcp_server"`
	// Cursor is the opaque MCP pagination cursor from a previous page.
	Cursor *string `json:"cursor,omitempty"`
}

// GetResourcesRet is the successful answer to [EventGetResources]. The
// resources are MCP Resource objects, forwarded unchanged. A nil NextCursor
// marks the last page; a nil Resources encodes as an empty array.
type GetResourcesRet struct {
	Resources  []json.RawMessage `json:"resources"`
	NextCursor *string           `json:"next_cursor,omitempty"`
	ReqID      string            `json:"req_id"`
}

// MarshalJSON encodes r, writing a nil Resources as [].
func (r GetResourcesRet) MarshalJSON() ([]byte, error) {
	type wire GetResourcesRet
	if r.Resources == nil {
		r.Resources = []json.RawMessage{}
	}
	return json.Marshal(wire(r))
}

// GetSkillsReq is the payload of [EventGetSkills].
type GetSkillsReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
}

// GetSkillsRet is the successful answer to [EventGetSkills], in the
// Computer's discovery order. A nil Skills encodes as an empty array.
type GetSkillsRet struct {
	Skills []A2CSkillRef `json:"skills"`
	ReqID  string        `json:"req_id"`
}

// MarshalJSON encodes r, writing a nil Skills as [].
func (r GetSkillsRet) MarshalJSON() ([]byte, error) {
	type wire GetSkillsRet
	if r.Skills == nil {
		r.Skills = []A2CSkillRef{}
	}
	return json.Marshal(wire(r))
}

// A2CSkillRef describes one installed skill. The first four fields are always
// present; consumers must not assume any of the others.
type A2CSkillRef struct {
	// Name is opaque and comparable; use Source, not Name, to learn the origin.
	Name string `json:"name"`
	// Source is "user", "marketplace:<repo>" or "mcp:<bundle_id>".
	Source string `json:"source"`
	// Path is the skill package's absolute local directory.
	Path        string `json:"path"`
	Description string `json:"description"`
	// URI is the skill:// URI, for MCP-sourced skills only.
	URI           string         `json:"uri,omitempty"`
	License       string         `json:"license,omitempty"`
	Compatibility string         `json:"compatibility,omitempty"`
	AllowedTools  []string       `json:"allowed_tools,omitzero"`
	SkillMetadata map[string]any `json:"skill_metadata,omitzero"`
	Version       string         `json:"version,omitempty"`
	// Tags are the frontmatter's tags, passed through (0.4.0, see
	// [Profile.SkillTags]); absent when the frontmatter has none or they
	// are not a list of strings.
	Tags []string `json:"tags,omitzero"`
}

// DefaultSkillRelPath is the file [GetSkillReq] reads when RelPath is nil.
const DefaultSkillRelPath = "SKILL.md"

// GetSkillReq is the payload of [EventGetSkill].
type GetSkillReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
	// Name is the skill name as listed by [GetSkillsRet].
	Name string `json:"name"`
	// RelPath is a POSIX path relative to the skill package; nil means
	// [DefaultSkillRelPath].
	RelPath *string `json:"rel_path,omitempty"`
}

// Path returns RelPath, or [DefaultSkillRelPath] when it is nil.
func (r GetSkillReq) Path() string {
	if r.RelPath == nil {
		return DefaultSkillRelPath
	}
	return *r.RelPath
}

// GetSkillRet is the successful answer to [EventGetSkill]. Exactly one of
// Body and BlobHandle is set; an empty resource has TotalSize 0 and Body "".
type GetSkillRet struct {
	Name    string `json:"name"`
	RelPath string `json:"rel_path"`
	// MimeType is inferred from the file extension, deterministically.
	MimeType string `json:"mime_type"`
	// TotalSize and SHA256 (lower-case hex) cover the served bytes: SKILL.md
	// without its frontmatter, any other file as is.
	TotalSize int64  `json:"total_size"`
	SHA256    string `json:"sha256"`
	// Body is the resource as text, when it is small and textual.
	Body *string `json:"body,omitempty"`
	// BlobHandle is an opaque handle for [EventGetBlob], otherwise.
	BlobHandle *string `json:"blob_handle,omitempty"`
	ReqID      string  `json:"req_id"`
}

// GetBlobReq is the payload of [EventGetBlob]: one chunk of a resource named
// by an opaque handle.
type GetBlobReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
	// BlobHandle is exactly as received from its producer; never built.
	BlobHandle string `json:"blob_handle"`
	// ChunkOffset is the absolute byte offset of the chunk; nil means 0.
	ChunkOffset *int64 `json:"chunk_offset,omitempty"`
	// MaxChunkBytes is a hint; the Computer clamps it.
	MaxChunkBytes *int64 `json:"max_chunk_bytes,omitempty"`
}

// GetBlobRet is the successful answer to [EventGetBlob]. EOF holds exactly
// when ChunkOffset plus the chunk length equals TotalSize; TotalSize and
// SHA256 describe the whole resource and do not change between chunks.
type GetBlobRet struct {
	BlobHandle  string `json:"blob_handle"`
	MimeType    string `json:"mime_type"`
	TotalSize   int64  `json:"total_size"`
	SHA256      string `json:"sha256"`
	ChunkOffset int64  `json:"chunk_offset"`
	EOF         bool   `json:"eof"`
	// Blob is the chunk, base64-encoded (standard alphabet, padded).
	Blob  string `json:"blob"`
	ReqID string `json:"req_id"`
}

// EnterOfficeReq is the payload of [EventJoinOffice]. It is where a session
// declares its role.
type EnterOfficeReq struct {
	Role Role `json:"role"`
	// Name is the session's routing name (a Computer's address).
	Name string `json:"name"`
	// OfficeID names the office; joining creates it.
	OfficeID string `json:"office_id"`
}

// LeaveOfficeReq is the payload of [EventLeaveOffice].
type LeaveOfficeReq struct {
	OfficeID string `json:"office_id"`
}

// OfficeNotification is the payload of [NotifyEnterOffice] and
// [NotifyLeaveOffice]. Exactly one of Computer and Agent names the member
// that entered or left.
type OfficeNotification struct {
	OfficeID string `json:"office_id"`
	Computer string `json:"computer,omitempty"`
	Agent    string `json:"agent,omitempty"`
}

// EnterOfficeNotification is the payload of [NotifyEnterOffice].
type EnterOfficeNotification = OfficeNotification

// LeaveOfficeNotification is the payload of [NotifyLeaveOffice].
type LeaveOfficeNotification = OfficeNotification

// ComputerRef names a Computer. It is the payload of the server:update_* and
// notify:update_* events.
type ComputerRef struct {
	Computer string `json:"computer"`
}

// UpdateComputerConfigReq is the payload of [EventUpdateConfig],
// [EventUpdateDesktop] and [EventUpdateSkills] (and of their notifications).
type UpdateComputerConfigReq = ComputerRef

// UpdateToolListNotification is the payload of [EventUpdateToolList] and
// [NotifyUpdateToolList].
type UpdateToolListNotification = ComputerRef

// UpdateMCPConfigNotification is the payload of [NotifyUpdateConfig].
type UpdateMCPConfigNotification = ComputerRef

// ListRoomReq is the payload of [EventListRoom].
type ListRoomReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	OfficeID string `json:"office_id"`
}

// SessionInfo describes one session of an office. Every field is optional
// on the wire; A2CVersion is informational and never re-checked.
type SessionInfo struct {
	SID        string `json:"sid,omitempty"`
	Name       string `json:"name,omitempty"`
	Role       Role   `json:"role,omitempty"`
	OfficeID   string `json:"office_id,omitempty"`
	A2CVersion string `json:"a2c_version,omitempty"`
}

// ListRoomRet is the successful answer to [EventListRoom]. A nil Sessions
// encodes as an empty array.
type ListRoomRet struct {
	Sessions []SessionInfo `json:"sessions"`
	ReqID    string        `json:"req_id"`
}

// MarshalJSON encodes r, writing a nil Sessions as [].
func (r ListRoomRet) MarshalJSON() ([]byte, error) {
	type wire ListRoomRet
	if r.Sessions == nil {
		r.Sessions = []SessionInfo{}
	}
	return json.Marshal(wire(r))
}

// CallData returns the request's agent and req_id.
func (r ToolCallReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetToolsReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetComputerConfigReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetDesktopReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetResourcesReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetSkillsReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetSkillReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// CallData returns the request's agent and req_id.
func (r GetBlobReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// Target returns the Computer the request is addressed to.
func (r ToolCallReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetToolsReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetComputerConfigReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetDesktopReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetResourcesReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetSkillsReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetSkillReq) Target() string { return r.Computer }

// Target returns the Computer the request is addressed to.
func (r GetBlobReq) Target() string { return r.Computer }
