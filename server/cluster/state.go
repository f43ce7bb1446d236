package cluster

import (
	"context"
	"time"
)

// The node's standing with Redis is one state machine, owned by one
// goroutine (the keeper, see [Node.keeper]). Every other goroutine reads
// the state the keeper last published ([Node.state]) and reports what it
// ran into ([Node.report]); none of them changes the state itself. The
// defects this replaces lived in five flags and atomics set from four
// goroutines, where a transition could be lost between two of them.
//
//	          command failed                     renew fails
//	  live ───────────────────▶ cut ◀─────────────────────── (any)
//	   ▲  ▲                      │ renew ok, re-assert ok
//	   │  └──────────────────────┘
//	   │ settle time over            lease gone: register under a new
//	   │ (reload every office)       epoch, re-assert
//	   └──────────────────── settling ◀───────────────────── (any)
//
// One transition, the re-assert, repairs whatever may have diverged: it
// re-seats every member the node holds under its current epoch (already
// seated is a no-op; a seat taken meanwhile evicts the member here),
// removes the records of this node's that it no longer holds, and reloads
// every office it follows. It runs whenever the keeper learns that the
// node's records or copies may be wrong: the lease was lost, or a command
// failed (its effect unknown). A subscription made again after its
// connection broke leaves the records alone but may have missed events:
// the subscriber names its channels (Node.resumed) and the loader reloads
// the offices they carry, which is the re-assert's last step alone.

// phase is where the node stands with Redis.
type phase uint8

const (
	// phaseLive: the lease is held and the last exchange succeeded.
	phaseLive phase = iota
	// phaseCut: a command failed or the lease could not be renewed. Joins
	// are refused, requests to other nodes fail at once, nobody is swept.
	phaseCut
	// phaseSettling: the lease was lost (Redis restarted empty, or the
	// node was cut off or paused for longer than its lease) and taken
	// again under a new epoch. The other nodes may not have re-asserted
	// their members yet, so for a lease's time joins are refused (a
	// newcomer could take a live member's seat), office events are not
	// applied and reloads wait (a snapshot would show those members as
	// gone), and nobody is swept. Then every followed office is reloaded.
	phaseSettling
)

func (p phase) String() string {
	switch p {
	case phaseLive:
		return "live"
	case phaseCut:
		return "cut"
	case phaseSettling:
		return "settling"
	}
	return "?"
}

// state is what the keeper publishes: read by any goroutine, never
// changed in place (the keeper publishes a new one).
type state struct {
	phase phase
	// epoch is the registration the node's lease holds: every member the
	// node seats carries it. 0 before the first registration.
	epoch int64
	// settleEnd ends phaseSettling.
	settleEnd time.Time
	// sweepAfter holds the sweeper back after a cut or a settling: a live
	// node needs a heartbeat or two to renew a lease that ran low (or
	// out) while Redis was away.
	sweepAfter time.Time
	// stale: the re-assert is due (a failure or a lost lease happened
	// and no re-assert has succeeded since).
	stale bool
}

// The troubles other goroutines report to the keeper (bits of
// Node.troubles).
const (
	// troubleFailed: a command failed; its effect on Redis is unknown.
	troubleFailed uint32 = 1 << iota
	// troubleLease: this node's lease was found gone or another epoch's.
	troubleLease
)

// state returns the keeper's last published state.
func (n *Node) state() *state { return n.st.Load() }

// report tells the keeper of a trouble and wakes it; it never blocks.
func (n *Node) report(t uint32) {
	n.troubles.Or(t)
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// keeper owns the state machine: every Heartbeat, and at once when a
// trouble is reported, it renews the lease and takes the transitions the
// result and the troubles call for.
func (n *Node) keeper() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	// A trouble wakes the keeper at once, but not more often than this:
	// a command that keeps failing must not turn the repair into a loop
	// at Redis's speed.
	gap := max(n.cfg.Heartbeat/10, time.Millisecond)
	var last time.Time
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
			if wait := gap - time.Since(last); wait > 0 {
				select {
				case <-n.ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		n.step()
	}
}

// step is one round of the keeper.
func (n *Node) step() {
	n.at("step", n.id)
	ctx := n.ctx
	st := *n.state()
	defer func() {
		if st != *n.state() {
			n.publishState(st)
		}
	}()
	troubles := n.troubles.Swap(0)
	if troubles&troubleFailed != 0 {
		st.stale = true
		if st.phase == phaseLive {
			// Joins are refused and requests fail fast from now until
			// a renewal and a re-assert succeed.
			st.phase = phaseCut
		}
		n.publishState(st)
	}
	renewed, err := n.renew(ctx, st.epoch)
	if err != nil {
		st.stale = true
		if st.phase != phaseCut {
			n.log.Warn("Redis unreachable: joins refused until it returns", "err", err)
			st.phase = phaseCut
		}
		return
	}
	if !renewed {
		// Redis restarted empty, or this node was cut off (or paused)
		// for longer than its lease, and may have been swept. Take a new
		// lease under a new epoch, then settle.
		epoch, err := n.register(ctx, false)
		if err != nil {
			st.stale = true
			st.phase = phaseCut
			return
		}
		now := time.Now()
		n.log.Warn("lease lost: registering again; joins wait until the cluster has settled",
			"epoch", epoch, "settle", n.cfg.LeaseTTL.String())
		st.epoch, st.phase, st.stale = epoch, phaseSettling, true
		st.settleEnd = now.Add(n.cfg.LeaseTTL)
		st.sweepAfter = later(st.sweepAfter, st.settleEnd)
		n.publishState(st)
	}
	if st.stale {
		if err := n.reassert(ctx, st); err != nil {
			n.log.Warn("re-assert failed; retrying", "err", err)
			if st.phase == phaseLive {
				st.phase = phaseCut
			}
			return
		}
		st.stale = false
	}
	now := time.Now()
	switch {
	case st.phase == phaseCut:
		// Other nodes' leases may have run low while Redis was away:
		// give them two heartbeats to renew before judging them.
		st.phase = phaseLive
		st.sweepAfter = later(st.sweepAfter, now.Add(2*n.cfg.Heartbeat+n.cfg.OpTimeout))
		n.log.Info("Redis back: cluster state restored")
	case st.phase == phaseSettling && !now.Before(st.settleEnd):
		st.phase = phaseLive
		// The snapshots can be trusted again: the other nodes have
		// re-asserted. Versions may have started again (force).
		n.reloadAll(true)
		n.log.Info("Redis back: the cluster has settled; joins accepted again")
	}
}

// repairDue reports whether a re-assert is due or a failure has been
// reported and not yet handled: the node's index must then not be pruned
// (it is how the re-assert finds records left behind).
func (n *Node) repairDue() bool {
	return n.state().stale || n.troubles.Load()&troubleFailed != 0
}

// publishState makes st the node's state. Only the keeper calls it (and
// Start, before the keeper runs).
func (n *Node) publishState(st state) {
	n.st.Store(&st)
	if st.phase == phaseLive {
		// Reloads held back while cut off or settling may run now.
		n.wakeLoader()
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// renew renews the lease held under epoch and re-adds the registration
// (a sweeper that judged this node dead during a pause may have removed
// it). It reports false when the lease is gone or another epoch's.
func (n *Node) renew(ctx context.Context, epoch int64) (bool, error) {
	if epoch == 0 {
		return false, nil
	}
	c, cancel := n.op(ctx)
	defer cancel()
	ok, err := renewScript.Run(c, n.rdb, nodeKeys(n.id)[:1], epoch, n.cfg.LeaseTTL.Milliseconds()).Int()
	if err != nil {
		return false, err
	}
	if err := n.rdb.SAdd(c, nodesKey, n.id).Err(); err != nil {
		return false, err
	}
	return ok == 1, nil
}
