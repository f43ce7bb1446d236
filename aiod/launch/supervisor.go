package launch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// Program describes one program a [Supervisor] keeps running.
type Program struct {
	// Name names the program in logs and errors ("chromium", "Xvfb").
	Name string
	// Command returns a fresh command for each start. The supervisor
	// adds its own process group and parent-death signal to it.
	Command func() (*exec.Cmd, error)
	// Start starts cmd: cmd.Start by default, or the sandbox's Wrap of
	// it under isolation.
	Start func(cmd *exec.Cmd) func() error
	// Ready, when set, is polled (every 50 ms) after each start until it
	// returns nil; a start counts as ready once it does, and the first
	// start fails when it has not within ReadyTimeout.
	Ready        func(ctx context.Context) error
	ReadyTimeout time.Duration
	// Started, when set, is called after each successful start, before
	// Ready is polled: the hook that reads what a program reports on a
	// descriptor of its own (Xvfb's display number).
	Started func(ctx context.Context, cmd *exec.Cmd) error
	// Sandboxed says Start puts the program in a PID namespace of its
	// own (aiod's sandbox), where it gets no parent-death signal: Go's
	// check that the parent is still alive reads the parent's pid as 0
	// there and kills the child at once. The namespace, whose init has
	// the signal, dies with the daemon instead.
	Sandboxed bool
	// Grace is how long the program has after SIGTERM before its whole
	// process group is killed (default 5 s).
	Grace  time.Duration
	Logger *slog.Logger
}

// Backoff bounds of the restarts: the first comes after minBackoff, each
// quick death doubles the wait up to maxBackoff, and a run longer than
// steadyRun resets it.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 10 * time.Second
	steadyRun  = 30 * time.Second
)

// Supervisor runs one [Program]: it starts it, restarts it with backoff
// whenever it ends, and ends it, with every process of its process
// group, on Stop.
//
// Each start puts the program in a process group of its own (its pgid is
// its pid) with SIGKILL as its parent-death signal, so that Stop reaches
// the helpers it forks (Chromium's zygote and renderers) and a daemon
// that dies without stopping takes the program with it. One goroutine
// (run) owns the program's life; Stop cancels it and waits for it.
type Supervisor struct {
	p    Program
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}
	tail *child.Tail

	mu       sync.Mutex
	cmd      *exec.Cmd // the running instance, nil between two
	pid      int
	restarts int
	kick     chan struct{} // a Restart request
	onRe     func()        // called after each restart
}

// Start starts p and waits until it is ready (p.Ready, within
// p.ReadyTimeout). It returns an error, with the end of the program's
// output, when the first start fails, the program exits before it is
// ready, or it is not ready in time; nothing is left running then.
// Afterwards the program is supervised until [Supervisor.Stop].
func Start(ctx context.Context, p Program) (*Supervisor, error) {
	if p.Grace <= 0 {
		p.Grace = 5 * time.Second
	}
	if p.ReadyTimeout <= 0 {
		p.ReadyTimeout = 30 * time.Second
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	if p.Start == nil {
		p.Start = func(cmd *exec.Cmd) func() error { return cmd.Start }
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Supervisor{p: p, log: p.Logger.With("program", p.Name), stop: cancel, done: make(chan struct{}),
		tail: child.NewTail(16 << 10), kick: make(chan struct{}, 1)}
	exited, err := s.startOnce(rctx)
	if err == nil {
		err = s.awaitReady(ctx, exited, p.ReadyTimeout)
	}
	if err != nil {
		s.end(exited)
		cancel()
		return nil, err
	}
	go s.run(rctx, exited)
	return s, nil
}

// startOnce starts one instance; exited receives its Wait result.
func (s *Supervisor) startOnce(ctx context.Context) (<-chan error, error) {
	cmd, err := s.p.Command()
	if err != nil {
		return nil, err
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if !s.p.Sandboxed {
		dieWithParent(cmd.SysProcAttr)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = s.tail
	}
	if cmd.Stderr == nil {
		cmd.Stderr = s.tail
	}
	// Helpers of a program that died (Chromium's zygotes) may hold the
	// output pipe open: Wait must not wait for them, the group is killed
	// once it returns.
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = time.Second
	}
	// Registered with package child: the daemon is a subreaper whose
	// commands plane reaps orphaned zombies, never one an exec.Cmd owns.
	if err := child.Start(cmd, s.p.Start(cmd)); err != nil {
		return nil, fmt.Errorf("%s: starting %s: %w", s.p.Name, cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		child.Forget(cmd.Process.Pid)
		exited <- err
	}()
	s.mu.Lock()
	s.cmd, s.pid = cmd, cmd.Process.Pid
	s.mu.Unlock()
	if s.p.Started != nil {
		if err := s.p.Started(ctx, cmd); err != nil {
			s.end(exited)
			return nil, fmt.Errorf("%s: %w%s", s.p.Name, err, s.lastLines(3))
		}
	}
	return exited, nil
}

// awaitReady polls p.Ready until it answers, the program exits, or
// timeout passes.
func (s *Supervisor) awaitReady(ctx context.Context, exited <-chan error, timeout time.Duration) error {
	if s.p.Ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		last = s.p.Ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case err := <-exited:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			s.reaped()
			return fmt.Errorf("%s exited before it was ready (%v)%s", s.p.Name, child.ExitText(err), s.lastLines(3))
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %s: %w%s", s.p.Name, timeout, last, s.lastLines(3))
		case <-t.C:
		}
	}
}

// run supervises until ctx ends: each time the program exits it is
// started again after the backoff.
func (s *Supervisor) run(ctx context.Context, exited <-chan error) {
	defer close(s.done)
	backoff := minBackoff
	began := time.Now()
	for {
		select {
		case <-ctx.Done():
			s.end(exited)
			return
		case <-s.kick:
			s.log.Info("launch: restarting on request", "pid", s.PID())
			s.end(exited)
			backoff = 0
		case err := <-exited:
			pid := s.PID()
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			s.reaped()
			if time.Since(began) > steadyRun {
				backoff = minBackoff
			}
			s.log.Warn("launch: program exited; restarting", "pid", pid, "exit", child.ExitText(err), "in", backoff,
				"output", strings.Join(s.tail.LastLines(1), ""))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		var err error
		began = time.Now()
		if exited, err = s.startOnce(ctx); err != nil {
			s.log.Error("launch: restart failed", "err", err)
			exited = failed()
			continue
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		if err := s.awaitReady(ctx, exited, s.p.ReadyTimeout); err != nil {
			s.log.Warn("launch: restarted program is not ready", "err", err)
			if ctx.Err() == nil && s.running() {
				continue // keep it: it may yet answer
			}
			exited = failed()
			continue
		}
		s.log.Info("launch: program restarted", "pid", s.PID())
		s.mu.Lock()
		f := s.onRe
		s.mu.Unlock()
		if f != nil {
			f()
		}
	}
}

// failed is an exit channel that already says the instance is gone.
func failed() <-chan error {
	ch := make(chan error, 1)
	ch <- errors.New("not started")
	return ch
}

// running reports whether an instance is up.
func (s *Supervisor) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// end stops the current instance: SIGTERM to its process group, SIGKILL
// after the grace, and it is reaped (exited delivered) before end
// returns. Nil exited: nothing runs.
func (s *Supervisor) end(exited <-chan error) {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || exited == nil {
		return
	}
	s.killGroup(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(s.p.Grace):
		s.killGroup(syscall.SIGKILL)
		<-exited
	}
	s.reaped()
}

// reaped follows the reaping of the latest instance: whatever of its
// process group outlived the leader is killed, and the pid is forgotten
// so that no later signal (a failed restart, Stop) reaches another
// process that was given the same id.
func (s *Supervisor) reaped() {
	s.killGroup(syscall.SIGKILL)
	s.mu.Lock()
	s.pid = 0
	s.mu.Unlock()
}

// killGroup signals the process group of the latest instance.
func (s *Supervisor) killGroup(sig syscall.Signal) {
	if pid := s.PID(); pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// PID is the process id of the running instance (its process group id
// too); 0 before the first start and once an instance has been reaped
// until the next starts.
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Restarts is how many times the program has been started again.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Restart ends the running instance at once so that a new one starts
// (the programs on a display whose X server was restarted).
func (s *Supervisor) Restart() {
	if s == nil {
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// OnRestart sets f to be called after each restart of the program, once
// it is ready (the programs that depend on it start again).
func (s *Supervisor) OnRestart(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRe = f
}

// Stop ends the program and its process group and stops supervising.
// It returns once the program is reaped, or ctx's error when that takes
// longer than ctx allows (the program was SIGKILLed by then unless ctx
// was shorter than its grace).
func (s *Supervisor) Stop(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.stop()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.killGroup(syscall.SIGKILL)
		return fmt.Errorf("%s: %w", s.p.Name, ctx.Err())
	}
}

// lastLines is the program's last n non-empty output lines, as
// ": a | b", or "" when it wrote none.
func (s *Supervisor) lastLines(n int) string {
	lines := s.tail.LastLines(n)
	if len(lines) == 0 {
		return ""
	}
	return ": " + strings.Join(lines, " | ")
}
