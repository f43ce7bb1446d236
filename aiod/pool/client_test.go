package pool_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// seen is one request as the fake pool received it.
type seen struct {
	Method, Path, Query, Body string
	Header                    http.Header
}

// fakePool answers every request with status and body, and keeps what it
// received.
type fakePool struct {
	mu     sync.Mutex
	reqs   []seen
	status int
	body   string
}

func (f *fakePool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(b), Header: r.Header.Clone()})
	status, body := f.status, f.body
	f.mu.Unlock()
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// answer sets what the fake answers from now on.
func (f *fakePool) answer(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.body = status, body
}

// only returns the one request the fake received.
func (f *fakePool) only(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) != 1 {
		t.Fatalf("%d requests, want 1: %+v", len(f.reqs), f.reqs)
	}
	r := f.reqs[0]
	f.reqs = nil
	return r
}

func startFake(t *testing.T) (*fakePool, *httptest.Server) {
	t.Helper()
	f := &fakePool{}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts
}

// sandboxJSON is a sandbox object as a pool writes it: office, computer
// and expires_at null.
const sandboxJSON = `{"id":"sb1","state":"running","template":"base","office":null,"computer":null,
"created_at":"2026-12-06T07:00:00Z","expires_at":null,"on_timeout":"kill","idle_timeout_s":0,
"limits":{"memory":"1GiB","pids":512,"cpus":1},"network":"none","metadata":{},
"api_url":"http://127.0.0.1:18100/sandboxes/sb1","mcp_url":"http://127.0.0.1:18100/sandboxes/sb1/mcp"}`

// officeJSON is one in an office, with a deadline.
const officeJSON = `{"id":"sb2","state":"paused","template":"py","office":"t1","computer":"box",
"created_at":"2026-12-06T07:00:00Z","expires_at":"2026-12-06T07:05:00Z","on_timeout":"pause","idle_timeout_s":60,
"limits":{"memory":536870912,"pids":64,"cpus":0.5},"network":"host","metadata":{"owner":"ann"},
"api_url":"http://127.0.0.1:18100/sandboxes/sb2","mcp_url":"http://127.0.0.1:18100/sandboxes/sb2/mcp"}`

var (
	created = time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	expires = time.Date(2026, 12, 6, 7, 5, 0, 0, time.UTC)
	sb1     = pool.Sandbox{ID: "sb1", State: pool.Running, Template: "base", CreatedAt: created, OnTimeout: "kill",
		Limits: pool.Limits{Memory: 1 << 30, Pids: 512, CPUs: 1}, Network: "none", Metadata: map[string]string{},
		APIURL: "http://127.0.0.1:18100/sandboxes/sb1", MCPURL: "http://127.0.0.1:18100/sandboxes/sb1/mcp"}
	sb2 = pool.Sandbox{ID: "sb2", State: pool.Paused, Template: "py", Office: "t1", Computer: "box", CreatedAt: created,
		ExpiresAt: &expires, OnTimeout: "pause", IdleTimeoutS: 60, Limits: pool.Limits{Memory: 512 << 20, Pids: 64, CPUs: 0.5},
		Network: "host", Metadata: map[string]string{"owner": "ann"},
		APIURL: "http://127.0.0.1:18100/sandboxes/sb2", MCPURL: "http://127.0.0.1:18100/sandboxes/sb2/mcp"}
)

func intp(n int) *int { return &n }

// TestClientRequests checks the exact request of every method and how its
// answer decodes.
func TestClientRequests(t *testing.T) {
	f, ts := startFake(t)
	c := pool.NewClient(ts.URL+"/", "tok")
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		call   func() (any, error)
		status int
		answer string
		want   seen // Header unused
		result any
	}{
		{"create empty", func() (any, error) { return c.Create(ctx, pool.CreateRequest{}) },
			201, sandboxJSON, seen{"POST", "/v2/sandboxes", "", "{}", nil}, sb1},
		{"create full", func() (any, error) {
			return c.Create(ctx, pool.CreateRequest{Template: "py", Office: "t1", Name: "box", TimeoutS: intp(0), OnTimeout: "pause",
				IdleTimeoutS: 60, Env: map[string]string{"A": "1"}, Limits: &pool.Limits{Memory: 512 << 20, Pids: 64, CPUs: 0.5},
				Network: "host", Metadata: map[string]string{"owner": "ann"}})
		}, 201, officeJSON, seen{"POST", "/v2/sandboxes", "",
			`{"template":"py","office":"t1","name":"box","timeout_s":0,"on_timeout":"pause","idle_timeout_s":60,"env":{"A":"1"},` +
				`"limits":{"memory":"512MiB","pids":64,"cpus":0.5},"network":"host","metadata":{"owner":"ann"}}`, nil}, sb2},
		{"list all", func() (any, error) { return c.List(ctx, pool.ListFilter{}) },
			200, `{"sandboxes":[` + sandboxJSON + `,` + officeJSON + `]}`, seen{"GET", "/v2/sandboxes", "", "", nil}, []pool.Sandbox{sb1, sb2}},
		{"list filtered", func() (any, error) {
			return c.List(ctx, pool.ListFilter{State: "paused", Office: "t 1", Metadata: map[string]string{"owner": "ann&bob", "k": "v"}})
		}, 200, `{"sandboxes":[]}`, seen{"GET", "/v2/sandboxes", "metadata.k=v&metadata.owner=ann%26bob&office=t+1&state=paused", "", nil}, []pool.Sandbox{}},
		{"list null", func() (any, error) { return c.List(ctx, pool.ListFilter{}) },
			200, `{"sandboxes":null}`, seen{"GET", "/v2/sandboxes", "", "", nil}, []pool.Sandbox{}},
		{"get", func() (any, error) { return c.Get(ctx, "sb2") },
			200, officeJSON, seen{"GET", "/v2/sandboxes/sb2", "", "", nil}, sb2},
		{"get escaped", func() (any, error) { return c.Get(ctx, "a/b c?") },
			200, sandboxJSON, seen{"GET", "/v2/sandboxes/a%2Fb%20c%3F", "", "", nil}, sb1},
		{"delete", func() (any, error) { return nil, c.Delete(ctx, "sb1", false) },
			204, "", seen{"DELETE", "/v2/sandboxes/sb1", "", "", nil}, nil},
		{"delete keep", func() (any, error) { return nil, c.Delete(ctx, "sb1", true) },
			204, "", seen{"DELETE", "/v2/sandboxes/sb1", "keep_workspace=true", "", nil}, nil},
		{"pause", func() (any, error) { return c.Pause(ctx, "sb2") },
			200, officeJSON, seen{"POST", "/v2/sandboxes/sb2/pause", "", "", nil}, sb2},
		{"resume", func() (any, error) { return c.Resume(ctx, "sb1", nil) },
			200, sandboxJSON, seen{"POST", "/v2/sandboxes/sb1/resume", "", "{}", nil}, sb1},
		{"resume timeout", func() (any, error) { return c.Resume(ctx, "sb1", intp(600)) },
			200, sandboxJSON, seen{"POST", "/v2/sandboxes/sb1/resume", "", `{"timeout_s":600}`, nil}, sb1},
		{"timeout", func() (any, error) { return c.SetTimeout(ctx, "sb1", 30) },
			200, sandboxJSON, seen{"POST", "/v2/sandboxes/sb1/timeout", "", `{"timeout_s":30}`, nil}, sb1},
		{"timeout none", func() (any, error) { return c.SetTimeout(ctx, "sb1", 0) },
			200, sandboxJSON, seen{"POST", "/v2/sandboxes/sb1/timeout", "", `{"timeout_s":0}`, nil}, sb1},
		{"metrics", func() (any, error) { return c.Metrics(ctx, "sb1") },
			200, `{"cpu_usage_ns":1500000000,"memory_bytes":1048576,"memory_limit_bytes":1073741824,"pids":3,"pids_limit":512,"disk_bytes":4096,"since":"2026-12-06T07:00:00Z"}`,
			seen{"GET", "/v2/sandboxes/sb1/metrics", "", "", nil},
			pool.Metrics{CPUUsageNs: 1500000000, MemoryBytes: 1 << 20, MemoryLimitBytes: 1 << 30, Pids: 3, PidsLimit: 512, DiskBytes: 4096, Since: created}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.answer(tc.status, tc.answer)
			got, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			r := f.only(t)
			h := r.Header
			r.Header = nil
			if !reflect.DeepEqual(r, tc.want) {
				t.Errorf("request\n got %+v\nwant %+v", r, tc.want)
			}
			if h.Get("x-api-key") != "tok" || h.Get("Accept") != "application/json" {
				t.Errorf("headers %v", h)
			}
			if ct := h.Get("Content-Type"); (tc.want.Body != "") != (ct == "application/json") {
				t.Errorf("Content-Type %q with body %q", ct, tc.want.Body)
			}
			if !reflect.DeepEqual(got, tc.result) {
				t.Errorf("result\n got %#v\nwant %#v", got, tc.result)
			}
		})
	}
}

// TestClientNulls checks that null office, computer and expires_at read
// as empty and nil, and that a Sandbox written back has them null again.
func TestClientNulls(t *testing.T) {
	f, ts := startFake(t)
	f.answer(200, sandboxJSON)
	s, err := pool.NewClient(ts.URL, "").Get(context.Background(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Office != "" || s.Computer != "" || s.ExpiresAt != nil {
		t.Errorf("nulls read as %q %q %v", s.Office, s.Computer, s.ExpiresAt)
	}
	if h := f.only(t).Header; h.Get("x-api-key") != "" || len(h.Values("x-api-key")) != 0 {
		t.Errorf("no token, yet x-api-key sent: %v", h)
	}
	b, _ := json.Marshal(s)
	for _, want := range []string{`"office":null`, `"computer":null`, `"expires_at":null`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

// TestClientErrors checks what a refusal or a broken answer becomes.
func TestClientErrors(t *testing.T) {
	f, ts := startFake(t)
	c := pool.NewClient(ts.URL, "")
	huge := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   *pool.Error // nil: another error, whose text contains text
		text   string
	}{
		{"pool shape", 404, `{"error":{"code":404,"message":"no sandbox \"sb9\""}}`, &pool.Error{Status: 404, Message: `no sandbox "sb9"`}, ""},
		{"at max", 429, `{"error":{"code":429,"message":"64 sandboxes exist (--max 64)"}}`, &pool.Error{Status: 429, Message: "64 sandboxes exist (--max 64)"}, ""},
		{"short text", 502, "upstream\n  down\n", &pool.Error{Status: 502, Message: "502 Bad Gateway: upstream down"}, ""},
		{"aiod envelope", 404, `{"success":false,"message":"Not Found","data":null,"hint":null}`,
			&pool.Error{Status: 404, Message: `404 Not Found: {"success":false,"message":"Not Found","data":null,"hint":null}`}, ""},
		{"empty message", 400, `{"error":{"code":400,"message":""}}`, &pool.Error{Status: 400, Message: `400 Bad Request: {"error":{"code":400,"message":""}}`}, ""},
		{"huge text", 500, huge, &pool.Error{Status: 500, Message: "500 Internal Server Error"}, ""},
		{"huge body", 500, strings.Repeat(huge, 1000), &pool.Error{Status: 500, Message: "500 Internal Server Error"}, ""},
		{"binary", 503, "\x00\x01\xff", &pool.Error{Status: 503, Message: "503 Service Unavailable"}, ""},
		{"no body", 401, "", &pool.Error{Status: 401, Message: "401 Unauthorized"}, ""},
		{"unknown status", 599, "", &pool.Error{Status: 599, Message: "599"}, ""},
		{"undecodable", 200, "{", nil, "pool: GET /v2/sandboxes/sb1: undecodable answer (200): unexpected end of JSON input"},
		{"too large", 200, `{"id":"` + strings.Repeat("x", 1<<20) + `"}`, nil, "pool: GET /v2/sandboxes/sb1: the answer is larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.answer(tc.status, tc.body)
			_, err := c.Get(context.Background(), "sb1")
			f.only(t)
			var pe *pool.Error
			switch {
			case tc.want != nil && (!errors.As(err, &pe) || *pe != *tc.want):
				t.Errorf("err = %#v (%v), want %#v", err, err, tc.want)
			case tc.want == nil && (err == nil || errors.As(err, &pe) || err.Error() != tc.text):
				t.Errorf("err = %v, want %q", err, tc.text)
			}
		})
	}
	f.answer(404, `{"error":{"code":404,"message":"no sandbox \"sb9\""}}`)
	if err := c.Delete(context.Background(), "sb9", false); err == nil || err.Error() != `pool: no sandbox "sb9"` {
		t.Errorf("delete: %v", err)
	}
	f.only(t)
}

// TestClientRefusesBeforeSending checks the errors found without a
// request: a bad base URL, an empty id.
func TestClientRefusesBeforeSending(t *testing.T) {
	f, ts := startFake(t)
	ctx := context.Background()
	for _, base := range []string{"127.0.0.1:18100", "ftp://h", "http://", "http://h/?x=1", "://"} {
		if _, err := pool.NewClient(base, "").Get(ctx, "sb1"); err == nil || !strings.HasPrefix(err.Error(), "pool: bad base URL") {
			t.Errorf("%q: %v", base, err)
		}
	}
	c := pool.NewClient(ts.URL, "")
	for name, call := range map[string]func() error{
		"get":     func() error { _, err := c.Get(ctx, ""); return err },
		"delete":  func() error { return c.Delete(ctx, "", true) },
		"pause":   func() error { _, err := c.Pause(ctx, ""); return err },
		"resume":  func() error { _, err := c.Resume(ctx, "", nil); return err },
		"timeout": func() error { _, err := c.SetTimeout(ctx, "", 1); return err },
		"metrics": func() error { _, err := c.Metrics(ctx, ""); return err },
	} {
		if err := call(); err == nil || err.Error() != "pool: empty sandbox id" {
			t.Errorf("%s: %v", name, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) != 0 {
		t.Errorf("requests sent: %+v", f.reqs)
	}
}

// TestClientDeadline checks that a request ends at its context's deadline,
// or at Client.Timeout when the context has none, against a pool that
// never answers.
func TestClientDeadline(t *testing.T) {
	// The handler waits until the test ends: a server does not notice a
	// client gone while a request body is unread, so r.Context() is not
	// enough to release it.
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stuck.Close()
	defer close(release) // before Close, which waits for the handlers
	c := pool.NewClient(stuck.URL, "")

	c.Timeout = 50 * time.Millisecond
	if err := within(t, func() error { _, err := c.Get(context.Background(), "sb1"); return err }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Client.Timeout: %v", err)
	}
	c.Timeout = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := within(t, func() error { _, err := c.Create(ctx, pool.CreateRequest{}); return err }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("context deadline: %v", err)
	}
}

// within runs call and returns its error, or fails the test when call has
// not returned in 10 s: a deadline that is not kept fails the test
// instead of hanging it. (The call, then left behind, ends when the test
// releases the server.)
func within(t *testing.T, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the request outlived its deadline")
		return nil
	}
}

// TestClientURLs checks the URLs the client builds without a request.
func TestClientURLs(t *testing.T) {
	for _, tc := range []struct {
		base, id          string
		port              int
		api, host, pathed string
	}{
		{"http://127.0.0.1:18100", "sb1", 3000, "http://127.0.0.1:18100/sandboxes/sb1",
			"http://3000-sb1.localhost:18100/", "http://127.0.0.1:18100/sandboxes/sb1/ports/3000/"},
		{"http://127.0.0.1:18100/", "a/b", 80, "http://127.0.0.1:18100/sandboxes/a%2Fb",
			"", "http://127.0.0.1:18100/sandboxes/a%2Fb/ports/80/"}, // not a host name label
		{"http://127.0.0.1:18100", "Sb-1", 80, "http://127.0.0.1:18100/sandboxes/Sb-1",
			"http://80-Sb-1.localhost:18100/", "http://127.0.0.1:18100/sandboxes/Sb-1/ports/80/"},
		{"http://127.0.0.1:18100", strings.Repeat("x", 60), 80, "http://127.0.0.1:18100/sandboxes/" + strings.Repeat("x", 60),
			"http://80-" + strings.Repeat("x", 60) + ".localhost:18100/", "http://127.0.0.1:18100/sandboxes/" + strings.Repeat("x", 60) + "/ports/80/"},
		{"http://127.0.0.1:18100", strings.Repeat("x", 61), 80, "http://127.0.0.1:18100/sandboxes/" + strings.Repeat("x", 61),
			"", "http://127.0.0.1:18100/sandboxes/" + strings.Repeat("x", 61) + "/ports/80/"}, // a label of 64
		{"http://127.0.0.1:18100", "", 80, "http://127.0.0.1:18100/sandboxes/", "", "http://127.0.0.1:18100/sandboxes//ports/80/"},
		{"http://127.0.0.1:18100", "-x", 80, "http://127.0.0.1:18100/sandboxes/-x", "http://80--x.localhost:18100/", "http://127.0.0.1:18100/sandboxes/-x/ports/80/"},
		{"http://127.0.0.1:18100", "x-", 80, "http://127.0.0.1:18100/sandboxes/x-", "", "http://127.0.0.1:18100/sandboxes/x-/ports/80/"},
		{"https://pool.example/prefix/", "sb1", 8080, "https://pool.example/prefix/sandboxes/sb1",
			"https://8080-sb1.localhost/", "https://pool.example/prefix/sandboxes/sb1/ports/8080/"},
		{"http://[::1]:9", "x", 1, "http://[::1]:9/sandboxes/x", "http://1-x.localhost:9/", "http://[::1]:9/sandboxes/x/ports/1/"},
		{"http://127.0.0.1:18100", "x", 0, "http://127.0.0.1:18100/sandboxes/x", "", ""},
		{"http://127.0.0.1:18100", "x", 65536, "http://127.0.0.1:18100/sandboxes/x", "", ""},
		{"http://127.0.0.1:18100", "x", 65535, "http://127.0.0.1:18100/sandboxes/x", "http://65535-x.localhost:18100/", "http://127.0.0.1:18100/sandboxes/x/ports/65535/"},
		{"nonsense", "x", 1, "nonsense/sandboxes/x", "", "nonsense/sandboxes/x/ports/1/"},
	} {
		c := pool.NewClient(tc.base, "tok")
		if got := c.APIURL(tc.id); got != tc.api {
			t.Errorf("APIURL(%q) at %s = %q, want %q", tc.id, tc.base, got, tc.api)
		}
		if got := c.PortURL(tc.id, tc.port); got != tc.host {
			t.Errorf("PortURL(%q, %d) at %s = %q, want %q", tc.id, tc.port, tc.base, got, tc.host)
		}
		if got := c.PortPathURL(tc.id, tc.port); got != tc.pathed {
			t.Errorf("PortPathURL(%q, %d) at %s = %q, want %q", tc.id, tc.port, tc.base, got, tc.pathed)
		}
	}
}
