package pool

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// snapshot is a snapshot of the pool's (layers_linux.go): its wire form,
// and the snapshots it descends from, nearest first.
type snapshot struct {
	Snapshot
	ancestors []string
}

// snapshotPath is the snapshot id's subvolume.
func (p *Pool) snapshotPath(id string) string { return filepath.Join(p.root, "layers", "snap-"+id) }

// snapshotsOffered refuses the snapshot routes of a pool that cannot take
// one.
func (p *Pool) snapshotsOffered() error {
	if !p.cfg.Machine {
		return &Error{Status: http.StatusNotImplemented, Message: "snapshots are of whole machines: start the pool with --machine"}
	}
	if err := p.machinesReady(p.ctx); err != nil {
		return err
	}
	switch {
	case !p.cfg.Machine:
		return &Error{Status: http.StatusNotImplemented, Message: "snapshots are of whole machines: start the pool with --machine"}
	case !p.btrfs:
		return &Error{Status: http.StatusNotImplemented, Message: "this pool's layer store is not btrfs (install btrfs-progs, or put --root on btrfs): it cannot take snapshots"}
	}
	return nil
}

// TakeSnapshot snapshots sandbox id: the sandbox is frozen (the cgroup
// freezer) for the cut, a read-only snapshot of its upper layer, and
// goes on; the cost does not grow with what it wrote. Errors are *Error.
func (p *Pool) TakeSnapshot(id string) (Snapshot, error) {
	if err := p.snapshotsOffered(); err != nil {
		return Snapshot{}, err
	}
	b, ok := p.lookup(id)
	if !ok {
		return Snapshot{}, notFound(id)
	}
	if !b.machine {
		return Snapshot{}, &Error{Status: http.StatusConflict, Message: "sandbox " + id + " is not a whole machine (create it with \"machine\": true): it has no layers to snapshot"}
	}
	s := &snapshot{Snapshot: Snapshot{ID: newID(), SandboxID: id, Parent: nullable(b.parent)}, ancestors: append([]string{}, b.ancestors...)}
	if err := b.cut(p.snapshotPath(s.ID)); err != nil {
		return Snapshot{}, err
	}
	s.CreatedAt = time.Now().UTC()
	s.SizeBytes = layerSize(p.snapshotPath(s.ID))
	p.mu.Lock()
	p.snapshots[s.ID] = s
	p.mu.Unlock()
	p.log.Info("snapshot taken", "id", s.ID, "sandbox", id)
	return s.Snapshot, nil
}

// cut freezes the box (when running), snapshots its upper layer at dst
// read-only, and thaws it.
func (b *box) cut(dst string) error {
	select {
	case <-b.started:
	case <-time.After(time.Minute):
		return &Error{Status: http.StatusConflict, Message: "the sandbox is starting"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return notFound(b.id)
	case b.state != Running && b.state != Paused:
		return &Error{Status: http.StatusConflict, Message: "the sandbox is " + string(b.state)}
	}
	if b.state == Running {
		if err := b.sb.Pause(); err != nil {
			return &Error{Status: http.StatusInternalServerError, Message: "the sandbox could not be frozen for the snapshot: " + err.Error()}
		}
		defer func() {
			if err := b.sb.Resume(); err != nil {
				b.p.log.Warn("resume after a snapshot failed", "id", b.id, "err", err)
			}
		}()
	}
	if err := snapshotLayer(b.upper(), dst, true); err != nil {
		b.p.log.Warn("snapshot failed", "id", b.id, "err", err)
		return &Error{Status: http.StatusInternalServerError, Message: "the snapshot failed: " + err.Error()}
	}
	return nil
}

// Snapshots lists the pool's snapshots, oldest first.
func (p *Pool) Snapshots() []Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Snapshot, 0, len(p.snapshots))
	for _, s := range p.snapshots {
		out = append(out, s.Snapshot)
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// GetSnapshot is one snapshot.
func (p *Pool) GetSnapshot(id string) (Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.snapshots[id]
	if !ok {
		return Snapshot{}, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no snapshot %q", clip(id, 64))}
	}
	return s.Snapshot, nil
}

// DeleteSnapshot deletes a snapshot no sandbox of the pool was made from
// (409 naming them otherwise).
func (p *Pool) DeleteSnapshot(id string) error {
	p.mu.Lock()
	s, ok := p.snapshots[id]
	if !ok {
		p.mu.Unlock()
		return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no snapshot %q", clip(id, 64))}
	}
	var users []string
	for _, b := range p.boxes {
		if b.parent == id {
			users = append(users, "sandbox "+b.id)
		}
	}
	// (A template's warm machines are not listed: the template holds
	// the snapshot, and they end with it.)
	for _, t := range p.templates {
		if t != nil && t.SnapshotID == id {
			users = append(users, "template "+t.Name)
		}
	}
	if len(users) > 0 {
		p.mu.Unlock()
		slices.Sort(users)
		return &Error{Status: http.StatusConflict, Message: fmt.Sprintf("snapshot %s is in use by %s; delete %s first", id, strings.Join(users, ", "),
			map[bool]string{true: "them", false: "it"}[len(users) > 1])}
	}
	delete(p.snapshots, id)
	p.mu.Unlock()
	if err := deleteLayer(p.snapshotPath(s.ID)); err != nil {
		p.log.Warn("snapshot not removed", "id", id, "err", err)
	}
	return nil
}

// Fork snapshots sandbox id and starts a new sandbox from the snapshot
// (req's other fields as a create's): its files, installed packages and
// workspace are the original's at the cut, its processes none; its
// writes are its own.
func (p *Pool) Fork(ctx context.Context, id string, req CreateRequest, base string) (Sandbox, error) {
	if req.FromSnapshot != "" {
		return Sandbox{}, badField("from_snapshot", "a fork starts from the snapshot it takes; give none")
	}
	if req.Template != "" && req.Template != BaseTemplate {
		return Sandbox{}, badField("template", "a fork starts from the snapshot it takes, not a template")
	}
	if req.Machine != nil && !*req.Machine {
		return Sandbox{}, snapshotPlain()
	}
	// The request's other fields are judged before the cut (the
	// snapshot's own check comes with it).
	probe, yes := req, true
	probe.FromSnapshot, probe.Machine = "", &yes
	if _, err := p.check(probe); err != nil {
		return Sandbox{}, err
	}
	s, err := p.TakeSnapshot(id)
	if err != nil {
		return Sandbox{}, err
	}
	req.FromSnapshot = s.ID
	sb, err := p.Create(ctx, req, base)
	if err != nil {
		_ = p.DeleteSnapshot(s.ID) // no sandbox was made from it
	}
	return sb, err
}

// checkFrom resolves a create's from_snapshot.
func (p *Pool) checkFrom(id, template string) (*snapshot, error) {
	if id == "" {
		return nil, nil
	}
	if err := p.snapshotsOffered(); err != nil {
		return nil, err
	}
	if template != "" && template != BaseTemplate {
		return nil, badField("from_snapshot", "a sandbox starts from a snapshot or a template, not both")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.snapshots[id]
	if !ok {
		return nil, badField("from_snapshot", fmt.Sprintf("no snapshot %q", clip(id, 64)))
	}
	return s, nil
}
