package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestJoinRefusesInvalidUnicode sends join payloads as raw JSON text with
// lone UTF-16 surrogate escapes: decoded, both would be "x\uFFFD" and
// collide, so both are refused with a clear reason, while a real pair and
// a literal U+FFFD are names like any other.
func TestJoinRefusesInvalidUnicode(t *testing.T) {
	_, url := newTestServer(t, Config{})
	const refused = `false,"invalid payload: names must be valid Unicode (lone UTF-16 surrogate or invalid UTF-8)"`
	for _, tc := range []struct{ payload, want string }{
		{`{"role":"computer","name":"x\ud800","office_id":"o"}`, refused},
		{`{"role":"computer","name":"x\udc00","office_id":"o"}`, refused},
		{`{"role":"computer","name":"x\ud800\u0041","office_id":"o"}`, refused},
		{`{"role":"agent","name":"a","office_id":"o\udc00"}`, refused},
		{`{"role":"computer","name":"\ud83d\ude00","office_id":"o"}`, "true,null"},
		{`{"role":"computer","name":"x\ufffd","office_id":"o"}`, "true,null"},
	} {
		p := connect(t, url, nil)
		if got := strings.Join(p.call(smcp.EventJoinOffice, json.RawMessage(tc.payload)), ","); got != tc.want {
			t.Errorf("join %s = %s, want %s", tc.payload, got, tc.want)
		}
	}
	// A request routed by such a name is refused too, not sent to "x\uFFFD".
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	got := a.call(smcp.EventGetTools, json.RawMessage(`{"agent":"a","req_id":"r","computer":"x\ud800"}`))
	if e, ok := smcp.DecodeError([]byte(got[0])); !ok || e.Code != 400 {
		t.Errorf("get_tools to a lone-surrogate name = %s", got)
	}
}

func TestValidUnicodeJSON(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`"plain"`, true},
		{`"\ud83d\ude00"`, true},
		{`"\\ud800"`, true}, // an escaped backslash, then text
		{`"\ud800"`, false},
		{`"\udfff"`, false},
		{`"\ud800\ud800"`, false},
		{`"\ud800x"`, false},
		{`{"\ud800":1}`, false},
		{"\"\xff\"", false},
		{`"\u00e9"`, true},
	} {
		if got := validUnicodeJSON([]byte(tc.in)); got != tc.ok {
			t.Errorf("validUnicodeJSON(%s) = %v", tc.in, got)
		}
	}
}
