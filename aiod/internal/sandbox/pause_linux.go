package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Pausing freezes every process of the sandbox with the cgroup freezer
// (v1's freezer controller, v2's cgroup.freeze): they keep their memory,
// files and descriptors, and run no instruction until Resume.
//
// Invariant: no thread of the daemon is ever in a group that is frozen.
// A frozen daemon thread would stop the daemon, not the sandbox: the Go
// runtime waits for every thread to reach a safe point before a
// collection, so one frozen thread can stop them all. On v2 no thread
// of the daemon joins the sandbox's group (a process is born in it, or
// held at its exec and moved; spawn_linux.go). On v1 the spawner thread
// joins the pids, cpu and cpuacct groups, never the freezer's; a
// process is moved into the freezer group as a whole (cgroups.place,
// which refuses the daemon's own numbers), and Pause checks the frozen
// group's member list for the daemon before it reports success.
//
// Starts and pauses are ordered by Sandbox.gate: a Wrap in flight
// finishes (its process placed in every group) before a freeze, and a
// Wrap while paused fails with ErrPaused rather than wait: a plane
// would otherwise hang on a process that cannot run, and the pool
// resumes a sandbox before it forwards a request to it. Do, DoContext,
// OpenInView and DialContext work while paused: their threads are the
// daemon's, in no group of the sandbox (a read of a file a frozen
// process is writing sees what was written so far).

// pauseWait bounds how long Pause waits for the kernel to report the
// group frozen: a task in an uninterruptible sleep (a disk, a network
// filesystem) freezes only once it wakes.
const pauseWait = 5 * time.Second

// Pause freezes every process of the sandbox and returns once the
// kernel reports the group frozen, within pauseWait; on a timeout the
// group is thawed again and an error returned. Pausing a paused
// sandbox does nothing. While paused, Wrap fails with [ErrPaused].
func (s *Sandbox) Pause() error {
	if s == nil {
		return errors.New("sandbox: isolation none has nothing to pause")
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if s.paused.Load() {
		return nil
	}
	// Set first: an instance started again meanwhile (init died; see
	// Sandbox.instance) would be frozen before it reports.
	s.paused.Store(true)
	if err := s.cg.freeze(time.Now().Add(pauseWait)); err != nil {
		s.paused.Store(false)
		return err
	}
	return nil
}

// Resume thaws the processes Pause froze. Resuming a running sandbox
// does nothing.
func (s *Sandbox) Resume() error {
	if s == nil {
		return nil
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if !s.paused.Load() {
		return nil
	}
	if err := s.cg.thaw(); err != nil {
		return err
	}
	s.paused.Store(false)
	return nil
}

// Paused reports whether the sandbox is paused.
func (s *Sandbox) Paused() bool {
	return s != nil && s.paused.Load()
}

// usable reports whether the sandbox is open and can be frozen.
func (s *Sandbox) usable() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("sandbox: closed")
	}
	if s.cg == nil || !s.cg.canFreeze() {
		return ErrNoCgroups
	}
	return nil
}

// canFreeze reports whether c has a freezer.
func (c *cgroups) canFreeze() bool {
	return c != nil && (c.v2 != "" || c.v1["freezer"] != "")
}

// freeze freezes the group and waits, until deadline, for the kernel to
// report it frozen. On v1 the processes of the pids group not yet in
// the freezer group (one that forked before its parent was placed) are
// moved in first, and again after the group reports frozen, until none
// is left out: a task moved into a frozen group is frozen.
func (c *cgroups) freeze(deadline time.Time) error {
	if c.v2 != "" {
		if err := os.WriteFile(filepath.Join(c.v2, "cgroup.freeze"), []byte("1"), 0); err != nil {
			return fmt.Errorf("sandbox: freezing: %w", err)
		}
		err := waitFor(deadline, func() (bool, error) {
			b, err := os.ReadFile(filepath.Join(c.v2, "cgroup.events"))
			return strings.Contains(string(b), "frozen 1"), err
		})
		if err != nil {
			_ = c.thaw()
			return fmt.Errorf("sandbox: freezing: %w", err)
		}
		return nil
	}
	dir := c.v1["freezer"]
	c.sweep()
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		return fmt.Errorf("sandbox: freezing: %w", err)
	}
	err := waitFor(deadline, func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil || strings.TrimSpace(string(b)) != "FROZEN" {
			return false, err
		}
		// Frozen: is every process of the sandbox in the group?
		return c.sweep() == 0, nil
	})
	if err == nil {
		if _, self := procs(dir)[os.Getpid()]; self {
			err = errors.New("the daemon itself is in the sandbox's freezer group")
		}
	}
	if err != nil {
		_ = c.thaw()
		return fmt.Errorf("sandbox: freezing: %w", err)
	}
	return nil
}

// thaw lets the group run again.
func (c *cgroups) thaw() error {
	var err error
	if c.v2 != "" {
		err = os.WriteFile(filepath.Join(c.v2, "cgroup.freeze"), []byte("0"), 0)
	} else {
		err = os.WriteFile(filepath.Join(c.v1["freezer"], "freezer.state"), []byte("THAWED"), 0)
	}
	if err != nil {
		return fmt.Errorf("sandbox: thawing: %w", err)
	}
	return nil
}

// killFrozen sends SIGKILL to every process of the frozen group, for
// Close: a frozen process cannot die (v1), so its end needs a thaw, and
// one already killed runs no instruction of its own after it. A frozen
// process cannot exit either, so the numbers read stay its own until the
// thaw.
func (c *cgroups) killFrozen() {
	dir := c.v2
	if c.v2 == "" {
		dir = c.v1["freezer"]
	}
	for pid := range procs(dir) {
		if !ownTask(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitFor calls done until it reports true, an error, or deadline
// passes. The freezer tells of its progress only through the files it
// is polled on (v1 has no notification), so the wait backs off from
// 50 µs to 2 ms between reads.
func waitFor(deadline time.Time, done func() (bool, error)) error {
	pause := 50 * time.Microsecond
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the kernel did not report the group frozen in time")
		}
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Millisecond)
	}
}
