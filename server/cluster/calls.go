package cluster

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// The ends of a cross-node call other than an answer.
var (
	// ErrGone: the target left its office (or its node died and was
	// swept, or its node no longer holds it) before answering. The server
	// answers "Computer disconnected before answering".
	ErrGone = errors.New("cluster: target gone")
	// ErrTimeout: no answer within the call's deadline. The server
	// answers its usual timeout (a2c_timeout for a tool call, else 408).
	ErrTimeout = errors.New("cluster: no answer in time")
)

// Calls tracks the requests this node has sent to members on other nodes
// and not seen ended. Each call ends exactly once, by whichever comes
// first: its answer frame, a [KindGone] frame, the departure of its
// target ([Calls.Gone]), its deadline, or [Calls.Close]. The zero value
// is ready to use.
type Calls struct {
	mu     sync.Mutex
	next   uint64
	calls  map[uint64]*call
	bySID  map[string]map[uint64]*call
	closed bool
}

type call struct {
	id    uint64
	node  string // the node that holds the target: only it may answer
	sid   string
	timer *time.Timer
	done  func(payload []byte, err error)
}

// Start registers a call to the member sid held by node that ends
// within timeout and returns its id, to put in the request frame. done
// runs once, on its own goroutine or the caller of Answer/Gone/Close,
// never under a lock of Calls.
//
// Ids start at a random value in each process: a process that takes over
// the node id of one that ended (a restart with the same --node-id) must
// not take a late answer to the former's call for one of its own.
func (c *Calls) Start(node, sid string, timeout time.Duration, done func(payload []byte, err error)) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = make(map[uint64]*call)
		c.bySID = make(map[string]map[uint64]*call)
		c.next = rand.Uint64() >> 1
	}
	c.next++
	k := &call{id: c.next, node: node, sid: sid, done: done}
	if c.closed {
		go done(nil, ErrGone)
		return k.id
	}
	c.calls[k.id] = k
	if c.bySID[sid] == nil {
		c.bySID[sid] = make(map[uint64]*call)
	}
	c.bySID[sid][k.id] = k
	k.timer = time.AfterFunc(timeout, func() { c.end(k.id, nil, ErrTimeout) })
	return k.id
}

// Answer ends the call a [KindAnswer] or [KindGone] frame is about: the
// frame must come from the node the call went to and name its target
// (Frame.To). It reports false for a call already ended (a late answer,
// dropped), a frame from elsewhere, or a frame of another kind.
func (c *Calls) Answer(f Frame) bool {
	if f.Kind != KindAnswer && f.Kind != KindGone {
		return false
	}
	c.mu.Lock()
	k := c.calls[f.Call]
	match := k != nil && k.node == f.From && k.sid == f.To
	c.mu.Unlock()
	if !match {
		return false
	}
	if f.Kind == KindGone {
		return c.end(f.Call, nil, ErrGone)
	}
	return c.end(f.Call, f.Payload, nil)
}

// Abort ends a call whose request could not be published.
func (c *Calls) Abort(id uint64, err error) { c.end(id, nil, err) }

// Gone ends every call waiting on the member sid with ErrGone: call it on
// the member's departure event.
func (c *Calls) Gone(sid string) {
	c.mu.Lock()
	var ids []uint64
	for id := range c.bySID[sid] {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.end(id, nil, ErrGone)
	}
}

// Len is the number of calls waiting.
func (c *Calls) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// Close ends every waiting call with ErrGone and any later Start at once.
func (c *Calls) Close() {
	c.mu.Lock()
	c.closed = true
	var ids []uint64
	for id := range c.calls {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.end(id, nil, ErrGone)
	}
}

func (c *Calls) end(id uint64, payload []byte, err error) bool {
	c.mu.Lock()
	k := c.calls[id]
	if k == nil {
		c.mu.Unlock()
		return false
	}
	delete(c.calls, id)
	if m := c.bySID[k.sid]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(c.bySID, k.sid)
		}
	}
	c.mu.Unlock()
	k.timer.Stop()
	k.done(payload, err)
	return true
}
