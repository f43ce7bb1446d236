package smcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	call := ToolCallReq{Agent: "bot", ReqID: "r1", Computer: "pc", ToolName: "fs__read", Params: json.RawMessage(`{"a":1}`), Timeout: 30}
	with := func(f func(*ToolCallReq)) ToolCallReq { c := call; f(&c); return c }

	tests := []struct {
		name  string
		v     Validator
		field string // "" = valid; otherwise a substring of the message
	}{
		// server:join_office
		{"enter ok agent", EnterOfficeReq{RoleAgent, "bot", "3f0c"}, ""},
		{"enter ok computer", EnterOfficeReq{RoleComputer, "电脑 1", "3f0c"}, ""},
		{"enter bad role", EnterOfficeReq{"server", "bot", "o"}, `"role"`},
		{"enter empty role", EnterOfficeReq{"", "bot", "o"}, `"role"`},
		{"enter role case", EnterOfficeReq{"Agent", "bot", "o"}, `"role"`},
		{"enter empty name", EnterOfficeReq{RoleAgent, "", "o"}, `"name" must not be empty`},
		{"enter name max", EnterOfficeReq{RoleAgent, long(MaxNameLen), "o"}, ""},
		{"enter name too long", EnterOfficeReq{RoleAgent, long(MaxNameLen + 1), "o"}, `"name" must be at most 256 bytes`},
		{"enter name control", EnterOfficeReq{RoleAgent, "a\nb", "o"}, `"name" must not contain control characters`},
		{"enter name DEL", EnterOfficeReq{RoleAgent, "a\x7fb", "o"}, `"name"`},
		{"enter name C1", EnterOfficeReq{RoleAgent, "a\u0085b", "o"}, `"name"`},
		{"enter name bad utf8", EnterOfficeReq{RoleAgent, "a\xffb", "o"}, `"name" must be valid UTF-8`},
		{"enter empty office", EnterOfficeReq{RoleAgent, "bot", ""}, `"office_id"`},
		{"enter office too long", EnterOfficeReq{RoleAgent, "bot", long(257)}, `"office_id"`},
		// server:leave_office
		{"leave ok", LeaveOfficeReq{"o"}, ""},
		{"leave empty", LeaveOfficeReq{""}, `"office_id"`},
		{"leave tab", LeaveOfficeReq{"o\t"}, `"office_id"`},
		// server:list_room
		{"list ok", ListRoomReq{"bot", "r", "o"}, ""},
		{"list no agent", ListRoomReq{"", "r", "o"}, `"agent"`},
		{"list no req_id", ListRoomReq{"bot", "", "o"}, `"req_id"`},
		{"list no office", ListRoomReq{"bot", "r", ""}, `"office_id"`},
		// server:tool_call_cancel
		{"cancel ok", AgentCallData{"bot", "r1"}, ""},
		{"cancel no agent", AgentCallData{"", "r1"}, `"agent"`},
		{"cancel no req_id", AgentCallData{"bot", ""}, `"req_id"`},
		{"cancel req_id too long", AgentCallData{"bot", long(MaxReqIDLen + 1)}, `"req_id" must be at most 256 bytes`},
		{"cancel req_id control", AgentCallData{"bot", "r\x00"}, `"req_id"`},
		// server:update_*
		{"computer ok", ComputerRef{"pc"}, ""},
		{"computer empty", ComputerRef{""}, `"computer"`},
		{"update config alias", UpdateComputerConfigReq{"pc"}, ""},
		// notify:enter_office / leave_office
		{"notify computer", OfficeNotification{OfficeID: "o", Computer: "pc"}, ""},
		{"notify agent", OfficeNotification{OfficeID: "o", Agent: "bot"}, ""},
		{"notify neither", OfficeNotification{OfficeID: "o"}, `exactly one`},
		{"notify both", OfficeNotification{OfficeID: "o", Agent: "a", Computer: "c"}, `exactly one`},
		{"notify no office", OfficeNotification{Agent: "a"}, `"office_id"`},
		// client:tool_call
		{"tool ok", call, ""},
		{"tool no params", with(func(c *ToolCallReq) { c.Params = nil }), ""},
		{"tool null params", with(func(c *ToolCallReq) { c.Params = json.RawMessage(`null`) }), ""},
		{"tool empty object", with(func(c *ToolCallReq) { c.Params = json.RawMessage(` {} `) }), ""},
		{"tool array params", with(func(c *ToolCallReq) { c.Params = json.RawMessage(`[1]`) }), `"params" must be a JSON object`},
		{"tool string params", with(func(c *ToolCallReq) { c.Params = json.RawMessage(`"{}"`) }), `"params"`},
		{"tool broken params", with(func(c *ToolCallReq) { c.Params = json.RawMessage(`{"a":`) }), `"params"`},
		{"tool blank params", with(func(c *ToolCallReq) { c.Params = json.RawMessage(`  `) }), `"params"`},
		{"tool no computer", with(func(c *ToolCallReq) { c.Computer = "" }), `"computer"`},
		{"tool no agent", with(func(c *ToolCallReq) { c.Agent = "" }), `"agent"`},
		{"tool no req_id", with(func(c *ToolCallReq) { c.ReqID = "" }), `"req_id"`},
		{"tool no name", with(func(c *ToolCallReq) { c.ToolName = "" }), `"tool_name"`},
		{"tool name max", with(func(c *ToolCallReq) { c.ToolName = long(MaxToolNameLen) }), ""},
		{"tool name too long", with(func(c *ToolCallReq) { c.ToolName = long(MaxToolNameLen + 1) }), `"tool_name" must be at most 512 bytes`},
		{"tool timeout 0", with(func(c *ToolCallReq) { c.Timeout = 0 }), `"timeout" must be between 1 and 3600`},
		{"tool timeout -1", with(func(c *ToolCallReq) { c.Timeout = -1 }), `"timeout"`},
		{"tool timeout 1", with(func(c *ToolCallReq) { c.Timeout = 1 }), ""},
		{"tool timeout max", with(func(c *ToolCallReq) { c.Timeout = MaxTimeout }), ""},
		{"tool timeout over", with(func(c *ToolCallReq) { c.Timeout = MaxTimeout + 1 }), `"timeout"`},
		// other client:* requests
		{"tools ok", GetToolsReq{"bot", "r", "pc"}, ""},
		{"tools no computer", GetToolsReq{"bot", "r", ""}, `"computer"`},
		{"config ok", GetComputerConfigReq{"bot", "r", "pc"}, ""},
		{"config no req_id", GetComputerConfigReq{"bot", "", "pc"}, `"req_id"`},
		{"skills ok", GetSkillsReq{"bot", "r", "pc"}, ""},
		{"skills no agent", GetSkillsReq{"", "r", "pc"}, `"agent"`},
		{"desktop ok", GetDesktopReq{Agent: "bot", ReqID: "r", Computer: "pc", DesktopSize: ptr(3), Window: ptr("window://a")}, ""},
		{"desktop size 0", GetDesktopReq{Agent: "bot", ReqID: "r", Computer: "pc", DesktopSize: ptr(0)}, ""},
		{"desktop size negative", GetDesktopReq{Agent: "bot", ReqID: "r", Computer: "pc", DesktopSize: ptr(-1)}, ""},
		{"desktop empty window", GetDesktopReq{Agent: "bot", ReqID: "r", Computer: "pc", Window: ptr("")}, ""},
		{"desktop window too long", GetDesktopReq{Agent: "bot", ReqID: "r", Computer: "pc", Window: ptr(long(MaxOpaqueLen + 1))}, `"window"`},
		{"desktop window control", GetDesktopReq{Agent: "bot", ReqID: "r", Computer: "pc", Window: ptr("window://a\n")}, `"window"`},
		{"resources ok", GetResourcesReq{Agent: "bot", ReqID: "r", Computer: "pc", MCPServer: "fs", Cursor: ptr("c")}, ""},
		{"resources unknown-looking server", GetResourcesReq{Agent: "bot", ReqID: "r", Computer: "pc", MCPServer: "com.example.docs"}, ""},
		{"resources no server", GetResourcesReq{Agent: "bot", ReqID: "r", Computer: "pc"}, `"mcp_server"`},
		{"resources cursor too long", GetResourcesReq{Agent: "bot", ReqID: "r", Computer: "pc", MCPServer: "fs", Cursor: ptr(long(MaxOpaqueLen + 1))}, `"cursor"`},
		{"skill ok", GetSkillReq{Agent: "bot", ReqID: "r", Computer: "pc", Name: "mcp:fs:review", RelPath: ptr("scripts/run.sh")}, ""},
		{"skill lexer is the computer's", GetSkillReq{Agent: "bot", ReqID: "r", Computer: "pc", Name: "Bad::Name"}, ""},
		{"skill traversal is the computer's", GetSkillReq{Agent: "bot", ReqID: "r", Computer: "pc", Name: "x", RelPath: ptr("../../etc/passwd")}, ""},
		{"skill no name is the computer's 4016", GetSkillReq{Agent: "bot", ReqID: "r", Computer: "pc"}, ""},
		{"skill long name is the computer's 4016", GetSkillReq{Agent: "bot", ReqID: "r", Computer: "pc", Name: long(MaxToolNameLen + 1)}, ""},
		{"skill rel_path NUL is the computer's 4017", GetSkillReq{Agent: "bot", ReqID: "r", Computer: "pc", Name: "x", RelPath: ptr("a\x00b")}, ""},
		{"blob ok", GetBlobReq{Agent: "bot", ReqID: "r", Computer: "pc", BlobHandle: "h", ChunkOffset: ptr[int64](0), MaxChunkBytes: ptr[int64](1 << 18)}, ""},
		{"blob negative offset is the computer's", GetBlobReq{Agent: "bot", ReqID: "r", Computer: "pc", BlobHandle: "h", ChunkOffset: ptr[int64](-1)}, ""},
		{"blob no handle", GetBlobReq{Agent: "bot", ReqID: "r", Computer: "pc"}, `"blob_handle"`},
		{"blob handle too long", GetBlobReq{Agent: "bot", ReqID: "r", Computer: "pc", BlobHandle: long(MaxOpaqueLen + 1)}, `"blob_handle"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeBadRequest {
				t.Fatalf("Validate() = %#v, want a 400 *Error", err)
			}
			if !strings.HasPrefix(e.Message, "invalid payload: ") || !strings.Contains(e.Message, tt.field) {
				t.Errorf("message %q does not name %s", e.Message, tt.field)
			}
			if len(e.Message) > 120 {
				t.Errorf("message is %d bytes long", len(e.Message))
			}
		})
	}
}

// TestValidateReturnsUntypedNil guards against a nil *Error stored in a
// non-nil error interface.
func TestValidateReturnsUntypedNil(t *testing.T) {
	var v Validator = LeaveOfficeReq{"o"}
	if err := v.Validate(); err != nil {
		t.Fatalf("Validate() = %#v", err)
	}
}

func TestClientRequestsImplementInterfaces(t *testing.T) {
	for _, e := range ClientEvents() {
		req := NewClientRequest(e)
		if err := req.Validate(); err == nil {
			t.Errorf("%s: zero request validated", e)
		}
	}
}
