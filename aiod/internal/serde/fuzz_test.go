package serde

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// ref is the encoding/json reference for cmdFields.
type ref struct {
	Command *string           `json:"command"`
	Timeout *uint64           `json:"timeout"`
	Async   *bool             `json:"async"`
	Env     map[string]string `json:"env"`
	Args    []string          `json:"args"`
	Offset  *int64            `json:"offset"`
	Rows    *uint32           `json:"rows"`
	Ratio   *float64          `json:"ratio"`
	Data    json.RawMessage   `json:"data"`
	Opts    json.RawMessage   `json:"opts"`
}

// comparable reports whether encoding/json and serde should agree on body:
// an object of valid UTF-8 without surrogate escapes, whose known keys are
// spelled exactly, appear once, and hold values of the declared JSON type
// (encoding/json is case-insensitive, takes the last duplicate, and turns
// null into zero values where serde refuses them).
func comparable(body []byte) bool {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !utf8.Valid(body) || bytes.Contains(bytes.ToLower(body), []byte(`\ud`)) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return false
		}
		var f *Field
		for i := range cmdFields {
			if cmdFields[i].Name == key {
				f = &cmdFields[i]
			} else if strings.EqualFold(cmdFields[i].Name, key) {
				return false
			}
		}
		if f == nil {
			continue
		}
		if seen[key] {
			return false
		}
		seen[key] = true
		if string(raw) == "null" {
			if f.Required {
				return false
			}
			continue
		}
		c := raw[0]
		switch f.Kind {
		case String:
			if c != '"' {
				return false
			}
		case U64, I64, U32, F64:
			if c != '-' && (c < '0' || c > '9') || string(raw) == "-0" {
				return false
			}
		case Bool:
			if c != 't' && c != 'f' {
				return false
			}
		case StringList:
			var xs []json.RawMessage
			if json.Unmarshal(raw, &xs) != nil {
				return false
			}
			for _, x := range xs {
				if x[0] != '"' {
					return false
				}
			}
		case StringMap:
			var xs map[string]json.RawMessage
			if c != '{' || json.Unmarshal(raw, &xs) != nil {
				return false
			}
			for _, x := range xs {
				if x[0] != '"' {
					return false
				}
			}
		case Object:
			if c != '{' {
				return false
			}
		}
	}
	return seen["command"]
}

func FuzzDecode(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c.body))
	}
	for _, s := range []string{
		`{"command":"ls","timeout":5,"async":true,"env":{"a":"b"},"args":["x"],"offset":-3,"rows":2,"ratio":1.25e2,"data":{"k":[1,null]},"opts":{}}`,
		`{"command":"\u00e9\ud83d\ude00","x":[{"y":{}}],"data":null}`,
		"{\n\t\"command\" : \"a\" ,\r\n \"Timeout\": 1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := Decode(body, cmdFields)
		if err != nil {
			if err.Message == "" || len(err.Location) == 0 || err.Location[0] != "body" || err.Type == "" {
				t.Fatalf("malformed error %#v", err)
			}
		}
		if !comparable(body) {
			return
		}
		var r ref
		if json.Unmarshal(body, &r) != nil {
			return
		}
		if err != nil {
			// serde_json limits Value nesting and rejects ±inf numbers that
			// encoding/json accepts in a RawMessage.
			if strings.HasPrefix(err.Message, "recursion limit exceeded") || strings.HasPrefix(err.Message, "number out of range") {
				return
			}
			t.Fatalf("encoding/json accepts %q, Decode: %v", body, err)
		}
		want := map[string]any{"command": *r.Command}
		if r.Timeout != nil {
			want["timeout"] = *r.Timeout
		}
		if r.Async != nil {
			want["async"] = *r.Async
		}
		if r.Env != nil {
			want["env"] = r.Env
		}
		if r.Args != nil {
			want["args"] = r.Args
		}
		if r.Offset != nil {
			want["offset"] = *r.Offset
		}
		if r.Rows != nil {
			want["rows"] = *r.Rows
		}
		if r.Ratio != nil {
			want["ratio"] = *r.Ratio
		}
		if r.Data != nil && string(r.Data) != "null" {
			want["data"] = r.Data
		}
		if r.Opts != nil && string(r.Opts) != "null" {
			want["opts"] = r.Opts
		}
		if r, ok := got["ratio"].(float64); ok && math.IsNaN(r) {
			t.Fatalf("NaN")
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("body %q\n got %#v\nwant %#v", body, got, want)
		}
	})
}

func FuzzDecodeRawQuery(f *testing.F) {
	f.Add("path=a&start_line=1&end_line=-2&recursive=true&ratio=1.5&rows=3")
	f.Add("start_line=abc")
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := DecodeRawQuery(raw, queryFields)
		if err != nil && (err.Message == "" || err.Location[0] != "query") {
			t.Fatalf("malformed error %#v", err)
		}
	})
}
