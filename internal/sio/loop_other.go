//go:build !linux

package sio

import (
	"errors"
	"net/http"
)

// loopSet is the epoll event loop, which exists on Linux only; elsewhere
// every WebSocket has its reader goroutine.
type loopSet struct{}

func newLoopSet(Options) (*loopSet, error) {
	return nil, errors.New("sio: no event loop on this system")
}

func (*loopSet) stop() {}

func (*loopSet) accept(w http.ResponseWriter, r *http.Request, c *econn, bind func(wsPeer)) wsPeer {
	return acceptGorilla(c.srv, w, r, c, bind)
}

func (*loopSet) watch(int, func() bool) (*Watch, error) { return nil, ErrNoLoop }
