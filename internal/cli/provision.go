package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// officeSandboxes makes a sandbox pool the hub's server.Provisioner
// (`a2c server --sandbox-pool URL`): each office gets one sandbox of the
// pool, created to join that office as the Computer "sandbox" and to live
// until the office is released (timeout_s 0), then killed or paused as
// --office-on-timeout says.
//
// The pool itself is the record of which office has which sandbox: an
// office's sandbox is the one of that office carrying the metadata
// officeSandboxKey=true, so a restarted hub (or another node of a cluster)
// finds the sandboxes created before, and nothing is kept here but the
// creations under way.
type officeSandboxes struct {
	pool      sandboxPool
	onTimeout string // pool.OnTimeoutKill or pool.OnTimeoutPause
	log       *slog.Logger

	// ctx bounds the creations, which outlive the Ensure that started
	// them (see Ensure); Close ends it and waits for them (wg).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	calls map[string]*ensureCall // office -> its creation under way
}

// sandboxPool is what officeSandboxes needs of a sandbox pool: the part
// of aiod/pool's client it calls, so tests can stand in for it.
type sandboxPool interface {
	Create(ctx context.Context, req pool.CreateRequest) (pool.Sandbox, error)
	List(ctx context.Context, f pool.ListFilter) ([]pool.Sandbox, error)
	Delete(ctx context.Context, id string, keepWorkspace bool) error
	Pause(ctx context.Context, id string) (pool.Sandbox, error)
}

// officeSandboxKey is the metadata that marks an office's own sandbox
// (value "true"), as opposed to sandboxes someone created in that office
// by hand.
const officeSandboxKey = "a2c.office_sandbox"

// officeSandboxName is the Computer name an office's sandbox joins with.
const officeSandboxName = "sandbox"

// Bounds of the calls to the pool: a creation (it may wait for a sandbox
// to start: longer than the Agent's join waits, and shared by the joins
// that come meanwhile), and a release.
const (
	createTimeout  = 2 * time.Minute
	releaseTimeout = 30 * time.Second
)

// ensureCall is one office's lookup-or-creation, shared by the Ensure
// calls that come while it runs.
type ensureCall struct {
	done     chan struct{} // closed when computer and err are set
	computer string
	err      error
}

func newOfficeSandboxes(p sandboxPool, onTimeout string, log *slog.Logger) *officeSandboxes {
	ctx, cancel := context.WithCancel(context.Background())
	return &officeSandboxes{pool: p, onTimeout: onTimeout, log: log, ctx: ctx, cancel: cancel, calls: make(map[string]*ensureCall)}
}

// Ensure returns the Computer name of office's sandbox, creating the
// sandbox if the office has none. Concurrent calls for one office share
// one lookup-or-creation. That work runs on its own goroutine bounded by
// createTimeout, not by ctx: when ctx ends first (the hub waits 5 s for
// the Agent's join), the creation goes on, and the next Ensure for the
// office joins it or finds the sandbox it made.
func (b *officeSandboxes) Ensure(ctx context.Context, office string) (string, error) {
	b.mu.Lock()
	c := b.calls[office]
	if c == nil {
		if b.ctx.Err() != nil {
			b.mu.Unlock()
			return "", errors.New("office sandboxes: closed")
		}
		c = &ensureCall{done: make(chan struct{})}
		b.calls[office] = c
		b.wg.Add(1)
		go b.run(office, c)
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.computer, c.err
	case <-ctx.Done():
		return "", fmt.Errorf("office sandbox of %q still being prepared: %w", office, ctx.Err())
	}
}

// run does one office's lookup-or-creation and publishes its outcome.
func (b *officeSandboxes) run(office string, c *ensureCall) {
	defer b.wg.Done()
	ctx, cancel := context.WithTimeout(b.ctx, createTimeout)
	defer cancel()
	c.computer, c.err = b.ensure(ctx, office)
	b.mu.Lock()
	delete(b.calls, office)
	b.mu.Unlock()
	close(c.done)
}

func (b *officeSandboxes) ensure(ctx context.Context, office string) (string, error) {
	have, err := b.find(ctx, office)
	if err != nil {
		return "", err
	}
	if len(have) > 0 {
		// A paused one keeps its seat in the office, and a tool call
		// through the office resumes it: it is used as it is.
		return computerName(have[0]), nil
	}
	none := 0
	sb, err := b.pool.Create(ctx, pool.CreateRequest{
		Office:    office,
		Name:      officeSandboxName,
		TimeoutS:  &none, // it lives until the office is released
		OnTimeout: b.onTimeout,
		Metadata:  map[string]string{officeSandboxKey: "true"},
	})
	if err != nil {
		return "", fmt.Errorf("creating the office sandbox of %q: %w", office, err)
	}
	b.log.Info("office sandbox created", "office", office, "sandbox", sb.ID, "computer", computerName(sb))
	return computerName(sb), nil
}

// find lists office's own sandboxes that have not ended, the one to use
// first: running before paused before starting, then the oldest (two
// hubs may each have created one at once; the spare is used by neither
// and released with the office).
func (b *officeSandboxes) find(ctx context.Context, office string) ([]pool.Sandbox, error) {
	all, err := b.pool.List(ctx, pool.ListFilter{Office: office, Metadata: map[string]string{officeSandboxKey: "true"}})
	if err != nil {
		return nil, fmt.Errorf("listing the office sandboxes of %q: %w", office, err)
	}
	rank := map[pool.State]int{pool.Running: 0, pool.Paused: 1, pool.Starting: 2}
	var out []pool.Sandbox
	for _, sb := range all {
		// The filter is the pool's, checked again here: a pool that
		// ignored it must not hand one office another office's sandbox.
		if _, live := rank[sb.State]; live && sb.Office == office && sb.Metadata[officeSandboxKey] == "true" {
			out = append(out, sb)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank[out[i].State], rank[out[j].State]; ri != rj {
			return ri < rj
		}
		return out[i].CreatedAt.Before(out[j].CreatedAt)
	})
	return out, nil
}

// computerName is the name sb's Computer has in its office.
func computerName(sb pool.Sandbox) string {
	if sb.Computer != "" {
		return sb.Computer
	}
	return officeSandboxName
}

// Release applies --office-on-timeout to every sandbox of office: kill
// (delete, workspace included) or pause. A sandbox already gone, or
// already paused, is left as it is, so a second Release is harmless.
// It first waits for a creation of the office still under way, so that
// the sandbox it makes is released too.
func (b *officeSandboxes) Release(office string) {
	ctx, cancel := context.WithTimeout(b.ctx, releaseTimeout)
	defer cancel()
	b.mu.Lock()
	c := b.calls[office]
	b.mu.Unlock()
	if c != nil {
		select {
		case <-c.done:
		case <-ctx.Done():
		}
	}
	have, err := b.find(ctx, office)
	if err != nil {
		b.log.Warn("office sandbox not released", "office", office, "err", err)
		return
	}
	for _, sb := range have {
		switch {
		case b.onTimeout == pool.OnTimeoutPause && sb.State == pool.Paused:
			continue
		case b.onTimeout == pool.OnTimeoutPause:
			_, err = b.pool.Pause(ctx, sb.ID)
		default:
			err = b.pool.Delete(ctx, sb.ID, false)
		}
		var pe *pool.Error
		if errors.As(err, &pe) && pe.Status == http.StatusNotFound {
			err = nil // gone meanwhile
		}
		if err != nil {
			b.log.Warn("office sandbox not released", "office", office, "sandbox", sb.ID, "action", b.onTimeout, "err", err)
			continue
		}
		b.log.Info("office sandbox released", "office", office, "sandbox", sb.ID, "action", b.onTimeout)
	}
}

// Close ends the creations under way and waits for them. Call it after
// the server's Shutdown, which makes no more calls.
func (b *officeSandboxes) Close() {
	b.mu.Lock()
	b.cancel()
	b.mu.Unlock()
	b.wg.Wait()
}

// clientConsolePool is a pool reached over HTTP (a2c server
// --sandbox-pool) as the console's Sandboxes page sees it.
type clientConsolePool struct{ c *pool.Client }

func (p clientConsolePool) List(ctx context.Context) ([]pool.Sandbox, error) {
	return p.c.List(ctx, pool.ListFilter{})
}

func (p clientConsolePool) Metrics(ctx context.Context, id string) (pool.Metrics, error) {
	return p.c.Metrics(ctx, id)
}

func (p clientConsolePool) Pause(ctx context.Context, id string) error {
	_, err := p.c.Pause(ctx, id)
	return err
}

func (p clientConsolePool) Resume(ctx context.Context, id string) error {
	_, err := p.c.Resume(ctx, id, nil)
	return err
}

func (p clientConsolePool) Delete(ctx context.Context, id string) error {
	return p.c.Delete(ctx, id, false)
}
