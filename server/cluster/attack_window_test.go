package cluster

import (
	"log/slog"
	"testing"
)

// TestAttackReplayWindowAcrossChannels: a node's sequence numbers are one
// counter for every channel it publishes on. Frames of one sender that
// reach a receiver through two channels (its node channel and an office
// channel: on a Redis Cluster, two subscription connections to two
// shards) may arrive out of order; with one window per sender, a genuine
// frame late by more than replayWindow seals was refused as a replay and
// its call lost. The windows are per sender and channel now.
func TestAttackReplayWindowAcrossChannels(t *testing.T) {
	snd := newSealer(testKey, slog.Default())
	rcv := newSealer(testKey, slog.Default())
	seal := func(ch string) []byte {
		f := &Frame{Kind: KindRequest, From: "na", To: "s", Office: "o", Event: "e", Call: 1, TimeoutMS: 1000}
		return snd.seal(AppendFrame(nil, f), 0, ch)
	}
	toB := seal(nodeChannel("nb")) // a request for b, delayed on its shard
	for range replayWindow {
		seal(nodeChannel("nc")) // traffic to other nodes meanwhile
	}
	bcast := seal(officeChannel("o")) // a broadcast b also receives, first
	if _, ok := rcv.open(officeChannel("o"), bcast); !ok {
		t.Fatal("broadcast refused")
	}
	if _, ok := rcv.open(nodeChannel("nb"), toB); !ok {
		t.Errorf("a genuine frame delivered late through another channel was refused: %+v", rcv.refused())
	}
}
