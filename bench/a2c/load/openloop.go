package main

// The open loop (-rate N): calls leave on a fixed schedule whatever the
// server does, as a production hub's traffic does, so a server that
// slows down shows it as latency (calls queue) or as lost throughput
// rather than as a load generator that politely waits. The closed loop
// (one call outstanding per Agent) cannot show that: its offered rate is
// whatever the server manages.
//
// The schedule: call j (j = 0, 1, ...) is due at t0 + j/N seconds, and
// Agent j mod A sends it; each Agent has its own sender goroutine and
// any number of calls outstanding (the sio client keeps its pending
// acknowledgements by id). A sender that wakes late sends every call
// that is due at once: a late call keeps its scheduled time, and its
// latency is measured from that time, not from when it left, so a
// stalled client or server cannot hide queueing (no coordinated
// omission). How late the calls left (the send lag) is measured as well,
// and the report grades it: kept (p99 ≤ lateLag), late (the rate was
// held but some calls left up to behindLag late; that lag is in the
// latencies from the schedule) or behind (the load client did not hold
// the schedule: the row measures the client as much as the server).
//
// The window: calls due in the first -warmup are not measured; calls due
// in the next -duration are. The schedule ends with the window; the
// figures of the window's calls are taken once every answer is in (or
// has timed out).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

const (
	// lateLag and behindLag grade the send lag p99: up to lateLag the
	// schedule was kept, up to behindLag it was late, above it the load
	// client fell behind.
	lateLag   = time.Millisecond
	behindLag = 5 * time.Millisecond
	// openAckTimeout is how long the client waits for one answer before
	// it counts the call as timed out (the call's own timeout, 30 s, is
	// the server's).
	openAckTimeout = 10 * time.Second
)

// openResult is one open-loop run of one target at one level.
type openResult struct {
	agents, rate int
	seconds      float64
	scheduled    int // calls due in the window
	answered     int // successful answers that arrived in the window
	measured     int // calls due in the window answered successfully (latency samples)
	// p50, p99, p999 are latencies of the window's calls from their
	// scheduled send time to their answer; sentP99 from the time they
	// actually left (the server's part when the client was late).
	p50, p99, p999, sentP99 time.Duration
	// lagP50, lagP99, lagMax are how late the window's calls left.
	lagP50, lagP99, lagMax time.Duration
	// writeMax is the longest time one send spent writing: the server's
	// backpressure (it stopped reading), as against a client short of CPU.
	writeMax time.Duration
	// lagWorst is the largest lagP99 of the rounds (a median's grade).
	lagWorst         time.Duration
	cpuPerCall       time.Duration
	clientCores      float64 // the load client's CPU time per second of the window
	errors, timeouts int64   // over the whole run, warm-up included
	stream           *streamStat
}

type openTarget struct {
	name   string
	levels []openResult
}

// openAgent is one Agent of the open loop with the figures of its calls.
type openAgent struct {
	sock *sio.Socket
	mu   sync.Mutex
	lat  []time.Duration // window calls answered successfully, from the schedule
	svc  []time.Duration // the same calls from their actual send
	lag  []time.Duration // window calls sent
	// writeMax is the longest write of a window call (sender only).
	writeMax time.Duration
}

// runOpen measures every target at every (agents, rate) level, targets
// taking turns within each round, and prints the report.
func runOpen(w io.Writer, names []string, agentLevels, rates []int, warm, dur time.Duration, rounds int, root, bin string, cpus int) {
	results := make([]openTarget, len(names))
	for i, t := range names {
		results[i].name = t
	}
	for _, a := range agentLevels {
		for _, rate := range rates {
			per := make([][]openResult, len(names))
			for round := 0; round < rounds; round++ {
				for i, t := range names {
					fmt.Fprintf(os.Stderr, "round %d: %s, %d agents, open loop at %d calls/s\n", round+1, t, a, rate)
					srv := start(t, root, bin)
					r := measureOpen(srv, a, rate, warm, dur)
					srv.stop()
					r.stream = srv.stream
					per[i] = append(per[i], r)
				}
			}
			for i := range names {
				results[i].levels = append(results[i].levels, medianOpen(per[i]))
			}
		}
	}
	printOpen(w, results, dur, cpus, rounds)
}

// measureOpen runs the schedule against srv with agents Agent/Computer
// pairs (one office each) and returns the window's figures.
func measureOpen(srv *server, agents, rate int, warm, dur time.Duration) openResult {
	ctx := context.Background()
	ags := make([]*openAgent, agents)
	comps := make([]*sio.Socket, agents)
	for i := range ags {
		a, c := dialPair(ctx, srv.url, fmt.Sprintf("open-%d-%d", i, time.Now().UnixNano()))
		per := int(float64(rate)*dur.Seconds())/agents + 1
		ags[i] = &openAgent{sock: a, lat: make([]time.Duration, 0, per), svc: make([]time.Duration, 0, per), lag: make([]time.Duration, 0, per)}
		comps[i] = c
	}

	var (
		errs, timeouts, answered atomic.Int64
		pending                  sync.WaitGroup // one per call sent, done in its callback
		senders                  sync.WaitGroup
		stop                     = make(chan struct{})
	)
	t0 := time.Now().Add(20 * time.Millisecond) // every sender is waiting by then
	ws := t0.Add(warm)
	we := ws.Add(dur)
	due := func(j int64) time.Time { return t0.Add(time.Duration(j * int64(time.Second) / int64(rate))) }
	for i, ag := range ags {
		senders.Go(func() {
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for k := int64(0); ; k++ {
				j := k*int64(agents) + int64(i)
				at := due(j)
				if !at.Before(we) {
					return
				}
				if d := time.Until(at); d > 0 {
					timer.Reset(d)
					select {
					case <-timer.C:
					case <-stop:
						return
					}
				}
				inWindow := !at.Before(ws)
				sent := time.Now()
				if inWindow {
					ag.mu.Lock()
					ag.lag = append(ag.lag, sent.Sub(at))
					ag.mu.Unlock()
				}
				// smcp.ToolCallReq built without reflection, as relay.Start does.
				b := fmt.Appendf(nil, `{"agent":"a","req_id":"o%d-%d","computer":"c","tool_name":"b__echo","params":{"text":"hello"},"timeout":30}`, i, k)
				pending.Add(1)
				ag.sock.RequestDirect(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{b}}, openAckTimeout, func(m sio.Message, err error) {
					defer pending.Done()
					now := time.Now()
					if err == nil && (len(m.Args) == 0 || !strings.Contains(string(m.Args[0]), `"isError":false`)) {
						err = fmt.Errorf("bad answer %q", m.Args)
					}
					switch {
					case errors.Is(err, sio.ErrAckTimeout):
						timeouts.Add(1)
						return
					case err != nil:
						errs.Add(1)
						return
					}
					if !now.Before(ws) && now.Before(we) {
						answered.Add(1)
					}
					if inWindow {
						ag.mu.Lock()
						ag.lat = append(ag.lat, now.Sub(at))
						ag.svc = append(ag.svc, now.Sub(sent))
						ag.mu.Unlock()
					}
				})
				if d := time.Since(sent); inWindow && d > ag.writeMax {
					ag.writeMax = d
				}
			}
		})
	}

	time.Sleep(time.Until(ws))
	c0, u0, r0 := srv.cpuTicks(), selfCPU(), time.Now()
	time.Sleep(time.Until(we))
	c1, u1, r1 := srv.cpuTicks(), selfCPU(), time.Now()

	// The senders end with the schedule; one stuck in a write (a server
	// that stopped reading) is released by the disconnect below. pending
	// is waited on only once no sender can add to it.
	stopped := waitFor(senders.Wait, 10*time.Second)
	close(stop)
	if !stopped {
		fmt.Fprintln(os.Stderr, "load: senders still writing 10 s after the window; disconnecting")
	}
	// Every call ends in its callback: an answer, the client's timeout,
	// or the socket's closing (which the disconnect makes happen).
	if stopped && !waitFor(pending.Wait, openAckTimeout+5*time.Second) {
		fmt.Fprintln(os.Stderr, "load: calls unanswered after the client's timeout; they count as errors")
	}
	for i, ag := range ags {
		ag.sock.Disconnect()
		comps[i].Disconnect()
	}
	if !waitFor(senders.Wait, 10*time.Second) || !waitFor(pending.Wait, 10*time.Second) {
		check(fmt.Errorf("open loop: senders or callbacks still running 10 s after the disconnect"))
	}

	var lat, svc, lag []time.Duration
	var writeMax time.Duration
	for _, ag := range ags {
		writeMax = max(writeMax, ag.writeMax)
		lat = append(lat, ag.lat...)
		svc = append(svc, ag.svc...)
		lag = append(lag, ag.lag...)
	}
	slices.Sort(lat)
	slices.Sort(svc)
	slices.Sort(lag)
	r := openResult{
		agents: agents, rate: rate, seconds: dur.Seconds(), // the counts are of [ws, we) exactly
		scheduled: len(lag), answered: int(answered.Load()), measured: len(lat),
		clientCores: (u1 - u0).Seconds() / r1.Sub(r0).Seconds(),
		errors:      errs.Load(), timeouts: timeouts.Load(),
		writeMax: writeMax,
	}
	if n := len(lat); n > 0 {
		r.p50, r.p99, r.p999 = lat[n/2], lat[n*99/100], lat[n*999/1000]
		r.sentP99 = svc[n*99/100]
	}
	if n := len(lag); n > 0 {
		r.lagP50, r.lagP99, r.lagMax = lag[n/2], lag[n*99/100], lag[n-1]
		r.lagWorst = r.lagP99
	}
	if r.answered > 0 {
		r.cpuPerCall = time.Duration(float64(c1-c0) * float64(10*time.Millisecond) / float64(r.answered))
	}
	return r
}

// waitFor runs wait on a goroutine and reports whether it returned
// within d. The goroutine outlives a false answer until wait returns;
// callers make sure it does (by disconnecting).
func waitFor(wait func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// selfCPU is the load client's own user+sys time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medianOpen takes each figure's median over rounds; errors and timeouts
// add up, and the schedule's grade is the worst round's.
func medianOpen(rs []openResult) openResult {
	med := func(f func(openResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	dur := func(f func(openResult) time.Duration) time.Duration {
		return time.Duration(med(func(r openResult) float64 { return float64(f(r)) }))
	}
	out := rs[0]
	out.seconds = 1
	out.scheduled = int(med(func(r openResult) float64 { return float64(r.scheduled) / r.seconds }))
	out.answered = int(med(func(r openResult) float64 { return float64(r.answered) / r.seconds }))
	out.p50 = dur(func(r openResult) time.Duration { return r.p50 })
	out.p99 = dur(func(r openResult) time.Duration { return r.p99 })
	out.p999 = dur(func(r openResult) time.Duration { return r.p999 })
	out.sentP99 = dur(func(r openResult) time.Duration { return r.sentP99 })
	out.lagP50 = dur(func(r openResult) time.Duration { return r.lagP50 })
	out.lagP99 = dur(func(r openResult) time.Duration { return r.lagP99 })
	out.lagMax = dur(func(r openResult) time.Duration { return r.lagMax })
	out.writeMax = dur(func(r openResult) time.Duration { return r.writeMax })
	out.cpuPerCall = dur(func(r openResult) time.Duration { return r.cpuPerCall })
	out.clientCores = med(func(r openResult) float64 { return r.clientCores })
	out.errors, out.timeouts, out.lagWorst = 0, 0, 0
	var streams []streamStat
	for _, r := range rs {
		out.errors += r.errors
		out.timeouts += r.timeouts
		out.lagWorst = max(out.lagWorst, r.lagWorst)
		if r.stream != nil && r.stream.calls > 0 {
			streams = append(streams, *r.stream)
		}
	}
	out.stream = nil
	if len(streams) > 0 {
		slices.SortFunc(streams, func(a, b streamStat) int {
			x, y := float64(a.events)/float64(a.calls), float64(b.events)/float64(b.calls)
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		})
		out.stream = &streams[len(streams)/2]
	}
	return out
}

// printOpen writes the open-loop report: one row per target and level,
// then every target's ratios to the first one.
func printOpen(w io.Writer, targets []openTarget, dur time.Duration, cpus, rounds int) {
	fmt.Fprintf(w, "### Relay open loop (%s per level, %d CPUs, medians of %d rounds)\n\n", dur, cpus, rounds)
	fmt.Fprintln(w, "Calls leave on a fixed schedule whatever the answers; p50/p99/p99.9 are from each call's scheduled send time (queueing shows; no coordinated omission), \"p99 from send\" from when it actually left. "+
		"Send lag: how late calls left against the schedule (part of a millisecond is the Go runtime's timer granularity, alike for every target); schedule: \"kept\" when its p99 was ≤ "+lateLag.String()+" in every round, \"late\" when ≤ "+behindLag.String()+
		" (the rate was held; that lag is inside the latencies from the schedule), \"behind\" above (the load client, not only the server, set the pace). Client CPU: the load client's own CPU time per second (it is every Agent and every Computer, both ends of each call). "+
		"Stream: events the reading console page got per relayed call (2 = a start and an end) and events dropped for the page that never reads.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | agents | offered calls/s | answered calls/s | p50 | p99 | p99.9 | p99 from send | server CPU per call | client CPU | send lag p50 / p99 (max) | longest write | schedule | errors | timeouts | stream events per call | dropped |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
	anyBehind := false
	for _, t := range targets {
		for _, l := range t.levels {
			sched := "kept"
			switch {
			case l.lagWorst > behindLag:
				sched, anyBehind = "**behind**", true
			case l.lagWorst > lateLag:
				sched = "late"
			}
			per, dropped := "–", "–"
			if l.stream != nil {
				per = fmt.Sprintf("%.2f", float64(l.stream.events)/float64(l.stream.calls))
				dropped = fmt.Sprint(l.stream.dropped)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %d | %s | %s | %s | %s | %.1f µs | %.2f cores | %s / %s (%s) | %s | %s | %d | %d | %s | %s |\n",
				t.name, l.agents, l.scheduled, l.answered, us(l.p50), us(l.p99), us(l.p999), us(l.sentP99),
				float64(l.cpuPerCall)/float64(time.Microsecond), l.clientCores, us(l.lagP50), us(l.lagP99), us(l.lagMax), us(l.writeMax), sched,
				l.errors, l.timeouts, per, dropped)
		}
	}
	if anyBehind {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "- The load client fell behind its schedule in at least one run (send lag p99 over "+behindLag.String()+"). "+
			"A longest write about as long as the lag points at the server not reading (backpressure: the server set the pace, and the latency from the schedule is the honest figure); "+
			"a short one at a client short of CPU (a busy machine: rerun when it is quiet, or at a lower rate). On a busy machine both happen.")
	}
	if len(targets) < 2 {
		return
	}
	first := targets[0]
	fmt.Fprintln(w)
	fmt.Fprintf(w, "A/B against %s at the same offered rate (same run, medians):\n\n", first.name)
	fmt.Fprintln(w, "| server | agents | offered calls/s | answered calls/s ratio | CPU per call ratio | p50 ratio | p99 ratio | p99.9 ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, t := range targets[1:] {
		for i, l := range t.levels {
			if i >= len(first.levels) {
				break
			}
			b := first.levels[i]
			fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s |\n", t.name, l.agents, l.rate,
				ratio(float64(l.answered), float64(b.answered)), ratio(float64(l.cpuPerCall), float64(b.cpuPerCall)),
				ratio(float64(l.p50), float64(b.p50)), ratio(float64(l.p99), float64(b.p99)), ratio(float64(l.p999), float64(b.p999)))
		}
	}
}
