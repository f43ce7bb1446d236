package desktop

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestInputQueueOrder: waiters get the display in the order they came,
// and one that gives up leaves the queue without ever holding it.
func TestInputQueueOrder(t *testing.T) {
	var q inputQueue
	if err := q.acquire(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 8)
	quit, cancelQuit := context.WithCancel(context.Background())
	var wg sync.WaitGroup // the waiters, done once they have released
	for i := range 5 {
		ctx := context.Background()
		if i == 2 {
			ctx = quit
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.acquire(ctx, 10*time.Second); err != nil {
				order <- -i
				return
			}
			order <- i
			q.release()
		}()
		// each is queued before the next starts
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			q.mu.Lock()
			n := len(q.waiters)
			q.mu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d not queued", i)
			}
		}
	}
	cancelQuit()
	if got := <-order; got != -2 {
		t.Fatalf("the waiter that gave up: %d", got)
	}
	q.release()
	for _, want := range []int{0, 1, 3, 4} {
		if got := <-order; got != want {
			t.Fatalf("got %d, want %d", got, want)
		}
	}
	wg.Wait() // the last one sends its number before it releases
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.busy || len(q.waiters) != 0 {
		t.Errorf("queue left busy=%v waiters=%d", q.busy, len(q.waiters))
	}
}

// TestInputQueueBusy: a waiter past its bound gets the busy answer.
func TestInputQueueBusy(t *testing.T) {
	var q inputQueue
	_ = q.acquire(context.Background(), time.Second)
	if err := q.acquire(context.Background(), 50*time.Millisecond); !errors.Is(err, errDisplayBusy) {
		t.Fatalf("got %v", err)
	}
	q.release()
	if err := q.acquire(context.Background(), 50*time.Millisecond); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// TestAbandonedActionNotRun: an action whose client gives up while a
// batch holds the display is never performed.
func TestAbandonedActionNotRun(t *testing.T) {
	_, srv := testWorker(t, 320, 200)
	post := func(c *http.Client, path, body string) (int, string, error) {
		resp, err := c.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, b, err := post(http.DefaultClient, "/v2/computer/actions", `{"action_type":"MOVE_TO","x":10,"y":10}`); code != 200 {
		t.Fatal(code, b, err)
	}
	batch := make(chan int, 1)
	go func() {
		code, _, _ := post(http.DefaultClient, "/v2/computer/actions/batch", `{"actions":[{"action_type":"WAIT","duration":1}]}`)
		batch <- code
	}()
	time.Sleep(200 * time.Millisecond) // the batch holds the display
	if _, _, err := post(&http.Client{Timeout: 300 * time.Millisecond}, "/v2/computer/actions", `{"action_type":"MOVE_TO","x":77,"y":77}`); err == nil {
		t.Fatal("the queued action answered while the batch ran")
	}
	if code := <-batch; code != 200 {
		t.Fatalf("batch: %d", code)
	}
	time.Sleep(100 * time.Millisecond)
	resp, err := http.Get(srv.URL + "/v2/computer/cursor")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"data":{"x":10,"y":10}`) {
		t.Errorf("the abandoned MOVE_TO ran: %s", b)
	}
}
