package cluster

import (
	"bytes"
	"context"
	"fmt"
)

// The node's subscriptions run on its own subscription client
// (subscriber.go): the node channel and the channel of every office it
// follows, on one connection to a single Redis, or on one connection per
// master that owns a followed channel's slot on a Redis Cluster. Every
// message arrives in deliver, on the reader goroutine of its connection;
// a connection that broke and was made again names its channels in
// resumed, and the offices they carry are reloaded.

// subscribe adds a channel; it returns once Redis confirmed it. On
// failure (Redis unreachable) the caller gives the channel up with
// unsubscribe: the subscriber would otherwise keep it wanted and
// subscribe it when Redis returns.
func (n *Node) subscribe(ctx context.Context, ch string) error {
	c, cancel := n.op(ctx)
	defer cancel()
	if err := n.sub.Subscribe(c, ch); err != nil {
		return fmt.Errorf("%w: subscribe: %w", ErrUnavailable, err)
	}
	return nil
}

func (n *Node) unsubscribe(ch string) { n.sub.Unsubscribe(ch) }

// deliver hands one message of a subscription to its reader: a frame for
// this node to the handler (once its seal holds, see auth.go), an office's event to the copy, an office's
// broadcast frame to the handler. payload aliases the subscriber's read
// buffer, so what outlives the call is copied: a frame's payload (the
// handler may queue it) and an event's text.
func (n *Node) deliver(ch string, payload []byte) {
	if ch == n.mine {
		body, ok := n.open(ch, payload)
		if !ok {
			return
		}
		f, err := DecodeFrame(body)
		if err != nil {
			n.dropFrame(ch)
			return
		}
		f.Payload = bytes.Clone(f.Payload) // its strings are copies already
		if n.h.Frame != nil {
			n.h.Frame(f)
		}
		return
	}
	if len(payload) > 0 && isFrame(payload[0]) {
		n.onOfficeFrame(ch, payload)
		return
	}
	n.onEvent(ch, string(payload))
}

// resumed is told of channels subscribed again after their connection
// broke (or their slot moved): what was published on them meanwhile is
// lost. The offices they carry are reloaded by the loader, off the
// receivers' path. Frames lost on the node channel are not recovered:
// the calls they carried end at their deadline, as with a frame lost with
// a dying node.
func (n *Node) resumed(chs []string) {
	var offices []string
	n.mu.Lock()
	for _, ch := range chs {
		if v := n.views[ch]; v != nil {
			offices = append(offices, v.office)
		}
	}
	n.mu.Unlock()
	n.log.Info("subscription made again: reloading the offices it carries", "channels", len(chs), "offices", len(offices))
	for _, office := range offices {
		n.scheduleReload(office, false)
	}
}

// onOfficeFrame delivers a broadcast published on an office's channel
// (see PublishOffice): only a KindBroadcast of that very office, and not
// this node's own.
func (n *Node) onOfficeFrame(ch string, payload []byte) {
	body, ok := n.open(ch, payload)
	if !ok {
		return
	}
	f, err := DecodeFrame(body)
	if err != nil || f.Kind != KindBroadcast || f.From == n.id || officeChannel(f.Office) != ch {
		if f.From != n.id {
			n.dropFrame(ch)
		}
		return
	}
	f.Payload = bytes.Clone(f.Payload)
	if n.h.Frame != nil {
		n.h.Frame(f)
	}
}

// SubscriptionBreaks counts the node's subscription connections that
// broke while carrying channels (Redis dropped them, for one over its
// pubsub output buffer limit or an operator's CLIENT KILL, or the
// network failed): each lost the frames and events published until it
// was made again. A steady rate is worth an alert: whoever may PUBLISH
// on the Redis can cause one with a message larger than that limit.
func (n *Node) SubscriptionBreaks() uint64 { return n.sub.breaks.Load() }
