package sandbox

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// threads is how many OS threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// TestDoBound: 300 blocked Do calls hold at most doThreads+doSpill
// threads of the view (they made 296 threads before the bound); a call
// that finds every slot taken fails, when its context ends, with
// ErrBusy, which the planes answer 503; the waiting calls all run once
// the slots come free.
func TestDoBound(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	before := threads(t)
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(doThreads + doSpill)
	var once [doThreads + doSpill]sync.Once
	var n sync.Mutex
	started := 0
	errs := make(chan error, 300)
	for range 300 {
		go func() {
			errs <- s.Do(func() error {
				n.Lock()
				i := started
				started++
				n.Unlock()
				if i < len(once) {
					once[i].Do(running.Done)
				}
				<-release
				return nil
			})
		}()
	}
	running.Wait() // every slot is taken
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.DoContext(ctx, func() error { return nil })
	if !errors.Is(err, ErrBusy) || api.Status(err) != http.StatusServiceUnavailable {
		t.Errorf("a call past the bound: %v (status %d)", err, api.Status(err))
	}
	if got := threads(t); got > before+doSpill+8 {
		t.Errorf("%d threads with every slot taken (%d before)", got, before)
	}
	close(release)
	for range 300 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
