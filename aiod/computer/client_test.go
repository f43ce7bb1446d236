package computer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/planetest"
)

// TestClient: Screenshot and Act against a fake worker: the bytes and
// type it sends, the action body passed unchanged, its refusals as
// WorkerError with its message (and each refused field of a 422), and
// ErrUnavailable when nothing listens.
func TestClient(t *testing.T) {
	var gotBody string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/computer/screenshot", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\nshot"))
	})
	mux.HandleFunc("POST /v2/computer/actions", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("Content-Type", "application/json")
		switch gotBody {
		case `{"action_type":"WAIT","duration":11}`:
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"success":false,"message":"Request data validation failed","data":null,"errors":[{"location":["body","duration"],"message":"must be more than 0 and at most 10","type":"value_error"}]}`)
		case `{"action_type":"TYPING","text":"é","use_clipboard":false}`:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"success":false,"message":"non-ASCII text needs use_clipboard","data":null,"hint":null}`)
		case `{"action_type":"PRESS","key":"x"}`:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `oops`)
		case `{"action_type":"PRESS","key":"y"}`: // a 1.x worker: no envelope
			_, _ = io.WriteString(w, `{"status":"success","action_performed":"PRESS"}`)
		case `{"action_type":"PRESS","key":"z"}`: // a refusal answered 200
			_, _ = io.WriteString(w, `{"success":false,"message":"","data":null,"hint":null}`)
		case `{"action_type":"WAIT","duration":12}`: // a FastAPI-style worker
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"detail":[{"msg":"duration too long"}]}`)
		default:
			_, _ = io.WriteString(w, `{"success":true,"message":"ok","data":{"status":"success","action_performed":"MOVE_TO"},"hint":null,"status":"success","action_performed":"MOVE_TO"}`)
		}
	})
	ws := httptest.NewServer(mux)
	defer ws.Close()
	p := New(Config{URL: ws.URL})
	ctx := context.Background()

	img, mt, err := p.Screenshot(ctx)
	if err != nil || string(img) != "\x89PNG\r\n\x1a\nshot" || mt != "image/png" {
		t.Errorf("screenshot: %q %q %v", img, mt, err)
	}
	if err := p.Act(ctx, []byte(`{"action_type":"MOVE_TO","x":5,"y":5}`)); err != nil || gotBody != `{"action_type":"MOVE_TO","x":5,"y":5}` {
		t.Errorf("act: %v, the worker got %s", err, gotBody)
	}
	if err := p.Act(ctx, []byte(`{"action_type":"PRESS","key":"y"}`)); err != nil {
		t.Errorf("act on a 1.x worker: %v", err)
	}
	for _, c := range []struct {
		body, msg string
		status    int
	}{
		{`{"action_type":"WAIT","duration":11}`, "Request data validation failed: body.duration: must be more than 0 and at most 10", 422},
		{`{"action_type":"TYPING","text":"é","use_clipboard":false}`, "non-ASCII text needs use_clipboard", 400},
		{`{"action_type":"PRESS","key":"x"}`, "the computer-use worker answered 500 Internal Server Error", 500},
		{`{"action_type":"PRESS","key":"z"}`, "the computer-use worker could not perform the action", 200},
		{`{"action_type":"WAIT","duration":12}`, "duration too long", 422},
	} {
		err := p.Act(ctx, []byte(c.body))
		var we *WorkerError
		if !errors.As(err, &we) || we.Status != c.status || we.Message != c.msg {
			t.Errorf("%s: %v", c.body, err)
		}
	}

	down := New(Config{URL: planetest.DeadURL(t)})
	if _, _, err := down.Screenshot(ctx); !errors.Is(err, ErrUnavailable) ||
		err.Error()[:len(ErrUnavailable.Error())] != "computer-use worker is not available (start computer-use or set AIO_COMPUTER_USE_URL)" {
		t.Errorf("screenshot down: %v", err)
	}
	if err := down.Act(ctx, []byte(`{"action_type":"WAIT","duration":0.1}`)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("act down: %v", err)
	}
}

// TestClientKey: the plane's own requests (probe, screenshot, action)
// present the daemon's key, and only when it has one.
func TestClientKey(t *testing.T) {
	for _, key := range []string{"", "s3cret"} {
		var mu sync.Mutex
		got := map[string]string{}
		ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[r.URL.Path] = r.Header.Get("Authorization")
			mu.Unlock()
			switch r.URL.Path {
			case "/v2/computer/screenshot":
				w.Header().Set("Content-Type", "image/png")
				_, _ = w.Write([]byte("\x89PNG"))
			default:
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"success":true,"message":"ok","data":{"status":"success","action_performed":"WAIT"},"hint":null}`))
			}
		}))
		p := New(Config{URL: ws.URL, APIKey: key})
		p.Probe(context.Background(), ":1")
		_, _, _ = p.Screenshot(context.Background())
		_ = p.Act(context.Background(), []byte(`{"action_type":"WAIT","duration":0.1}`))
		ws.Close()
		want := ""
		if key != "" {
			want = "Bearer " + key
		}
		for _, path := range []string{"/capabilities", "/v2/computer/screenshot", "/v2/computer/actions"} {
			if a, ok := got[path]; !ok || a != want {
				t.Errorf("key %q: %s sent Authorization %q (asked: %v), want %q", key, path, a, ok, want)
			}
		}
	}
}

// TestWorkerKey: with a worker of the daemon's own, forwarded requests
// carry the worker's key in place of the client's credentials (header or
// query), and the plane's own requests present it too.
func TestWorkerKey(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery+" auth="+r.Header.Get("Authorization")+" key="+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"success":true,"message":"ok","data":{"status":"success","action_performed":"WAIT"},"hint":null}`))
	}))
	defer ws.Close()
	p := New(Config{URL: ws.URL, APIKey: "daemon-key", WorkerKey: "wk"})
	mux := http.NewServeMux()
	p.Mount(mux)
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/v2/computer/cursor?api_key=daemon-key&x=1&api%5Fkey=daemon-key", nil),
		httptest.NewRequest(http.MethodGet, "/v2/computer/info", nil),
	} {
		r.Header.Set("Authorization", "Bearer daemon-key")
		r.Header.Set("X-Api-Key", "daemon-key")
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	_ = p.Act(context.Background(), []byte(`{"action_type":"WAIT","duration":0.1}`))
	want := []string{
		"/v2/computer/cursor?x=1 auth=Bearer wk key=",
		"/v2/computer/info? auth=Bearer wk key=",
		"/v2/computer/actions? auth=Bearer wk key=",
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the worker saw:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
