package aiod

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape reads /metrics and returns each series (name with its labels,
// as printed) and its value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, body := do(t, "GET", base+"/metrics", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// moved waits until the series has grown by at least by since before
// (a request's metrics are recorded once its answer is written).
func moved(t *testing.T, base string, before map[string]float64, series string, by float64) {
	t.Helper()
	var now float64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if now = scrape(t, base)[series]; now >= before[series]+by {
			return
		}
	}
	t.Errorf("%s: %v, want at least %v", series, now, before[series]+by)
}

// TestMetricsMove: every metric the README lists moves when its event
// happens: requests and their durations by route, commands by final
// status and their durations, and the live command sessions.
func TestMetricsMove(t *testing.T) {
	base := start(t, Config{Workspace: t.TempDir(), CommandKillGrace: 500 * time.Millisecond})
	before := scrape(t, base)
	for range 3 {
		do(t, "GET", base+"/health", "", nil)
	}
	do(t, "GET", base+"/nope", "", nil)
	moved(t, base, before, `http_requests_total{method="GET",route="GET /health",status="200"}`, 3)
	moved(t, base, before, `http_requests_total{method="GET",route="unmatched",status="404"}`, 1)
	moved(t, base, before, `http_request_duration_seconds_count{route="GET /health"}`, 3)
	moved(t, base, before, `http_request_duration_seconds_bucket{route="GET /health",le="+Inf"}`, 3)

	before = scrape(t, base)
	json := map[string]string{"Content-Type": "application/json"}
	do(t, "POST", base+"/v2/commands", `{"command":"true"}`, json)
	do(t, "POST", base+"/v2/commands", `{"command":"sleep 30","hard_timeout":0.1}`, json)
	do(t, "POST", base+"/v2/commands", `{"command":"/no/such","shell":"none"}`, json)
	moved(t, base, before, `http_requests_total{method="POST",route="POST /v2/commands",status="200"}`, 2)
	moved(t, base, before, `http_requests_total{method="POST",route="POST /v2/commands",status="400"}`, 1)
	moved(t, base, before, `command_exec_total{status="completed"}`, 1)
	moved(t, base, before, `command_exec_total{status="timed_out"}`, 1)
	moved(t, base, before, `command_exec_total{status="error"}`, 1)
	moved(t, base, before, `command_exec_duration_seconds_count`, 2)

	before = scrape(t, base)
	_, body := do(t, "POST", base+"/v2/commands", `{"command":"sleep 30","mode":"async"}`, json)
	id := body[strings.Index(body, `"command_id":"`)+len(`"command_id":"`):]
	id = id[:strings.IndexByte(id, '"')]
	do(t, "POST", base+"/v2/commands/"+id+"/kill", `{}`, json)
	moved(t, base, before, `command_exec_total{status="completed"}`, 1)

	before = scrape(t, base)
	do(t, "POST", base+"/v2/commands/sessions", `{"id":"m1"}`, json)
	do(t, "POST", base+"/v2/commands/sessions", `{"id":"m2"}`, json)
	moved(t, base, before, `command_sessions`, 2)
	up := scrape(t, base)[`command_sessions`]
	do(t, "DELETE", base+"/v2/commands/sessions/m1", "", nil)
	if got := scrape(t, base)[`command_sessions`]; got != up-1 {
		t.Errorf("command_sessions after a close: %v, want %v", got, up-1)
	}
}
