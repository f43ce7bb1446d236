package sio

import "errors"

// ErrNoLoop is returned by [Server.Watch] where the server has no event
// loop: off Linux, or with [Options.GoroutinePerConn].
var ErrNoLoop = errors.New("sio: no event loop")

// Watch is a descriptor read on one of the server's event loops, from
// [Server.Watch].
type Watch struct {
	stop func()
	done chan struct{}
}

// Stop ends the watch. When it returns, the ready function is not running
// and will not run again, so the caller may close the descriptor. It is
// safe to call more than once, from any goroutine but the ready function.
func (w *Watch) Stop() { w.stop() }

// Done is closed when the watch has ended: its ready function returned
// false, Stop was called, or the server closed.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Watch has one of the server's event loops call ready each time the
// non-blocking descriptor fd is readable, until ready returns false, Stop
// is called or the server closes. It lets another connection of the
// process (the hub's Redis subscription) be read on the same goroutine as
// the WebSockets its messages go to, with no goroutine to wake.
//
// The watch is level-triggered: ready should read once (the loop serves
// its other descriptors before calling it again while bytes remain), must
// not block, and must not call Stop (it returns false instead). The
// descriptor stays the caller's: it must not be closed until the watch
// has ended and Stop has returned.
func (s *Server) Watch(fd int, ready func() bool) (*Watch, error) {
	s.mu.Lock()
	perConn := s.opts.GoroutinePerConn
	s.mu.Unlock()
	if perConn {
		return nil, ErrNoLoop
	}
	ls, err := s.loopSet()
	if err != nil {
		return nil, ErrNoLoop
	}
	return ls.watch(fd, ready)
}
