package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Per-office sandboxes (shared/spec/sandboxes.md, "Offices"): with
// Config.Provisioner set, the hub gives each office a sandbox Computer of
// its own the first time an Agent joins it, and hands the sandbox back
// once the office has had no Agent for Config.OfficeIdle.
//
// The Agent's join is seated at once, as without a provisioner (the
// office and its members see the Agent enter), but its answer waits: for
// Ensure, then for the sandbox's Computer to take its seat in the office,
// at most Config.ProvisionWait from the join in all. So the Agent's first
// request finds the sandbox. The waiting never runs on the connection's
// event loop or on the member's queue: a goroutine owned by the
// provisioner does it and answers the join when it ends (an answer only
// queues; see sio.Event.Ack). The Computer's arrival is an event, not a
// poll: the seat of a Computer on this node (enteredLocked), or another
// node's member entering an office this node follows (onClusterEvent),
// wakes the joins that wait for that name in that office, after the
// office was told of it: the Agent hears of its sandbox
// (notify:enter_office) before its join's answer.
//
// Whatever happens, the join is answered exactly once, with (true, null):
// the office works without its sandbox when Ensure fails or the Computer
// is late (both logged). If the Agent leaves (or disconnects) while it
// waits, its join is answered then, before the leave's own answer.
//
// One office's Ensure and Release calls take turns (provOffice.turn): at
// most one of them runs at a time per office, so a Release never races a
// creation, and an Ensure after a Release creates (or resumes) anew.

// Provisioner gives an office its own sandbox Computer (see
// [Config].Provisioner). Its methods are called from goroutines of the
// server, never on a connection's event loop; one server never makes two
// calls for one office at once (the nodes of a cluster may).
type Provisioner interface {
	// Ensure makes sure office has its sandbox, creating it if needed, and
	// returns the name the sandbox's Computer has (or will have) in the
	// office. It is idempotent: an office that has its sandbox keeps it.
	// ctx bounds the call (Config.ProvisionWait from the Agent's join).
	Ensure(ctx context.Context, office string) (computer string, err error)
	// Release is called when office has had no Agent for
	// Config.OfficeIdle: the provisioner applies its on_timeout (kill or
	// pause). It must bound its own work, and be harmless for an office
	// that has no sandbox or was released before: in a cluster, more than
	// one node may release the same office.
	Release(office string)
}

// Defaults of the provisioning bounds.
const (
	defaultOfficeIdle    = 10 * time.Minute
	defaultProvisionWait = 5 * time.Second
)

// provisioner is the server's side of a Provisioner: the joins that wait
// for their office's sandbox, and the idle timers of offices with no
// Agent. It is nil on a server without Config.Provisioner, and every hook
// checks that first.
type provisioner struct {
	s    *Server
	p    Provisioner
	idle time.Duration // Config.OfficeIdle
	wait time.Duration // Config.ProvisionWait

	// ctx ends at Shutdown: it cancels the waits and the Ensure calls.
	ctx  context.Context
	stop context.CancelFunc
	// wg counts the goroutines the provisioner started (a waiting join, a
	// fired idle timer), so Shutdown can wait for them.
	wg sync.WaitGroup

	// mu guards what follows. Lock order: Server.mu, then mu; never take
	// Server.mu while holding mu.
	mu      sync.Mutex
	closed  bool
	offices map[string]*provOffice
}

// provOffice is the provisioning state of one office. It exists while
// something refers to it (refs), an idle timer is armed, or joins wait.
type provOffice struct {
	// turn, of capacity one, is held by the one Ensure or Release of the
	// office under way.
	turn chan struct{}
	// refs counts the goroutines using the office (waiting for or holding
	// turn).
	refs int
	// timer is the idle timer, armed while the office has no Agent (nil:
	// none). gen changes whenever a timer is armed or an Agent takes its
	// seat, so a timer that fired just before either does nothing.
	timer *time.Timer
	gen   uint64
	// waits are the joins waiting for the office's sandbox.
	waits map[*seatWait]struct{}
}

func newProvOffice() *provOffice {
	return &provOffice{turn: make(chan struct{}, 1), waits: make(map[*seatWait]struct{})}
}

func (o *provOffice) unused() bool { return o.refs == 0 && o.timer == nil && len(o.waits) == 0 }

// seatWait is one Agent's join waiting for its office's sandbox.
type seatWait struct {
	agent *member
	// computer is the name Ensure returned ("" until then).
	computer string
	// seated is closed when that Computer is in the office, or the wait
	// is over for another reason (the Agent left); ended tells them apart
	// for the log.
	seated chan struct{}
	ended  bool
	// answer sends the join's (true, null), once, whoever calls it first.
	answer func()
}

func newProvisioner(s *Server, cfg Config) *provisioner {
	ctx, stop := context.WithCancel(context.Background())
	return &provisioner{s: s, p: cfg.Provisioner, idle: cfg.OfficeIdle, wait: cfg.ProvisionWait,
		ctx: ctx, stop: stop, offices: make(map[string]*provOffice)}
}

// refLocked returns the state of office, creating it, with one more
// reference.
// The caller holds p.mu.
func (p *provisioner) refLocked(office string) *provOffice {
	o := p.offices[office]
	if o == nil {
		o = newProvOffice()
		p.offices[office] = o
	}
	o.refs++
	return o
}

// unref drops a reference taken by refLocked, and the office's state
// with it when nothing else holds it.
func (p *provisioner) unref(office string, o *provOffice) {
	p.mu.Lock()
	o.refs--
	p.forgetLocked(office, o)
	p.mu.Unlock()
}

func (p *provisioner) forgetLocked(office string, o *provOffice) {
	if o.unused() && p.offices[office] == o {
		delete(p.offices, office)
	}
}

// ackJoin answers a join that has just seated m in office (the caller
// holds s.mu): at once when nothing is to be provisioned (no provisioner,
// or a Computer), else when the office's sandbox is in (see the top of
// this file).
func (s *Server) ackJoin(m *member, e *sio.Event, office string) {
	if s.prov == nil || m.role != smcp.RoleAgent || m.console {
		ackTuple(e, true, "")
		return
	}
	s.prov.provision(m, e, office)
}

// provision starts the goroutine that ensures office's sandbox and waits
// for its Computer, then answers the join e of Agent m. The caller holds
// s.mu, and m is seated: its leave (which ends the wait) cannot come
// before the wait is registered here.
func (p *provisioner) provision(m *member, e *sio.Event, office string) {
	var once sync.Once
	w := &seatWait{agent: m, seated: make(chan struct{}), answer: func() { once.Do(func() { ackTuple(e, true, "") }) }}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		w.answer()
		return
	}
	o := p.refLocked(office)
	o.waits[w] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	start := time.Now()
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.ctx, p.wait)
		defer cancel()
		err := p.ensure(ctx, o, w, office)
		p.mu.Lock()
		delete(o.waits, w)
		o.refs--
		p.forgetLocked(office, o)
		p.mu.Unlock()
		switch {
		case errors.Is(err, errAgentLeft):
			p.s.log.Debug("office sandbox wait ended: the Agent left", "office", office, "sid", m.sid())
		case err != nil:
			p.s.log.Warn("office sandbox not ready: the join is answered without it", "office", office, "sid", m.sid(), "after", time.Since(start).Round(time.Millisecond), "err", err)
		default:
			p.s.log.Debug("office sandbox ready", "office", office, "sid", m.sid(), "after", time.Since(start).Round(time.Millisecond))
		}
		w.answer()
	}()
}

// errAgentLeft ends the wait of an Agent that left its office first.
var errAgentLeft = errors.New("the Agent left the office")

// ensure calls Ensure on its office's turn, then waits until the
// Computer it names is a member of the office, or ctx ends.
func (p *provisioner) ensure(ctx context.Context, o *provOffice, w *seatWait, office string) error {
	select {
	case o.turn <- struct{}{}:
	case <-w.seated: // the Agent left while an earlier call held the turn
		return errAgentLeft
	case <-ctx.Done():
		return fmt.Errorf("waiting for the office's previous sandbox call: %w", ctx.Err())
	}
	computer, err := p.p.Ensure(ctx, office)
	<-o.turn
	if err != nil {
		return fmt.Errorf("ensure: %w", err)
	}
	if computer == "" {
		return errors.New("ensure: the provisioner named no Computer")
	}
	// The name is registered before the office is looked at, so a seat
	// taken between the look and the wait still wakes this one.
	p.mu.Lock()
	w.computer = computer
	left := w.ended
	p.mu.Unlock()
	if left {
		return errAgentLeft
	}
	if p.s.hasComputer(office, computer) {
		return nil
	}
	select {
	case <-w.seated:
		p.mu.Lock()
		left = w.ended
		p.mu.Unlock()
		if left {
			return errAgentLeft
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the sandbox's Computer %q did not join: %w", computer, ctx.Err())
	}
}

// hasComputer reports whether a Computer of that name is in office: on
// this node, or in a cluster anywhere in this node's copy of the office
// (which it follows while its Agent sits here).
func (s *Server) hasComputer(office, name string) bool {
	s.mu.RLock()
	o := s.offices[office]
	here := o != nil && o.computers[name] != nil
	s.mu.RUnlock()
	if here || s.hub == nil {
		return here
	}
	_, ok := s.hub.node.Lookup(office, smcp.RoleComputer, name)
	return ok
}

// computerSeated wakes the joins of office that wait for the Computer
// name. It is called once a Computer's arrival has been announced to
// the office: its seat here (the caller holds s.mu), or another node's
// Computer entering an office this node follows.
func (p *provisioner) computerSeated(office, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.offices[office]
	if o == nil {
		return
	}
	for w := range o.waits {
		if w.computer == name {
			p.endWaitLocked(o, w, false)
		}
	}
}

// endWaitLocked wakes w (once); left says its Agent left.
func (p *provisioner) endWaitLocked(o *provOffice, w *seatWait, left bool) {
	select {
	case <-w.seated:
		return
	default:
	}
	w.ended = left
	close(w.seated)
	delete(o.waits, w)
}

// agentSeated is an Agent taking its seat in office, here or (in a
// cluster) on another node: the office's idle timer, if armed, stops.
func (p *provisioner) agentSeated(office string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.offices[office]
	if o == nil {
		return
	}
	o.gen++
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	p.forgetLocked(office, o)
}

// agentLeft is the office's Agent leaving it: m when it sat on this node
// (its waiting join, if any, is answered now, before the leave's own
// answer; the caller holds s.mu), nil for another node's Agent whose
// node died (a sweep). The office's idle timer starts.
func (p *provisioner) agentLeft(office string, m *member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	o := p.offices[office]
	if m != nil && o != nil {
		for w := range o.waits {
			if w.agent == m {
				w.answer()
				p.endWaitLocked(o, w, true)
			}
		}
	}
	if o == nil {
		o = newProvOffice()
		p.offices[office] = o
	}
	o.gen++
	if o.timer != nil {
		o.timer.Stop()
	}
	gen := o.gen
	o.timer = time.AfterFunc(p.idle, func() { p.fire(office, gen) })
}

// fire is an office's idle timer running out: unless an Agent took a
// seat since (gen changed), or sits in the office on another node, the
// office's sandbox is released, on the office's turn.
func (p *provisioner) fire(office string, gen uint64) {
	p.mu.Lock()
	o := p.offices[office]
	if p.closed || o == nil || o.gen != gen {
		p.mu.Unlock()
		return
	}
	o.timer = nil
	o.refs++
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	defer p.unref(office, o)

	select {
	case o.turn <- struct{}{}:
	case <-p.ctx.Done():
		return
	}
	defer func() { <-o.turn }()
	current := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.closed && o.gen == gen
	}
	if !current() {
		return
	}
	agent, err := p.s.agentAnywhere(p.ctx, office)
	switch {
	case err != nil:
		// The cluster's view cannot be read: releasing could take the
		// sandbox from an Agent on another node. Try again later.
		p.s.log.Warn("office sandbox kept: the cluster's view of the office is unavailable; trying again later", "office", office, "err", err)
		p.mu.Lock()
		if !p.closed && o.gen == gen && o.timer == nil {
			o.timer = time.AfterFunc(p.idle, func() { p.fire(office, gen) })
		}
		p.mu.Unlock()
		return
	case agent:
		return // its own node starts the timer when it leaves
	case !current():
		return
	}
	p.s.log.Info("office idle: releasing its sandbox", "office", office, "idle", p.idle)
	p.p.Release(office)
}

// agentAnywhere reports whether office has an Agent: on this node, or in
// a cluster on any node (the node's copy when it follows the office, else
// the office's record in Redis).
func (s *Server) agentAnywhere(ctx context.Context, office string) (bool, error) {
	s.mu.RLock()
	o := s.offices[office]
	here := o != nil && o.agent != nil
	s.mu.RUnlock()
	if here || s.hub == nil {
		return here, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := s.hub.node.Office(ctx, office)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.Role == smcp.RoleAgent {
			return true, nil
		}
	}
	return false, nil
}

// close stops every idle timer (their offices are not released: the
// sandboxes outlive this process, and the next Agent's join finds them),
// ends the waits (their joins are answered) and waits for the
// provisioner's goroutines until ctx ends.
func (p *provisioner) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for _, o := range p.offices {
		if o.timer != nil {
			o.timer.Stop()
			o.timer = nil
		}
	}
	p.mu.Unlock()
	p.stop()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("server: office sandbox calls still running: %w", ctx.Err())
	}
}
