package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// heartbeat renews the lease every cfg.Heartbeat. A renewal that finds
// no lease (it expired during an outage, or Redis restarted empty)
// registers the node again; after any failure, the first success
// re-asserts the node's members and reloads the offices it follows.
func (n *Node) heartbeat() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.pingShared(n.ctx)
		c, cancel := n.op(n.ctx)
		ok, err := n.rdb.SetXX(c, leaseKey(n.id), n.id, n.cfg.LeaseTTL).Result()
		cancel()
		if err != nil {
			if n.ctx.Err() == nil && n.healthy.Swap(false) {
				n.log.Warn("Redis unreachable: joins refused until it returns", "err", err)
			}
			n.needSync.Store(true)
			continue
		}
		if !ok {
			// Redis restarted empty, or this node was cut off for longer
			// than its lease. The other nodes are re-asserting their
			// members too: settle for a lease's time before taking joins,
			// trusting snapshots or sweeping anyone.
			n.log.Warn("lease lost: registering again; joins wait until the cluster has settled", "settle", n.cfg.LeaseTTL.String())
			until := time.Now().Add(n.cfg.LeaseTTL).UnixNano()
			n.settleUntil.Store(until)
			n.sweepAfter.Store(max(n.sweepAfter.Load(), until))
			if err := n.register(n.ctx); err != nil {
				n.healthy.Store(false)
				continue
			}
			n.needSync.Store(true)
		}
		if n.needSync.Load() {
			if err := n.resync(n.ctx); err != nil {
				n.log.Warn("re-assert failed; retrying", "err", err)
				continue
			}
		}
		if !n.healthy.Load() {
			// Other nodes' leases may have run low while Redis was away:
			// give them two heartbeats to renew before judging them (set
			// before healthy, which the sweeper reads first).
			n.sweepAfter.Store(max(n.sweepAfter.Load(), time.Now().Add(2*n.cfg.Heartbeat+n.cfg.OpTimeout).UnixNano()))
			n.healthy.Store(true)
			n.log.Info("Redis back: cluster state restored")
		}
		if !n.settling() && n.needReload.Swap(false) {
			if err := n.reloadAll(n.ctx); err != nil {
				n.needReload.Store(true)
				n.log.Warn("reload after settling failed; retrying", "err", err)
			}
		}
	}
}

// resync re-asserts every member this node holds (the join script again:
// already seated is a no-op; a seat taken meanwhile evicts the member
// here), removes the records of this node that it no longer holds, and
// reloads every office it follows.
func (n *Node) resync(ctx context.Context) error {
	n.needSync.Store(false)
	fail := func(err error) error {
		n.needSync.Store(true)
		return err
	}
	if err := n.resubscribe(ctx); err != nil {
		return fail(err)
	}
	n.mu.Lock()
	held := make(map[string][]Member, len(n.local))
	for office, ms := range n.local {
		for _, m := range ms {
			held[office] = append(held[office], m)
		}
	}
	n.mu.Unlock()
	// Offices in the index that we no longer hold: drop our leftovers.
	c, cancel := n.op(ctx)
	idx, err := n.rdb.SMembers(c, nodeIndex(n.id)).Result()
	cancel()
	if err != nil {
		return fail(err)
	}
	for _, office := range idx {
		if _, ok := held[office]; !ok {
			if _, err := n.sweepOfficeExcept(ctx, n.id, office, nil); err != nil {
				return fail(err)
			}
			c, cancel := n.op(ctx)
			_ = n.rdb.SRem(c, nodeIndex(n.id), office).Err()
			cancel()
		}
	}
	settling := n.settling()
	for office, ms := range held {
		keep := make(map[string]bool, len(ms))
		for _, m := range ms {
			keep[m.SID] = true
			code, _, err := n.seat(ctx, office, m)
			if err != nil {
				return fail(err)
			}
			if code >= 2 {
				n.evict(office, m)
				delete(keep, m.SID)
				continue
			}
			// The member may have left while its seat was re-asserted
			// (its leave ran first): give the seat back, or it would
			// stay held by nobody until the next re-assert.
			n.mu.Lock()
			_, still := n.local[office][m.SID]
			n.mu.Unlock()
			if !still {
				delete(keep, m.SID)
				c, cancel := n.op(ctx)
				err := leaveScript.Run(c, n.rdb, officeKeys(office), m.SID, n.id, officeChannel(office), n.pubCmd).Err()
				cancel()
				if err != nil && !errors.Is(err, redis.Nil) {
					return fail(err)
				}
			}
		}
		if _, err := n.sweepOfficeExcept(ctx, n.id, office, keep); err != nil {
			return fail(err)
		}
		if settling {
			// Other nodes may not have re-asserted yet: a snapshot now
			// would show their members as gone. Reload once settled.
			n.needReload.Store(true)
			continue
		}
		if err := n.load(ctx, office, true); err != nil {
			return fail(err)
		}
	}
	return nil
}

// reloadAll reloads every office the node follows: the end of settling.
func (n *Node) reloadAll(ctx context.Context) error {
	n.mu.Lock()
	offices := make([]string, 0, len(n.views))
	for _, v := range n.views {
		offices = append(offices, v.office)
	}
	n.mu.Unlock()
	for _, office := range offices {
		if err := n.load(ctx, office, true); err != nil {
			return err
		}
	}
	return nil
}

// resubscribe subscribes again to the node's channel and every followed
// office's. The client library resubscribes by itself after a reconnect,
// but only when its connection notices the loss; subscribing again
// (harmless when still subscribed) forces a fresh connection now.
func (n *Node) resubscribe(ctx context.Context) error {
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	chs := []string{nodeChannel(n.id)}
	for ch := range n.views {
		chs = append(chs, ch)
	}
	n.mu.Unlock()
	if n.cluster {
		// Each sharded subscription reconnects on its own connection.
		return nil
	}
	c, cancel := n.op(ctx)
	defer cancel()
	if err := n.shared.Subscribe(c, chs...); err != nil {
		return fmt.Errorf("%w: resubscribe: %w", ErrUnavailable, err)
	}
	return nil
}

func (n *Node) evict(office string, m Member) {
	n.mu.Lock()
	delete(n.local[office], m.SID)
	if len(n.local[office]) == 0 {
		delete(n.local, office)
	}
	n.mu.Unlock()
	n.log.Warn("member evicted: its seat was taken while Redis was away", "office", office, "sid", m.SID, "name", m.Name)
	if n.h.Evicted != nil {
		n.h.Evicted(office, m)
	}
}

// sweeper looks for dead nodes every cfg.SweepEvery and removes their
// members. Every node sweeps; the scripts make concurrent sweeps of the
// same dead node harmless (a member is removed, and its departure
// published, once).
func (n *Node) sweeper() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if !n.healthy.Load() || time.Now().UnixNano() < n.sweepAfter.Load() {
			// Cut off, or just back: this node is in no position to call
			// another dead (see sweep).
			continue
		}
		if err := n.sweep(n.ctx); err != nil && n.ctx.Err() == nil {
			n.log.Debug("sweep failed", "err", err)
		}
	}
}

// sweep finds the registered nodes whose lease has expired and sweeps
// each: every office of its index, then the index and the registration.
func (n *Node) sweep(ctx context.Context) error {
	c, cancel := n.op(ctx)
	defer cancel()
	ids, err := n.rdb.SMembers(c, nodesKey).Result()
	if err != nil {
		return err
	}
	var others []string
	var checks []*redis.IntCmd
	var own *redis.IntCmd
	_, err = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		// This node's own lease is read with the others': if it has
		// expired too, Redis was away (or paused) for longer than a
		// lease and every lease ran out, the live nodes' with the dead
		// ones'. Nobody is judged until the heartbeats have renewed them.
		own = p.Exists(c, leaseKey(n.id))
		for _, id := range ids {
			if id != n.id {
				others = append(others, id)
				checks = append(checks, p.Exists(c, leaseKey(id)))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if own.Val() == 0 {
		n.needSync.Store(true)
		return nil
	}
	for i, id := range others {
		if checks[i].Val() > 0 {
			continue
		}
		if err := n.sweepNode(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// sweepNode removes every member of a dead node, office by office, then
// forgets the node. If the node comes back meanwhile its own re-assert
// seats its members again.
func (n *Node) sweepNode(ctx context.Context, dead string) error {
	c, cancel := n.op(ctx)
	offices, err := n.rdb.SMembers(c, nodeIndex(dead)).Result()
	cancel()
	if err != nil {
		return err
	}
	for len(offices) > 0 {
		k := min(len(offices), sweepBatch)
		if err := n.sweepOffices(ctx, dead, offices[:k]); err != nil {
			return err
		}
		offices = offices[k:]
	}
	c, cancel = n.op(ctx)
	defer cancel()
	_, err = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		p.Del(c, nodeIndex(dead))
		p.SRem(c, nodesKey, dead)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if dead == n.id {
		n.log.Debug("a previous process's records swept", "offices", len(offices))
	} else {
		n.log.Info("dead node swept", "dead", dead, "offices", len(offices))
	}
	return nil
}

// sweepBatch is how many offices one pipelined round trip sweeps.
const sweepBatch = 256

// sweepOffices removes node's members from each of offices: the sweep
// script once per office, pipelined, so a dead node that held tens of
// thousands of offices is swept in a few round trips rather than one per
// office (its index is pruned as its offices empty, see Node.Leave).
func (n *Node) sweepOffices(ctx context.Context, node string, offices []string) error {
	c, cancel := n.op(ctx)
	defer cancel()
	if err := sweepScript.Load(c, n.rdb).Err(); err != nil {
		return n.fail("sweep", err)
	}
	cmds := make([]*redis.Cmd, len(offices))
	_, err := n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for i, office := range offices {
			cmds[i] = sweepScript.EvalSha(c, p, officeKeys(office), node, officeChannel(office), n.pubCmd)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		if strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// Redis lost its scripts between the load and the pipeline
			// (a restart): one office at a time, with the script sent
			// again as needed.
			for _, office := range offices {
				if _, err := n.sweepOffice(ctx, node, office); err != nil {
					return err
				}
			}
			return nil
		}
		return n.fail("sweep", err)
	}
	// The name index, best effort (see ComputerElsewhere).
	_, _ = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for i, cmd := range cmds {
			res, _ := cmd.Slice()
			for j := 0; j+1 < len(res); j += 2 {
				sid, _ := res[j].(string)
				rec, _ := res[j+1].(string)
				if m, err := parseMember(sid, rec); err == nil && m.Role == smcp.RoleComputer {
					p.SRem(c, nameKey(m.Name), offices[i])
				}
			}
		}
		return nil
	})
	return nil
}

// sweepOffice removes from office every member held by node.
func (n *Node) sweepOffice(ctx context.Context, node, office string) ([]Member, error) {
	return n.sweepOfficeExcept(ctx, node, office, nil)
}

// sweepOfficeExcept removes node's members of office, except the sids in
// keep (when keep is not nil, one leave script per extra member runs
// instead of the sweep script).
func (n *Node) sweepOfficeExcept(ctx context.Context, node, office string, keep map[string]bool) ([]Member, error) {
	c, cancel := n.op(ctx)
	defer cancel()
	var removed []Member
	if keep == nil {
		res, err := sweepScript.Run(c, n.rdb, officeKeys(office), node, officeChannel(office), n.pubCmd).Slice()
		if err != nil {
			return nil, n.fail("sweep", err)
		}
		for i := 0; i+1 < len(res); i += 2 {
			sid, _ := res[i].(string)
			rec, _ := res[i+1].(string)
			if m, err := parseMember(sid, rec); err == nil {
				removed = append(removed, m)
			}
		}
	} else {
		all, err := n.rdb.HGetAll(c, officeKeys(office)[0]).Result()
		if err != nil {
			return nil, n.fail("members", err)
		}
		for sid, rec := range all {
			m, err := parseMember(sid, rec)
			if err != nil || m.Node != node || keep[sid] {
				continue
			}
			if err := leaveScript.Run(c, n.rdb, officeKeys(office), sid, node, officeChannel(office), n.pubCmd).Err(); err != nil && !errors.Is(err, redis.Nil) {
				return nil, n.fail("leave", err)
			}
			removed = append(removed, m)
		}
	}
	for _, m := range removed {
		if m.Role == "computer" {
			_ = n.rdb.SRem(c, nameKey(m.Name), office).Err()
		}
	}
	return removed, nil
}
