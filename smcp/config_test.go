package smcp

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestToolMetaEncoding(t *testing.T) {
	yes, alias := true, "cat"
	tests := []struct {
		name string
		m    ToolMeta
		want string
	}{
		{"all set", ToolMeta{AutoApply: &yes, Alias: &alias, Tags: []string{"browser"}, RetObjectMapper: map[string]any{"a": "b"}},
			`{"auto_apply":true,"ret_object_mapper":{"a":"b"},"alias":"cat","tags":["browser"]}`},
		{"unset fields are null", ToolMeta{Tags: []string{"read"}},
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["read"]}`},
		{"empty tags stay empty", ToolMeta{Tags: []string{}},
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":[]}`},
		{"zero", ToolMeta{}, `{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":null}`},
	}
	for _, tt := range tests {
		s, err := tt.m.Encode()
		if err != nil || s != tt.want {
			t.Errorf("%s: Encode() = %s, %v; want %s", tt.name, s, err, tt.want)
		}
		back, err := DecodeToolMeta(s)
		if err != nil || !reflect.DeepEqual(back, tt.m) {
			t.Errorf("%s: round trip = %+v, %v", tt.name, back, err)
		}
	}
	// The reference Computer writes explicit nulls and spaces.
	got, err := DecodeToolMeta(`{"auto_apply": true, "alias": null, "tags": ["browser"], "ret_object_mapper": null}`)
	if err != nil || got.AutoApply == nil || !*got.AutoApply || got.Alias != nil || !reflect.DeepEqual(got.Tags, []string{"browser"}) {
		t.Errorf("DecodeToolMeta = %+v, %v", got, err)
	}
	if _, err := DecodeToolMeta(`"x"`); err == nil {
		t.Error("DecodeToolMeta accepted a non-object")
	}
}

func TestParseServerToolMeta(t *testing.T) {
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		decl string
		want []string // nil: no tags
		bad  bool
	}{
		{"tags", `{"tags":["read","io"]}`, []string{"read", "io"}, false},
		{"empty tags", `{"tags":[]}`, []string{}, false},
		{"no tags", `{}`, nil, false},
		{"null tags", `{"tags":null}`, nil, false},
		{"other keys filtered", `{"tags":["read"],"auto_apply":true,"alias":"x","ret_object_mapper":{"a":"b"},"custom":1}`, []string{"read"}, false},
		{"auto_apply only", `{"auto_apply":true}`, nil, false},
		{"tags a string", `{"tags":"read"}`, nil, true},
		{"tags with a number", `{"tags":["read",1]}`, nil, true},
		{"tags an object", `{"tags":{"a":"b"}}`, nil, true},
		{"a JSON string", `"{\"tags\":[\"read\"]}"`, nil, true},
		{"an array", `["read"]`, nil, true},
		{"null", `null`, nil, true},
		{"a number", `3`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseServerToolMeta(decode(tt.decl))
			if tt.bad {
				if !errors.Is(err, ErrMalformedToolMeta) {
					t.Fatalf("err = %v, want ErrMalformedToolMeta", err)
				}
				if strings.Contains(err.Error(), "read") {
					t.Errorf("error quotes a declared value: %v", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.Tags, tt.want) || (tt.want != nil) != (got.Tags != nil) {
				t.Fatalf("ParseServerToolMeta = %#v, %v; want tags %#v", got, err, tt.want)
			}
		})
	}
	// Go-typed tags (an in-process server setting Meta directly) are read too.
	if got, err := ParseServerToolMeta(map[string]any{"tags": []string{"a"}}); err != nil || !reflect.DeepEqual(got.Tags, []string{"a"}) {
		t.Errorf("[]string tags: %#v, %v", got, err)
	}
}

// TestMergeToolMeta runs the conformance vectors of §2.6 (server-declared
// tool tags) on the merge itself: the server declares
// {"tags": ["read"], "auto_apply": true} for safe_read.
func TestMergeToolMeta(t *testing.T) {
	yes, no := true, false
	alias, defAlias := "cat", "dflt"
	declared := func() *ServerToolMeta {
		d, err := ParseServerToolMeta(map[string]any{"tags": []any{"read"}, "auto_apply": true})
		if err != nil {
			t.Fatal(err)
		}
		return &d
	}
	tests := []struct {
		name      string
		tool, def *ToolMeta
		server    *ServerToolMeta
		want      string // canonical JSON; "" means the key is removed
	}{
		{"#1 declaration only", nil, nil, declared(),
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["read"]}`},
		{"#2 default tags win over the server", nil, &ToolMeta{Tags: []string{"default"}}, declared(),
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["default"]}`},
		{"#3 tool tags win over default", &ToolMeta{Tags: []string{"specific"}}, &ToolMeta{Tags: []string{"default"}}, declared(),
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["specific"]}`},
		{"#4 empty tool tags clear every lower layer", &ToolMeta{Tags: []string{}}, &ToolMeta{Tags: []string{"default"}}, declared(),
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":[]}`},
		{"#5 config auto_apply only inherits server tags", &ToolMeta{AutoApply: &yes}, nil, declared(),
			`{"auto_apply":true,"ret_object_mapper":null,"alias":null,"tags":["read"]}`},
		{"#6 server auto_apply never reaches the result", nil, nil, declared(),
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["read"]}`},
		{"#6 config auto_apply false stays false", &ToolMeta{AutoApply: &no}, nil, declared(),
			`{"auto_apply":false,"ret_object_mapper":null,"alias":null,"tags":["read"]}`},
		{"#7 malformed declaration, config present", &ToolMeta{Tags: []string{"cfg"}}, nil, nil,
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["cfg"]}`},
		{"#7 malformed declaration, no config: removed", nil, nil, nil, ""},
		{"#8 declaration and config: whole canonical", &ToolMeta{Alias: &alias, RetObjectMapper: map[string]any{"a": "b"}}, nil, declared(),
			`{"auto_apply":null,"ret_object_mapper":{"a":"b"},"alias":"cat","tags":["read"]}`},
		{"#10 null tool tags inherit default", &ToolMeta{Tags: nil}, &ToolMeta{Tags: []string{"default"}}, declared(),
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":["default"]}`},
		{"valid declaration without tags", nil, nil, &ServerToolMeta{},
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":null}`},
		{"empty declared tags", nil, nil, &ServerToolMeta{Tags: []string{}},
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":[]}`},
		{"default fields under tool fields", &ToolMeta{AutoApply: &no}, &ToolMeta{AutoApply: &yes, Alias: &defAlias, Tags: []string{"d"}}, nil,
			`{"auto_apply":false,"ret_object_mapper":null,"alias":"dflt","tags":["d"]}`},
		{"empty config layer is present", &ToolMeta{}, nil, nil,
			`{"auto_apply":null,"ret_object_mapper":null,"alias":null,"tags":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := MergeToolMeta(tt.tool, tt.def, tt.server)
			if tt.want == "" {
				if ok {
					t.Fatalf("ok = true (%+v), want the key removed", m)
				}
				return
			}
			if !ok {
				t.Fatal("ok = false")
			}
			got, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal([]byte(got), &g)
			_ = json.Unmarshal([]byte(tt.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("merged = %s\nwant     %s", got, tt.want)
			}
		})
	}
}

func TestPickStringOptions(t *testing.T) {
	in := MCPServerInput{Type: InputPickString, ID: "region", Description: "Region", Default: json.RawMessage(`"eu-1"`),
		Options: []PickStringOption{{Label: "Europe", Value: "eu-1"}, {Label: "Europe", Value: "eu-2"}, {Label: "US", Value: "eu-1"}}}
	tests := []struct {
		name    string
		profile Profile
		want    string
	}{
		{"0.4.0 objects", mustProfile(t, "0.4.0"),
			`{"type":"pickString","id":"region","description":"Region","default":"eu-1","options":[{"label":"Europe","value":"eu-1"},{"label":"Europe","value":"eu-2"},{"label":"US","value":"eu-1"}]}`},
		{"0.3.2 objects", mustProfile(t, "0.3.2"),
			`{"type":"pickString","id":"region","description":"Region","default":"eu-1","options":[{"label":"Europe","value":"eu-1"},{"label":"Europe","value":"eu-2"},{"label":"US","value":"eu-1"}]}`},
		{"0.3.1 values", mustProfile(t, "0.3.1"),
			`{"type":"pickString","id":"region","description":"Region","default":"eu-1","options":["eu-1","eu-2","eu-1"]}`},
		{"0.3.0 values", mustProfile(t, "0.3.0"),
			`{"type":"pickString","id":"region","description":"Region","default":"eu-1","options":["eu-1","eu-2","eu-1"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeInput(in, tt.profile)
			if err != nil || string(b) != tt.want {
				t.Fatalf("EncodeInput = %s, %v\nwant %s", b, err, tt.want)
			}
			// An Agent decodes either form.
			ret := GetComputerConfigRet{Inputs: []json.RawMessage{b}}
			got, err := ret.DecodeInputs()
			if err != nil || len(got) != 1 || len(got[0].Options) != 3 {
				t.Fatalf("DecodeInputs = %+v, %v", got, err)
			}
			if !reflect.DeepEqual(got[0].OptionValues(), []string{"eu-1", "eu-2", "eu-1"}) || !got[0].HasOption("eu-2") || got[0].HasOption("Europe") {
				t.Errorf("decoded options = %+v", got[0].Options)
			}
		})
	}
	// Other inputs are the same in every version.
	cmd := MCPServerInput{Type: InputCommand, ID: "c", Command: "echo"}
	a, _ := EncodeInput(cmd, mustProfile(t, "0.3.0"))
	b, _ := EncodeInput(cmd, mustProfile(t, "0.4.0"))
	if string(a) != string(b) || strings.Contains(string(a), "options") {
		t.Errorf("command input: %s vs %s", a, b)
	}
	var o PickStringOption
	if err := json.Unmarshal([]byte(`1`), &o); err == nil {
		t.Error("a number decoded as an option")
	}
}

func mustProfile(t *testing.T, v string) Profile {
	t.Helper()
	p, err := NewProfile(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSMCPToolToolMeta(t *testing.T) {
	tests := []struct {
		name   string
		meta   map[string]any
		ok     bool
		hasErr bool
	}{
		{"absent", nil, false, false},
		{"null", map[string]any{MetaKeyToolMeta: nil}, false, false},
		{"string", map[string]any{MetaKeyToolMeta: `{"tags":["a"]}`}, true, false},
		{"object not string", map[string]any{MetaKeyToolMeta: map[string]any{"tags": []any{"a"}}}, false, true},
		{"bad json", map[string]any{MetaKeyToolMeta: `{`}, false, true},
	}
	for _, tt := range tests {
		m, ok, err := SMCPTool{Meta: tt.meta}.ToolMeta()
		if ok != tt.ok || (err != nil) != tt.hasErr {
			t.Errorf("%s: ToolMeta() = %+v, %v, %v", tt.name, m, ok, err)
		}
	}
}

func TestGetComputerConfigRetDecode(t *testing.T) {
	raw := `{"inputs":[{"type":"promptString","id":"token","description":"API token","password":true},
		{"type":"pickString","id":"env","description":"Env","options":["dev","prod"],"default":"dev"}],
	"servers":{
		"bundle_8d2a9232fa76e8a5":{"name":"你好世界","type":"stdio","disabled":false,"forbidden_tools":[],"tool_meta":{},
			"server_parameters":{"command":"npx","args":["-y","everything"],"env":null,"cwd":null,"encoding":"utf-8","encoding_error_handler":"strict"}},
		"bundle_b413b61fe2e77b15":{"name":"","type":"streamable","disabled":false,"forbidden_tools":[],"tool_meta":{},
			"server_parameters":{"url":"https://api.example.com/mcp","headers":null,"timeout":"PT30S","sse_read_timeout":"PT300S","terminate_on_close":true}},
		"docs":{"name":"docs","bundle_id":"docs","type":"sse","disabled":true,"forbidden_tools":["rm"],"tool_meta":{"read":{"alias":"cat"}},
			"server_parameters":{"url":"https://h/sse","headers":{"X":"1"},"timeout":30.0,"sse_read_timeout":300.5}}}}`
	var ret GetComputerConfigRet
	if err := json.Unmarshal([]byte(raw), &ret); err != nil {
		t.Fatal(err)
	}
	servers, err := ret.DecodeServers()
	if err != nil {
		t.Fatal(err)
	}
	for key, c := range servers {
		id, err := c.Identity()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		explicit := ""
		if c.BundleID != nil {
			explicit = *c.BundleID
		}
		if got, err := ResolveBundleID(explicit, c.Name, id); got != key || err != nil {
			t.Errorf("server %s resolves to %q, %v", key, got, err)
		}
	}
	if a := servers["docs"].ToolMeta["read"].Alias; a == nil || *a != "cat" {
		t.Errorf("tool_meta alias = %v", a)
	}
	inputs, err := ret.DecodeInputs()
	if err != nil || len(inputs) != 2 || inputs[0].Password == nil || !*inputs[0].Password ||
		inputs[1].Type != InputPickString || string(inputs[1].Default) != `"dev"` {
		t.Errorf("DecodeInputs = %+v, %v", inputs, err)
	}

	bad := GetComputerConfigRet{Servers: map[string]json.RawMessage{"x": json.RawMessage(`[]`)}}
	if _, err := bad.DecodeServers(); err == nil {
		t.Error("DecodeServers accepted a non-object")
	}
	badIn := GetComputerConfigRet{Inputs: []json.RawMessage{json.RawMessage(`1`)}}
	if _, err := badIn.DecodeInputs(); err == nil {
		t.Error("DecodeInputs accepted a non-object")
	}
	for _, c := range []MCPServerConfig{
		{Type: ServerTypeStdio, ServerParameters: json.RawMessage(`{"command":1}`)},
		{Type: ServerTypeSSE, ServerParameters: json.RawMessage(`[]`)},
	} {
		if _, err := c.Identity(); err == nil {
			t.Errorf("Identity() accepted %s", c.ServerParameters)
		}
	}
}
