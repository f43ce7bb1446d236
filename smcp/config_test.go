package smcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestToolMetaEncoding(t *testing.T) {
	yes, alias := true, "cat"
	m := ToolMeta{AutoApply: &yes, Alias: &alias, Tags: []string{"browser"}}
	s, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"auto_apply":true,"alias":"cat","tags":["browser"]}`; s != want {
		t.Errorf("Encode() = %s, want %s", s, want)
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
