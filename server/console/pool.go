package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// Pool is the sandbox pool whose sandboxes the console's Sandboxes page
// shows: "aiod pool" reached through its Go client, or the one "a2c up"
// runs in its own process. An error that is a *pool.Error is the pool's
// refusal and keeps its status and message; any other error is the
// pool's failure (unreachable, no answer) and stays in the log.
type Pool interface {
	List(ctx context.Context) ([]pool.Sandbox, error)
	Metrics(ctx context.Context, id string) (pool.Metrics, error)
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Delete(ctx context.Context, id string) error
}

// Pool limits: every request to the pool has a deadline, and a list's
// metrics are fetched a few at a time, so that a slow or large pool
// costs a page poll a bounded time and the pool a bounded load.
const (
	// PoolListTimeout bounds the pool's answer to a list.
	PoolListTimeout = 10 * time.Second
	// PoolMetricsTimeout bounds each sandbox's metrics of a list; a
	// sandbox whose metrics do not come in time is listed without them.
	PoolMetricsTimeout = 3 * time.Second
	// PoolMetricsConcurrency bounds the metrics requests of one list in
	// flight at once.
	PoolMetricsConcurrency = 8
	// PoolActionTimeout bounds a pause, resume or delete (a delete
	// waits for the sandbox's processes to end).
	PoolActionTimeout = 30 * time.Second
)

// PoolSandbox is one sandbox of the console's list: the pool's sandbox
// object with its latest metrics.
type PoolSandbox struct {
	pool.Sandbox
	// Metrics is nil when they could not be had; MetricsError then says
	// why.
	Metrics      *pool.Metrics
	MetricsError string
	// SampledAt is when the metrics were read (the console's clock): the
	// page derives a CPU rate from two samples' cpu_usage_ns and this.
	SampledAt *time.Time
}

// MarshalJSON writes the sandbox object's fields (as the pool writes
// them) followed by "metrics", "metrics_error" and "sampled_at". (The
// embedded pool.Sandbox has a MarshalJSON of its own, which would
// otherwise hide these fields.)
func (s PoolSandbox) MarshalJSON() ([]byte, error) {
	obj, err := json.Marshal(s.Sandbox)
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(struct {
		Metrics      *pool.Metrics `json:"metrics"`
		MetricsError string        `json:"metrics_error,omitempty"`
		SampledAt    *time.Time    `json:"sampled_at"`
	}{s.Metrics, s.MetricsError, s.SampledAt})
	if err != nil {
		return nil, err
	}
	// Both are JSON objects: join {...a} and {b...} as {...a,b...}.
	out := make([]byte, 0, len(obj)+len(extra))
	out = append(out, obj[:len(obj)-1]...)
	out = append(out, ',')
	return append(out, extra[1:]...), nil
}

// poolMetricsTimeout and poolNow are vars for tests.
var (
	poolMetricsTimeout = PoolMetricsTimeout
	poolNow            = time.Now
)

// poolAPI answers the pool routes with 404 when the console has no pool.
func (c *Console) poolAPI(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Pool == nil {
			writeError(w, http.StatusNotFound, "this hub has no sandbox pool")
			return
		}
		h(w, r)
	}
}

// validPoolID reports whether s can be a pool sandbox's id: 20
// characters of [a-z2-7] (the pool's own rule).
func validPoolID(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// poolList serves the pool's sandboxes, each with its latest metrics.
func (c *Console) poolList(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), PoolListTimeout)
	defer cancel()
	boxes, err := c.cfg.Pool.List(ctx)
	if err != nil {
		c.poolError(w, "list", err)
		return
	}
	out := make([]PoolSandbox, len(boxes))
	for i, b := range boxes {
		out[i].Sandbox = b
	}
	c.poolMetrics(r.Context(), out)
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

// poolMetrics fills in each sandbox's metrics, PoolMetricsConcurrency
// requests at a time, each within PoolMetricsTimeout. A failure is that
// sandbox's MetricsError, never the list's. It returns when every
// request has ended (each has a deadline), so no goroutine outlives the
// list.
func (c *Console) poolMetrics(ctx context.Context, out []PoolSandbox) {
	sem := make(chan struct{}, PoolMetricsConcurrency)
	var wg sync.WaitGroup
	for i := range out {
		s := &out[i]
		if s.State == pool.Stopped {
			continue // it has no cgroups left to read
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			s.MetricsError = "the request ended"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			mctx, cancel := context.WithTimeout(ctx, poolMetricsTimeout)
			defer cancel()
			m, err := c.cfg.Pool.Metrics(mctx, s.ID)
			if err != nil {
				// Debug only: a page asks every 2 s.
				_, msg, failed := poolStatus(err)
				c.log.Debug("console: sandbox metrics failed", "id", s.ID, "err", err)
				if failed {
					msg = "metrics unavailable"
				}
				s.MetricsError = msg
				return
			}
			now := poolNow().UTC()
			s.Metrics, s.SampledAt = &m, &now
		}()
	}
	wg.Wait()
}

// poolAction runs a pause or a resume and answers with the sandbox as
// the pool lists it afterwards, or 204 when it lists it no more (or the
// list failed: the action itself went through).
func (c *Console) poolAction(name string, act func(Pool, context.Context, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := poolPathID(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), PoolActionTimeout)
		defer cancel()
		if err := act(c.cfg.Pool, ctx, id); err != nil {
			c.poolError(w, name, err)
			return
		}
		c.log.Info("console: sandbox "+name, "id", id)
		if boxes, err := c.cfg.Pool.List(ctx); err == nil {
			for _, b := range boxes {
				if b.ID == id {
					writeJSON(w, http.StatusOK, b)
					return
				}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// poolDelete ends a sandbox: 204.
func (c *Console) poolDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := poolPathID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), PoolActionTimeout)
	defer cancel()
	if err := c.cfg.Pool.Delete(ctx, id); err != nil {
		c.poolError(w, "delete", err)
		return
	}
	c.log.Info("console: sandbox deleted", "id", id)
	w.WriteHeader(http.StatusNoContent)
}

// poolPathID is the route's sandbox id, or false after a 400.
func poolPathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !validPoolID(id) {
		writeError(w, http.StatusBadRequest, "invalid sandbox id: 20 characters of a-z and 2-7")
		return "", false
	}
	return id, true
}

// poolError answers a failed request to the pool (see [poolStatus]); a
// failure of the pool itself is logged.
func (c *Console) poolError(w http.ResponseWriter, op string, err error) {
	status, msg, failed := poolStatus(err)
	if failed {
		c.log.Warn("console: sandbox pool request failed", "op", op, "err", err)
	}
	writeError(w, status, msg)
}

// poolStatus maps a failed request to the pool onto the console's
// answer: the pool's refusal (a *pool.Error of 4xx, or 503) keeps its
// status and message, which the pool wrote for its clients; no answer in
// time is 504, and any other failure 502 (failed: true), with a message
// of the console's, never the error's own text.
func poolStatus(err error) (status int, msg string, failed bool) {
	var pe *pool.Error
	switch {
	case errors.As(err, &pe) && (pe.Status >= 400 && pe.Status < 500 || pe.Status == http.StatusServiceUnavailable):
		return pe.Status, pe.Message, false
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "the sandbox pool did not answer in time", false
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "request cancelled", false
	}
	return http.StatusBadGateway, "the sandbox pool failed; see the hub's log", true
}
