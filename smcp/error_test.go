package smcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestCodes(t *testing.T) {
	tests := []struct {
		code int
		want int
		name string
	}{
		{CodeBadRequest, 400, "Bad Request"},
		{CodeUnauthorized, 401, "Unauthorized"},
		{CodeForbidden, 403, "Forbidden"},
		{CodeNotFound, 404, "Not Found"},
		{CodeTimeout, 408, "Timeout"},
		{CodeInternal, 500, "Internal Error"},
		{CodeToolNotFound, 4001, "Tool Not Found"},
		{CodeToolDisabled, 4002, "Tool Disabled"},
		{CodeToolExecutionFailed, 4003, "Tool Execution Failed"},
		{CodeToolTimeout, 4004, "Tool Timeout"},
		{CodeToolRequiresConfirmation, 4005, "Tool Requires Confirmation"},
		{CodeToolAuthorizationRequired, 4006, "Tool Authorization Required"},
		{CodeToolAuthorizationFailed, 4007, "Tool Authorization Failed"},
		{CodeVersionMismatch, 4008, "Protocol Version Mismatch"},
		{CodeMCPServerNotFound, 4014, "MCP Server Not Found"},
		{CodeCapabilityNotSupported, 4015, "MCP Capability Not Supported"},
		{CodeInvalidSkillName, 4016, "Invalid Skill Name"},
		{CodeSkillNotAccessible, 4017, "Skill Resource Not Accessible"},
		{CodeBlobNotAccessible, 4018, "Blob Not Accessible"},
		{CodeRoomFull, 4101, "Room Full"},
		{CodeRoomNotFound, 4102, "Room Not Found"},
		{CodeNotInRoom, 4103, "Not In Room"},
		{CodeCrossRoom, 4104, "Cross Room Access"},
		{CloseVersionMismatch, 4900, ""},
		{4009, 4009, ""},
		{0, 0, ""},
	}
	for _, tt := range tests {
		if tt.code != tt.want {
			t.Errorf("code constant = %d, want %d", tt.code, tt.want)
		}
		if got := CodeName(tt.code); got != tt.name {
			t.Errorf("CodeName(%d) = %q, want %q", tt.code, got, tt.name)
		}
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{NewError(CodeNotInRoom, "sender is in no office"), "smcp 4103: sender is in no office"},
		{NewError(CodeNotInRoom, ""), "smcp 4103: Not In Room"},
		{&Error{Code: 4999}, "smcp 4999: "},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorIs(t *testing.T) {
	var err error = fmt.Errorf("relay: %w", NewError(CodeNotInRoom, "x"))
	if !errors.Is(err, &Error{Code: CodeNotInRoom}) {
		t.Error("errors.Is by code failed")
	}
	if errors.Is(err, &Error{Code: CodeCrossRoom}) {
		t.Error("errors.Is matched another code")
	}
	if errors.Is(err, errors.New("smcp 4103: x")) {
		t.Error("errors.Is matched a non-*Error")
	}
	var nilErr *Error
	if errors.Is(err, nilErr) {
		t.Error("errors.Is matched a nil *Error")
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNotInRoom {
		t.Error("errors.As failed")
	}
}

func TestVersionMismatchBody(t *testing.T) {
	got, err := json.Marshal(VersionMismatch("0.2.0", "0.1.5"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"code":4008,"message":"Protocol version mismatch","server_version":"0.2.0","client_version":"0.1.5","min_supported":"0.2.0","max_supported":"0.2.999"}`
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	tests := []struct{ server, lo, hi string }{
		{"0.3.0", "0.3.0", "0.3.999"},
		{"0.3.7", "0.3.0", "0.3.999"},
		{"1.2.3", "1.0.0", "1.2.999"},
		{"2.0.1", "2.0.0", "2.0.999"},
		{"bogus", "bogus", "bogus"},
	}
	for _, tt := range tests {
		e := VersionMismatch(tt.server, "9.9.9")
		if e.MinSupported != tt.lo || e.MaxSupported != tt.hi || e.ServerVersion != tt.server || e.ClientVersion != "9.9.9" {
			t.Errorf("VersionMismatch(%q) = %+v, want range %s..%s", tt.server, e, tt.lo, tt.hi)
		}
	}
	// A 4008 always carries all six fields, even when some are empty.
	got, _ = json.Marshal(Error{Code: CodeVersionMismatch, Message: "m"})
	if want := `{"code":4008,"message":"m","server_version":"","client_version":"","min_supported":"","max_supported":""}`; string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestErrorMarshal(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"4014 constructor", MCPServerNotFound("office_docs"),
			`{"code":4014,"message":"MCP Server not registered","mcp_server":"office_docs","mcp_server_name":"office_docs"}`},
		{"4014 from mcp_server", &Error{Code: 4014, Message: "m", MCPServer: "a"},
			`{"code":4014,"message":"m","mcp_server":"a","mcp_server_name":"a"}`},
		{"4014 from mcp_server_name", &Error{Code: 4014, Message: "m", MCPServerName: "b"},
			`{"code":4014,"message":"m","mcp_server":"b","mcp_server_name":"b"}`},
		{"4014 without server", &Error{Code: 4014, Message: "m", Details: map[string]any{"name": "helper"}},
			`{"code":4014,"message":"m","details":{"name":"helper"}}`},
		{"4015 constructor", CapabilityNotSupported("fs", "resources"),
			`{"code":4015,"message":"MCP Server does not support 'resources' capability","mcp_server":"fs","mcp_server_name":"fs","capability":"resources"}`},
		{"4016 constructor", InvalidSkillName("Bad:Name:x"),
			`{"code":4016,"message":"Invalid skill name format","details":{"name":"Bad:Name:x"}}`},
		{"4017 constructor", SkillNotAccessible(ReasonTooLarge, map[string]any{"rel_path": "big.bin", "total_size": 200000000}),
			`{"code":4017,"message":"Skill resource not accessible","details":{"reason":"too_large","rel_path":"big.bin","total_size":200000000}}`},
		{"4017 nil details", SkillNotAccessible(ReasonTraversal, nil),
			`{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal"}}`},
		{"4018 constructor", BlobNotAccessible(ReasonRange),
			`{"code":4018,"message":"Blob not accessible","details":{"reason":"range"}}`},
		{"4014 drops capability", &Error{Code: 4014, Message: "m", MCPServer: "a", Capability: "tools", ServerVersion: "1.0.0"},
			`{"code":4014,"message":"m","mcp_server":"a","mcp_server_name":"a"}`},
		{"4008 drops server fields", &Error{Code: 4008, Message: "m", ServerVersion: "1", ClientVersion: "2", MinSupported: "3", MaxSupported: "4", MCPServer: "a", Capability: "c"},
			`{"code":4008,"message":"m","server_version":"1","client_version":"2","min_supported":"3","max_supported":"4"}`},
		{"irrelevant fields dropped", &Error{Code: 400, Message: "bad", ServerVersion: "0.3.0", MCPServer: "x", Capability: "tools"},
			`{"code":400,"message":"bad"}`},
		{"escaping", NewError(500, "a<b>&c\"\n"), `{"code":500,"message":"a\u003cb\u003e\u0026c\"\n"}`},
		{"extra sorted, collisions skipped", &Error{Code: 4014, Message: "m", MCPServer: "a", Details: map[string]any{},
			Extra: map[string]json.RawMessage{"z": json.RawMessage(`[1, 2]`), "a": json.RawMessage(`true`),
				"code": json.RawMessage(`1`), "mcp_server": json.RawMessage(`"other"`), "details": json.RawMessage(`null`)}},
			`{"code":4014,"message":"m","mcp_server":"a","mcp_server_name":"a","details":{},"a":true,"z":[1,2]}`},
		{"extra keeps irrelevant typed names", &Error{Code: 400, Message: "m", Extra: map[string]json.RawMessage{"capability": json.RawMessage(`"x"`)}},
			`{"code":400,"message":"m","capability":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.err)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	if _, err := json.Marshal(&Error{Code: 400, Extra: map[string]json.RawMessage{"x": json.RawMessage(`{`)}}); err == nil {
		t.Error("invalid Extra JSON encoded without error")
	}
}

func TestErrorConstructorsDoNotAlias(t *testing.T) {
	in := map[string]any{"rel_path": "a"}
	e := SkillNotAccessible(ReasonNotFound, in)
	if _, ok := in["reason"]; ok {
		t.Error("SkillNotAccessible modified its details argument")
	}
	if e.Reason() != ReasonNotFound || BlobNotAccessible(ReasonGone).Reason() != ReasonGone || NewError(400, "").Reason() != "" {
		t.Error("Reason() mismatch")
	}
	long := strings.Repeat("é", 300)
	name := InvalidSkillName(long).Details["name"].(string)
	if len(name) > MaxNameLen || !strings.HasPrefix(long, name) {
		t.Errorf("InvalidSkillName kept %d bytes", len(name))
	}
	if e := NewError(CodeRoomFull, ""); e.Message != "Room Full" {
		t.Errorf("NewError default message = %q", e.Message)
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		ok   bool
		want *Error
	}{
		{"4008", `{"code":4008,"message":"Protocol version mismatch","server_version":"0.2.0","client_version":"0.1.5","min_supported":"0.2.0","max_supported":"0.2.999"}`, true,
			VersionMismatch("0.2.0", "0.1.5")},
		{"4014 new name", `{"code":4014,"message":"m","mcp_server":"fs"}`, true,
			&Error{Code: 4014, Message: "m", MCPServer: "fs", MCPServerName: "fs"}},
		{"4014 old name", `{"code":4014,"message":"m","mcp_server_name":"com.example.docs"}`, true,
			&Error{Code: 4014, Message: "m", MCPServer: "com.example.docs", MCPServerName: "com.example.docs"}},
		{"4015", `{"code":4015,"message":"m","mcp_server":"fs","capability":"resources"}`, true,
			&Error{Code: 4015, Message: "m", MCPServer: "fs", MCPServerName: "fs", Capability: "resources"}},
		{"4017", `{"code":4017,"message":"m","details":{"reason":"traversal"}}`, true,
			&Error{Code: 4017, Message: "m", Details: map[string]any{"reason": "traversal"}}},
		{"plain", ` {"code":404,"message":"no such computer"} `, true, NewError(404, "no such computer")},
		{"no message", `{"code":408}`, true, &Error{Code: 408}},
		{"zero code", `{"code":0,"message":""}`, true, &Error{}},
		{"negative code", `{"code":-1}`, true, &Error{Code: -1}},
		{"wrong-typed fields kept in Extra", `{"code":4008,"message":5,"server_version":1,"details":[1]}`, true,
			&Error{Code: 4008, Extra: map[string]json.RawMessage{"message": json.RawMessage(`5`), "server_version": json.RawMessage(`1`), "details": json.RawMessage(`[1]`)}}},
		{"irrelevant typed name kept in Extra", `{"code":400,"message":"m","mcp_server":"fs"}`, true,
			&Error{Code: 400, Message: "m", Extra: map[string]json.RawMessage{"mcp_server": json.RawMessage(`"fs"`)}}},
		{"envelope", `{"error":{"code":400,"message":"x"}}`, false, nil},
		{"string code", `{"code":"400","message":"x"}`, false, nil},
		{"fraction code", `{"code":400.0}`, false, nil},
		{"exponent code", `{"code":4e3}`, false, nil},
		{"huge code", `{"code":99999999999}`, false, nil},
		{"null code", `{"code":null}`, false, nil},
		{"no code", `{"message":"x"}`, false, nil},
		{"call result", `{"content":[],"isError":true,"meta":{"error_code":4006}}`, false, nil},
		{"array", `[{"code":400}]`, false, nil},
		{"null", `null`, false, nil},
		{"number", `400`, false, nil},
		{"empty", ``, false, nil},
		{"truncated", `{"code":400`, false, nil},
		{"trailing", `{"code":400} {}`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := DecodeError([]byte(tt.raw))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				if got != nil {
					t.Errorf("got %+v with ok=false", got)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestErrorUnmarshalRejectsNonPayload(t *testing.T) {
	var e Error
	if err := json.Unmarshal([]byte(`{"error":{"code":400}}`), &e); err == nil {
		t.Error("envelope decoded as an Error")
	}
	var holder struct {
		Err *Error `json:"err"`
	}
	if err := json.Unmarshal([]byte(`{"err":{"code":4103,"message":"m"}}`), &holder); err != nil || holder.Err.Code != 4103 {
		t.Errorf("nested decode: %v, %+v", err, holder.Err)
	}
}
