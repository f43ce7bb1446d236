// Command load benchmarks the signalling server's relay against a
// reference relay on Node's official socket.io server, in one run:
//
//	go run ./bench/a2c/load [-targets ours,node] [-agents 1,10,100] [-duration 5s] [-idle 1000,10000]
//
// For each target it starts the server as a separate process, then for
// each level A it connects A offices of one Agent and one Computer (the
// Computer answers at once), lets every Agent call client:tool_call in a
// loop, and reports round-trip p50/p99, calls/s and the server's CPU time
// per call (user+sys from /proc). It then measures the server's RSS with
// N idle joined connections (a fresh process per N). A baseline of two
// loopback WebSocket hops (a plain Go forwarder between A clients and A
// echo peers, the relay's topology without Socket.IO) is measured at each
// level in the same run: its CPU per round trip is the floor. It prints a
// Markdown report with ratios ours/reference and ours/raw forwarder.
//
// With -rate N (calls/s; a comma-separated list measures each) the load
// is an open loop instead, and the raw forwarder is not measured:
//
//	go run ./bench/a2c/load -targets ours,ours+console -agents 10 -rate 5000 -idle ""
//
// For each target and level, calls leave on a fixed schedule of N per
// second, spread over the -agents Agents (each with any number of calls
// outstanding, every req_id unique), whether or not answers come back.
// It reports the offered and the answered calls/s, latency p50/p99/p99.9
// from each call's scheduled send time (a server that falls behind shows
// its queue), the server's CPU per call, errors and timeouts, how late
// the client's sends were against the schedule (the client must not be
// the bottleneck; the report says when it fell behind), and for
// +console targets the reading page's events per call and the events
// dropped for the page that never reads; then ratios against the first
// target. See openloop.go. -rate 0 (the default) is the closed loop.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
	"github.com/a2c-smcp/a2c-go/bench/internal/relay"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "forwarder" {
		runForwarder()
		return
	}
	targets := flag.String("targets", "ours,node", "servers to measure: ours, node")
	agents := flag.String("agents", "1,10,100", "concurrent Agents (one office each)")
	dur := flag.Duration("duration", 5*time.Second, "measured time per level")
	warm := flag.Duration("warmup", time.Second, "unmeasured time before each level")
	idle := flag.String("idle", "1000,10000", "idle joined connections for the RSS measurement")
	rounds := flag.Int("rounds", 3, "repetitions of every measurement; figures are medians")
	cpuProfile := flag.String("cpuprofile", "", "write the load client's own CPU profile here")
	rate := flag.String("rate", "0", "open loop: calls/s offered on a fixed schedule over the -agents connections, "+
		"instead of the closed loop and the raw forwarder (a list measures each rate; 0 = off)")
	flag.Parse()
	raiseNoFile()
	// The load client's own garbage collection is noise in the latencies
	// it measures; give it room (it holds little).
	debug.SetGCPercent(800)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}

	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "a2c-bench-")
	check(err)
	defer os.RemoveAll(tmp)
	bin, err := procs.BuildA2C(root, tmp)
	check(err)
	buildDir = tmp
	defer stopSink()

	// The machine's noise drifts, so targets take turns within each round
	// and every figure is the median over the rounds.
	r := report{dur: *dur, cpus: runtime.NumCPU(), rounds: *rounds}
	names := strings.Split(*targets, ",")
	results := make([]targetResult, len(names))
	for i, t := range names {
		results[i].name = t
	}
	var rates []int
	for _, n := range ints(*rate) {
		if n > 0 {
			rates = append(rates, n)
		}
	}
	if len(rates) > 0 {
		runOpen(os.Stdout, names, ints(*agents), rates, *warm, *dur, *rounds, root, bin, r.cpus)
		if idles := ints(*idle); len(idles) > 0 {
			results = measureIdles(results, idles, *rounds, root, bin)
			printIdle(os.Stdout, results)
		}
		printSink(os.Stdout)
		return
	}
	for _, a := range ints(*agents) {
		per := make([][]levelResult, len(names))
		var base []levelResult
		for round := 0; round < *rounds; round++ {
			fmt.Fprintf(os.Stderr, "round %d: baseline, raw WebSocket forwarder, %d agents\n", round+1, a)
			base = append(base, measureBaseline(a, *warm, *dur))
			for i, t := range names {
				fmt.Fprintf(os.Stderr, "round %d: %s, %d agents\n", round+1, t, a)
				srv := start(t, root, bin)
				per[i] = append(per[i], measureLoad(srv, a, *warm, *dur))
				srv.stop()
			}
		}
		for i := range names {
			results[i].levels = append(results[i].levels, medianLevel(per[i]))
		}
		r.baseline = append(r.baseline, medianLevel(base))
	}
	r.targets = measureIdles(results, ints(*idle), *rounds, root, bin)
	r.print(os.Stdout)
	printStreams(os.Stdout)
}

// measureIdles adds to every target its idle-connections figures, one
// per count in idle, targets taking turns within each round.
func measureIdles(results []targetResult, idle []int, rounds int, root, bin string) []targetResult {
	for _, n := range idle {
		per := make([][]idleResult, len(results))
		for round := 0; round < rounds; round++ {
			for i, t := range results {
				fmt.Fprintf(os.Stderr, "round %d: %s, %d idle connections\n", round+1, t.name, n)
				srv := start(t.name, root, bin)
				per[i] = append(per[i], measureIdle(srv, n))
				srv.stop()
			}
		}
		for i := range results {
			results[i].idle = append(results[i].idle, medianIdle(per[i]))
		}
	}
	return results
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		check(err)
		out = append(out, n)
	}
	return out
}

func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// server is a server process under test.
type server struct {
	url string
	cmd *exec.Cmd
	// watchers read the console's live stream (ours+console).
	watchers *streamWatchers
	// stream is what the watchers saw, once stop has run.
	stream *streamStat
}

func start(target, root, bin string) *server {
	// "ours:NAME=VALUE+..." is our server with extra environment, for A/B
	// runs of an internal setting; "ours@REV" our server built from a
	// git revision, and "ours+otlp", "ours+console" our server with
	// tracing exported or the console on (see variants.go).
	var extraEnv []string
	if name, env, ok := strings.Cut(target, ":"); ok {
		target = name
		extraEnv = strings.Split(env, "+")
	}
	v := parseVariant(target)
	target = v.base
	if v.rev != "" {
		bin = binAt(root, v.rev)
	}
	extraEnv = append(extraEnv, v.env()...)
	var cmd *exec.Cmd
	switch target {
	case "ours":
		cmd = exec.Command(bin, "server", "--listen", "127.0.0.1:0", "--log-level", "warn")
		cmd.Args = append(cmd.Args, v.args()...)
		if p := os.Getenv("A2C_BENCH_CPUPROFILE"); p != "" {
			cmd.Args = append(cmd.Args, "--cpu-profile", p)
		}
		if p := os.Getenv("A2C_BENCH_GOMAXPROCS"); p != "" {
			extraEnv = append(extraEnv, "GOMAXPROCS="+p)
		}
		if len(extraEnv) > 0 {
			cmd.Env = append(os.Environ(), extraEnv...)
		}
	case "node":
		cmd = exec.Command("node", "relay.js", "--port", "0")
		cmd.Dir = filepath.Join(root, "bench", "a2c", "reference")
	default:
		check(fmt.Errorf("unknown target %q", target))
	}
	url, err := procs.Start(cmd)
	check(err)
	time.Sleep(200 * time.Millisecond)
	srv := &server{url: url, cmd: cmd}
	if v.console {
		srv.watchers = watchStream(url)
	}
	return srv
}

func (s *server) stop() {
	if s.watchers != nil {
		st := s.watchers.stop(s)
		s.stream = &st
	}
	procs.Stop(s.cmd)
}

// cpuTicks is the process's user+sys time in clock ticks (1/100 s).
func (s *server) cpuTicks() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	check(err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// rssKiB is the process's resident set in KiB.
func (s *server) rssKiB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return n
		}
	}
	return 0
}

type levelResult struct {
	agents      int
	calls       int
	seconds     float64
	p50, p99    time.Duration
	cpuPerCall  time.Duration
	clientError int64
}

// dialPair joins an Agent and an echoing Computer to office on url.
func dialPair(ctx context.Context, url, office string) (agent, comp *sio.Socket) {
	c, err := relay.Dial(ctx, url, relay.Computer{})
	check(err)
	check(relay.Join(c, smcp.RoleComputer, "c", office))
	a, err := relay.Dial(ctx, url, nil)
	check(err)
	check(relay.Join(a, smcp.RoleAgent, "a", office))
	return a, c
}

func measureLoad(srv *server, agents int, warm, dur time.Duration) levelResult {
	ctx := context.Background()
	type pair struct{ agent, comp *sio.Socket }
	pairs := make([]pair, agents)
	for i := range pairs {
		a, c := dialPair(ctx, srv.url, fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()))
		pairs[i] = pair{a, c}
	}
	socks := make([]*sio.Socket, len(pairs))
	for i, p := range pairs {
		socks[i] = p.agent
	}
	load := relay.Start(socks)
	time.Sleep(warm)
	c0 := srv.cpuTicks()
	t0 := time.Now()
	load.Measuring.Store(true)
	time.Sleep(dur)
	load.Measuring.Store(false)
	elapsed := time.Since(t0)
	c1 := srv.cpuTicks()
	all, errs, ok := load.Stop(time.Minute)
	if !ok {
		check(fmt.Errorf("calls still unanswered a minute after the window"))
	}
	for _, p := range pairs {
		p.agent.Disconnect()
		p.comp.Disconnect()
	}
	slices.Sort(all)
	r := levelResult{agents: agents, calls: len(all), seconds: elapsed.Seconds(), clientError: errs}
	if len(all) > 0 {
		r.p50 = all[len(all)/2]
		r.p99 = all[len(all)*99/100]
		r.cpuPerCall = time.Duration(float64(c1-c0) * float64(10*time.Millisecond) / float64(len(all)))
	}
	return r
}

type idleResult struct {
	conns          int
	baseKiB, kib   int64
	perConnKiB     float64
	connectSeconds float64
}

func measureIdle(srv *server, n int) idleResult {
	time.Sleep(500 * time.Millisecond)
	base := srv.rssKiB()
	socks := make([]*sio.Socket, n)
	t0 := time.Now()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				s, err := relay.Dial(ctx, srv.url, relay.Computer{})
				cancel()
				check(err)
				check(relay.Join(s, smcp.RoleComputer, "c", fmt.Sprintf("idle-%d", i)))
				socks[i] = s
			}
		}()
	}
	wg.Wait()
	connect := time.Since(t0)
	time.Sleep(3 * time.Second)
	rss := srv.rssKiB()
	for _, s := range socks {
		s.Disconnect()
	}
	return idleResult{conns: n, baseKiB: base, kib: rss, perConnKiB: float64(rss-base) / float64(n), connectSeconds: connect.Seconds()}
}

// medianLevel takes each figure's median over rounds.
func medianLevel(rs []levelResult) levelResult {
	pick := func(f func(levelResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := rs[0]
	out.seconds = 1
	out.calls = int(pick(func(r levelResult) float64 { return float64(r.calls) / r.seconds }))
	out.p50 = time.Duration(pick(func(r levelResult) float64 { return float64(r.p50) }))
	out.p99 = time.Duration(pick(func(r levelResult) float64 { return float64(r.p99) }))
	out.cpuPerCall = time.Duration(pick(func(r levelResult) float64 { return float64(r.cpuPerCall) }))
	var errs int64
	for _, r := range rs {
		errs += r.clientError
	}
	out.clientError = errs
	return out
}

func medianIdle(rs []idleResult) idleResult {
	slices.SortFunc(rs, func(a, b idleResult) int {
		switch {
		case a.perConnKiB < b.perConnKiB:
			return -1
		case a.perConnKiB > b.perConnKiB:
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}
