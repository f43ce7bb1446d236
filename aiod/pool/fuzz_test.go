package pool

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/egress"
)

// FuzzCreateBody: whatever a client sends as POST /v2/sandboxes, the
// decoding and the rules of every field answer (a request, or an error
// naming what is wrong) without panicking, and a request they accept
// satisfies the rules again (check is idempotent on its own output).
func FuzzCreateBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"timeout_s":0}`, `{"limits":{"memory":"1GiB","pids":8,"cpus":0.5}}`, `{"env":{"A":"b"}}`,
		`{"metadata":{"k":"v"}}`, `{"office":"o","name":"n"}`, `{"timeout_s":1e400}`, `{"limits":{"memory":-1}}`, `[`, `{"env":{"":""}}`,
		`{"network":"egress","egress":{"allow":["*.debian.org","10.0.0.0/8"],"deny":["1.2.3.4"]}}`, `{"network":"egress","egress":{"allow":null}}`} {
		f.Add([]byte(s))
	}
	p := &Pool{cfg: Config{Memory: DefaultMemory, Pids: DefaultPids, CPUs: DefaultCPUs, Server: "http://127.0.0.1:1",
		Templates: map[string]string{"t": "/nonexistent"}}, egress: &egress.Network{}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v2/sandboxes", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		var cb createBody
		if !readJSON(w, r, &cb) {
			if w.Code < 400 || w.Code > 415 || !strings.Contains(w.Body.String(), `"error"`) {
				t.Fatalf("refusal %d %s", w.Code, w.Body)
			}
			return
		}
		req, err := cb.request()
		if err != nil {
			return
		}
		s, err := p.check(req)
		if err != nil {
			return
		}
		if s.template == "" || s.network == "" || s.onTimeout == "" || s.limits.Pids == 0 {
			t.Fatalf("defaults not filled: %+v", s)
		}
		if (s.network == NetworkEgress) != (s.egress != nil) || s.egress != nil && (s.egress.Allow == nil || s.egress.Deny == nil) {
			t.Fatalf("egress rules %+v on network %q", s.egress, s.network)
		}
		if _, err := json.Marshal(req); err != nil {
			t.Fatal(err)
		}
	})
}
