package commands

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// FuzzRunRequest sends arbitrary bodies to POST /v2/commands. Whatever
// the body asks for, /usr/bin/true is what runs. The handler must never
// panic and must answer 200, 400, 404, 422 or 503.
func FuzzRunRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[1]`, `nul`, `{"command":1}`, `{"command":"exit 3"}`,
		`{"command":"x","shell":"none","args":["a"]}`, `{"command":"x","args":[]}`, `{"command":"x","shell":"zsh"}`,
		`{"command":"x","shell":"powershell"}`, `{"command":"x","timeout":-1}`, `{"command":"x","timeout":1e308,"hard_timeout":0}`,
		`{"command":"x","user":"no-such-user-xyz"}`, `{"command":"x","session":"nope"}`, `{"command":"x","env":{"A=B":"c"}}`,
		`{"command":"x","max_output_length":18446744073709551615}`, `{"command":"x","mode":"async"}`, `{"command":"x","cwd":"/nonexistent"}`,
		`{"command":"x","mode":"sync","timeout":0.001,"env":null,"args":null,"user":null}`, `{"command":"a\u0000b"}`,
	} {
		f.Add(s)
	}
	p := New(Config{Workspace: f.TempDir()})
	p.e.startHook = func(c *exec.Cmd) { c.Path, c.Args = "/usr/bin/true", []string{"true"} }
	f.Cleanup(func() { closePlane(f, p) })
	mux := http.NewServeMux()
	p.Mount(mux)
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, jsonRequest(body))
		switch w.Code {
		case 200, 400, 404, 422, 503:
		default:
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
	})
}

// BenchmarkEchoHi runs `echo hi` through the sync POST /v2/commands
// handler; compare with BenchmarkBareExec. Both report p50-ns.
func BenchmarkEchoHi(b *testing.B) {
	p := New(Config{Workspace: b.TempDir()})
	b.Cleanup(func() { closePlane(b, p) })
	mux := http.NewServeMux()
	p.Mount(mux)
	const body = `{"command":"echo hi"}`
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, jsonRequest(body))
		lat = append(lat, time.Since(start))
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"stdout":"hi\n"`) {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	reportP50(b, lat)
}

// BenchmarkBareExec is the baseline: a bare fork/exec of bash -c 'echo hi'.
func BenchmarkBareExec(b *testing.B) {
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		out, err := exec.Command("bash", "-c", "echo hi").Output()
		lat = append(lat, time.Since(start))
		if err != nil || string(out) != "hi\n" {
			b.Fatalf("%q %v", out, err)
		}
	}
	reportP50(b, lat)
}

func reportP50(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

// jsonRequest is a POST /v2/commands with a JSON body.
func jsonRequest(body string) *http.Request {
	r := httptest.NewRequest("POST", "/v2/commands", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}
