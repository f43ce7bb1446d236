package code

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// post sends a v2 execute under ctx and returns its status (0 when the
// client gave up).
func (h *harness) post(ctx context.Context, body map[string]any) int {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v2/code/execute", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *session) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// TestQueueCancelled: a request whose client gives up while it waits
// for the session never runs, even after the session frees up.
func TestQueueCancelled(t *testing.T) {
	h := newHarness(t, Config{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r, _ := h.exec("javascript", "q", "await new Promise(r => setTimeout(r, 1500)); globalThis.order = ['first']")
		if r.Status != StatusOK {
			t.Errorf("first: %+v", r)
		}
	})
	waitFor(t, "the first run", func() bool {
		s, err := h.p.e.Session(JavaScript, "q")
		return err == nil && s.State == "executing"
	})
	s, _ := h.p.e.reg.Get(JavaScript, "q")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // the client gives up once its request waits in the queue
		for deadline := time.Now().Add(5 * time.Second); s.queued() == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	if st := h.post(ctx, map[string]any{"language": "javascript", "session_id": "q", "code": "order.push('second')"}); st != 0 {
		t.Errorf("status %d for a request the client gave up on", st)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the client waited %v", d)
	}
	waitFor(t, "the cancelled request to leave the queue", func() bool { return s.queued() == 0 })
	wg.Wait()
	r, _ := h.exec("javascript", "q", "order.join(',')")
	if got := r.out(t, 0).Data["text/plain"]; got != "'first'" {
		t.Errorf("order %v: the cancelled cell ran", got)
	}
}

// TestQueueDeadline: the wait counts against the cell's timeout.
func TestQueueDeadline(t *testing.T) {
	h := newHarness(t, Config{NodeGrace: 500 * time.Millisecond})
	busy := func(ms string) {
		r, _ := h.exec("javascript", "q", "await new Promise(r => setTimeout(r, "+ms+")); globalThis.ran = []")
		if r.Status != StatusOK {
			t.Errorf("busy: %+v", r)
		}
	}
	executing := func() bool {
		s, err := h.p.e.Session(JavaScript, "q")
		return err == nil && s.State == "executing"
	}

	t.Run("deadline passes while queued", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Go(func() { busy("2500") })
		waitFor(t, "the first run", executing)
		start := time.Now()
		r, rp := h.exec("javascript", "q", "globalThis.late = 1", "timeout", 1)
		want := "execution timed out after 1000ms while waiting for the session's previous execution to finish; the code was not run"
		if rp.Success || r.Status != StatusTimeout || r.ExitCode != 1 || r.ExecutionCount != nil || *r.Stderr != want+"\n" ||
			r.out(t, 0).Ename != "TimeoutError" || r.out(t, 0).Evalue != want {
			t.Errorf("%s", rp.raw)
		}
		if d := time.Since(start); d < 900*time.Millisecond || d > 2*time.Second {
			t.Errorf("answered after %v, want about 1 s", d)
		}
		wg.Wait()
		if r, _ := h.exec("javascript", "q", "typeof late"); r.out(t, 0).Data["text/plain"] != "'undefined'" {
			t.Errorf("the timed-out cell ran: %+v", r)
		}
	})

	t.Run("the rest of the timeout is what the cell gets", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Go(func() { busy("600") })
		waitFor(t, "the first run", executing)
		start := time.Now()
		r, rp := h.exec("javascript", "q", "while (true) {}", "timeout", 1)
		if r.Status != StatusTimeout || !strings.Contains(*r.Stderr, "of the 1000ms timeout were spent waiting for the session's previous execution") {
			t.Errorf("%s", rp.raw)
		}
		if d := time.Since(start); d > 1800*time.Millisecond {
			t.Errorf("answered after %v, want about 1 s", d)
		}
		wg.Wait()
	})
}

// TestQueueBound: at most MaxQueued requests wait for one session; the
// next is refused with 429. Nothing starts: the test holds the slot.
func TestQueueBound(t *testing.T) {
	h := newHarness(t, Config{})
	s, err := h.p.e.session(JavaScript, "full", h.p.e.cfg.Workspace, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.lock(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	statuses := make([]int, MaxQueued)
	for i := range MaxQueued {
		wg.Go(func() {
			statuses[i] = h.post(ctx, map[string]any{"language": "javascript", "session_id": "full", "code": "1"})
		})
	}
	waitFor(t, "a full queue", func() bool { return s.queued() == MaxQueued })
	_, rp := h.run(map[string]any{"language": "javascript", "session_id": "full", "code": "1"}, http.StatusTooManyRequests)
	if rp.Message != "Session busy: too many queued executions" {
		t.Errorf("%s", rp.raw)
	}
	if _, err := s.lock(t.Context(), time.Time{}); !errors.Is(err, ErrBusy) || api.Status(err) != http.StatusTooManyRequests {
		t.Errorf("engine: %v", err)
	}
	cancel()
	wg.Wait()
	waitFor(t, "an empty queue", func() bool { return s.queued() == 0 })
	for i, st := range statuses {
		if st != 0 {
			t.Errorf("queued request %d: status %d", i, st)
		}
	}
	if s.tryLock() {
		t.Fatal("a cancelled waiter released the slot it never held")
	}
	s.unlock()

	// an engine caller whose context ends while queued gets a clean error
	if _, err := s.lock(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer ccancel()
	_, err = h.p.e.Execute(cctx, Request{Language: JavaScript, SessionID: "full", Code: "1"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the code was not run") {
		t.Errorf("%v", err)
	}
	s.unlock()
	if r, err := h.p.e.Execute(t.Context(), Request{Language: JavaScript, SessionID: "full", Code: "1 + 1"}); err != nil || r.Status != StatusOK {
		t.Errorf("after the queue drained: %+v %v", r, err)
	}
}
