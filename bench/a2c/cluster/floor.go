package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis floor: what two Redis hops cost on this machine without any
// of the server's work. The benchmark publishes on floorPing; a child
// process (this program run as "redis-echo ADDR") receives it and
// publishes it back on floorPong; the benchmark receives that. That is
// the cross-node path's addition over the same-node path at N=1: two
// PUBLISH commands, two deliveries, between two Go processes using
// go-redis, one call at a time.
const (
	floorPing = "a2cbench:ping"
	floorPong = "a2cbench:pong"
	echoArg   = "redis-echo"
)

// runEcho is the child: it answers every ping with a pong until its
// Redis connection ends (Redis stopped) or it is killed.
func runEcho(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, floorPing)
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			os.Exit(0)
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = rdb.Publish(c, floorPong, msg.Payload).Err()
		cancel()
		if err != nil {
			os.Exit(0)
		}
	}
}

// startEcho starts the echo child and waits until it has subscribed.
func startEcho(rd *redisProc) *proc {
	self, err := os.Executable()
	check(err)
	cmd := exec.Command(self, echoArg, rd.addr)
	cmd.Stderr = os.Stderr
	orphanKill(cmd)
	check(cmd.Start())
	clean.add(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := rd.rdb.PubSubNumSub(ctx, floorPing).Result()
		cancel()
		check(err)
		if n[floorPing] > 0 {
			break
		}
		if time.Now().After(deadline) {
			fatal(fmt.Errorf("the redis-echo child did not subscribe"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &proc{name: "echo", pid: cmd.Process.Pid, cmd: cmd}
}

// floor is the benchmark's side of the Redis floor: a client of its own
// that publishes pings and receives the pongs.
type floor struct {
	rdb *redis.Client
	ps  *redis.PubSub
	n   atomic.Int64
}

func newFloor(rd *redisProc) *floor {
	f := &floor{rdb: redis.NewClient(&redis.Options{Addr: rd.addr, DisableIdentity: true})}
	clean.add(func() { f.rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.ps = f.rdb.Subscribe(ctx, floorPong)
	_, err := f.ps.Receive(ctx) // the subscription's confirmation
	check(err)
	return f
}

// call is one round trip: ping published, pong received.
func (f *floor) call() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want := fmt.Sprint(f.n.Add(1))
	if err := f.rdb.Publish(ctx, floorPing, want).Err(); err != nil {
		return err
	}
	msg, err := f.ps.ReceiveMessage(ctx)
	if err != nil {
		return err
	}
	if msg.Payload != want {
		return fmt.Errorf("redis floor: pong %q, want %q", msg.Payload, want)
	}
	return nil
}

// runFloor runs round trips back to back: warm-up, then a measured window
// of dur between two snapshots.
func runFloor(f *floor, warm, dur time.Duration, rd *redisProc, all []*proc) window {
	for t := time.Now(); time.Since(t) < warm; {
		check(f.call())
	}
	var w window
	s0 := snapshot(rd, all)
	for t := time.Now(); time.Since(t) < dur; {
		t0 := time.Now()
		check(f.call())
		w.lat = append(w.lat, time.Since(t0))
	}
	w.delta = snapshot(rd, all).sub(s0)
	return w
}
