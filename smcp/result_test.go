package smcp

import (
	"encoding/json"
	"testing"
)

func decodeResult(t *testing.T, s string) CallToolResult {
	t.Helper()
	var r CallToolResult
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return r
}

func TestCallToolResultMarkers(t *testing.T) {
	tests := []struct {
		name      string
		json      string
		timeout   bool
		cancelled bool
		code      int
	}{
		{"plain", `{"content":[],"isError":false}`, false, false, 0},
		{"timeout meta", `{"content":[],"isError":true,"meta":{"a2c_timeout":true}}`, true, false, 0},
		{"timeout _meta", `{"content":[],"isError":true,"_meta":{"a2c_timeout":true}}`, true, false, 0},
		{"legacy timeout", `{"content":[],"isError":true,"meta":{"timeout":true}}`, true, false, 0},
		{"timeout false", `{"content":[],"isError":true,"meta":{"a2c_timeout":false}}`, false, false, 0},
		{"timeout string", `{"content":[],"isError":true,"meta":{"a2c_timeout":"true"}}`, false, false, 0},
		{"cancelled", `{"content":[],"isError":true,"meta":{"a2c_cancelled":true,"a2c_cancel_reason":"agent_requested"}}`, false, true, 0},
		{"cancelled _meta", `{"content":[],"isError":true,"_meta":{"a2c_cancelled":true}}`, false, true, 0},
		{"auth", `{"content":[],"isError":true,"meta":{"error_code":4006,"mcp_server":"fs"}}`, false, false, 4006},
		{"auth _meta", `{"content":[],"isError":true,"_meta":{"error_code":4007}}`, false, false, 4007},
		{"code fraction", `{"content":[],"isError":true,"meta":{"error_code":4006.5}}`, false, false, 0},
		{"code string", `{"content":[],"isError":true,"meta":{"error_code":"4006"}}`, false, false, 0},
		{"code huge", `{"content":[],"isError":true,"meta":{"error_code":1e300}}`, false, false, 0},
		{"meta wins", `{"content":[],"isError":true,"_meta":{"error_code":4007},"meta":{"error_code":4006}}`, false, false, 4006},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeResult(t, tt.json)
			if r.Timeout() != tt.timeout || r.Cancelled() != tt.cancelled || r.ErrorCode() != tt.code {
				t.Errorf("Timeout, Cancelled, ErrorCode = %v, %v, %d; want %v, %v, %d",
					r.Timeout(), r.Cancelled(), r.ErrorCode(), tt.timeout, tt.cancelled, tt.code)
			}
		})
	}
}

func TestCallToolResultMetaSpellings(t *testing.T) {
	r := decodeResult(t, `{"content":[],"isError":true,"_meta":{"a":1,"b":"under"},"meta":{"b":"plain","c":true}}`)
	for key, want := range map[string]any{"a": 1.0, "b": "plain", "c": true} {
		if got, ok := r.Marker(key); !ok || got != want {
			t.Errorf("Marker(%q) = %v, %v; want %v", key, got, ok, want)
		}
	}
	if _, ok := r.Marker("missing"); ok {
		t.Error("Marker(missing) reported present")
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[],"isError":true,"meta":{"a":1,"b":"plain","c":true}}`
	if string(out) != want {
		t.Errorf("re-encoded\n got %s\nwant %s", out, want)
	}
	var zero CallToolResult
	if _, ok := zero.Marker("a2c_timeout"); ok || zero.Timeout() || zero.Cancelled() || zero.ErrorCode() != 0 {
		t.Error("zero result reports markers")
	}
}

func TestCallToolResultErrorCodeGoValues(t *testing.T) {
	for _, v := range []any{4006, int64(4006), json.Number("4006"), 4006.0} {
		r := CallToolResult{Meta: map[string]any{MetaErrorCode: v}}
		if got := r.ErrorCode(); got != 4006 {
			t.Errorf("ErrorCode() with %T = %d", v, got)
		}
	}
}

func TestResultConstructors(t *testing.T) {
	tests := []struct {
		name string
		r    CallToolResult
		want string
	}{
		{"timeout", TimeoutResult("Tool call timed out after 30s"),
			`{"content":[{"type":"text","text":"Tool call timed out after 30s"}],"isError":true,"meta":{"a2c_timeout":true}}`},
		{"cancelled", CancelledResult(),
			`{"content":[{"type":"text","text":"Tool call cancelled"}],"isError":true,"meta":{"a2c_cancel_reason":"agent_requested","a2c_cancelled":true}}`},
		{"tool error", ToolErrorResult(CodeToolNotFound, "unknown tool"),
			`{"content":[{"type":"text","text":"unknown tool"}],"isError":true,"meta":{"error_code":4001}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			back := decodeResult(t, string(got))
			if back.Timeout() != tt.r.Timeout() || back.Cancelled() != tt.r.Cancelled() ||
				back.ErrorCode() != tt.r.ErrorCode() || back.Text() != tt.r.Text() || !back.IsError {
				t.Errorf("decoded result lost its markers: %+v", back)
			}
		})
	}
	r := CancelledResult()
	if v, _ := r.Marker(MetaCancelReason); v != CancelReasonAgentRequested {
		t.Errorf("cancel reason = %v", v)
	}
}

func TestCallToolResultText(t *testing.T) {
	r := decodeResult(t, `{"content":[{"type":"text","text":"a"},{"type":"image","data":"AA=="},{"type":"text","text":"b"},"junk"],"isError":false}`)
	if got := r.Text(); got != "a\nb" {
		t.Errorf("Text() = %q", got)
	}
}

func TestTextContentEscapes(t *testing.T) {
	var item map[string]string
	if err := json.Unmarshal(TextContent("a\"b\n<c>"), &item); err != nil {
		t.Fatal(err)
	}
	if item["type"] != "text" || item["text"] != "a\"b\n<c>" {
		t.Errorf("TextContent decoded to %v", item)
	}
}
