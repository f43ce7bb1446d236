package code

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The v1 Jupyter interrupt and restart answer 501, as the published
// daemon does.
func TestJupyterInterruptRestart501(t *testing.T) {
	h := newHarness(t, Config{})
	for _, route := range []string{"interrupt", "restart"} {
		rp := h.do("POST", "/v1/jupyter/sessions/k/"+route, nil)
		if rp.status != http.StatusNotImplemented || rp.Success || !strings.Contains(rp.raw, "Session "+route+" is not supported") {
			t.Errorf("%s: %d %s", route, rp.status, rp.raw)
		}
	}
}

// The v1 max_idle_time replaces the idle limit of the session it
// creates, and the session says so.
func TestNodeMaxIdleTime(t *testing.T) {
	h := newHarness(t, Config{})
	if !h.p.e.nodeProbe().ok {
		t.Skip("no node")
	}
	rp := h.do("POST", "/v1/nodejs/sessions", map[string]any{"session_id": "short", "max_idle_time": 100})
	if rp.status != 200 || !strings.Contains(rp.raw, `"max_idle_time":100`) {
		t.Fatalf("create: %s", rp.raw)
	}
	h.do("POST", "/v1/nodejs/sessions", map[string]any{"session_id": "default"})
	waitFor(t, "the short session to be reclaimed", func() bool {
		h.p.e.reclaim()
		_, err := h.p.e.Session(JavaScript, "short")
		return err != nil
	})
	if _, err := h.p.e.Session(JavaScript, "default"); err != nil {
		t.Fatal("a session with the plane's idle limit was reclaimed")
	}
}

// sdkCodeInfo mirrors the AIO SDKs' CodeInfoResponse and
// CodeLanguageInfo: agent-infra/sandbox sdk/python
// agent_sandbox/types/code_info_response.py and code_language_info.py
// (agent-sandbox 0.0.31), and agent-infra/sandbox-sdk-go code.go
// (v0.0.3, 42ace01). language and description are required there;
// the rest is optional.
type sdkCodeInfo struct {
	Languages []struct {
		Language       string         `json:"language"`
		Description    string         `json:"description"`
		RuntimeVersion *string        `json:"runtime_version"`
		DefaultTimeout *int           `json:"default_timeout"`
		MaxTimeout     *int           `json:"max_timeout"`
		Details        map[string]any `json:"details"`
	} `json:"languages"`
}

// GET /v1/code/info answers the SDKs' shape: one object per language,
// with every field they decode and the probed versions.
func TestCodeInfoV1SDKShape(t *testing.T) {
	h := newHarness(t, Config{})
	rp := h.do("GET", "/v1/code/info", nil)
	if rp.status != 200 || !rp.Success {
		t.Fatalf("info: %d %s", rp.status, rp.raw)
	}
	var info sdkCodeInfo
	rp.data(t, &info)
	probes := map[string]interpreter{Python: h.p.e.pythonProbe(), JavaScript: h.p.e.nodeProbe()}
	if len(info.Languages) != len(probes) {
		t.Fatalf("languages: %s", rp.Data)
	}
	var keys struct {
		Languages []map[string]json.RawMessage `json:"languages"`
	}
	rp.data(t, &keys)
	for i, l := range info.Languages {
		probe, ok := probes[l.Language]
		if !ok || i > 0 && l.Language == info.Languages[0].Language {
			t.Fatalf("language %d: %q in %s", i, l.Language, rp.Data)
		}
		for _, k := range []string{"language", "description", "runtime_version", "default_timeout", "max_timeout", "details"} {
			if _, ok := keys.Languages[i][k]; !ok {
				t.Errorf("%s: no %s in %s", l.Language, k, rp.Data)
			}
		}
		want := probe.version
		if got := l.RuntimeVersion; want == "" && got != nil || want != "" && (got == nil || *got != want) {
			t.Errorf("%s runtime_version: %v, probed %q", l.Language, got, want)
		}
		if l.Description == "" || l.DefaultTimeout == nil || *l.DefaultTimeout != 30 || l.MaxTimeout == nil || *l.MaxTimeout != 900 {
			t.Errorf("%s: %s", l.Language, rp.Data)
		}
		if l.Details["available"] != probe.ok || probe.ok && l.Details["path"] != probe.path {
			t.Errorf("%s details: %v, probed %+v", l.Language, l.Details, probe)
		}
	}
}
