package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/relay"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// dial connects to a server with the benchmark's 30 s bound.
func dial(srvURL string, h sio.ClientHandler) (*sio.Socket, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return relay.Dial(ctx, srvURL, h)
}

// pair is one Agent and its Computer, alone in their office.
type pair struct{ agent, comp *sio.Socket }

// connectPairs connects n pairs: the Computer ("c") to compURL first,
// then the Agent ("a") to agentURL, each pair in office tag-i.
func connectPairs(n int, agentURL, compURL, tag string) []pair {
	out := make([]pair, n)
	for i := range out {
		office := fmt.Sprintf("%s-%d", tag, i)
		c, err := dial(compURL, relay.Computer{})
		check(err)
		check(relay.Join(c, smcp.RoleComputer, "c", office))
		a, err := dial(agentURL, nil)
		check(err)
		check(relay.Join(a, smcp.RoleAgent, "a", office))
		out[i] = pair{a, c}
	}
	return out
}

func closePairs(ps []pair) {
	for _, p := range ps {
		p.agent.Disconnect()
		p.comp.Disconnect()
	}
}

// window is one measured window of one path.
type window struct {
	lat   lat.Samples
	errs  int64
	delta snap // the processes' CPU and Redis's commands over the window
}

// runWindow lets every Agent call client:tool_call back to back: warm-up,
// then a measured window of dur between two snapshots, then it stops the
// calls and waits for the last answers.
func runWindow(pairs []pair, warm, dur time.Duration, rd *redisProc, all []*proc) window {
	agents := make([]*sio.Socket, len(pairs))
	for i, p := range pairs {
		agents[i] = p.agent
	}
	load := relay.Start(agents)
	time.Sleep(warm)
	s0 := snapshot(rd, all)
	load.Measuring.Store(true)
	time.Sleep(dur)
	load.Measuring.Store(false)
	s1 := snapshot(rd, all)
	samples, errs, ok := load.Stop(45 * time.Second)
	if !ok {
		fatal(fmt.Errorf("calls still unanswered 45 s after the window"))
	}
	w := window{lat: samples, errs: errs}
	w.delta = s1.sub(s0)
	return w
}

// result pools the windows of one path at one level.
type result struct {
	path    string
	agents  int
	lat     lat.Samples
	errs    int64
	seconds float64
	ticks   map[string]int64 // process name -> CPU ticks over the windows
	cmds    cmdStats
	windows int
}

func (r *result) add(w window) {
	r.lat = append(r.lat, w.lat...)
	slices.Sort(r.lat)
	r.errs += w.errs
	r.seconds += w.delta.elapsed.Seconds()
	if r.ticks == nil {
		r.ticks = make(map[string]int64)
	}
	for k, v := range w.delta.ticks {
		r.ticks[k] += v
	}
	r.cmds = r.cmds.add(w.delta.cmds)
	r.windows++
}

func (r *result) calls() int { return len(r.lat) }

func (r *result) rate() float64 { return float64(r.calls()) / r.seconds }

// pct is the p-th percentile (0 < p < 100).
func (r *result) pct(p int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[len(r.lat)*p/100]
}

// cpuPerCall is the CPU time of the named processes per call.
func (r *result) cpuPerCall(names ...string) time.Duration {
	if r.calls() == 0 {
		return 0
	}
	var t int64
	for _, n := range names {
		t += r.ticks[n]
	}
	return time.Duration(float64(t) * float64(tick) / float64(r.calls()))
}
