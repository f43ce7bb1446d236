package code

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// harness is a plane on a real HTTP server.
type harness struct {
	planetest.Client
	t   testing.TB
	p   *Plane
	srv *httptest.Server
}

func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	p := New(cfg)
	srv := planetest.Serve(t, p)
	return &harness{Client: planetest.Client{T: t, URL: srv.URL}, t: t, p: p, srv: srv}
}

// reply is a decoded answer with its raw body.
type reply struct {
	api.Reply
	status int
	raw    string
}

// data decodes the reply's data into v.
func (r reply) data(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
}

func (h *harness) do(method, path string, body any) reply {
	h.t.Helper()
	st, r, raw := h.Do(method, path, body)
	return reply{Reply: r, status: st, raw: string(raw)}
}

// runData is a decoded v2 run.
type runData struct {
	Language       string            `json:"language"`
	Status         string            `json:"status"`
	ExecutionCount *int              `json:"execution_count"`
	ExitCode       int               `json:"exit_code"`
	Outputs        []json.RawMessage `json:"outputs"`
	Stdout         *string           `json:"stdout"`
	Stderr         *string           `json:"stderr"`
	SessionID      *string           `json:"session_id"`
}

// outData is a decoded output, with its keys.
type outData struct {
	OutputType string         `json:"output_type"`
	Name       string         `json:"name"`
	Text       string         `json:"text"`
	Ename      string         `json:"ename"`
	Evalue     string         `json:"evalue"`
	Traceback  []string       `json:"traceback"`
	Data       map[string]any `json:"data"`
	keys       map[string]any
}

func (r runData) out(t testing.TB, i int) outData {
	t.Helper()
	if i >= len(r.Outputs) {
		t.Fatalf("no output %d in %d", i, len(r.Outputs))
	}
	var o outData
	_ = json.Unmarshal(r.Outputs[i], &o)
	_ = json.Unmarshal(r.Outputs[i], &o.keys)
	return o
}

// run posts to /v2/code/execute and decodes the run; want is the
// expected HTTP status.
func (h *harness) run(body map[string]any, want int) (runData, reply) {
	h.t.Helper()
	rp := h.do("POST", "/v2/code/execute", body)
	if rp.status != want {
		h.t.Fatalf("POST %v: status %d, want %d: %s", body, rp.status, want, rp.raw)
	}
	var r runData
	if want == http.StatusOK {
		rp.data(h.t, &r)
		if rp.Success != (r.Status == StatusOK) {
			h.t.Errorf("success %v with status %q", rp.Success, r.Status)
		}
	}
	return r, rp
}

// exec runs code in lang (session id unless ""), with extra body
// fields as key, value pairs, and wants a 200.
func (h *harness) exec(lang, id, code string, extra ...any) (runData, reply) {
	h.t.Helper()
	body := map[string]any{"language": lang, "code": code}
	if id != "" {
		body["session_id"] = id
	}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return h.run(body, http.StatusOK)
}
