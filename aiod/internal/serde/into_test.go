package serde

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type CommandRequest struct {
	Command string            `json:"command" serde:"required"`
	Timeout *uint64           `json:"timeout"`
	Env     map[string]string `json:"env"`
	Args    []string          `json:"args"`
	Data    json.RawMessage   `json:"data"`
	//lint:ignore U1000 an unexported field the decoder must skip
	skipped int
}

func TestDecodeInto(t *testing.T) {
	var r CommandRequest
	if err := DecodeInto([]byte(`{}`), &r); err == nil || err.Message != "missing field `command` at line 1 column 2" ||
		!reflect.DeepEqual(err.Location, []string{"body", "command"}) {
		t.Fatalf("got %v", err)
	}
	if err := DecodeInto([]byte(`7`), &r); err == nil || err.Message != "invalid type: integer `7`, expected struct CommandRequest at line 1 column 1" {
		t.Fatalf("got %v", err)
	}
	if err := DecodeInto([]byte(`{"command":"ls","timeout":3,"env":{"A":"b"},"args":["x"],"data":{"k":1}}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Command != "ls" || r.Timeout == nil || *r.Timeout != 3 || r.Env["A"] != "b" || len(r.Args) != 1 || string(r.Data) != `{"k":1}` {
		t.Fatalf("got %+v", r)
	}
	var q struct {
		Path      string  `json:"path" serde:"required"`
		StartLine *uint64 `json:"start_line"`
	}
	if err := DecodeQueryInto("start_line=abc", &q); err == nil || err.Message != "invalid digit found in string" {
		t.Fatalf("got %v", err)
	}
	if err := DecodeQueryInto("path=/a&start_line=4", &q); err != nil || q.Path != "/a" || *q.StartLine != 4 {
		t.Fatalf("got %v %+v", err, q)
	}
}

// TestEnumVariants: a string field tagged enum= answers serde's unknown
// variant error, positioned after the string in a body, plain in a query.
func TestEnumVariants(t *testing.T) {
	type req struct {
		Mode  *string `json:"mode" serde:"enum=sync|async"`
		Shell string  `json:"shell" serde:"required,enum=auto|bash|sh"`
	}
	cases := []struct {
		body, want string
	}{
		{`{"shell":"bash","mode":"async"}`, ""},
		{`{"shell":"zsh"}`, "unknown variant `zsh`, expected one of `auto`, `bash`, `sh` at line 1 column 14"},
		{`{"shell":"sh","mode":"later"}`, "unknown variant `later`, expected `sync` or `async` at line 1 column 28"},
		{`{"mode":null,"shell":"sh"}`, ""},
	}
	for _, c := range cases {
		var r req
		err := DecodeInto([]byte(c.body), &r)
		if (c.want == "") != (err == nil) || (err != nil && (err.Message != c.want || err.Type != TypeValue || strings.Join(err.Location, ",") != "body,"+map[bool]string{true: "shell", false: "mode"}[strings.Contains(c.body, "zsh")])) {
			t.Errorf("%s: %+v, want %q", c.body, err, c.want)
		}
	}
	var q req
	if err := DecodeQueryInto("shell=fish", &q); err == nil || err.Message != "unknown variant `fish`, expected one of `auto`, `bash`, `sh`" || err.Type != TypeValue {
		t.Errorf("query: %+v", err)
	}
}
