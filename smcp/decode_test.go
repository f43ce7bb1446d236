package smcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		v    any
		code int
		msg  string
	}{
		{"not object: array", `[1]`, new(ToolCallReq), 400, "invalid payload: must be a JSON object"},
		{"not object: null", `null`, new(ToolCallReq), 400, "invalid payload: must be a JSON object"},
		{"not object: string", `"x"`, new(ToolCallReq), 400, "invalid payload: must be a JSON object"},
		{"not object: number", `1`, new(ToolCallReq), 400, "invalid payload: must be a JSON object"},
		{"malformed", `{"agent":`, new(ToolCallReq), 400, "invalid payload: malformed JSON"},
		{"empty", ``, new(ToolCallReq), 400, "invalid payload: malformed JSON"},
		{"trailing", `{} x`, new(ToolCallReq), 400, "invalid payload: malformed JSON"},
		{"fractional timeout", `{"timeout":1.5}`, new(ToolCallReq), 400, `invalid payload: field "timeout" must be integer`},
		{"string timeout", `{"timeout":"30"}`, new(ToolCallReq), 400, `invalid payload: field "timeout" must be integer`},
		{"huge timeout", `{"timeout":1e30}`, new(ToolCallReq), 400, `invalid payload: field "timeout" must be integer`},
		{"numeric agent", `{"agent":5}`, new(ToolCallReq), 400, `invalid payload: field "agent" must be string`},
		{"object name", `{"name":{}}`, new(EnterOfficeReq), 400, `invalid payload: field "name" must be string`},
		{"string desktop_size", `{"desktop_size":"3"}`, new(GetDesktopReq), 400, `invalid payload: field "desktop_size" must be integer`},
		{"bool window", `{"window":true}`, new(GetDesktopReq), 400, `invalid payload: field "window" must be string`},
		{"string offset", `{"chunk_offset":"0"}`, new(GetBlobReq), 400, `invalid payload: field "chunk_offset" must be integer`},
		{"nested", `{"tools":[{"name":1}]}`, new(GetToolsRet), 400, `invalid payload: field "tools.name" must be string`},
		{"eof flag", `{"eof":"yes"}`, new(GetBlobRet), 400, `invalid payload: field "eof" must be boolean`},
		{"non-pointer", `{}`, ToolCallReq{}, 500, "smcp.Decode: target must be a non-nil pointer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Decode([]byte(tt.raw), tt.v)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode() = %v, want *Error", err)
			}
			if e.Code != tt.code || e.Message != tt.msg {
				t.Errorf("Decode() = %d %q, want %d %q", e.Code, e.Message, tt.code, tt.msg)
			}
		})
	}
}

func TestDecodeFieldPathIsBounded(t *testing.T) {
	// encoding/json names fields by their struct path, not by map keys, so
	// input keys never reach the message.
	key := strings.Repeat(`k\u0001`, 5000) // a control character, JSON-escaped
	raw := `{"tool_meta":{"` + key + `":{"tags":5}}}`
	err := Decode([]byte(raw), new(MCPServerConfig))
	var e *Error
	if !errors.As(err, &e) || e.Message != `invalid payload: field "tool_meta.tags" must be array` {
		t.Fatalf("Decode() = %v", err)
	}
	// Should a path ever carry input, it is escaped and cut.
	got := escapeShort(strings.Repeat("k\x01\xff", 5000), 64)
	if len(got) > 4*64+3 || strings.ContainsAny(got, "\x01\"") || strings.Contains(got, "\xff") || !strings.HasSuffix(got, "...") {
		t.Errorf("escapeShort = %q", got)
	}
	if got := quoteShort("é\n", 64); got != `"\u00e9\n"` {
		t.Errorf("quoteShort = %s", got)
	}
	if got := truncate("aé", 2); got != "a" {
		t.Errorf("truncate cut inside a rune: %q", got)
	}
}

func TestDecodeIgnoresUnknownAndCaseFoldedKeys(t *testing.T) {
	raw := `{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"t","timeout":30,
		"TIMEOUT":9999,"Computer":"evil","Tool_Name":"x","future_field":{"a":1}}`
	var r ToolCallReq
	if err := DecodeRequest([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	if r.Timeout != 30 || r.Computer != "pc" || r.ToolName != "t" {
		t.Errorf("case-folded keys leaked: %+v", r)
	}
	// A folded key alone is ignored, not used.
	var l LeaveOfficeReq
	if err := Decode([]byte(`{"OFFICE_ID":"o"}`), &l); err != nil || l.OfficeID != "" {
		t.Errorf("Decode = %+v, %v", l, err)
	}
	// Types that decode themselves keep their own rules.
	var res CallToolResult
	if err := Decode([]byte(`{"content":[{"type":"text","text":"x"}],"isError":true,"meta":{"a2c_timeout":true}}`), &res); err != nil ||
		!res.Timeout() || len(res.Content) != 1 {
		t.Errorf("Decode(CallToolResult) = %+v, %v", res, err)
	}
	// So do maps.
	var m map[string]any
	if err := Decode([]byte(`{"A":1,"a":2}`), &m); err != nil || len(m) != 2 {
		t.Errorf("Decode(map) = %v, %v", m, err)
	}
}

func TestDecodeRequest(t *testing.T) {
	var r EnterOfficeReq
	err := DecodeRequest([]byte(`{"role":"admin","name":"x","office_id":"o"}`), &r)
	if e, ok := err.(*Error); !ok || e.Code != 400 || !strings.Contains(e.Message, `"role"`) {
		t.Errorf("DecodeRequest = %v", err)
	}
	err = DecodeRequest([]byte(`[]`), &r)
	if e, ok := err.(*Error); !ok || e.Message != "invalid payload: must be a JSON object" {
		t.Errorf("DecodeRequest = %v", err)
	}
	if err := DecodeRequest([]byte(`{"role":"computer","name":"pc","office_id":"o"}`), &r); err != nil {
		t.Errorf("DecodeRequest = %v", err)
	}
	var tc ToolCallReq
	err = DecodeRequest([]byte(`{"agent":"a","req_id":"r","computer":"c","tool_name":"t","params":[],"timeout":5}`), &tc)
	if e, ok := err.(*Error); !ok || e.Message != `invalid payload: field "params" must be a JSON object` {
		t.Errorf("DecodeRequest = %v", err)
	}
}

func TestDecodeKeepsParamsVerbatim(t *testing.T) {
	raw := `{"agent":"a","req_id":"r","computer":"c","tool_name":"t","params":{"b": 1, "a": "<x>"},"timeout":5}`
	var r ToolCallReq
	if err := DecodeRequest([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	if string(r.Params) != `{"b": 1, "a": "<x>"}` {
		t.Errorf("Params = %s", r.Params)
	}
	var args map[string]any
	if err := json.Unmarshal(r.Params, &args); err != nil || args["a"] != "<x>" {
		t.Errorf("params decode: %v %v", args, err)
	}
}

func TestScanKeys(t *testing.T) {
	exact := map[string]bool{"agent": true, "timeout": true}
	for _, tc := range []struct {
		in         string
		folded, ok bool
	}{
		{`{}`, false, true},
		{` { "agent" : "a" , "timeout":5 } `, false, true},
		{`{"agent":{"x":[1,"}",{"y":"\""}]},"other":null}`, false, true},
		{`{"Timeout":5}`, true, true},
		{`{"TIMEOUT":5,"agent":"a"}`, true, true},
		{`{"a\"b":1}`, false, false}, // escaped key: careful path
		{`[1]`, false, false},
		{`{"agent":"a"`, false, false},
		{`{"agent":"a"}x`, false, false},
		{`{"agent" "a"}`, false, false},
		{`{"agent":"a",}`, false, false},
	} {
		folded, ok := scanKeys([]byte(tc.in), exact)
		if folded != tc.folded || ok != tc.ok {
			t.Errorf("scanKeys(%s) = %v, %v; want %v, %v", tc.in, folded, ok, tc.folded, tc.ok)
		}
	}
}

func BenchmarkDecodeToolCallReq(b *testing.B) {
	raw := []byte(`{"agent":"a","req_id":"0-12","computer":"c","tool_name":"b__echo","params":{"text":"hello"},"timeout":30}`)
	for b.Loop() {
		var r ToolCallReq
		if err := DecodeRequest(raw, &r); err != nil {
			b.Fatal(err)
		}
	}
}
