package smcp

// Namespace is the Socket.IO namespace every SMCP session connects to. It is
// fixed by the protocol; the Engine.IO HTTP path is not.
const Namespace = "/smcp"

// ProtocolVersion is the A2C-SMCP protocol version processes speak by
// default; [SupportedVersions] lists the others they may be started with
// (see [Profile]). Clients send their version as the a2c_version query parameter ([QueryVersion]) and the
// Server compares it with its own using [CheckVersion].
const ProtocolVersion = "0.4.0"

// QueryVersion is the name of the connect URL query parameter that carries
// the client's protocol version.
const QueryVersion = "a2c_version"

// HeaderErrorCode is the HTTP response header the Server sets, redundantly
// with the JSON body, when it refuses a handshake with [CodeVersionMismatch].
const HeaderErrorCode = "X-A2C-Error-Code"

// Events sent by an Agent and routed by the Server to the one Computer named
// in the payload's computer field. The Computer implements them.
const (
	EventToolCall     = "client:tool_call"     // payload [ToolCallReq], ack [CallToolResult]
	EventGetTools     = "client:get_tools"     // payload [GetToolsReq], ack [GetToolsRet]
	EventGetConfig    = "client:get_config"    // payload [GetComputerConfigReq], ack [GetComputerConfigRet]
	EventGetDesktop   = "client:get_desktop"   // payload [GetDesktopReq], ack [GetDesktopRet]
	EventGetResources = "client:get_resources" // payload [GetResourcesReq], ack [GetResourcesRet]
	EventGetSkills    = "client:get_skills"    // payload [GetSkillsReq], ack [GetSkillsRet]
	EventGetSkill     = "client:get_skill"     // payload [GetSkillReq], ack [GetSkillRet]
	EventGetBlob      = "client:get_blob"      // payload [GetBlobReq], ack [GetBlobRet]
	// EventPutBlob uploads a file to the Computer, one chunk per event
	// (0.4.0; see [Profile.PutBlob]).
	EventPutBlob = "client:put_blob" // payload [PutBlobReq], ack [PutBlobRet]
)

// Events sent by an Agent or a Computer to the Server, which handles them
// itself.
const (
	EventJoinOffice     = "server:join_office"      // payload [EnterOfficeReq], ack (bool, string|null)
	EventLeaveOffice    = "server:leave_office"     // payload [LeaveOfficeReq], ack (bool, string|null)
	EventUpdateConfig   = "server:update_config"    // payload [UpdateComputerConfigReq], no ack
	EventUpdateToolList = "server:update_tool_list" // payload [UpdateToolListNotification], no ack
	EventUpdateDesktop  = "server:update_desktop"   // payload [UpdateComputerConfigReq], no ack
	EventUpdateSkills   = "server:update_skills"    // payload [UpdateComputerConfigReq], no ack
	EventCancelToolCall = "server:tool_call_cancel" // payload [AgentCallData], no ack, never an error
	EventListRoom       = "server:list_room"        // payload [ListRoomReq], ack [ListRoomRet]
)

// Notifications broadcast by the Server to the members of one office.
// Receivers may ignore them.
const (
	NotifyEnterOffice    = "notify:enter_office"     // payload [OfficeNotification]
	NotifyLeaveOffice    = "notify:leave_office"     // payload [OfficeNotification]
	NotifyUpdateConfig   = "notify:update_config"    // payload [UpdateMCPConfigNotification]
	NotifyUpdateToolList = "notify:update_tool_list" // payload [UpdateToolListNotification]
	NotifyUpdateDesktop  = "notify:update_desktop"   // payload [ComputerRef]
	NotifyUpdateSkills   = "notify:update_skills"    // payload [ComputerRef]
	NotifyCancelToolCall = "notify:tool_call_cancel" // payload [AgentCallData]
)

// ClientEvents returns the nine client:* event names of the latest
// version in the order the specification lists them; [Profile.ClientEvents]
// gives those of one version. The caller owns the returned slice.
func ClientEvents() []string {
	return []string{
		EventToolCall, EventGetTools, EventGetConfig, EventGetDesktop,
		EventGetResources, EventGetSkills, EventGetSkill, EventGetBlob, EventPutBlob,
	}
}

// ServerEvents returns the eight server:* event names in the order the
// specification lists them. The caller owns the returned slice.
func ServerEvents() []string {
	return []string{
		EventJoinOffice, EventLeaveOffice, EventUpdateConfig, EventUpdateToolList,
		EventUpdateDesktop, EventUpdateSkills, EventCancelToolCall, EventListRoom,
	}
}

// NotifyEvents returns the seven notify:* event names in the order the
// specification lists them. The caller owns the returned slice.
func NotifyEvents() []string {
	return []string{
		NotifyEnterOffice, NotifyLeaveOffice, NotifyUpdateConfig, NotifyUpdateToolList,
		NotifyUpdateDesktop, NotifyUpdateSkills, NotifyCancelToolCall,
	}
}

// IsClientEvent reports whether name is one of the nine client:* events of
// the latest version, that is, an event a Server may route to a Computer;
// [Profile.IsClientEvent] answers for one version. Matching is exact.
func IsClientEvent(name string) bool {
	switch name {
	case EventToolCall, EventGetTools, EventGetConfig, EventGetDesktop,
		EventGetResources, EventGetSkills, EventGetSkill, EventGetBlob, EventPutBlob:
		return true
	}
	return false
}

// IsServerEvent reports whether name is one of the eight server:* events.
// Matching is exact.
func IsServerEvent(name string) bool {
	switch name {
	case EventJoinOffice, EventLeaveOffice, EventUpdateConfig, EventUpdateToolList,
		EventUpdateDesktop, EventUpdateSkills, EventCancelToolCall, EventListRoom:
		return true
	}
	return false
}

// IsNotifyEvent reports whether name is one of the seven notify:* events.
// Matching is exact.
func IsNotifyEvent(name string) bool {
	switch name {
	case NotifyEnterOffice, NotifyLeaveOffice, NotifyUpdateConfig, NotifyUpdateToolList,
		NotifyUpdateDesktop, NotifyUpdateSkills, NotifyCancelToolCall:
		return true
	}
	return false
}

// Role is the part a session plays in an office. It is declared in
// [EnterOfficeReq], never in the connect auth object.
type Role string

// The two roles of the protocol.
const (
	// RoleAgent starts calls. An office holds at most one Agent.
	RoleAgent Role = "agent"
	// RoleComputer hosts MCP servers and answers client:* events. An office
	// holds any number of Computers; a Computer is in at most one office.
	RoleComputer Role = "computer"
)

// Valid reports whether r is [RoleAgent] or [RoleComputer].
func (r Role) Valid() bool { return r == RoleAgent || r == RoleComputer }
