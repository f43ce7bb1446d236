package serde

import (
	"encoding/json"
	"reflect"
	"testing"
)

type CommandRequest struct {
	Command string            `json:"command" serde:"required"`
	Timeout *uint64           `json:"timeout"`
	Env     map[string]string `json:"env"`
	Args    []string          `json:"args"`
	Data    json.RawMessage   `json:"data"`
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
