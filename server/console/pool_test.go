package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// fakePool is a Pool in memory: its sandboxes, their metrics, and the
// calls it got.
type fakePool struct {
	mu       sync.Mutex
	boxes    []pool.Sandbox
	metrics  map[string]pool.Metrics
	mErr     map[string]error // a sandbox's metrics fail with this
	listErr  error
	actErr   error // pause, resume and delete fail with this
	calls    []string
	inflight int // Metrics calls running
	maxIn    int // the most at once
}

func (f *fakePool) List(context.Context) ([]pool.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "list")
	if f.listErr != nil {
		return nil, f.listErr
	}
	return slices.Clone(f.boxes), nil
}

func (f *fakePool) Metrics(ctx context.Context, id string) (pool.Metrics, error) {
	f.mu.Lock()
	f.inflight++
	f.maxIn = max(f.maxIn, f.inflight)
	err := f.mErr[id]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if errors.Is(err, context.DeadlineExceeded) { // a pool that does not answer
		<-ctx.Done()
		return pool.Metrics{}, fmt.Errorf("pool client: %w", ctx.Err())
	}
	if err != nil {
		return pool.Metrics{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.metrics[id]
	if !ok {
		return pool.Metrics{}, &pool.Error{Status: 404, Message: fmt.Sprintf("no sandbox %q", id)}
	}
	return m, nil
}

func (f *fakePool) act(name, id string, to pool.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" "+id)
	if f.actErr != nil {
		return f.actErr
	}
	for i := range f.boxes {
		if f.boxes[i].ID == id {
			if to == pool.Stopped {
				f.boxes = slices.Delete(f.boxes, i, i+1)
			} else {
				f.boxes[i].State = to
			}
			return nil
		}
	}
	return &pool.Error{Status: 404, Message: fmt.Sprintf("no sandbox %q", id)}
}

func (f *fakePool) Pause(_ context.Context, id string) error { return f.act("pause", id, pool.Paused) }
func (f *fakePool) Resume(_ context.Context, id string) error {
	return f.act("resume", id, pool.Running)
}
func (f *fakePool) Delete(_ context.Context, id string) error {
	return f.act("delete", id, pool.Stopped)
}

// actions are the pause, resume and delete calls the fake got.
func (f *fakePool) actions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c != "list" {
			out = append(out, c)
		}
	}
	return out
}

const (
	idA = "aaaaaaaaaaaaaaaaaaa2"
	idB = "bbbbbbbbbbbbbbbbbbb7"
)

var (
	t0      = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	t0Plus5 = t0.Add(5 * time.Minute)
)

// newFakePool has two sandboxes: idA running in office t1 with a
// deadline, idB paused in no office; only idA has metrics.
func newFakePool() *fakePool {
	return &fakePool{
		boxes: []pool.Sandbox{
			{ID: idA, State: pool.Running, Template: "base", Office: "t1", Computer: "sandbox", CreatedAt: t0, ExpiresAt: &t0Plus5,
				OnTimeout: "kill", Limits: pool.Limits{Memory: 1 << 30, Pids: 512, CPUs: 1}, Network: "none",
				Metadata: map[string]string{"k": "<b>v</b>"}, APIURL: "http://127.0.0.1:18100/sandboxes/" + idA, MCPURL: "http://127.0.0.1:18100/sandboxes/" + idA + "/mcp"},
			{ID: idB, State: pool.Paused, Template: "py", CreatedAt: t0, OnTimeout: "pause",
				Limits: pool.Limits{Memory: 512 << 20, Pids: 64, CPUs: 0.5}, Network: "none",
				APIURL: "http://127.0.0.1:18100/sandboxes/" + idB, MCPURL: "http://127.0.0.1:18100/sandboxes/" + idB + "/mcp"},
		},
		metrics: map[string]pool.Metrics{
			idA: {CPUUsageNs: 1500000000, MemoryBytes: 64 << 20, MemoryLimitBytes: 1 << 30, Pids: 3, PidsLimit: 512, DiskBytes: 4096, Since: t0},
		},
		mErr: map[string]error{},
	}
}

func poolHub(t *testing.T, token string, p Pool) (*hub, *client) {
	t.Helper()
	setVar(t, &poolNow, func() time.Time { return t0.Add(time.Minute) })
	h := newHubConfig(t, token, Config{Pool: p})
	c := h.client(t)
	if token != "" {
		if resp := c.login(token); resp.StatusCode != 303 {
			t.Fatalf("login: %d", resp.StatusCode)
		}
	}
	return h, c
}

// The sandbox objects as the pool writes them (office and computer last),
// for the exact answers.
const (
	boxAJSON = `{"id":"aaaaaaaaaaaaaaaaaaa2","state":"running","template":"base",` +
		`"created_at":"2026-12-06T08:00:00Z","expires_at":"2026-12-06T08:05:00Z","on_timeout":"kill","idle_timeout_s":0,` +
		`"limits":{"memory":"1GiB","pids":512,"cpus":1},"network":"none","metadata":{"k":"\u003cb\u003ev\u003c/b\u003e"},` +
		`"api_url":"http://127.0.0.1:18100/sandboxes/aaaaaaaaaaaaaaaaaaa2","mcp_url":"http://127.0.0.1:18100/sandboxes/aaaaaaaaaaaaaaaaaaa2/mcp","office":"t1","computer":"sandbox"`
	boxBJSON = `{"id":"bbbbbbbbbbbbbbbbbbb7","state":"%s","template":"py",` +
		`"created_at":"2026-12-06T08:00:00Z","expires_at":null,"on_timeout":"pause","idle_timeout_s":0,` +
		`"limits":{"memory":"512MiB","pids":64,"cpus":0.5},"network":"none","metadata":null,` +
		`"api_url":"http://127.0.0.1:18100/sandboxes/bbbbbbbbbbbbbbbbbbb7","mcp_url":"http://127.0.0.1:18100/sandboxes/bbbbbbbbbbbbbbbbbbb7/mcp","office":null,"computer":null`
	metricsAJSON = `"metrics":{"cpu_usage_ns":1500000000,"memory_bytes":67108864,"memory_limit_bytes":1073741824,"pids":3,"pids_limit":512,"disk_bytes":4096,"since":"2026-12-06T08:00:00Z"}`
)

func TestPoolList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mErrB error  // idB's metrics error (it has none: the fake answers 404)
		wantB string // idB's metrics fields
	}{
		{"refused", nil, `"metrics":null,"metrics_error":"no sandbox \"bbbbbbbbbbbbbbbbbbb7\"","sampled_at":null`},
		{"failed", errors.New("dial tcp 10.0.0.1:18100: secret detail"), `"metrics":null,"metrics_error":"metrics unavailable","sampled_at":null`},
		{"slow", context.DeadlineExceeded, `"metrics":null,"metrics_error":"the sandbox pool did not answer in time","sampled_at":null`},
		{"pool 500", &pool.Error{Status: 500, Message: "cgroup read: EIO"}, `"metrics":null,"metrics_error":"metrics unavailable","sampled_at":null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setVar(t, &poolMetricsTimeout, 50*time.Millisecond)
			f := newFakePool()
			if tc.mErrB != nil {
				f.mErr[idB] = tc.mErrB
			}
			_, c := poolHub(t, testToken, f)
			resp, body := c.get("/api/console/pool/sandboxes")
			want := `{"sandboxes":[` + boxAJSON + `,` + metricsAJSON + `,"sampled_at":"2026-12-06T08:01:00Z"},` +
				fmt.Sprintf(boxBJSON, "paused") + `,` + tc.wantB + `}]}`
			if resp.StatusCode != 200 || body != want {
				t.Fatalf("list: %d\n%s\nwant\n%s", resp.StatusCode, body, want)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q", cc)
			}
		})
	}
}

func TestPoolListEmptyAndStopped(t *testing.T) {
	f := newFakePool()
	f.boxes = nil
	_, c := poolHub(t, "", f)
	if resp, body := c.get("/api/console/session"); resp.StatusCode != 200 || !strings.Contains(body, `"pool":true`) {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.get("/api/console/pool/sandboxes"); resp.StatusCode != 200 || body != `{"sandboxes":[]}` {
		t.Fatalf("empty list: %d %s", resp.StatusCode, body)
	}
	// A stopped sandbox has no cgroups to read: its metrics are not asked.
	f.boxes = []pool.Sandbox{{ID: idA, State: pool.Stopped}}
	f.metrics = nil
	resp, body := c.get("/api/console/pool/sandboxes")
	if resp.StatusCode != 200 || !strings.Contains(body, `"state":"stopped"`) || !strings.HasSuffix(body, `"metrics":null,"sampled_at":null}]}`) {
		t.Fatalf("stopped: %d %s", resp.StatusCode, body)
	}
}

func TestPoolListErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unavailable", &pool.Error{Status: 503, Message: "the pool is shutting down"}, `{"error":{"code":503,"message":"the pool is shutting down"}}`},
		{"unauthorized", &pool.Error{Status: 401, Message: "bad token"}, `{"error":{"code":401,"message":"bad token"}}`},
		{"internal", &pool.Error{Status: 500, Message: "internal error: /sys/fs/cgroup"}, `{"error":{"code":502,"message":"the sandbox pool failed; see the hub's log"}}`},
		{"unreachable", errors.New("dial tcp 127.0.0.1:18100: connection refused"), `{"error":{"code":502,"message":"the sandbox pool failed; see the hub's log"}}`},
		{"slow", fmt.Errorf("get: %w", context.DeadlineExceeded), `{"error":{"code":504,"message":"the sandbox pool did not answer in time"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakePool()
			f.listErr = tc.err
			_, c := poolHub(t, testToken, f)
			resp, body := c.get("/api/console/pool/sandboxes")
			var e struct{ Error struct{ Code int } }
			_ = json.Unmarshal([]byte(body), &e)
			if body != tc.want || resp.StatusCode != e.Error.Code {
				t.Fatalf("%d %s, want %s", resp.StatusCode, body, tc.want)
			}
		})
	}
}

// TestPoolMetricsBound: a list of many sandboxes reads their metrics
// concurrently, never more than PoolMetricsConcurrency at once, each
// within its own deadline. Every metrics call here lasts until its
// deadline: a list that read them one by one would have 1 in flight, one
// that read them all at once all of them.
func TestPoolMetricsBound(t *testing.T) {
	setVar(t, &poolMetricsTimeout, 100*time.Millisecond)
	f := newFakePool()
	f.boxes = nil
	for i := range 3*PoolMetricsConcurrency + 1 {
		id := strings.NewReplacer("0", "a", "1", "b", "8", "c", "9", "d").Replace(fmt.Sprintf("%020d", i))
		f.boxes = append(f.boxes, pool.Sandbox{ID: id, State: pool.Running})
		f.mErr[id] = context.DeadlineExceeded
	}
	_, c := poolHub(t, "", f)
	resp, body := c.get("/api/console/pool/sandboxes")
	if resp.StatusCode != 200 {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	var l struct{ Sandboxes []PoolSandbox }
	if err := json.Unmarshal([]byte(body), &l); err != nil || len(l.Sandboxes) != len(f.boxes) {
		t.Fatalf("%d sandboxes, %v", len(l.Sandboxes), err)
	}
	if n := strings.Count(body, `"metrics_error":"the sandbox pool did not answer in time"`); n != len(f.boxes) {
		t.Fatalf("%d metrics timed out, want %d: %s", n, len(f.boxes), body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxIn != PoolMetricsConcurrency {
		t.Fatalf("%d metrics requests at once, want %d", f.maxIn, PoolMetricsConcurrency)
	}
}

func TestPoolActions(t *testing.T) {
	f := newFakePool()
	_, c := poolHub(t, testToken, f)
	post := func(path string) (*http.Response, string) { return c.do("POST", path, "self", "", "") }

	if resp, body := post("/api/console/pool/sandboxes/" + idB + "/resume"); resp.StatusCode != 200 || body != fmt.Sprintf(boxBJSON, "running")+"}" {
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	if resp, body := post("/api/console/pool/sandboxes/" + idB + "/pause"); resp.StatusCode != 200 || body != fmt.Sprintf(boxBJSON, "paused")+"}" {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.do("DELETE", "/api/console/pool/sandboxes/"+idA, "self", "", ""); resp.StatusCode != 204 || body != "" {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if got, want := f.actions(), []string{"resume " + idB, "pause " + idB, "delete " + idA}; !slices.Equal(got, want) {
		t.Fatalf("the pool got %q, want %q", got, want)
	}
	// Unknown: the pool's 404.
	unknown := strings.Repeat("z", 20)
	for _, r := range [][2]string{{"POST", "/api/console/pool/sandboxes/" + unknown + "/pause"}, {"DELETE", "/api/console/pool/sandboxes/" + unknown}} {
		if resp, body := c.do(r[0], r[1], "self", "", ""); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"no sandbox \"zzzzzzzzzzzzzzzzzzzz\""}}` {
			t.Fatalf("%s %s: %d %s", r[0], r[1], resp.StatusCode, body)
		}
	}
	// Gone from the list after the action: 204.
	f.listErr = errors.New("list broke")
	if resp, body := post("/api/console/pool/sandboxes/" + idB + "/resume"); resp.StatusCode != 204 || body != "" {
		t.Fatalf("resume, list failing: %d %s", resp.StatusCode, body)
	}
	// The pool's refusal and failure.
	f.listErr = nil
	f.actErr = &pool.Error{Status: 409, Message: "the sandbox is starting"}
	if resp, body := post("/api/console/pool/sandboxes/" + idB + "/pause"); resp.StatusCode != 409 || body != `{"error":{"code":409,"message":"the sandbox is starting"}}` {
		t.Fatalf("refused pause: %d %s", resp.StatusCode, body)
	}
	f.actErr = errors.New("freezer: write /sys/fs/cgroup/freezer/x: EBUSY")
	if resp, body := post("/api/console/pool/sandboxes/" + idB + "/pause"); resp.StatusCode != 502 || body != `{"error":{"code":502,"message":"the sandbox pool failed; see the hub's log"}}` {
		t.Fatalf("failed pause: %d %s", resp.StatusCode, body)
	}
}

func TestPoolBadID(t *testing.T) {
	f := newFakePool()
	_, c := poolHub(t, testToken, f)
	for _, id := range []string{
		"short",
		strings.Repeat("a", 19),
		strings.Repeat("a", 21),
		strings.Repeat("A", 20),            // upper case
		strings.Repeat("a", 19) + "1",      // 1 is not base32
		strings.Repeat("a", 19) + "%2e",    // an escaped dot
		strings.Repeat("a", 18) + "%C3%A9", // é
	} {
		for _, r := range [][2]string{{"POST", "/api/console/pool/sandboxes/" + id + "/pause"}, {"POST", "/api/console/pool/sandboxes/" + id + "/resume"}, {"DELETE", "/api/console/pool/sandboxes/" + id}} {
			if resp, body := c.do(r[0], r[1], "self", "", ""); resp.StatusCode != 400 || body != `{"error":{"code":400,"message":"invalid sandbox id: 20 characters of a-z and 2-7"}}` {
				t.Errorf("%s %s: %d %s", r[0], r[1], resp.StatusCode, body)
			}
		}
	}
	// Not an id at all: no such route (or the mux's redirect to a clean
	// path, not followed).
	for _, r := range [][2]string{{"POST", "/api/console/pool/sandboxes//pause"}, {"DELETE", "/api/console/pool/sandboxes/" + idA + "/x"}, {"GET", "/api/console/pool/sandboxes/" + idA + "/pause"}} {
		if resp, _ := c.do(r[0], r[1], "self", "", ""); resp.StatusCode != 404 && resp.StatusCode != 307 {
			t.Errorf("%s %s: %d", r[0], r[1], resp.StatusCode)
		}
	}
	if a := f.actions(); len(a) != 0 {
		t.Fatalf("the pool got %q", a)
	}
}

// TestPoolAuth: every pool route asks for a session, and those that
// change something the console's own Origin, as the other routes do.
func TestPoolAuth(t *testing.T) {
	f := newFakePool()
	h, c := poolHub(t, testToken, f)
	routes := [][2]string{
		{"GET", "/api/console/pool/sandboxes"},
		{"POST", "/api/console/pool/sandboxes/" + idA + "/pause"},
		{"POST", "/api/console/pool/sandboxes/" + idB + "/resume"},
		{"DELETE", "/api/console/pool/sandboxes/" + idA},
	}
	anon := h.client(t)
	for _, r := range routes {
		if resp, body := anon.do(r[0], r[1], "self", "", ""); resp.StatusCode != 401 || body != `{"error":{"code":401,"message":"login required"}}` {
			t.Errorf("no session: %s %s: %d %s", r[0], r[1], resp.StatusCode, body)
		}
		if r[0] == "GET" {
			continue
		}
		// No Origin (nor Referer): the console's refusal.
		if resp, body := c.do(r[0], r[1], "", "", ""); resp.StatusCode != 403 || body != `{"error":{"code":403,"message":"cross-origin request refused"}}` {
			t.Errorf("no origin: %s %s: %d %s", r[0], r[1], resp.StatusCode, body)
		}
		// Another origin: the hub's refusal, before the console.
		if resp, _ := c.do(r[0], r[1], "http://evil.example", "", ""); resp.StatusCode != 403 {
			t.Errorf("other origin: %s %s: %d", r[0], r[1], resp.StatusCode)
		}
	}
	if a := f.actions(); len(a) != 0 {
		t.Fatalf("the pool got %q", a)
	}
	// A Referer of the hub's own pages will do, as on the other routes.
	req, err := http.NewRequest("POST", h.url+"/api/console/pool/sandboxes/"+idA+"/pause", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", CookieName+"="+c.cookie)
	req.Header.Set("Referer", h.url+"/")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !slices.Equal(f.actions(), []string{"pause " + idA}) {
		t.Fatalf("pause with a Referer: %d, the pool got %q", resp.StatusCode, f.actions())
	}
}

func TestPoolNone(t *testing.T) {
	_, c := poolHub(t, testToken, nil)
	if resp, body := c.get("/api/console/session"); resp.StatusCode != 200 || !strings.Contains(body, `"pool":false`) {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	for _, r := range [][2]string{
		{"GET", "/api/console/pool/sandboxes"},
		{"POST", "/api/console/pool/sandboxes/" + idA + "/pause"},
		{"POST", "/api/console/pool/sandboxes/" + idA + "/resume"},
		{"DELETE", "/api/console/pool/sandboxes/" + idA},
	} {
		if resp, body := c.do(r[0], r[1], "self", "", ""); resp.StatusCode != 404 || body != `{"error":{"code":404,"message":"this hub has no sandbox pool"}}` {
			t.Errorf("%s %s: %d %s", r[0], r[1], resp.StatusCode, body)
		}
	}
}

func TestValidPoolID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{idA, true}, {idB, true}, {"abcdefghijklmnopqrst", true}, {"uvwxyz234567uvwxyz23", true},
		{"", false}, {idA[:19], false}, {idA + "a", false}, {"abcdefghijklmnopqrs0", false},
		{"abcdefghijklmnopqrs8", false}, {"abcdefghijklmnopqrs-", false}, {"ABCDEFGHIJKLMNOPQRST", false},
		{"abcdefghijklmnopqrs/", false}, {"abcdefghijklmnopqr\u00e9", false},
	} {
		if got := validPoolID(tc.id); got != tc.want {
			t.Errorf("validPoolID(%q) = %t", tc.id, got)
		}
	}
}

// TestStaticNoHTMLParsing: the page's scripts never parse strings as
// HTML (sandbox ids, offices and metadata are untrusted): every text is
// set as text (h, textContent).
func TestStaticNoHTMLParsing(t *testing.T) {
	for _, name := range []string{"app.js", "login.js"} {
		src := staticBytes(t, name)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
}
