package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do's threads are bounded: doThreads serve it from a pool, and when all
// are busy (a slow disk, a long walk) a call gets a thread of its own,
// up to doSpill of them at once. A call past both waits for a slot, up
// to its context's deadline or doWait, then fails with ErrBusy. Without
// the bound every blocked call held one more OS thread (300 blocked
// calls made 296 threads; Go aborts the process at 10,000).
const (
	doSpill = 28
	doWait  = 10 * time.Second
)

// acquire takes one of Do's slots (s.doSlots, doThreads+doSpill of
// them); the caller gives it back with release.
func (s *Sandbox) acquire(ctx context.Context) error {
	select {
	case s.doSlots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(doWait)
	defer t.Stop()
	select {
	case s.doSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (%w)", ErrBusy, ctx.Err())
	case <-t.C:
		return ErrBusy
	case <-s.stop:
		return errors.New("sandbox: closed")
	}
}

func (s *Sandbox) release() { <-s.doSlots }

// DoContext is [Sandbox.Do] with the wait for a free thread bounded by
// ctx as well (a call already running is not interrupted).
func (s *Sandbox) DoContext(ctx context.Context, f func() error) error {
	if s == nil {
		return f()
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.do(f)
}
