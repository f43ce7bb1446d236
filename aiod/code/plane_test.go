package code

import (
	"net/http"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

func TestValidation(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"language", map[string]any{"language": "ruby", "code": "puts 1"}, "Unsupported language 'ruby'. Supported: python, javascript"},
		{"empty code", map[string]any{"language": "js", "code": ""}, "code must not be empty"},
		{"timeout 0", map[string]any{"language": "js", "code": "1", "timeout": 0}, "timeout must be between 1 and 900 seconds"},
		{"timeout 901", map[string]any{"language": "js", "code": "1", "timeout": 901}, "timeout must be between 1 and 900 seconds"},
		{"cwd", map[string]any{"language": "js", "code": "1", "cwd": "/no/such/dir"}, "cwd is not a directory: /no/such/dir"},
		{"missing code", map[string]any{"language": "js"}, "Request data validation failed"},
	} {
		if _, rp := h.run(c.body, http.StatusUnprocessableEntity); rp.Message != c.msg {
			t.Errorf("%s: %s", c.name, rp.raw)
		}
	}
	rp := h.do("POST", "/v1/code/execute", map[string]any{"language": "ruby", "code": "puts 1"})
	if rp.status != 422 || len(rp.Errors) != 1 || strings.Join(rp.Errors[0].Location, ".") != "body.language" || rp.Errors[0].Type != "enum" ||
		rp.Errors[0].Message != "Unsupported language 'ruby'. Supported: python, javascript" {
		t.Errorf("v1 language: %s", rp.raw)
	}
	if rp = h.do("GET", "/v2/code/sessions/nope", nil); rp.status != http.StatusNotFound {
		t.Errorf("unknown session: %s", rp.raw)
	}
	if rp = h.do("DELETE", "/v2/code/sessions/nope", nil); rp.status != 200 || !rp.Success || !strings.Contains(rp.raw, `"deleted":false`) {
		t.Errorf("unknown delete: %s", rp.raw)
	}
	if rp = h.do("GET", "/v2/code/info", nil); !strings.Contains(rp.raw, `"backend":"kernel"`) || !strings.Contains(rp.raw, `"max_timeout":900`) {
		t.Errorf("info: %s", rp.raw)
	}
}

// TestDefaultCaps checks the default caps' messages without starting
// processes: sessions are created lazily, so filling the table is cheap.
func TestDefaultCaps(t *testing.T) {
	e := NewEngine(Config{})
	for _, c := range []struct {
		lang string
		n    int
		msg  string
	}{{Python, 5, "Maximum number of kernel sessions (5) reached"}, {JavaScript, 20, "Maximum number of sessions (20) reached"}} {
		for i := range c.n {
			if _, err := e.session(c.lang, string(rune('a'+i)), "/", nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.session(c.lang, "one-more", "/", nil, 0); err == nil || err.Error() != c.msg || api.Status(err) != http.StatusTooManyRequests {
			t.Errorf("%s: %v", c.lang, err)
		}
		if _, err := e.session(c.lang, "a", "/", nil, 0); err != nil {
			t.Errorf("existing session refused: %v", err)
		}
	}
}

func TestUnavailable(t *testing.T) {
	h := newHarness(t, Config{Python: "/nonexistent/python3", Node: "/nonexistent/node"})
	for lang, want := range map[string]string{"python": "/nonexistent/python3", "javascript": "/nonexistent/node"} {
		_, rp := h.run(map[string]any{"language": lang, "code": "1"}, http.StatusServiceUnavailable)
		if !strings.Contains(rp.Message, want) || rp.Hint == nil {
			t.Errorf("%s: %s", lang, rp.raw)
		}
	}
	if rp := h.do("POST", "/v1/jupyter/execute", map[string]any{"code": "1"}); rp.status != http.StatusNotImplemented ||
		rp.Hint == nil || !strings.Contains(*rp.Hint, "ipykernel") {
		t.Errorf("jupyter: %s", rp.raw)
	}
	if rp := h.do("GET", "/v2/code/info", nil); !strings.Contains(rp.raw, `"python":{"available":false`) || !strings.Contains(rp.raw, `"backend":null`) {
		t.Errorf("info: %s", rp.raw)
	}
}
