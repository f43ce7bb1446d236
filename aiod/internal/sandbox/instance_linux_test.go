package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInstanceEndWhileEntering: while init is killed and the sandbox
// started again over and over, Do calls (some on threads of their own,
// which join the view as they start) and OpenInView keep using the
// instance they got. The instance that ends must not close its
// namespaces under them: every Do that runs is in the view (/root is
// absent there), and -race sees no access to a closed instance's state.
func TestInstanceEndWhileEntering(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var escaped, ran atomic.Int64
	worker := func(hold time.Duration) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := s.Do(func() error {
				ran.Add(1)
				if _, err := os.Stat("/root"); !errors.Is(err, fs.ErrNotExist) {
					escaped.Add(1)
				}
				time.Sleep(hold)
				return nil
			})
			_ = err // a call that met an ending instance may fail; it must not run outside
			if f, err := s.OpenInView("/tmp"); err == nil {
				f.Close()
			}
		}
	}
	// Eight busy callers keep the four pool threads taken, so others
	// spill onto threads of their own that join the view as they start.
	for i := range 12 {
		wg.Add(1)
		go worker(time.Duration(i%2) * time.Millisecond)
	}
	for range 15 {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		_ = cur.init.Process.Kill()
		<-cur.done
		if _, err := s.instance(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := escaped.Load(); n > 0 {
		t.Errorf("%d of %d Do calls ran outside the view", n, ran.Load())
	}
}
