package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/relay"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// memResult is what joined members cost: Redis memory, the nodes' RSS,
// the commands and CPU of their joins, and the CPU of holding them idle.
type memResult struct {
	members               int
	nodes                 [2]string // the two nodes' names
	solo                  string    // the server without --redis
	perNode               map[string]int
	joinSeconds           float64
	join                  snap // over the joins: CPU ticks and commands
	usedBefore, usedAfter int64
	keysBefore, keysAfter int64
	channels              int64            // Redis's pubsub_channels with the members joined
	keyBytes              map[string]int64 // MEMORY USAGE of one member's keys, by kind
	rssBefore, rssAfter   map[string]int64
	idle                  snap // the members held idle
	leaveSeconds          float64
	keysLeft, usedLeft    int64 // after every member left
	leftKinds             map[string]int

	soloMembers               int
	soloRSSBefore, soloRSSAft int64
}

// measureMembers joins n Computers, each alone in its office under its
// own name (the most keys per member), alternately on nodes a and b,
// measures, then lets them go; then n/2 on the server without --redis
// for its RSS per connection.
func measureMembers(n int, hold time.Duration, rd *redisProc, a, b, solo *proc) memResult {
	all := []*proc{a, b, solo, rd.proc}
	m := memResult{members: n, nodes: [2]string{a.name, b.name}, solo: solo.name, perNode: map[string]int{}, rssBefore: map[string]int64{}, rssAfter: map[string]int64{}, keyBytes: map[string]int64{}}
	time.Sleep(time.Second)
	m.usedBefore = usedMemory(rd)
	m.keysBefore = dbSize(rd)
	kindsBefore := keyKinds(rd)
	for _, p := range []*proc{a, b} {
		m.rssBefore[p.name] = p.rssKiB()
	}
	fmt.Fprintf(os.Stderr, "joining %d Computers (one office each) on %s and %s\n", n, a.name, b.name)
	s0 := snapshot(rd, all)
	t0 := time.Now()
	socks := connectMany(n, func(i int) (*proc, string, string) {
		p := a
		if i%2 == 1 {
			p = b
		}
		return p, fmt.Sprintf("pc-%d", i), fmt.Sprintf("mem-%d", i)
	})
	m.joinSeconds = time.Since(t0).Seconds()
	m.join = snapshot(rd, all).sub(s0)
	m.perNode[a.name] = (n + 1) / 2
	m.perNode[b.name] = n / 2

	time.Sleep(3 * time.Second)
	m.usedAfter = usedMemory(rd)
	m.keysAfter = dbSize(rd)
	m.channels, _ = strconv.ParseInt(rd.info("stats")["pubsub_channels"], 10, 64)
	for _, p := range []*proc{a, b} {
		m.rssAfter[p.name] = p.rssKiB()
	}
	for kind, key := range map[string]string{
		"members hash (a2c:{O}:m)":   "a2c:{mem-0}:m",
		"seats hash (a2c:{O}:s)":     "a2c:{mem-0}:s",
		"version (a2c:{O}:v)":        "a2c:{mem-0}:v",
		"name index (a2c:cn:{name})": "a2c:cn:{pc-0}",
		"node index (a2c:{N}:idx)":   "a2c:{" + a.name + "}:idx",
	} {
		m.keyBytes[kind] = memoryUsage(rd, key)
	}

	fmt.Fprintf(os.Stderr, "holding them idle for %s\n", hold)
	s0 = snapshot(rd, all)
	time.Sleep(hold)
	m.idle = snapshot(rd, all).sub(s0)

	fmt.Fprintln(os.Stderr, "disconnecting them")
	t0 = time.Now()
	for _, s := range socks {
		s.Disconnect()
	}
	// The members are gone when no member hash of theirs is left (an
	// emptied office keeps its version key for 24 h, and the node's index
	// keeps the office).
	for countKeys(rd, "a2c:{mem-*}:m") > 0 && time.Since(t0) < 2*time.Minute {
		time.Sleep(200 * time.Millisecond)
	}
	m.leaveSeconds = time.Since(t0).Seconds()
	time.Sleep(time.Second)
	m.keysLeft = dbSize(rd)
	m.leftKinds = keyKinds(rd)
	for k, v := range kindsBefore {
		if m.leftKinds[k] -= v; m.leftKinds[k] == 0 {
			delete(m.leftKinds, k)
		}
	}
	m.usedLeft = usedMemory(rd)

	m.soloMembers = n / 2
	if m.soloMembers > 0 {
		fmt.Fprintf(os.Stderr, "joining %d Computers on the server without --redis\n", m.soloMembers)
		m.soloRSSBefore = solo.rssKiB()
		socks = connectMany(m.soloMembers, func(i int) (*proc, string, string) {
			return solo, fmt.Sprintf("pc-%d", i), fmt.Sprintf("mem-%d", i)
		})
		time.Sleep(3 * time.Second)
		m.soloRSSAft = solo.rssKiB()
		for _, s := range socks {
			s.Disconnect()
		}
	}
	return m
}

// connectMany connects and joins n Computers, 32 at a time; where(i) is
// the server, the Computer's name and its office.
func connectMany(n int, where func(i int) (*proc, string, string)) []*sio.Socket {
	socks := make([]*sio.Socket, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				p, name, office := where(i)
				s, err := dial(p.url, relay.Computer{})
				check(err)
				check(relay.Join(s, smcp.RoleComputer, name, office))
				socks[i] = s
			}
		}()
	}
	wg.Wait()
	return socks
}

func usedMemory(rd *redisProc) int64 {
	v, err := strconv.ParseInt(rd.info("memory")["used_memory"], 10, 64)
	check(err)
	return v
}

func dbSize(rd *redisProc) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := rd.rdb.DBSize(ctx).Result()
	check(err)
	return v
}

func memoryUsage(rd *redisProc, key string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := rd.rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		return -1
	}
	return v
}

// keyKinds counts Redis's keys by kind: the part after the hash tag.
func keyKinds(rd *redisProc) map[string]int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make(map[string]int)
	it := rd.rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for it.Next(ctx) {
		k := it.Val()
		if i := strings.LastIndexByte(k, '}'); i >= 0 {
			k = k[i+1:]
		}
		if strings.HasPrefix(it.Val(), "a2c:cn:") {
			k = "cn (name index)"
		}
		out[k]++
	}
	check(it.Err())
	return out
}

// countKeys counts the keys matching pattern.
func countKeys(rd *redisProc, pattern string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	it := rd.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		n++
	}
	check(it.Err())
	return n
}
