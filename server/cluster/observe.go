package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// observer is a go-redis hook that reports each command (or pipeline) to
// Config.Observe: the server's Redis latency and error metrics.
type observer struct {
	f func(cmd string, d time.Duration, err error)
}

func (o observer) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		start := time.Now()
		c, err := next(ctx, network, addr)
		if err != nil {
			o.f("dial", time.Since(start), err)
		}
		return c, err
	}
}

func (o observer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		o.f(strings.ToLower(cmd.Name()), time.Since(start), realErr(err))
		return err
	}
}

func (o observer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		o.f("pipeline", time.Since(start), realErr(err))
		return err
	}
}

// realErr drops the errors that are answers, not failures: a missing key
// (redis.Nil) and a script not yet cached (NOSCRIPT, which go-redis
// answers by sending the script itself).
func realErr(err error) error {
	if err == nil || errors.Is(err, redis.Nil) || strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return nil
	}
	return err
}
