package smcp

import (
	"encoding/json"
	"testing"
)

// roundTrip decodes canonical into a fresh value from newV, re-encodes it and
// requires the bytes to be unchanged.
func TestPayloadRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		newV func() any
		json string
	}{
		{"AgentCallData", func() any { return new(AgentCallData) },
			`{"agent":"bot","req_id":"r1"}`},
		{"ToolCallReq", func() any { return new(ToolCallReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"fs__read","params":{"path":"/tmp/x","n":[1,2.5,null]},"timeout":30}`},
		{"ToolCallReq/no-params", func() any { return new(ToolCallReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"t","timeout":5}`},
		{"ToolCallReq/null-params", func() any { return new(ToolCallReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"t","params":null,"timeout":5}`},
		{"GetToolsReq", func() any { return new(GetToolsReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc"}`},
		{"GetToolsRet", func() any { return new(GetToolsRet) },
			`{"tools":[{"name":"fs__read","bundle_id":"fs","description":"Read a file","params_schema":{"type":"object"},"return_schema":null,"meta":{"a2c_tool_meta":"{\"auto_apply\":true}","readOnly":true}}],"req_id":"r1"}`},
		{"GetToolsRet/empty", func() any { return new(GetToolsRet) },
			`{"tools":[],"req_id":"r1"}`},
		{"SMCPTool/empty-meta", func() any { return new(SMCPTool) },
			`{"name":"a__b","bundle_id":"a","description":"","params_schema":{},"return_schema":{"type":"object"},"meta":{}}`},
		{"SMCPTool/no-meta", func() any { return new(SMCPTool) },
			`{"name":"a__b","bundle_id":"a","description":"d","params_schema":{},"return_schema":null}`},
		{"GetComputerConfigReq", func() any { return new(GetComputerConfigReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc"}`},
		{"GetComputerConfigRet", func() any { return new(GetComputerConfigRet) },
			`{"inputs":[{"type":"promptString","id":"k","description":"key","password":true}],"servers":{"fs":{"name":"fs","type":"stdio","disabled":false,"forbidden_tools":[],"tool_meta":{},"server_parameters":{"command":"npx","args":[],"env":null}}}}`},
		{"GetComputerConfigRet/no-inputs", func() any { return new(GetComputerConfigRet) },
			`{"servers":{}}`},
		{"GetComputerConfigRet/empty-inputs", func() any { return new(GetComputerConfigRet) },
			`{"inputs":[],"servers":{}}`},
		{"GetDesktopReq", func() any { return new(GetDesktopReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","desktop_size":0,"window":"window://a/b"}`},
		{"GetDesktopReq/bare", func() any { return new(GetDesktopReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc"}`},
		{"GetDesktopRet", func() any { return new(GetDesktopRet) },
			`{"desktops":["window://a\n\nhello","window://b"],"req_id":"r1"}`},
		{"GetDesktopRet/empty", func() any { return new(GetDesktopRet) },
			`{"desktops":[],"req_id":"r1"}`},
		{"GetResourcesReq", func() any { return new(GetResourcesReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","mcp_server":"fs","cursor":"c2"}`},
		{"GetResourcesReq/no-cursor", func() any { return new(GetResourcesReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","mcp_server":"fs"}`},
		{"GetResourcesRet", func() any { return new(GetResourcesRet) },
			`{"resources":[{"uri":"file:///a","name":"a","_meta":{"x":1},"annotations":{"priority":0.5}}],"next_cursor":"c3","req_id":"r1"}`},
		{"GetResourcesRet/last-page", func() any { return new(GetResourcesRet) },
			`{"resources":[],"req_id":"r1"}`},
		{"GetSkillsReq", func() any { return new(GetSkillsReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc"}`},
		{"GetSkillsRet", func() any { return new(GetSkillsRet) },
			`{"skills":[{"name":"mcp:fs:code-review","source":"mcp:fs","path":"/home/u/.a2c/skills/code-review","description":"Review code","uri":"skill://com.example/code-review","license":"MIT","compatibility":"any","allowed_tools":["fs__read"],"skill_metadata":{"k":"v"},"version":"1.0.0"},{"name":"helper","source":"user","path":"/s/helper","description":"h"}],"req_id":"r1"}`},
		{"GetSkillReq", func() any { return new(GetSkillReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","name":"helper","rel_path":"scripts/run.sh"}`},
		{"GetSkillReq/default-path", func() any { return new(GetSkillReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","name":"helper"}`},
		{"GetSkillRet/empty-body", func() any { return new(GetSkillRet) },
			`{"name":"helper","rel_path":"SKILL.md","mime_type":"text/markdown","total_size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","body":"","req_id":"r1"}`},
		{"GetSkillRet/handle", func() any { return new(GetSkillRet) },
			`{"name":"helper","rel_path":"assets/logo.png","mime_type":"image/png","total_size":70000,"sha256":"ab","blob_handle":"h1","req_id":"r1"}`},
		{"GetBlobReq", func() any { return new(GetBlobReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","blob_handle":"h1","chunk_offset":0,"max_chunk_bytes":262144}`},
		{"GetBlobReq/bare", func() any { return new(GetBlobReq) },
			`{"agent":"bot","req_id":"r1","computer":"pc","blob_handle":"h1"}`},
		{"GetBlobRet", func() any { return new(GetBlobRet) },
			`{"blob_handle":"h1","mime_type":"image/png","total_size":3,"sha256":"ab","chunk_offset":0,"eof":true,"blob":"AQID","req_id":"r1"}`},
		{"EnterOfficeReq", func() any { return new(EnterOfficeReq) },
			`{"role":"computer","name":"pc","office_id":"3f0c1b9e"}`},
		{"LeaveOfficeReq", func() any { return new(LeaveOfficeReq) },
			`{"office_id":"3f0c1b9e"}`},
		{"OfficeNotification/computer", func() any { return new(OfficeNotification) },
			`{"office_id":"o","computer":"pc"}`},
		{"OfficeNotification/agent", func() any { return new(OfficeNotification) },
			`{"office_id":"o","agent":"bot"}`},
		{"ComputerRef", func() any { return new(ComputerRef) },
			`{"computer":"pc"}`},
		{"ListRoomReq", func() any { return new(ListRoomReq) },
			`{"agent":"bot","req_id":"r1","office_id":"o"}`},
		{"ListRoomRet", func() any { return new(ListRoomRet) },
			`{"sessions":[{"sid":"s1","name":"pc","role":"computer","office_id":"o","a2c_version":"0.3.0"},{"name":"bot"}],"req_id":"r1"}`},
		{"CallToolResult", func() any { return new(CallToolResult) },
			`{"content":[{"type":"text","text":"hi"}],"isError":false}`},
		{"CallToolResult/full", func() any { return new(CallToolResult) },
			`{"content":[{"type":"image","data":"","mimeType":"image/png","_meta":{"a2c_blob_handle":"h","a2c_sha256":"ab","a2c_total_size":99}}],"structuredContent":{"ok":true},"isError":true,"meta":{"error_code":4006,"mcp_server":"fs"}}`},
		{"Error/4103", func() any { return new(Error) },
			`{"code":4103,"message":"Not in an office","details":{"event":"client:get_tools"},"trace_id":"t1"}`},
		{"MCPServerConfig", func() any { return new(MCPServerConfig) },
			`{"name":"fs","bundle_id":"files","type":"stdio","disabled":true,"forbidden_tools":["rm"],"tool_meta":{"read":{"auto_apply":true,"ret_object_mapper":{"a":"b"},"alias":"cat","tags":["io"]}},"default_tool_meta":{"auto_apply":false},"vrl":".x = 1","server_parameters":{"command":"npx"}}`},
		{"MCPServerInput/pickString", func() any { return new(MCPServerInput) },
			`{"type":"pickString","id":"env","description":"Env","default":"dev","options":[{"label":"dev","value":"dev"},{"label":"prod","value":"prod"}]}`},
		{"MCPServerInput/command", func() any { return new(MCPServerInput) },
			`{"type":"command","id":"c","description":"d","command":"echo","args":{"a":"b"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.newV()
			if err := json.Unmarshal([]byte(tt.json), v); err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(got) != tt.json {
				t.Errorf("round trip changed the payload\n got %s\nwant %s", got, tt.json)
			}
		})
	}
}

func TestNilCollectionsEncodeEmpty(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{GetToolsRet{ReqID: "r"}, `{"tools":[],"req_id":"r"}`},
		{&GetToolsRet{ReqID: "r"}, `{"tools":[],"req_id":"r"}`},
		{GetDesktopRet{ReqID: "r"}, `{"desktops":[],"req_id":"r"}`},
		{GetResourcesRet{ReqID: "r"}, `{"resources":[],"req_id":"r"}`},
		{GetSkillsRet{ReqID: "r"}, `{"skills":[],"req_id":"r"}`},
		{ListRoomRet{ReqID: "r"}, `{"sessions":[],"req_id":"r"}`},
		{GetComputerConfigRet{}, `{"servers":{}}`},
		{CallToolResult{}, `{"content":[],"isError":false}`},
		{SMCPTool{Name: "a__b", BundleID: "a"}, `{"name":"a__b","bundle_id":"a","description":"","params_schema":null,"return_schema":null}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatalf("%T: %v", tt.v, err)
		}
		if string(got) != tt.want {
			t.Errorf("%T\n got %s\nwant %s", tt.v, got, tt.want)
		}
	}
}

func TestGetSkillReqPath(t *testing.T) {
	p := "scripts/a.sh"
	if got := (GetSkillReq{}).Path(); got != "SKILL.md" {
		t.Errorf("default Path() = %q", got)
	}
	if got := (GetSkillReq{RelPath: &p}).Path(); got != p {
		t.Errorf("Path() = %q, want %q", got, p)
	}
}
