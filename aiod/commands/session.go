package commands

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
)

// tier is the commands sessions' one tier in the engine's registry.
const tier = "commands"

// session keeps what commands in it share: directory, environment,
// account, and its last commands. Guarded by Engine.mu. It is a
// sessions.Session of the engine's registry.
type session struct {
	e        *Engine
	id       string
	cwd      string
	env      []string // KEY=VALUE
	user     string   // "" until a request names one
	bashEnv  string   // v1 snapshot_path, sourced by bash via BASH_ENV
	created  time.Time
	lastUsed time.Time
	count    int64
	cmds     []*Command // the last maxCommands, oldest first
	running  int
	closed   bool
	// anon: created for a request that named no session. Nobody can
	// close it, so what its commands leave behind ends when it is
	// evicted or reclaimed.
	anon bool
}

// Session statuses.
const (
	SessionReady  = "ready"
	SessionClosed = "closed"
)

// SessionInfo describes a session; its JSON is the published
// BashSessionInfo.
type SessionInfo struct {
	SessionID      string  `json:"session_id"`
	Status         string  `json:"status"`
	WorkingDir     string  `json:"working_dir"`
	CreatedAt      string  `json:"created_at"`
	LastUsedAt     string  `json:"last_used_at"`
	CurrentCommand *string `json:"current_command"`
	CommandCount   int64   `json:"command_count"`

	// Created and LastUsed are the times behind the strings.
	Created, LastUsed time.Time `json:"-"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (s *session) infoLocked() SessionInfo {
	in := SessionInfo{SessionID: s.id, Status: SessionReady, WorkingDir: s.cwd, CreatedAt: stamp(s.created),
		LastUsedAt: stamp(s.lastUsed), CommandCount: s.count, Created: s.created, LastUsed: s.lastUsed}
	if s.closed {
		in.Status = SessionClosed
	}
	for i := len(s.cmds) - 1; i >= 0 && s.running > 0; i-- {
		if c := s.cmds[i]; c.running() {
			in.CurrentCommand = &c.Text
			break
		}
	}
	return in
}

func (c *Command) running() bool {
	st, _ := c.State()
	return st == StatusRunning
}

// SessionOptions creates a session. All fields are optional.
type SessionOptions struct {
	// ID names the session; "" generates one. An existing id is returned
	// as is (a different User is ErrInvalid).
	ID string
	// Cwd is the directory commands start in, relative to the workspace.
	Cwd string
	// Env is inherited by every command; a command's own env wins.
	Env map[string]string
	// User is the account every command runs as.
	User string
	// BashEnv names a file every bash command sources (v1 snapshot_path).
	BashEnv string
}

// CreateSession creates a session, or returns the existing one with
// that id.
func (e *Engine) CreateSession(opts SessionOptions) (SessionInfo, error) {
	if opts.User != "" {
		if _, err := e.lookupIdentity(opts.User); err != nil {
			return SessionInfo{}, err
		}
	}
	cwd := e.exec.Workspace()
	if opts.Cwd != "" {
		var err error
		if cwd, err = e.dir("", opts.Cwd); err != nil {
			return SessionInfo{}, err
		}
	}
	if opts.BashEnv != "" {
		if fi, err := os.Stat(opts.BashEnv); err != nil || fi.IsDir() {
			return SessionInfo{}, invalid("snapshot_path is not an existing file: "+opts.BashEnv, "")
		}
	}
	id := opts.ID
	if id == "" {
		id = newID()
	}
	for {
		s, created, err := e.open(id, false, false, func(s *session) {
			s.cwd, s.user, s.bashEnv = cwd, opts.User, opts.BashEnv
			for k, v := range opts.Env {
				s.env = append(s.env, k+"="+v)
			}
		})
		if err != nil {
			return SessionInfo{}, err
		}
		if info, ok, err := e.claimSession(s, created, opts.User); ok {
			return info, err
		}
		// an eviction or a close ended it meanwhile: look again
	}
}

// claimSession answers CreateSession for s: the new one as made, an
// existing one claimed for user and touched; false when s has been
// closed since it was found.
func (e *Engine) claimSession(s *session, created bool, user string) (info SessionInfo, open bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case s.closed:
		return SessionInfo{}, false, nil
	case !created:
		if err := s.claimUser(user); err != nil {
			return SessionInfo{}, true, err
		}
		s.lastUsed = time.Now()
	}
	return s.infoLocked(), true, nil
}

// claimUser fixes the session's account the first time one is named; a
// different one later is ErrInvalid.
func (s *session) claimUser(user string) error {
	switch {
	case user == "" || user == s.user:
	case s.user != "":
		return invalid(fmt.Sprintf("session %s runs as %s; it cannot switch to %s", s.id, s.user, user),
			"use a new session for a different user")
	default:
		s.user = user
	}
	return nil
}

// open returns session id from the registry (made busy when busy),
// creating it under the cap (set up by init) when there is none: at the
// limit the least recently used idle session is evicted, and with every
// session busy the refusal is ErrBusy; an engine that is shutting down
// creates none. A session that an eviction, a reclaim or a close has
// ended but not yet removed is removed here and the lookup repeated, so
// the session returned is open (a busy one stays open until released).
func (e *Engine) open(id string, busy, anon bool, init func(*session)) (s *session, created bool, err error) {
	for {
		if s, ok := e.reg.Get(tier, id); ok {
			e.mu.Lock()
			closed := s.closed
			if !closed && busy {
				s.running++
			}
			e.mu.Unlock()
			if !closed {
				return s, false, nil
			}
			e.reg.Remove(tier, id, s)
			continue
		}
		if e.isClosed() {
			return nil, false, unavailable("aiod is shutting down", "")
		}
		s, created, err = e.reg.Open(tier, id, func() *session {
			now := time.Now()
			s := &session{e: e, id: id, cwd: e.exec.Workspace(), created: now, lastUsed: now, anon: anon}
			if busy {
				s.running = 1 // no eviction can take it before its command is registered
			}
			if init != nil {
				init(s)
			}
			return s
		})
		if err != nil {
			return nil, false, err
		}
		e.syncSessions()
		e.mu.Lock()
		closed := s.closed
		if !closed && busy && !created {
			s.running++
		}
		e.mu.Unlock()
		if !closed {
			return s, created, nil
		}
		e.reg.Remove(tier, id, s)
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// syncSessions sets the command_sessions gauge to the registry's count;
// under mu, so the last of concurrent updates reads the latest count.
func (e *Engine) syncSessions() {
	e.mu.Lock()
	e.metrics.setSessions(e.reg.Len(tier))
	e.mu.Unlock()
}

// LastUsed is when the session last started or ended a command, or was
// addressed (sessions.Session: eviction picks the oldest).
func (s *session) LastUsed() time.Time {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.lastUsed
}

// Expire ends the session when none of its commands runs and it has
// been idle at least idle (sessions.Session: 0 is an eviction at the
// limit, else the idle reclaim). The check and the close happen under
// Engine.mu, where a command marks its session busy, so a command that
// starts meanwhile wins and one that comes later finds the session
// closed (see retireLocked for what its commands left behind).
func (s *session) Expire(idle time.Duration) bool {
	if s == nil {
		// The registry's eviction may look up a victim another eviction
		// has just removed, and hand over the zero value: nothing to end.
		return false
	}
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed || s.running > 0 || time.Since(s.lastUsed) < idle {
		return false
	}
	e.retireLocked(s)
	if idle == 0 {
		e.log.Debug("commands: evicted idle session", "session_id", s.id)
	} else {
		e.log.Debug("commands: reclaimed idle session", "session_id", s.id)
	}
	return true
}

// closeLocked drops s and returns what ending it must end: its running
// commands, and its ended ones, each a candidate for leftovers (what one
// left behind may carry its id without having been seen).
func (e *Engine) closeLocked(s *session) (live, ended []*Command) {
	live = e.dropLocked(s)
	ended = e.lingeringLocked(s)
	for _, c := range s.cmds {
		if !slices.Contains(live, c) && !slices.Contains(ended, c) {
			ended = append(ended, c)
		}
	}
	return live, ended
}

// retireLocked drops an idle session that is evicted or reclaimed. An
// anonymous one whose commands left processes behind (the exit-time
// check put them in e.lingering: something stayed in a command's group,
// or the tracker saw its tree grow) takes them with it, ended off the
// request path; a named one leaves them running, for its owner to end
// with DELETE or for Close. The test is this session's own record, never
// a look at /proc: on a busy daemon at its session cap every new
// anonymous command evicts one, and a scan per eviction, under the
// engine's lock, cost a tenth of the throughput with 8 clients.
func (e *Engine) retireLocked(s *session) {
	if !s.anon || !e.lingersLocked(s) {
		e.dropLocked(s)
		return
	}
	e.endInBackgroundLocked(e.closeLocked(s))
}

// lingersLocked reports whether an ended command of s left processes
// behind.
func (e *Engine) lingersLocked(s *session) bool {
	for c := range e.lingering {
		if c.sess == s {
			return true
		}
	}
	return false
}

// dropLocked closes a session and forgets its command ids; it returns
// the commands still running, for the caller to end. Removing it from
// the registry is the caller's (the registry's, for an eviction or a
// reclaim).
func (e *Engine) dropLocked(s *session) []*Command {
	s.closed = true
	for _, c := range s.cmds {
		delete(e.commands, c.ID)
	}
	var live []*Command
	for c := range e.running {
		if c.sess == s {
			live = append(live, c)
		}
	}
	return live
}

// reserve finds or creates the request's session, resolves the account
// to run as, and marks the session busy (and the engine live) until
// release.
func (e *Engine) reserve(req Request) (*session, *sessions.Identity, error) {
	recorded := ""
	if req.Session != "" {
		s, ok := e.reg.Get(tier, req.Session)
		if ok {
			e.mu.Lock()
			recorded, ok = s.user, !s.closed
			e.mu.Unlock()
		}
		if !ok && !req.CreateSession {
			return nil, nil, sessionNotFound(req.Session)
		}
	}
	name, fromDefault := req.User, false
	if name == "" {
		name = recorded
	}
	if name == "" && e.defaultUser != "" {
		name, fromDefault = e.defaultUser, true
	}
	var id *sessions.Identity
	if name != "" {
		var err error
		if id, err = e.lookupIdentity(name); err != nil {
			if fromDefault {
				return nil, nil, unavailable("AIO_DEFAULT_USER cannot be used: "+err.Error(), "fix the daemon's AIO_DEFAULT_USER, or pass user")
			}
			return nil, nil, err
		}
	}
	s, err := e.busy(req)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		s.running--
		return nil, nil, unavailable("aiod is shutting down", "")
	}
	if err := s.claimUser(req.User); err != nil {
		s.running--
		return nil, nil, err
	}
	s.lastUsed = time.Now()
	e.live.Add(1)
	return s, id, nil
}

// busy returns the request's session marked busy: a new anonymous one
// when it names none, else the named one, created when the request
// may (v1) and it does not exist.
func (e *Engine) busy(req Request) (*session, error) {
	if req.Session == "" {
		s, _, err := e.open(newID(), true, true, nil)
		return s, err
	}
	if req.CreateSession {
		s, _, err := e.open(req.Session, true, false, nil)
		return s, err
	}
	s, ok := e.reg.Get(tier, req.Session)
	if !ok {
		return nil, sessionNotFound(req.Session)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return nil, sessionNotFound(req.Session)
	}
	s.running++
	return s, nil
}

// release ends one reservation of s.
func (e *Engine) release(s *session) {
	e.mu.Lock()
	s.running--
	s.lastUsed = time.Now()
	e.mu.Unlock()
}

func (e *Engine) touch(s *session) {
	e.mu.Lock()
	s.lastUsed = time.Now()
	e.mu.Unlock()
}

// sessionLocked finds an open session; one that is closed but not yet
// out of the registry is not found.
func (e *Engine) sessionLocked(id string) (*session, error) {
	s, ok := e.reg.Get(tier, id)
	if !ok || s.closed {
		return nil, sessionNotFound(id)
	}
	return s, nil
}

// Session describes one session, or ErrNotFound.
func (e *Engine) Session(id string) (SessionInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.sessionLocked(id)
	if err != nil {
		return SessionInfo{}, err
	}
	return s.infoLocked(), nil
}

// Sessions lists the live commands sessions, oldest first.
func (e *Engine) Sessions() []SessionInfo {
	list := e.reg.List(tier)
	out := make([]SessionInfo, 0, len(list))
	e.mu.Lock()
	for _, s := range list {
		if !s.closed {
			out = append(out, s.infoLocked())
		}
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b SessionInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.SessionID, b.SessionID)
	})
	return out
}

// CloseSession removes a session and ends its running commands and the
// background children its commands left behind (SIGTERM, then SIGKILL
// after a grace period bounded by ctx). ErrNotFound for an unknown id.
// Sessions evicted at the limit or reclaimed when idle had nothing
// running; the background children of a named one live on until Close,
// those of an anonymous one end with it.
func (e *Engine) CloseSession(ctx context.Context, id string) (SessionInfo, error) {
	e.mu.Lock()
	s, err := e.sessionLocked(id)
	if err != nil {
		e.mu.Unlock()
		return SessionInfo{}, err
	}
	live, ended := e.closeLocked(s)
	info := s.infoLocked()
	e.mu.Unlock()
	e.reg.Remove(tier, id, s)
	e.syncSessions()
	return info, e.terminate(ctx, live, ended, false)
}

// Latest returns a session's newest command (running only, when
// running), nil when there is none, or ErrNotFound for the session.
func (e *Engine) Latest(sessionID string, running bool) (*Command, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.sessionLocked(sessionID)
	if err != nil {
		return nil, err
	}
	s.lastUsed = time.Now()
	for i := len(s.cmds) - 1; i >= 0; i-- {
		if c := s.cmds[i]; !running || c.running() {
			return c, nil
		}
	}
	return nil, nil
}

// reclaim ends the sessions idle past the idle limit (see Expire, and
// retireLocked for their background children).
func (e *Engine) reclaim() {
	if len(e.reg.Reclaim()) > 0 {
		e.syncSessions()
	}
}

// track records the trees of the running commands and of the ended
// ones that left processes behind (forgetting those whose processes have
// all ended), so that what leaves a group or loses its parent is still
// found; and reaps the zombies reparented to the daemon.
func (e *Engine) track() {
	e.mu.Lock()
	cmds := make([]*Command, 0, len(e.running)+len(e.lingering))
	for c := range e.running {
		cmds = append(cmds, c)
	}
	for c := range e.lingering {
		cmds = append(cmds, c)
	}
	e.mu.Unlock()
	if e.contained && len(cmds) == 0 {
		return // nothing to follow, and no orphan of the daemon is this engine's
	}
	t := scanProcs()
	var gone []*Command
	for _, c := range cmds {
		if !liveIn(c.track(t)) && !c.running() {
			gone = append(gone, c)
		}
	}
	if len(gone) > 0 {
		e.mu.Lock()
		for _, c := range gone {
			delete(e.lingering, c)
		}
		e.mu.Unlock()
	}
	if !e.contained {
		reapZombies(t)
	}
}

// janitor reclaims idle sessions, records process trees and reaps
// orphaned zombies (on SIGCHLD, and every trackEvery) until stop is
// closed.
func (e *Engine) janitor(stop <-chan struct{}) {
	every := min(max(e.idle/4, 10*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	tr := time.NewTicker(trackEvery)
	defer tr.Stop()
	chld := make(chan os.Signal, 1)
	if !e.contained { // in a sandbox, orphans are its init's to reap
		signal.Notify(chld, syscall.SIGCHLD)
		defer signal.Stop(chld)
	}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			e.reclaim()
		case <-tr.C:
			e.track()
		case <-chld:
			reapOrphans()
		}
	}
}
