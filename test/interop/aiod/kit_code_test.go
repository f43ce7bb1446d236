package aiod

import (
	"encoding/json"
	"strings"
	"testing"
)

// codeViews reads the interpreters as /v1/capabilities and GET
// /v2/code/info report them.
func codeViews(t *testing.T, a *aio) (caps, info map[string]any) {
	t.Helper()
	code, e := a.call("GET", "/v1/capabilities", "/v1/capabilities", nil)
	if code != 200 {
		t.Fatalf("capabilities: %d %s", code, e.raw)
	}
	var c struct {
		CodeInterpreter map[string]any `json:"code_interpreter"`
	}
	if err := json.Unmarshal(e.Data, &c); err != nil {
		t.Fatal(err)
	}
	code, e = a.call("GET", "/v2/code/info", "/v2/code/info", nil)
	if code != 200 {
		t.Fatalf("code info: %d %s", code, e.raw)
	}
	return c.CodeInterpreter, e.obj()
}

// TestAiodKitOneInterpreterAnswer: the capability snapshot and the code
// plane ask one discovery, so they name the same interpreters and agree
// on what is usable, with the interpreters found and with a pinned
// python that lacks ipykernel.
func TestAiodKitOneInterpreterAnswer(t *testing.T) {
	requireKernel(t)
	t.Run("found", func(t *testing.T) {
		d := startAiod(t, nil, "--workspace", t.TempDir())
		caps, info := codeViews(t, &aio{t: t, base: d.URL})
		if caps["default_python"] == nil || caps["default_python"] != info["default_python"] ||
			caps["default_node"] == nil || caps["default_node"] != info["default_node"] || caps["jupyter_backend"] != "kernel" {
			t.Fatalf("capabilities %v, code info %v", caps, info)
		}
	})
	t.Run("python without ipykernel", func(t *testing.T) {
		d := startAiod(t, []string{"AIO_PYTHON_BIN=/bin/sh"}, "--workspace", t.TempDir())
		a := &aio{t: t, base: d.URL}
		caps, info := codeViews(t, a)
		py, _ := info["python"].(map[string]any)
		if caps["default_python"] != "/bin/sh" || caps["jupyter_backend"] != nil || py["available"] != false ||
			!strings.Contains(strings.Join(asStrings(caps["missing"]), ","), "ipykernel") {
			t.Fatalf("capabilities %v, code info %v", caps, info)
		}
		code, e := a.call("POST", "/v2/code/execute", "/v2/code/execute", map[string]any{"language": "python", "code": "1"})
		if code != 503 || e.Message != "ipykernel is not importable by /bin/sh" {
			t.Fatalf("python run: %d %s", code, e.raw)
		}
	})
}

func asStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
