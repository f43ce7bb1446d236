package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// view is this node's copy of an office's membership, current as of
// version. The copy changes only from snapshots of the office's keys
// (load): an office event is a hint that the office changed, never
// applied as it is. Office events are published by scripts inside Redis
// and cannot carry the cluster key's seal, so anyone who may PUBLISH on
// the office channel could forge one; a forged hint costs one reload and
// changes nothing.
type view struct {
	office  string
	loaded  bool
	version int64
	members map[string]Member
	// hinted is the highest version an event announced since the last
	// load; a load that does not reach it is followed by one more.
	hinted int64
	// swept are the sids that events announced as swept (their node
	// died) since the last load: a departure a load then finds is
	// reported as a sweep, which ends the calls waiting on the member.
	swept map[string]bool
	// pins counts the joins in progress that need the view: it is not
	// dropped while one runs, even if the node holds nobody there yet.
	pins int
}

// Refresh reloads the node's copy of an office it follows from Redis
// (one script), reporting what changed as events. The server calls it
// before it answers from the copy where a change made on another node a
// moment ago must be seen: a request whose Computer is not in the copy,
// and server:list_room. It does nothing while the node settles.
func (n *Node) Refresh(ctx context.Context, office string) error {
	if n.settling() {
		return nil
	}
	n.mu.Lock()
	_, ok := n.views[officeChannel(office)]
	n.mu.Unlock()
	if !ok {
		return nil
	}
	return n.load(ctx, office, false)
}

// Office returns the members of any office, from the node's copy when it
// follows the office, else read from Redis (one script). It is for
// inspection (the server's office listing), not for routing.
func (n *Node) Office(ctx context.Context, office string) ([]Member, error) {
	n.mu.Lock()
	v := n.views[officeChannel(office)]
	if v != nil && v.loaded {
		out := make([]Member, 0, len(v.members))
		for _, m := range v.members {
			out = append(out, m)
		}
		n.mu.Unlock()
		return out, nil
	}
	n.mu.Unlock()
	c, cancel := n.op(ctx)
	defer cancel()
	res, err := snapshotScript.Run(c, n.rdb, officeKeys(office)).Slice()
	if err != nil {
		return nil, n.fail("snapshot", err)
	}
	var out []Member
	for i := 1; i+1 < len(res); i += 2 {
		sid, _ := res[i].(string)
		rec, _ := res[i+1].(string)
		if m, err := parseMember(sid, rec); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// Lookup finds a member of a followed office by role and name in the
// node's copy, with no Redis command: this is how a request is routed.
func (n *Node) Lookup(office string, role smcp.Role, name string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v := n.views[officeChannel(office)]; v != nil {
		for _, m := range v.members {
			if m.Role == role && m.Name == name {
				return m, true
			}
		}
	}
	return Member{}, false
}

// Members returns the members of a followed office (every node's), in no
// order, from the node's copy.
func (n *Node) Members(office string) []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.views[officeChannel(office)]
	if v == nil {
		return nil
	}
	out := make([]Member, 0, len(v.members))
	for _, m := range v.members {
		out = append(out, m)
	}
	return out
}

// Nodes returns the ids of the nodes other than this one that hold a
// member of office: where a broadcast goes, one frame each.
func (n *Node) Nodes(office string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.views[officeChannel(office)]
	if v == nil {
		return nil
	}
	seen := map[string]bool{n.id: true}
	var out []string
	for _, m := range v.members {
		if !seen[m.Node] {
			seen[m.Node] = true
			out = append(out, m.Node)
		}
	}
	return out
}

// follow makes sure the node receives office's events before it changes
// the office, so that no event after its snapshot is missed, and pins the
// view until the caller's unpin.
func (n *Node) follow(ctx context.Context, office string) error {
	ch := officeChannel(office)
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	v, ok := n.views[ch]
	if !ok {
		v = &view{office: office, members: make(map[string]Member)}
		n.views[ch] = v
	}
	v.pins++
	n.mu.Unlock()
	if ok {
		return nil
	}
	if err := n.subscribe(ctx, ch); err != nil {
		// Not followed after all: the caller will not unpin, and the
		// subscriber must not subscribe the channel when Redis returns.
		n.mu.Lock()
		drop := false
		if v.pins--; v.pins == 0 && len(n.local[office]) == 0 {
			delete(n.views, ch)
			drop = true
		}
		n.mu.Unlock()
		if drop {
			n.unsubscribe(ch)
		}
		return err
	}
	return nil
}

// unpin ends a join's hold on the office's view.
func (n *Node) unpin(office string) {
	n.mu.Lock()
	if v := n.views[officeChannel(office)]; v != nil {
		v.pins--
	}
	n.mu.Unlock()
	// A join that took no seat leaves no record: the office may leave
	// the index again (a failed one reported a trouble, which prevents
	// it).
	n.unfollowIfIdle(office, true)
}

// unfollowIfIdle stops following an office where the node holds nobody
// and no join is in progress.
//
// With prune (the caller removed its member's record), the office also
// leaves the node's index, so the index, and a sweep after this node's
// death, stays the size of the offices it holds. That is safe under
// subMu: a join of this node into the office pins the view (under subMu)
// before it adds the office to the index, so it comes after. Not while
// a re-assert is due: the index is how it finds records left behind.
func (n *Node) unfollowIfIdle(office string, prune bool) {
	ch := officeChannel(office)
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	v, ok := n.views[ch]
	idle := ok && len(n.local[office]) == 0 && v.pins == 0
	if idle {
		delete(n.views, ch)
	}
	n.mu.Unlock()
	if idle {
		n.unsubscribe(ch)
		if prune && !n.repairDue() {
			c, cancel := n.op(n.ctx)
			_ = n.rdb.SRem(c, nodeIndex(n.id), office).Err()
			cancel()
		}
	}
}

// load reads an office's snapshot and makes it the node's copy. The
// differences from the former copy are reported as events (version 0),
// so a member that vanished during an outage ends its pending calls. A
// snapshot older than the copy (a concurrent load read it first) is
// dropped, unless force says the versions may have started again (Redis
// lost its state: the re-assert and the end of settling). If an event
// announced a version the snapshot does not reach (the change came while
// it was read, or the event was forged), the office is loaded once more.
func (n *Node) load(ctx context.Context, office string, force bool) error {
	c, cancel := n.op(ctx)
	defer cancel()
	res, err := snapshotScript.Run(c, n.rdb, officeKeys(office)).Slice()
	if err != nil {
		return n.fail("snapshot", err)
	}
	if len(res) == 0 || len(res)%2 == 0 {
		return fmt.Errorf("%w: snapshot: %d values", errMember, len(res))
	}
	ver, _ := res[0].(int64)
	fresh := make(map[string]Member, len(res)/2)
	for i := 1; i+1 < len(res); i += 2 {
		sid, _ := res[i].(string)
		rec, _ := res[i+1].(string)
		m, err := parseMember(sid, rec)
		if err != nil {
			n.log.Warn("member record skipped", "office", office, "err", err)
			continue
		}
		fresh[sid] = m
	}
	var out []Event
	n.mu.Lock()
	v := n.views[officeChannel(office)]
	if v == nil {
		n.mu.Unlock()
		return nil
	}
	if v.loaded && !force && ver < v.version {
		n.mu.Unlock()
		return nil
	}
	for sid, m := range v.members {
		if _, ok := fresh[sid]; !ok {
			out = append(out, Event{Office: office, Member: m, Swept: v.swept[sid]})
		}
	}
	for sid, m := range fresh {
		if old, ok := v.members[sid]; !ok || !sameSeat(old, m) {
			out = append(out, Event{Office: office, Enter: true, Member: m})
		}
	}
	v.members, v.version, v.loaded = fresh, ver, true
	again := v.hinted > ver
	v.hinted, v.swept = 0, nil
	n.mu.Unlock()
	if again {
		n.scheduleReload(office, false)
	}
	n.emit(out)
	return nil
}

// onEvent takes one message of an office channel as a hint: if it
// announces a version the copy has not reached, the loader reloads the
// office (coalesced: a burst of events is one snapshot). While the node
// settles, events are ignored (their versions start again after a
// restart) and the reload at the end catches up. It runs on a receiver,
// which carries every frame too: it never waits on Redis.
func (n *Node) onEvent(ch, payload string) {
	if n.settling() {
		return
	}
	n.mu.Lock()
	v := n.views[ch]
	if v == nil {
		n.mu.Unlock()
		return
	}
	ev, err := parseEvent(v.office, payload)
	if err != nil {
		n.mu.Unlock()
		n.log.Warn("event dropped", "office", v.office, "err", err)
		return
	}
	if v.loaded && ev.Version <= v.version {
		n.mu.Unlock()
		return
	}
	v.hinted = max(v.hinted, ev.Version)
	if ev.Swept {
		if v.swept == nil {
			v.swept = make(map[string]bool)
		}
		if len(v.swept) < maxSweptHints {
			v.swept[ev.Member.SID] = true
		}
	}
	office, loaded := v.office, v.loaded
	n.mu.Unlock()
	if loaded {
		// Not loaded yet: the first load is under way, and one more
		// follows it if it does not reach this version.
		n.scheduleReload(office, false)
	}
}

// maxSweptHints bounds the swept hints an office keeps between two
// loads: events come from Redis and are not trusted to be few.
const maxSweptHints = 1024

func (n *Node) emit(evs []Event) {
	if n.h.Event == nil {
		return
	}
	for _, ev := range evs {
		n.h.Event(ev)
	}
}

// CensusKey is a group of [Node.Census]: the node holding the members and
// their role.
type CensusKey struct {
	Node string
	Role smcp.Role
}

// Census counts the members of the offices this node follows, by the node
// that holds each and role, from the node's copy: what the server's
// metrics show of where the cluster's members sit.
func (n *Node) Census() map[CensusKey]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[CensusKey]int)
	for _, v := range n.views {
		for _, m := range v.members {
			out[CensusKey{m.Node, m.Role}]++
		}
	}
	return out
}

// scheduleReload asks the loader to read office's copy again; force as
// in load (an earlier request's force is kept).
func (n *Node) scheduleReload(office string, force bool) {
	n.reloadMu.Lock()
	n.reloads[office] = n.reloads[office] || force
	n.reloadMu.Unlock()
	n.wakeLoader()
}

// reloadAll asks the loader to read every followed office again.
func (n *Node) reloadAll(force bool) {
	n.mu.Lock()
	offices := make([]string, 0, len(n.views))
	for _, v := range n.views {
		offices = append(offices, v.office)
	}
	n.mu.Unlock()
	n.reloadMu.Lock()
	for _, o := range offices {
		n.reloads[o] = n.reloads[o] || force
	}
	n.reloadMu.Unlock()
	n.wakeLoader()
}

func (n *Node) wakeLoader() {
	select {
	case n.loaderWake <- struct{}{}:
	default:
	}
}

// loader reloads the offices asked for, one snapshot each, while the node
// is live: cut off or settling, the requests wait (the keeper wakes it
// when the node is live again). A failed load is asked for again and
// reported to the keeper. It is the one goroutine that waits on Redis for
// the copies, so the receivers never do.
func (n *Node) loader() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.loaderWake:
		}
		if n.state().phase != phaseLive {
			continue
		}
		n.reloadMu.Lock()
		batch := n.reloads
		n.reloads = make(map[string]bool)
		n.reloadMu.Unlock()
		failed := false
		for office, force := range batch {
			if n.ctx.Err() != nil {
				return
			}
			if err := n.load(n.ctx, office, force); err != nil {
				failed = true
				n.reloadMu.Lock()
				n.reloads[office] = n.reloads[office] || force
				n.reloadMu.Unlock()
				n.log.Debug("reload failed; retrying", "office", office, "err", err)
			}
		}
		if failed {
			// The failure was reported to the keeper: retry after a
			// pause, by which time the node is cut off (and the loader
			// waits for its return) or the trouble has passed.
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(n.cfg.Heartbeat):
			}
			n.wakeLoader()
		}
	}
}
