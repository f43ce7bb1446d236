package serde

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// Source legend for expected messages:
//   [doc]   given verbatim by aiod's documentation (spec §2 req 5 and 9).
//   [serde] derived from serde_json / serde / Rust std source behaviour
//           (ErrorCode Display texts, position_of_index, peek_error vs error,
//           fix_position after end_map), not confirmed against a running aiod.

var cmdFields = []Field{
	{Name: "command", Kind: String, Required: true},
	{Name: "timeout", Kind: U64},
	{Name: "async", Kind: Bool},
	{Name: "env", Kind: StringMap},
	{Name: "args", Kind: StringList},
	{Name: "offset", Kind: I64},
	{Name: "rows", Kind: U32},
	{Name: "ratio", Kind: F64},
	{Name: "data", Kind: Any},
	{Name: "opts", Kind: Object},
}

type decodeCase struct {
	name, body string
	loc        []string
	msg, typ   string
	src        string // "doc" or "serde"
}

func body(f string) []string { return []string{"body", f} }

var root = []string{"body"}

var decodeCases = []decodeCase{
	// missing fields
	{"empty object", `{}`, body("command"), "missing field `command` at line 1 column 2", TypeMissing, "doc"},
	{"missing after other field", `{"a":1}`, body("command"), "missing field `command` at line 1 column 7", TypeMissing, "serde"},
	{"missing multiline", "{\n  \"a\": 1\n}", body("command"), "missing field `command` at line 3 column 1", TypeMissing, "serde"},
	{"missing with trailing space", `{"a":1} `, body("command"), "missing field `command` at line 1 column 7", TypeMissing, "serde"},
	{"type error before missing", `{"timeout":"x"}`, body("timeout"), `invalid type: string "x", expected u64 at line 1 column 14`, TypeType, "serde"},
	// invalid type, every unexpected description
	{"integer for string", `{"command":5}`, body("command"), "invalid type: integer `5`, expected a string at line 1 column 12", TypeType, "serde"},
	{"negative for string", `{"command":-5}`, body("command"), "invalid type: integer `-5`, expected a string at line 1 column 13", TypeType, "serde"},
	{"float for string", `{"command":1.5}`, body("command"), "invalid type: floating point `1.5`, expected a string at line 1 column 14", TypeType, "serde"},
	{"bool for string", `{"command":true}`, body("command"), "invalid type: boolean `true`, expected a string at line 1 column 15", TypeType, "serde"},
	{"null for required", `{"command":null}`, body("command"), "invalid type: null, expected a string at line 1 column 15", TypeType, "serde"},
	{"seq for string", `{"command":[]}`, body("command"), "invalid type: sequence, expected a string at line 1 column 11", TypeType, "serde"},
	{"map for string", `{"command":{}}`, body("command"), "invalid type: map, expected a string at line 1 column 11", TypeType, "serde"},
	{"string for bool", `{"command":"ls","async":"yes"}`, body("async"), `invalid type: string "yes", expected a boolean at line 1 column 29`, TypeType, "serde"},
	{"int for bool", `{"command":"ls","async":1}`, body("async"), "invalid type: integer `1`, expected a boolean at line 1 column 25", TypeType, "serde"},
	{"string for seq", `{"command":"ls","args":"x"}`, body("args"), `invalid type: string "x", expected a sequence at line 1 column 26`, TypeType, "serde"},
	{"int in seq", `{"command":"ls","args":[1]}`, body("args"), "invalid type: integer `1`, expected a string at line 1 column 25", TypeType, "serde"},
	{"seq for map", `{"command":"ls","env":[]}`, body("env"), "invalid type: sequence, expected a map at line 1 column 22", TypeType, "serde"},
	{"int in map", `{"command":"ls","env":{"A":1}}`, body("env"), "invalid type: integer `1`, expected a string at line 1 column 28", TypeType, "serde"},
	{"string for f64", `{"command":"ls","ratio":"1"}`, body("ratio"), `invalid type: string "1", expected f64 at line 1 column 27`, TypeType, "serde"},
	{"string for i64", `{"command":"ls","offset":"1"}`, body("offset"), `invalid type: string "1", expected i64 at line 1 column 28`, TypeType, "serde"},
	{"seq for object", `{"command":"ls","opts":[]}`, body("opts"), "invalid type: sequence, expected a map at line 1 column 23", TypeType, "serde"},
	{"float for u64", `{"command":"ls","timeout":1.5}`, body("timeout"), "invalid type: floating point `1.5`, expected u64 at line 1 column 29", TypeType, "serde"},
	{"exp for u64", `{"command":"ls","timeout":1e3}`, body("timeout"), "invalid type: floating point `1000.0`, expected u64 at line 1 column 29", TypeType, "serde"},
	{"minus zero for i64", `{"command":"ls","offset":-0}`, body("offset"), "invalid type: floating point `-0.0`, expected i64 at line 1 column 27", TypeType, "serde"},
	{"u64 overflow", `{"command":"ls","timeout":18446744073709551616}`, body("timeout"), "invalid type: floating point `1.8446744073709552e19`, expected u64 at line 1 column 46", TypeType, "serde"},
	{"escaped string in message", `{"timeout":"a\"b\n\u00e9\u0301"}`, body("timeout"), `invalid type: string "a\"b\né\u{301}", expected u64 at line 1 column 31`, TypeType, "serde"},
	{"multiline type error", "{\n\"timeout\": \"x\"\n}", body("timeout"), `invalid type: string "x", expected u64 at line 2 column 14`, TypeType, "serde"},
	// invalid value
	{"negative for u64", `{"command":"ls","timeout":-1}`, body("timeout"), "invalid value: integer `-1`, expected u64 at line 1 column 28", TypeValue, "serde"},
	{"u32 overflow", `{"command":"ls","rows":5000000000}`, body("rows"), "invalid value: integer `5000000000`, expected u32 at line 1 column 33", TypeValue, "serde"},
	{"negative u32", `{"command":"ls","rows":-1}`, body("rows"), "invalid value: integer `-1`, expected u32 at line 1 column 25", TypeValue, "serde"},
	{"i64 overflow", `{"command":"ls","offset":9223372036854775808}`, body("offset"), "invalid value: integer `9223372036854775808`, expected i64 at line 1 column 44", TypeValue, "serde"},
	// duplicate
	{"duplicate", `{"command":"a","command":"b"}`, body("command"), "duplicate field `command` at line 1 column 24", TypeValue, "serde"},
	{"duplicate after null", `{"command":"a","timeout":null,"timeout":1}`, body("timeout"), "duplicate field `timeout` at line 1 column 39", TypeValue, "serde"},
	// syntax
	{"empty body", ``, root, "EOF while parsing a value at line 1 column 0", TypeJSONDecode, "serde"},
	{"not json", `x`, root, "expected value at line 1 column 1", TypeJSONDecode, "serde"},
	{"key not string", `{1:2}`, root, "key must be a string at line 1 column 2", TypeJSONDecode, "serde"},
	{"trailing characters", `{"command":"ls"}x`, root, "trailing characters at line 1 column 17", TypeJSONDecode, "serde"},
	{"missing beats trailing", `{}x`, body("command"), "missing field `command` at line 1 column 2", TypeMissing, "serde"},
	{"trailing after newline", "{\"command\":\"ls\"}\n}", root, "trailing characters at line 2 column 1", TypeJSONDecode, "serde"},
	{"eof in object", `{"command":"ls"`, root, "EOF while parsing an object at line 1 column 15", TypeJSONDecode, "serde"},
	{"eof after brace", `{`, root, "EOF while parsing an object at line 1 column 1", TypeJSONDecode, "serde"},
	{"missing colon", `{"command" "ls"}`, root, "expected `:` at line 1 column 12", TypeJSONDecode, "serde"},
	{"missing comma", `{"command":"ls" "x"}`, root, "expected `,` or `}` at line 1 column 17", TypeJSONDecode, "serde"},
	{"trailing comma", `{"command":"ls",}`, root, "trailing comma at line 1 column 17", TypeJSONDecode, "serde"},
	{"trailing comma in list", `{"command":"ls","args":["a",]}`, root, "trailing comma at line 1 column 29", TypeJSONDecode, "serde"},
	{"invalid escape", `{"command":"\q"}`, root, "invalid escape at line 1 column 14", TypeJSONDecode, "serde"},
	{"control char", "{\"command\":\"a\x01\"}", root, `control character (\u0000-\u001F) found while parsing a string at line 1 column 14`, TypeJSONDecode, "serde"},
	{"newline in string", "{\"command\":\"a\nb\"}", root, `control character (\u0000-\u001F) found while parsing a string at line 2 column 0`, TypeJSONDecode, "serde"},
	{"eof in string", `{"command":"ab`, root, "EOF while parsing a string at line 1 column 14", TypeJSONDecode, "serde"},
	{"bad ident", `{"command":nul}`, root, "expected ident at line 1 column 15", TypeJSONDecode, "serde"},
	{"lone surrogate", `{"command":"\udc00"}`, root, "lone leading surrogate in hex escape at line 1 column 18", TypeJSONDecode, "serde"},
	{"unpaired surrogate", `{"command":"\ud800x"}`, root, "unexpected end of hex escape at line 1 column 19", TypeJSONDecode, "serde"},
	{"invalid utf8", "{\"command\":\"\xff\"}", root, "invalid unicode code point at line 1 column 14", TypeJSONDecode, "serde"},
	{"leading zero", `{"command":"ls","timeout":01}`, root, "invalid number at line 1 column 28", TypeJSONDecode, "serde"},
	{"bare minus", `{"command":"ls","timeout":-}`, root, "invalid number at line 1 column 28", TypeJSONDecode, "serde"},
	{"dot without digits", `{"command":"ls","ratio":1.}`, root, "invalid number at line 1 column 27", TypeJSONDecode, "serde"},
	{"number out of range", `{"command":"ls","ratio":1e400}`, root, "number out of range at line 1 column 29", TypeJSONDecode, "serde"},
	{"error in ignored value", `{"x":[1,]}`, root, "expected value at line 1 column 9", TypeJSONDecode, "serde"},
	{"eof in ignored list", `{"x":[1`, root, "EOF while parsing a list at line 1 column 7", TypeJSONDecode, "serde"},
	// struct-level
	{"top-level string", `"x"`, root, `invalid type: string "x", expected struct Request at line 1 column 3`, TypeType, "serde"},
	{"top-level null", `null`, root, `invalid type: null, expected struct Request at line 1 column 4`, TypeType, "serde"},
	{"top-level short seq", `["ls"]`, root, "invalid length 1, expected struct Request with 10 elements at line 1 column 6", TypeValue, "serde"},
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			v, err := Decode([]byte(c.body), cmdFields)
			if err == nil {
				t.Fatalf("Decode(%q) = %v, want error %q", c.body, v, c.msg)
			}
			want := &Error{Location: c.loc, Message: c.msg, Type: c.typ}
			if !reflect.DeepEqual(err, want) {
				t.Errorf("Decode(%q)\n got %#v\nwant %#v", c.body, err, want)
			}
		})
	}
}

func TestDecodeOK(t *testing.T) {
	cases := []struct {
		body string
		want map[string]any
	}{
		{`{"command":"ls"}`, map[string]any{"command": "ls"}},
		{` {"command" : "ls" , "timeout" : null } `, map[string]any{"command": "ls"}},
		{`{"command":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00","x":{"y":[1,2.5e-3,{"z":null}],"w":"\u0000"}}`,
			map[string]any{"command": "a\"\\/\b\f\n\r\t\u00e9\U0001F600"}},
		{`{"command":"ls","timeout":18446744073709551615,"async":false,"env":{"A":"1","A":"2"},"args":[],"offset":-9223372036854775808,"rows":4294967295,"ratio":-1,"data":[1, {"a":null}],"opts":{"k":[true]}}`,
			map[string]any{"command": "ls", "timeout": uint64(18446744073709551615), "async": false, "env": map[string]string{"A": "2"},
				"args": []string{}, "offset": int64(-9223372036854775808), "rows": uint32(4294967295), "ratio": float64(-1),
				"data": json.RawMessage(`[1, {"a":null}]`), "opts": json.RawMessage(`{"k":[true]}`)}},
		{"{\"command\":\"ls\",\"ratio\":0.1,\"unknown\":\"\xff\"}", map[string]any{"command": "ls", "ratio": 0.1}},
		{`{"command":"ls","x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, map[string]any{"command": "ls"}},
		{`["ls",1,true,{},[],0,0,0,null,{}]`, map[string]any{"command": "ls", "timeout": uint64(1), "async": true,
			"env": map[string]string{}, "args": []string{}, "offset": int64(0), "rows": uint32(0), "ratio": float64(0), "opts": json.RawMessage(`{}`)}},
	}
	for _, c := range cases {
		got, err := Decode([]byte(c.body), cmdFields)
		if err != nil {
			t.Errorf("Decode(%q): %v", c.body, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Decode(%q)\n got %#v\nwant %#v", c.body, got, c.want)
		}
	}
}

func TestRecursionLimit(t *testing.T) {
	ok := `{"command":"ls","data":` + strings.Repeat("[", 126) + strings.Repeat("]", 126) + `}`
	if _, err := Decode([]byte(ok), cmdFields); err != nil {
		t.Fatalf("126 levels: %v", err)
	}
	bad := `{"command":"ls","data":` + strings.Repeat("[", 127) + strings.Repeat("]", 127) + `}`
	_, err := Decode([]byte(bad), cmdFields)
	if err == nil || err.Message != "recursion limit exceeded at line 1 column 150" {
		t.Fatalf("127 levels: %v", err)
	}
}

func TestRyuFormat(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 1.5: "1.5", 0.001234: "0.001234", 1e-7: "1e-7", 1.5e-7: "1.5e-7", 1e15: "1000000000000000.0",
		1e16: "1e16", 1.8446744073709552e19: "1.8446744073709552e19", 123456.789: "123456.789", -2.5: "-2.5", 0.0001: "0.0001", 0.00001: "0.00001", 1e-6: "1e-6",
	} {
		if got := ryuFormat(f); got != want {
			t.Errorf("ryuFormat(%v) = %q, want %q", f, got, want)
		}
	}
}

var queryFields = []Field{
	{Name: "path", Kind: String, Required: true},
	{Name: "start_line", Kind: U64},
	{Name: "end_line", Kind: I64},
	{Name: "recursive", Kind: Bool},
	{Name: "ratio", Kind: F64},
	{Name: "rows", Kind: U32},
}

func TestDecodeQuery(t *testing.T) {
	q := []string{"query"}
	cases := []struct {
		name, raw string
		loc       []string
		msg, typ  string
		src       string
	}{
		{"missing path", ``, []string{"query", "path"}, "missing field `path`", TypeMissing, "doc"},
		{"bad int", `path=a&start_line=abc`, q, "invalid digit found in string", TypeType, "doc"},
		{"type error before missing", `start_line=abc`, q, "invalid digit found in string", TypeType, "serde"},
		{"empty int", `path=a&start_line=`, q, "cannot parse integer from empty string", TypeType, "serde"},
		{"negative u64", `path=a&start_line=-1`, q, "invalid digit found in string", TypeType, "serde"},
		{"u64 overflow", `path=a&start_line=18446744073709551616`, q, "number too large to fit in target type", TypeType, "serde"},
		{"overflow before bad digit", `path=a&start_line=99999999999999999999x`, q, "number too large to fit in target type", TypeType, "serde"},
		{"u32 overflow", `path=a&rows=4294967296`, q, "number too large to fit in target type", TypeType, "serde"},
		{"i64 underflow", `path=a&end_line=-9223372036854775809`, q, "number too small to fit in target type", TypeType, "serde"},
		{"bare sign", `path=a&end_line=-`, q, "invalid digit found in string", TypeType, "serde"},
		{"bad bool", `path=a&recursive=1`, q, "provided string was not `true` or `false`", TypeType, "serde"},
		{"bad float", `path=a&ratio=x`, q, "invalid float literal", TypeType, "serde"},
		{"empty float", `path=a&ratio=`, q, "cannot parse float from empty string", TypeType, "serde"},
		{"duplicate", `path=a&path=b`, q, "duplicate field `path`", TypeValue, "serde"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := &Error{Location: c.loc, Message: c.msg, Type: c.typ}
			_, err := DecodeRawQuery(c.raw, queryFields)
			if !reflect.DeepEqual(err, want) {
				t.Errorf("DecodeRawQuery(%q)\n got %#v\nwant %#v", c.raw, err, want)
			}
			vals, perr := url.ParseQuery(c.raw)
			if perr != nil {
				t.Fatal(perr)
			}
			_, err = DecodeQuery(vals, queryFields)
			if !reflect.DeepEqual(err, want) {
				t.Errorf("DecodeQuery(%q)\n got %#v\nwant %#v", c.raw, err, want)
			}
		})
	}
	got, err := DecodeRawQuery(`path=%2Ftmp+x&start_line=%2B5&end_line=-3&recursive=true&ratio=.5&rows=7&other=%zz`, queryFields)
	want := map[string]any{"path": "/tmp x", "start_line": uint64(5), "end_line": int64(-3), "recursive": true, "ratio": 0.5, "rows": uint32(7)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeRawQuery ok case: %#v, %v", got, err)
	}
}
