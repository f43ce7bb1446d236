package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
)

// proc is a process the benchmark started.
type proc struct {
	name string
	pid  int
	cmd  *exec.Cmd // nil for the benchmark itself
	url  string    // http://ADDR for a server
}

// serverEnv is the servers' environment (nil: the benchmark's).
var serverEnv []string

// startServer starts `a2c server` on a free loopback port with the extra
// flags, and registers its stop.
// benchClusterKey is the nodes' cluster key.
const benchClusterKey = "bench-cluster-key-0123456789abcdef"

func startServer(bin, name string, flags ...string) *proc {
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--log-level", "warn"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = serverEnv
	if slices.Contains(flags, "--redis") {
		// The nodes seal their frames, as a production cluster does.
		env := serverEnv
		if env == nil {
			env = os.Environ()
		}
		cmd.Env = append(slices.Clip(env), "A2C_CLUSTER_KEY="+benchClusterKey)
	}
	orphanKill(cmd)
	url, err := procs.Start(cmd)
	check(err)
	clean.add(func() { procs.Stop(cmd) })
	fmt.Fprintf(os.Stderr, "%s: %s (pid %d)\n", name, url, cmd.Process.Pid)
	return &proc{name: name, pid: cmd.Process.Pid, cmd: cmd, url: url}
}

// cpuTicks is the process's user and sys time in clock ticks (1/100 s).
func (p *proc) cpuTicks() (user, sys int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	check(err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	user, _ = strconv.ParseInt(f[11], 10, 64)
	sys, _ = strconv.ParseInt(f[12], 10, 64)
	return user, sys
}

// rssKiB is the process's resident set in KiB.
func (p *proc) rssKiB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return n
		}
	}
	return 0
}

// redisProc is the redis-server the nodes share, and the benchmark's own
// connection to it (one connection, so its INFO commands are the only
// ones it adds; they are left out of the counts).
type redisProc struct {
	*proc
	addr string
	rdb  *redis.Client
}

// startRedis starts redis-server on a free loopback port with no
// persistence and waits until it answers PING.
func startRedis(bin, dir string) *redisProc {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin,
		"--bind", "127.0.0.1",
		"--port", port,
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"),
		"--maxclients", "10000",
	)
	orphanKill(cmd)
	check(cmd.Start())
	clean.add(func() { procs.Stop(cmd) })
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, DisableIdentity: true, Protocol: 2})
	clean.add(func() { rdb.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("redis-server did not answer PING: %w", err))
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "redis-server: %s (pid %d)\n", addr, cmd.Process.Pid)
	return &redisProc{proc: &proc{name: "redis", pid: cmd.Process.Pid, cmd: cmd}, addr: addr, rdb: rdb}
}

// info returns one INFO section as a map.
func (r *redisProc) info(section string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.rdb.Info(ctx, section).Result()
	check(err)
	out := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// cmdStats are Redis's counts per command (cmdstat_NAME), without the
// benchmark's own INFO.
type cmdStats map[string]cmdStat

func (r *redisProc) commandStats() cmdStats {
	out := make(cmdStats)
	for k, v := range r.info("commandstats") {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || name == "info" {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(v, ",") {
			fk, fv, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(fv, 10, 64)
			switch fk {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
		out[name] = st
	}
	return out
}

// sub is the change from o to s; commands that did not move are left out.
func (s cmdStats) sub(o cmdStats) cmdStats {
	out := make(cmdStats)
	for k, v := range s {
		d := cmdStat{v.calls - o[k].calls, v.usec - o[k].usec}
		if d.calls != 0 {
			out[k] = d
		}
	}
	return out
}

func (s cmdStats) add(o cmdStats) cmdStats {
	out := maps.Clone(s)
	if out == nil {
		out = make(cmdStats)
	}
	for k, v := range o {
		c := out[k]
		out[k] = cmdStat{c.calls + v.calls, c.usec + v.usec}
	}
	return out
}

func (s cmdStats) total() (n int64) {
	for _, v := range s {
		n += v.calls
	}
	return n
}

// snap is the state of the processes and of Redis's counters at one time
// (or, after sub, their change over a window).
type snap struct {
	t       time.Time
	elapsed time.Duration
	ticks   map[string]int64 // process name -> CPU ticks (user+sys); name+sysSuffix -> sys alone
	cmds    cmdStats
}

func snapshot(r *redisProc, ps []*proc) snap {
	s := snap{ticks: make(map[string]int64, len(ps))}
	for _, p := range ps {
		u, k := p.cpuTicks()
		s.ticks[p.name] = u + k
		s.ticks[p.name+sysSuffix] = k
	}
	s.cmds = r.commandStats()
	s.t = time.Now()
	return s
}

func (s snap) sub(o snap) snap {
	d := snap{t: s.t, elapsed: s.t.Sub(o.t), ticks: make(map[string]int64), cmds: s.cmds.sub(o.cmds)}
	for k, v := range s.ticks {
		d.ticks[k] = v - o.ticks[k]
	}
	return d
}

// sysSuffix names a process's sys time in snap.ticks.
const sysSuffix = "/sys"

// tick is one clock tick of /proc/PID/stat.
const tick = 10 * time.Millisecond
