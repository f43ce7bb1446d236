package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Conn is the connection that asks to join, as its node knows it.
type Conn struct {
	SID string
	// Role is the role of the connection's first join ("" before it).
	Role smcp.Role
	// Version is the a2c_version it presented at the handshake.
	Version string
}

// Join applies the office rules cluster-wide to the connection c, which
// now sits at cur (the zero Seat if nowhere), asking for req. It returns the same decision as
// the single-node rules; when accepted the seat is taken in Redis and the
// entry is published, and a Computer that switched offices has left the
// former one. An error (ErrUnavailable) means nothing was decided: the
// caller refuses with [RefuseUnavailable].
func (n *Node) Join(ctx context.Context, c Conn, cur, req Seat) (Decision, error) {
	if d, done := decideLocal(c.Role, cur, req); done {
		return d, nil
	}
	sid := c.SID
	if !validID(sid) || !validVersion(c.Version) || req.Name == "" || len(req.Name) > MaxField {
		return Decision{}, fmt.Errorf("cluster: invalid member %q %q %q", sid, c.Version, req.Name)
	}
	st := n.state()
	switch st.phase {
	case phaseCut:
		return Decision{}, fmt.Errorf("%w: not connected", ErrUnavailable)
	case phaseSettling:
		return Decision{}, fmt.Errorf("%w: settling after Redis lost the cluster state", ErrUnavailable)
	}
	m := Member{SID: sid, Role: req.Role, Name: req.Name, Node: n.id, Version: c.Version, Epoch: st.epoch}
	if err := n.follow(ctx, req.Office); err != nil {
		return Decision{}, err
	}
	defer n.unpin(req.Office)
	code, holder, err := n.seat(ctx, req.Office, m, st.epoch)
	if err == nil && code >= 2 && code <= 3 && holder != "" && holder != n.id {
		if bound := n.judge(ctx, holder); bound >= 0 {
			// The seat's holder is on a dead node not swept yet: sweep
			// this office for it now, then try once more.
			if _, err = n.sweepOffice(ctx, holder, req.Office, bound); err == nil {
				code, _, err = n.seat(ctx, req.Office, m, st.epoch)
			}
		}
	}
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	switch code {
	case 0, 1:
		n.mu.Lock()
		if n.local[req.Office] == nil {
			n.local[req.Office] = make(map[string]Member)
		}
		n.local[req.Office][sid] = m
		n.mu.Unlock()
		d.Already = code == 1 && cur.Office == req.Office
		if cur.Office != "" && cur.Office != req.Office {
			d.SwitchOffice = true
			if err := n.Leave(ctx, cur.Office, sid); err != nil {
				n.log.Warn("switching office: leave deferred to the next re-assert", "office", cur.Office, "err", err)
			}
		}
		if err := n.load(ctx, req.Office, false); err != nil {
			n.scheduleReload(req.Office, false)
		}
		return d, nil
	case 2:
		d.Refuse = RefuseAgentTaken
	case 3:
		d.Refuse = RefuseNameTaken
	default:
		d.Refuse = RefuseOtherName
	}
	return d, nil
}

// seat runs the join script for m under the node's epoch. The office is
// added to the node's index first, in one script that also checks the
// lease: it must still hold epoch and live longer than the command
// deadline both steps share, with a margin (Config.leaseMargin), so the
// join runs while the lease lives and no sweeper can have judged this
// epoch dead and read the index before it. The index thus covers every
// seat the node holds, whatever the moment of a crash or a pause.
func (n *Node) seat(ctx context.Context, office string, m Member, epoch int64) (code int64, holder string, err error) {
	c, cancel := n.op(ctx)
	defer cancel()
	left := n.cfg.leaseMargin().Milliseconds()
	ok, err := indexScript.Run(c, n.rdb, nodeKeys(n.id), epoch, office, left).Int()
	if err != nil {
		return 0, "", n.fail("index", err)
	}
	switch ok {
	case -1:
		// Redis lost the cluster state (restarted empty), or this node
		// was cut off for longer than its lease: a seat taken now could
		// be another node's live member's, not re-asserted yet. The
		// keeper registers again and settles first.
		n.report(troubleLease)
		return 0, "", fmt.Errorf("%w: this node's lease is gone", ErrUnavailable)
	case -2:
		n.report(troubleLease)
		return 0, "", fmt.Errorf("%w: this node's lease runs out (heartbeat late)", ErrUnavailable)
	}
	res, err := joinScript.Run(c, n.rdb, officeKeys(office), m.SID, string(m.Role), m.Name, m.Node, officeChannel(office), n.pubCmd, m.Version, epoch).Slice()
	if err != nil {
		return 0, "", n.fail("join", err)
	}
	if len(res) == 0 {
		return 0, "", fmt.Errorf("%w: join: empty reply", ErrUnavailable)
	}
	code, _ = res[0].(int64)
	if len(res) > 1 {
		holder, _ = res[1].(string)
	}
	if code >= 0 && code <= 1 && m.Role == smcp.RoleComputer {
		_ = n.rdb.SAdd(c, nameKey(m.Name), office).Err()
	}
	return code, holder, nil
}

// Leave removes the connection sid, held by this node, from office and
// publishes its departure. Without Redis the member is forgotten locally
// at once and its record removed by the next re-assert.
func (n *Node) Leave(ctx context.Context, office, sid string) error {
	n.mu.Lock()
	m, held := n.local[office][sid]
	if held {
		delete(n.local[office], sid)
		if len(n.local[office]) == 0 {
			delete(n.local, office)
		}
	}
	n.mu.Unlock()
	left := false // the record is gone from Redis: the index may drop the office
	defer func() { n.unfollowIfIdle(office, left) }()
	c, cancel := n.op(ctx)
	defer cancel()
	rec, err := leaveScript.Run(c, n.rdb, officeKeys(office), sid, n.id, officeChannel(office), n.pubCmd).Text()
	if errors.Is(err, redis.Nil) {
		left = true
		return nil
	}
	if err != nil {
		return n.fail("leave", err)
	}
	left = true
	if held && m.Role == smcp.RoleComputer {
		n.dropName(c, rec, office)
	}
	return nil
}

// dropName removes office from the name index of the Computer in rec,
// unless the office holds that name again.
func (n *Node) dropName(ctx context.Context, rec, office string) {
	m, err := parseMember("x", rec)
	if err != nil || m.Role != smcp.RoleComputer {
		return
	}
	_ = n.rdb.SRem(ctx, nameKey(m.Name), office).Err()
}

// ComputerElsewhere reports whether a Computer of this name sits in any
// office: it tells "not in your office" (4104) from "not found" (404) on
// the error path of a relay, never on a call that is delivered.
//
// The index is updated after the seat scripts, best effort, so it may
// name an office where the name no longer sits (a removal lost under
// load): the offices it names are checked against their seats, and the
// stale entries removed, so the answer heals instead of staying wrong.
func (n *Node) ComputerElsewhere(ctx context.Context, name string) (bool, error) {
	c, cancel := n.op(ctx)
	defer cancel()
	const sample = 16
	offices, err := n.rdb.SRandMemberN(c, nameKey(name), sample).Result()
	if err != nil {
		return false, n.fail("names", err)
	}
	if len(offices) == 0 {
		return false, nil
	}
	seats := make([]*redis.StringCmd, len(offices))
	_, err = n.rdb.Pipelined(c, func(p redis.Pipeliner) error {
		for i, o := range offices {
			seats[i] = p.HGet(c, officeKeys(o)[1], "c:"+name)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, n.fail("names", err)
	}
	var stale []any
	for i, cmd := range seats {
		if cmd.Err() == nil {
			return true, nil
		}
		stale = append(stale, offices[i])
	}
	_ = n.rdb.SRem(c, nameKey(name), stale...).Err()
	// Every office sampled was stale; a larger index may still hold a
	// live one.
	return len(offices) == sample, nil
}
