package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscribe adds a channel: to the shared subscription on a single Redis,
// or as a sharded subscription of its own on a Redis Cluster (a shard
// channel is served by its slot's master, so channels of different slots
// cannot share a connection).
func (n *Node) subscribe(ctx context.Context, ch string) error {
	if !n.cluster {
		c, cancel := n.op(ctx)
		defer cancel()
		if err := n.shared.Subscribe(c, ch); err != nil {
			return fmt.Errorf("%w: subscribe: %w", ErrUnavailable, err)
		}
		return nil
	}
	// The callers hold subMu, so no other subscribe of ch runs meanwhile;
	// n.mu is not held across the network (Lookup and Nodes need it on
	// every relay).
	n.mu.Lock()
	have := n.subs[ch] != nil || n.ctx.Err() != nil
	n.mu.Unlock()
	if have {
		return nil
	}
	ps := n.rdb.SSubscribe(n.ctx)
	c, cancel := n.op(ctx)
	err := ps.SSubscribe(c, ch)
	cancel()
	if err != nil {
		_ = ps.Close()
		return fmt.Errorf("%w: subscribe: %w", ErrUnavailable, err)
	}
	n.mu.Lock()
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		_ = ps.Close()
		return nil
	}
	n.subs[ch] = ps
	n.wg.Add(1)
	n.mu.Unlock()
	go n.receive(ps)
	return nil
}

func (n *Node) unsubscribe(ch string) {
	if !n.cluster {
		c, cancel := n.op(n.ctx)
		defer cancel()
		_ = n.shared.Unsubscribe(c, ch)
		return
	}
	n.mu.Lock()
	ps := n.subs[ch]
	delete(n.subs, ch)
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

// sharedSilence is how long the shared subscription may hear nothing
// before its read fails and go-redis reconnects it: the heartbeat pings a
// subscription silent for sharedPing, so a live one hears a PONG well
// before.
const (
	sharedPing    = 2 * time.Second
	sharedSilence = 10 * time.Second
)

// receiveShared dispatches the messages of the shared subscription (a
// single Redis) until it closes. It reads them itself, where
// PubSub.Channel would hand each over a Go channel from a goroutine of its
// own and wake a health-check goroutine for it: two wake-ups per frame,
// four per cross-node call. Every read has a deadline (a context, renewed
// as messages come): go-redis takes a read that reaches it as a failed
// connection, closes it and subscribes again on a new one, so a read
// never resumes in the middle of a message. The heartbeat pings a silent
// subscription (pingShared), so a live connection never reaches it.
func (n *Node) receiveShared(ps *redis.PubSub) {
	defer n.wg.Done()
	mine := nodeChannel(n.id)
	var rd readDeadline
	defer rd.stop()
	rd.renew(n.ctx)
	failed := 0
	// broken: the connection failed; the first message read after it
	// comes from the new connection, once go-redis has subscribed again
	// there (it does so before any read): what was published in between
	// is lost, so the keeper is told to reload every followed office.
	broken := false
	for {
		if time.Until(rd.at) < sharedSilence/2 {
			rd.renew(n.ctx)
		}
		msg, err := ps.Receive(rd.ctx)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || n.ctx.Err() != nil {
				return
			}
			// The connection failed (or stayed silent past the deadline)
			// and go-redis has dropped it; the next read subscribes again.
			// A second failure in a row waits a little, as Channel does.
			if failed++; failed > 1 {
				select {
				case <-n.ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			broken = true
			rd.renew(n.ctx)
			continue
		}
		failed = 0
		if broken {
			broken = false
			n.log.Info("subscription re-made: reloading every office followed")
			n.report(troubleResubscribed)
		}
		n.lastHeard.Store(time.Now().UnixNano())
		if m, ok := msg.(*redis.Message); ok {
			n.dispatch(mine, m)
		}
	}
}

// readDeadline is the context whose deadline bounds the shared
// subscription's reads, renewed (one timer) every sharedSilence/2 of
// traffic rather than per message.
type readDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

func (r *readDeadline) renew(parent context.Context) {
	r.stop()
	r.at = time.Now().Add(sharedSilence)
	r.ctx, r.cancel = context.WithDeadline(parent, r.at)
}

func (r *readDeadline) stop() {
	if r.cancel != nil {
		r.cancel()
	}
}

// pingShared pings the shared subscription when it has heard nothing for
// sharedPing: the PONG keeps its reads within their deadline, and a
// failed write makes go-redis reconnect it. The heartbeat calls it.
func (n *Node) pingShared(ctx context.Context) {
	if n.shared == nil || time.Since(time.Unix(0, n.lastHeard.Load())) < sharedPing {
		return
	}
	c, cancel := n.op(ctx)
	_ = n.shared.Ping(c)
	cancel()
}

// receive dispatches the messages of one subscription until it closes.
// It reads through PubSub.Channel, which reads with no deadline in the
// middle of a message (a read cut by a deadline and then resumed would
// lose its place in the stream and could parse payload bytes as a
// message), health-checks a silent connection and reconnects and
// resubscribes by itself. The confirmations of its subscriptions are
// read too: after the first, each one means the connection broke and was
// made again, so the events published in between are lost and the
// keeper is told to reload.
func (n *Node) receive(ps *redis.PubSub) {
	defer n.wg.Done()
	mine := nodeChannel(n.id)
	first := true
	for msg := range ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)) {
		switch m := msg.(type) {
		case *redis.Message:
			n.dispatch(mine, m)
		case *redis.Subscription:
			if m.Kind != "ssubscribe" && m.Kind != "subscribe" {
				continue
			}
			if !first {
				n.log.Info("subscription re-made: reloading", "channel", m.Channel)
				n.report(troubleResubscribed)
			}
			first = false
		}
	}
}

// dispatch hands one message of a subscription to the handler.
func (n *Node) dispatch(mine string, msg *redis.Message) {
	if msg.Channel == mine {
		payload, ok := n.open(msg.Channel, []byte(msg.Payload))
		if !ok {
			return
		}
		f, err := DecodeFrame(payload)
		if err != nil {
			n.dropFrame(msg.Channel)
			return
		}
		if n.h.Frame != nil {
			n.h.Frame(f)
		}
		return
	}
	if len(msg.Payload) > 0 && isFrame(msg.Payload[0]) {
		n.onOfficeFrame(msg.Channel, msg.Payload)
		return
	}
	n.onEvent(msg.Channel, msg.Payload)
}

// onOfficeFrame delivers a broadcast published on an office's channel
// (see PublishOffice): only a KindBroadcast of that very office, and not
// this node's own.
func (n *Node) onOfficeFrame(ch, payload string) {
	b, ok := n.open(ch, []byte(payload))
	if !ok {
		return
	}
	f, err := DecodeFrame(b)
	if err != nil || f.Kind != KindBroadcast || f.From == n.id || officeChannel(f.Office) != ch {
		if f.From != n.id {
			n.dropFrame(ch)
		}
		return
	}
	if n.h.Frame != nil {
		n.h.Frame(f)
	}
}
