package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// reassert is the keeper's repair (see state.go): it re-seats every
// member this node holds under the epoch of st (already seated is a
// no-op; a seat taken meanwhile evicts the member here), removes the
// records of this node's that it no longer holds, and reloads every
// office it follows (later, from the loader, while settling). The
// subscriptions need no repair: the subscriber makes a broken connection
// again by itself and names what it lost (Node.resumed).
func (n *Node) reassert(ctx context.Context, st state) error {
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
		return fmt.Errorf("%w: index: %w", ErrUnavailable, err)
	}
	for _, office := range idx {
		if _, ok := held[office]; !ok {
			if _, err := n.sweepOfficeExcept(ctx, n.id, office, nil); err != nil {
				return err
			}
			c, cancel := n.op(ctx)
			_ = n.rdb.SRem(c, nodeIndex(n.id), office).Err()
			cancel()
		}
	}
	for office, ms := range held {
		keep := make(map[string]bool, len(ms))
		for _, m := range ms {
			keep[m.SID] = true
			m.Epoch = st.epoch
			code, _, err := n.seat(ctx, office, m, st.epoch)
			if err != nil {
				return err
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
			if still {
				n.local[office][m.SID] = m
			}
			n.mu.Unlock()
			if !still {
				delete(keep, m.SID)
				c, cancel := n.op(ctx)
				err := leaveScript.Run(c, n.rdb, officeKeys(office), m.SID, n.id, officeChannel(office), n.pubCmd).Err()
				cancel()
				if err != nil && !errors.Is(err, redis.Nil) {
					return fmt.Errorf("%w: leave: %w", ErrUnavailable, err)
				}
			}
		}
		if _, err := n.sweepOfficeExcept(ctx, n.id, office, keep); err != nil {
			return err
		}
	}
	// Every followed office, not only those held: a join in progress
	// follows one too. While settling the loader holds them back.
	n.reloadAll(true)
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
		if st := n.state(); st.phase != phaseLive || time.Now().Before(st.sweepAfter) {
			// Cut off, settling or just back: this node is in no
			// position to call another dead (see sweep).
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
	for _, id := range ids {
		if id != n.id && validID(id) {
			others = append(others, id)
		}
	}
	var judged []*redis.Cmd
	var own *redis.Cmd
	err = n.evalPipelined(c, judgeScript, func(p redis.Pipeliner) {
		// This node's own lease is judged with the others': if it has
		// expired too, Redis was away (or paused) for longer than a
		// lease and every lease ran out, the live nodes' with the dead
		// ones'. Nobody is judged until the heartbeats have renewed them.
		own = judgeScript.EvalSha(c, p, nodeKeys(n.id)[:2])
		judged = judged[:0]
		for _, id := range others {
			judged = append(judged, judgeScript.EvalSha(c, p, nodeKeys(id)[:2]))
		}
	})
	if err != nil {
		return err
	}
	if v, _ := own.Int64(); v != -1 {
		n.report(troubleLease)
		return nil
	}
	for i, id := range others {
		bound, err := judged[i].Int64()
		if err != nil || bound < 0 {
			continue
		}
		if err := n.sweepNode(ctx, id, bound); err != nil {
			return err
		}
	}
	return nil
}

// sweepNode removes every member a dead node seated under an epoch up to
// bound (the last one its judgement found), office by office, then
// forgets the node if it is still dead and has not registered again. A
// node that comes back meanwhile takes a new epoch and re-seats its
// members under it, so the sweep leaves them alone.
func (n *Node) sweepNode(ctx context.Context, dead string, bound int64) error {
	n.at("judged", dead)
	c, cancel := n.op(ctx)
	offices, err := n.rdb.SMembers(c, nodeIndex(dead)).Result()
	cancel()
	if err != nil {
		return err
	}
	count := len(offices)
	for len(offices) > 0 {
		k := min(len(offices), sweepBatch)
		if err := n.sweepOffices(ctx, dead, offices[:k], bound); err != nil {
			return err
		}
		offices = offices[k:]
	}
	n.at("swept", dead)
	c, cancel = n.op(ctx)
	defer cancel()
	gone, err := forgetScript.Run(c, n.rdb, nodeKeys(dead), bound, forgottenTTL).Int()
	if err != nil {
		return err
	}
	if gone == 1 {
		if err := n.rdb.SRem(c, nodesKey, dead).Err(); err != nil {
			return err
		}
	}
	n.log.Info("dead node swept", "dead", dead, "epoch", bound, "offices", count, "forgotten", gone == 1)
	return nil
}

// sweepBatch is how many offices one pipelined round trip sweeps.
const sweepBatch = 256

// sweepOffices removes node's members of epochs up to bound from each of
// offices: the sweep script once per office, pipelined, so a dead node
// that held tens of thousands of offices is swept in a few round trips
// rather than one per office (its index is pruned as its offices empty,
// see Node.Leave).
func (n *Node) sweepOffices(ctx context.Context, node string, offices []string, bound int64) error {
	c, cancel := n.op(ctx)
	defer cancel()
	cmds := make([]*redis.Cmd, len(offices))
	err := n.evalPipelined(c, sweepScript, func(p redis.Pipeliner) {
		for i, office := range offices {
			cmds[i] = sweepScript.EvalSha(c, p, officeKeys(office), node, officeChannel(office), n.pubCmd, bound)
		}
	})
	if err != nil {
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

// evalPipelined runs a pipeline of one script's EvalSha commands, which
// fill adds: the script is sent by its hash, as Redis knows it from an
// earlier round (a SCRIPT LOAD each round would be one more round trip).
// If Redis lost its scripts (a restart), the script is loaded and the
// pipeline runs once more. A script's nil answer is no error.
func (n *Node) evalPipelined(c context.Context, s *redis.Script, fill func(redis.Pipeliner)) error {
	for try := 0; ; try++ {
		_, err := n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
			fill(p)
			return nil
		})
		switch {
		case err == nil || errors.Is(err, redis.Nil):
			return nil
		case try > 0 || !redis.HasErrorPrefix(err, "NOSCRIPT"):
			return err
		}
		if err := s.Load(c, n.rdb).Err(); err != nil {
			return err
		}
	}
}

// sweepOffice removes from office every member held by node under an
// epoch up to bound.
func (n *Node) sweepOffice(ctx context.Context, node, office string, bound int64) ([]Member, error) {
	c, cancel := n.op(ctx)
	defer cancel()
	res, err := sweepScript.Run(c, n.rdb, officeKeys(office), node, officeChannel(office), n.pubCmd, bound).Slice()
	if err != nil {
		return nil, n.fail("sweep", err)
	}
	var removed []Member
	for i := 0; i+1 < len(res); i += 2 {
		sid, _ := res[i].(string)
		rec, _ := res[i+1].(string)
		if m, err := parseMember(sid, rec); err == nil {
			removed = append(removed, m)
			if m.Role == smcp.RoleComputer {
				_ = n.rdb.SRem(c, nameKey(m.Name), office).Err()
			}
		}
	}
	return removed, nil
}

// sweepOfficeExcept removes this node's own records of office, except the
// sids in keep: one leave script per record, so a record the node's
// current epoch wrote is removed as surely as an older one.
func (n *Node) sweepOfficeExcept(ctx context.Context, node, office string, keep map[string]bool) ([]Member, error) {
	c, cancel := n.op(ctx)
	defer cancel()
	all, err := n.rdb.HGetAll(c, officeKeys(office)[0]).Result()
	if err != nil {
		return nil, n.fail("members", err)
	}
	var removed []Member
	for sid, rec := range all {
		m, err := parseMember(sid, rec)
		if err != nil || m.Node != node || keep[sid] {
			continue
		}
		if err := leaveScript.Run(c, n.rdb, officeKeys(office), sid, node, officeChannel(office), n.pubCmd).Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, n.fail("leave", err)
		}
		removed = append(removed, m)
		if m.Role == smcp.RoleComputer {
			_ = n.rdb.SRem(c, nameKey(m.Name), office).Err()
		}
	}
	return removed, nil
}
