package smcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"0.3.0", "0.2.1", "1.2.0", "01.2.3", "", "abc", "0.3.0-dev",
		"1.2", "1.2.3.4", "2147483647.0.0", "2147483648.0.0", " 1.2.3", "1..3", "\xff.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidVersion) || len(err.Error()) > 200 {
				t.Fatalf("bad error for %q: %v", s, err)
			}
			e := CheckVersion(s, ProtocolVersion)
			if e == nil || e.Code != CodeBadRequest || len(e.Message) > 200 {
				t.Fatalf("CheckVersion(%q) = %v", s, e)
			}
			for i := 0; i < len(e.Message); i++ {
				if c := e.Message[i]; c < 0x20 || c > 0x7e {
					t.Fatalf("CheckVersion(%q) message has byte %#x", s, c)
				}
			}
			return
		}
		if strings.Count(s, ".") != 2 || strings.Trim(s, "0123456789.") != "" {
			t.Fatalf("ParseVersion accepted %q", s)
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("ParseVersion(%q) = %v", s, v)
		}
		if back, err := ParseVersion(v.String()); err != nil || back != v {
			t.Fatalf("String() of %v does not parse back: %v, %v", v, back, err)
		}
		switch e := CheckVersion(s, ProtocolVersion); {
		case e == nil:
			if !Compatible(v, Version{0, 3, 0}) {
				t.Fatalf("CheckVersion admitted incompatible %q", s)
			}
		case e.Code != CodeVersionMismatch || e.ClientVersion != s:
			t.Fatalf("CheckVersion(%q) = %v", s, e)
		}
	})
}

func FuzzDecodeError(f *testing.F) {
	for _, s := range []string{
		`{"code":4008,"message":"Protocol version mismatch","server_version":"0.2.0","client_version":"0.1.5","min_supported":"0.2.0","max_supported":"0.2.999"}`,
		`{"code":4014,"message":"m","mcp_server_name":"x","extra":[1,{"a":null}]}`,
		`{"code":4015,"message":"m","mcp_server":"x","mcp_server_name":5,"capability":"resources"}`,
		`{"code":4017,"message":"m","details":{"reason":"too_large","total_size":1e3}}`,
		`{"code":400,"message":"<&>","details":null,"":"\u2028"}`,
		`{"error":{"code":400}}`, `{"code":"1"}`, `{"code":1.0}`, `[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, ok := DecodeError(raw)
		if !ok {
			if e != nil {
				t.Fatal("non-nil *Error with ok=false")
			}
			return
		}
		first, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("re-encoding %q: %v", raw, err)
		}
		e2, ok := DecodeError(first)
		if !ok {
			t.Fatalf("re-encoded payload %s is not an ErrorPayload", first)
		}
		if e2.Code != e.Code || e2.Message != e.Message {
			t.Fatalf("code/message changed: %+v -> %+v", e, e2)
		}
		second, err := json.Marshal(e2)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("encoding is not stable:\n%s\n%s (%v)", first, second, err)
		}
		_ = e.Error()
	})
}

func FuzzDecodeToolCallReq(f *testing.F) {
	for _, s := range []string{
		`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"fs__read","params":{"path":"/tmp/x"},"timeout":30}`,
		`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"t","timeout":1}`,
		`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"t","params":null,"timeout":3600}`,
		`{"agent":"bot","req_id":"r1","computer":"pc","tool_name":"t","params":{"a":"<\u2028>","b":[1e400]},"timeout":5,"TIMEOUT":7}`,
		`{"agent":"b\u0000","req_id":"r","computer":"c","tool_name":"t","timeout":5}`,
		`{"timeout":1.5}`, `{"params":[]}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var r ToolCallReq
		err := Decode(raw, &r)
		if err == nil {
			err = r.Validate()
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeBadRequest {
				t.Fatalf("error is not a 400 *Error: %#v", err)
			}
			if len(e.Message) > 200 || !utf8.ValidString(e.Message) {
				t.Fatalf("unsafe message: %q", e.Message)
			}
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encoding accepted request: %v", err)
		}
		var r2 ToolCallReq
		if err := DecodeRequest(out, &r2); err != nil {
			t.Fatalf("re-encoded request %s rejected: %v", out, err)
		}
		if r.Agent != r2.Agent || r.ReqID != r2.ReqID || r.Computer != r2.Computer ||
			r.ToolName != r2.ToolName || r.Timeout != r2.Timeout {
			t.Fatalf("fields changed:\n%+v\n%+v", r, r2)
		}
		if !sameJSON(t, r.Params, r2.Params) {
			t.Fatalf("params changed: %s -> %s", r.Params, r2.Params)
		}
	})
}

// sameJSON reports whether a and b hold the same JSON value, numbers
// compared by their text (both absent counts as the same).
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	decode := func(raw json.RawMessage) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("params %s: %v", raw, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}
