package desktop

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// inputWait bounds how long an action or a batch waits for the display
// while another one drives it. It stays well under the minute aiod's
// computer plane waits for an answer (its response timeout), so that a
// queued request gets this worker's busy answer, never the plane's
// generic 503.
const inputWait = 15 * time.Second

// errDisplayBusy is the answer of a request that waited inputWait for
// the display: a retryable 503.
var errDisplayBusy = api.NewError(api.ErrUnavailable, "the display is busy: another action or batch has been running for over 15 s").
	WithHint("actions and batches run one at a time, in the order they arrive; retry once the running one has finished")

// inputQueue lets one action or batch at a time drive the display, in
// the order they arrived (a sync.Mutex is not FIFO: a later request
// could overtake a waiting one). A waiter that gives up (its client
// left, or it waited too long) leaves the queue and never runs.
type inputQueue struct {
	mu      sync.Mutex
	busy    bool
	waiters []chan struct{} // FIFO; closing one hands it the display
}

// acquire waits for the display, at most wait, until ctx ends. On nil
// the caller drives the display until it calls release; otherwise it
// never will (ctx's error, or errDisplayBusy).
func (q *inputQueue) acquire(ctx context.Context, wait time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	q.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-turn:
		if err = ctx.Err(); err == nil {
			return nil
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = errDisplayBusy
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, c := range q.waiters {
		if c == turn {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return err
		}
	}
	// handed the display as it gave up: pass it on
	q.releaseLocked()
	return err
}

// release hands the display to the longest waiter, if any.
func (q *inputQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *inputQueue) releaseLocked() {
	if len(q.waiters) == 0 {
		q.busy = false
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next)
}

// gone reports whether err is the end of the request's context: the
// client left, nothing is answered.
func gone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
