// Command cluster benchmarks a cluster of `a2c server` nodes on Redis
// against the same relay on one node, in one run with real processes on
// 127.0.0.1:
//
//	go run ./bench/a2c/cluster [-agents 1,10,100] [-duration 3s] [-rounds 2] [-members 10000] [-cpu-profile DIR]
//
// It builds a2c, starts a redis-server on a free port (no persistence),
// two nodes (`a2c server --redis ... --node-id node1|node2`) and one
// server without --redis, and measures three paths at each level of N
// paired Agents (each Agent in its own office with its own Computer,
// calling client:tool_call back to back; the Computer answers at once):
//
//   - cross: the Agent on node1, its Computer on node2;
//   - same: both on node1 (a cluster node, same-node relay);
//   - solo: both on the server without --redis (the baseline).
//
// The paths take turns within each round, and each figure pools the
// measured windows of every round: latency percentiles, calls/s, the
// servers' CPU per call (user+sys from /proc: both nodes for cross and
// same, the solo server for solo), Redis's CPU per call, and the Redis
// commands per call from Redis's own INFO commandstats, next to an idle
// window of the same length (the nodes' heartbeats and sweeps) measured
// before the load. It then joins -members Computers (one office each,
// half on each node) and reports Redis's used_memory and the nodes' RSS
// per member, the commands per join and the idle CPU of the members'
// connections, and the RSS per connection of the server without --redis.
//
// Everything it starts is stopped however it ends: on return, on a fatal
// error, on SIGINT/SIGTERM/SIGHUP, and (through the parent-death signal)
// when the benchmark itself is killed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == echoArg {
		runEcho(os.Args[2])
		return
	}
	levels := flag.String("agents", "1,10,100", "levels of N paired Agents (each with its own office and Computer)")
	dur := flag.Duration("duration", 3*time.Second, "measured time per path, level and round")
	warm := flag.Duration("warmup", 500*time.Millisecond, "unmeasured calls before each measured window")
	rounds := flag.Int("rounds", 2, "rounds per level; the paths take turns in each, and the windows are pooled")
	members := flag.Int("members", 10000, "joined Computers for the memory measurement (0 skips it)")
	idleHold := flag.Duration("idle", 5*time.Second, "how long the joined members are held idle to measure their CPU")
	profileDir := flag.String("cpu-profile", "", "directory where each server writes a Go CPU profile (node1.pprof, node2.pprof, solo.pprof), written when it stops")
	redisBin := flag.String("redis-server", "redis-server", "the redis-server binary")
	procsFlag := flag.Int("gomaxprocs", 0, "GOMAXPROCS of the servers (0: the Go default, the CPU count)")
	only := flag.String("paths", "cross,same,solo", "paths to measure (for profiling one): cross, same, solo")
	flag.Parse()
	if *rounds < 1 || *dur <= 0 {
		fatal(fmt.Errorf("-rounds must be ≥ 1 and -duration > 0"))
	}
	ns := ints(*levels)

	stopOnSignal()
	defer func() {
		if p := recover(); p != nil {
			clean.run()
			panic(p)
		}
		clean.run()
	}()
	raiseNoFile()
	// The load client's garbage collection is noise in the latencies it
	// measures; give it room (it holds little).
	debug.SetGCPercent(800)

	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "a2c-cluster-bench-")
	check(err)
	clean.add(func() { os.RemoveAll(tmp) })
	fmt.Fprintln(os.Stderr, "building a2c")
	bin, err := procs.BuildA2C(root, tmp)
	check(err)

	rd := startRedis(*redisBin, tmp)
	redisURL := "redis://" + rd.addr
	profile := func(name string) []string {
		if *profileDir == "" {
			return nil
		}
		check(os.MkdirAll(*profileDir, 0o755))
		return []string{"--cpu-profile", filepath.Join(*profileDir, name+".pprof")}
	}
	if *procsFlag > 0 {
		serverEnv = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(*procsFlag))
	}
	node1 := startServer(bin, "node1", append([]string{"--redis", redisURL, "--node-id", "node1"}, profile("node1")...)...)
	node2 := startServer(bin, "node2", append([]string{"--redis", redisURL, "--node-id", "node2"}, profile("node2")...)...)
	solo := startServer(bin, "solo", profile("solo")...)
	time.Sleep(500 * time.Millisecond)

	r := report{
		cpus: runtime.NumCPU(), dur: *dur, warm: *warm, rounds: *rounds,
		redisVersion: rd.info("server")["redis_version"],
	}
	// The idle window: no client, the length of one path's measured time
	// at one level. Its commands are the nodes' own (heartbeats, sweeps,
	// the client library's health checks).
	idleLen := time.Duration(*rounds) * *dur
	fmt.Fprintf(os.Stderr, "idle window, %s\n", idleLen)
	echo := startEcho(rd)
	fl := newFloor(rd)
	procsAll := []*proc{node1, node2, solo, rd.proc, echo, {name: "bench", pid: os.Getpid()}}
	s0 := snapshot(rd, procsAll)
	time.Sleep(idleLen)
	r.idle = snapshot(rd, procsAll).sub(s0)

	paths := []path{
		{name: pathCross, agentSrv: node1, compSrv: node2},
		{name: pathSame, agentSrv: node1, compSrv: node1},
		{name: pathSolo, agentSrv: solo, compSrv: solo},
	}
	paths = slices.DeleteFunc(paths, func(p path) bool { return !slices.Contains(strings.Split(*only, ","), p.name) })
	if len(paths) == 0 {
		fatal(fmt.Errorf("-paths names none of cross, same, solo"))
	}
	for _, n := range ns {
		pairs := make([][]pair, len(paths))
		for i, p := range paths {
			pairs[i] = connectPairs(n, p.agentSrv.url, p.compSrv.url, fmt.Sprintf("%s-%d", p.name, n))
		}
		res := make([]result, len(paths))
		for i, p := range paths {
			res[i] = result{path: p.name, agents: n}
		}
		fres := result{path: pathFloor, agents: 1}
		for round := range *rounds {
			for k := range paths {
				i := (k + round) % len(paths)
				fmt.Fprintf(os.Stderr, "N=%d round %d: %s\n", n, round+1, paths[i].name)
				res[i].add(runWindow(pairs[i], *warm, *dur, rd, procsAll))
			}
			if n == 1 {
				fmt.Fprintf(os.Stderr, "N=1 round %d: Redis floor\n", round+1)
				fres.add(runFloor(fl, *warm, *dur, rd, procsAll))
			}
		}
		if n == 1 {
			r.results = append(r.results, fres)
		}
		for i := range paths {
			closePairs(pairs[i])
		}
		r.results = append(r.results, res...)
		time.Sleep(300 * time.Millisecond) // the leaves settle before the next level's joins
	}

	if *members > 0 {
		// Fresh processes, so the load's heap does not hide the members'
		// memory; new ids, so no lease of a previous process is waited on.
		m1 := startServer(bin, "node3", "--redis", redisURL, "--node-id", "node3")
		m2 := startServer(bin, "node4", "--redis", redisURL, "--node-id", "node4")
		ms := startServer(bin, "solo2")
		r.mem = measureMembers(*members, *idleHold, rd, m1, m2, ms)
	}
	r.print(os.Stdout)
}

// The paths measured.
const (
	pathCross = "cross"
	pathSame  = "same"
	pathSolo  = "solo"
	pathFloor = "floor"
)

// path is where the Agents and the Computers of one path connect.
type path struct {
	name              string
	agentSrv, compSrv *proc
}

// cleanup runs the stops of everything started, once, last first.
type cleanup struct {
	mu   sync.Mutex
	fns  []func()
	done bool
}

var clean cleanup

// add registers f to run at the end; if the end has come already, f runs
// at once.
func (c *cleanup) add(f func()) {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		f()
		return
	}
	c.fns = append(c.fns, f)
	c.mu.Unlock()
}

// run runs the registered functions once; a second caller waits for the
// first to finish.
func (c *cleanup) run() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// stopOnSignal stops everything and exits on SIGINT, SIGTERM or SIGHUP.
func stopOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-ch
		fmt.Fprintf(os.Stderr, "cluster: %v: stopping everything started\n", s)
		clean.run()
		os.Exit(130)
	}()
}

// fatal stops everything started and exits.
func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cluster:", err)
	clean.run()
	os.Exit(1)
}

func check(err error) {
	if err != nil {
		fatal(err)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad level %q", f))
		}
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
