package server

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// The console's view of the hub's tool calls (see observe.go for the
// hooks): the running calls, the last ones ended, and a live stream.
//
// The relay pays for it at most one mutex section per hook and, per
// subscriber, a non-blocking channel send: a subscriber that does not
// keep up loses events (counted for it and in
// a2c_console_events_dropped_total), it never slows the relay and nothing
// queues without bound.

// Call log bounds.
const (
	// MaxEndedCalls is how many ended calls the log keeps, the most
	// recent.
	MaxEndedCalls = 1000
	// MaxCallSubscribers bounds the live streams open at once.
	MaxCallSubscribers = 64
	// DefaultCallBuffer is a subscriber's buffer, in events, when it asks
	// for none: the console's streams take their events every 10 ms, and
	// 1,024 events hold such a window at 50,000 calls a second.
	DefaultCallBuffer = 1024
)

// Call states and the console's Agent name.
const (
	CallRunning = "running"
	CallDone    = "done"
	// ConsoleAgent is the Agent name of the console's own requests (see
	// [Server.LocalRequest]).
	ConsoleAgent = "a2c-console"
)

// ErrNoCallLog is returned by the call log's methods when the server was
// made without Config.Calls.
var ErrNoCallLog = errors.New("server: no call log (Config.Calls is off)")

// ErrTooManySubscribers is returned by [Server.SubscribeCalls] past
// [MaxCallSubscribers] open streams.
var ErrTooManySubscribers = errors.New("server: too many call streams open")

// Call is one tool call as the console shows it (see server/console's
// documentation for the JSON shape).
type Call struct {
	ReqID    string    `json:"req_id"`
	Agent    string    `json:"agent"`
	Computer string    `json:"computer"`
	Office   string    `json:"office"`
	Tool     string    `json:"tool"`
	Start    time.Time `json:"start"`
	// DurationMS is the call's duration when done, the time so far while
	// it runs (at the moment the Call was read).
	DurationMS float64 `json:"duration_ms"`
	// State is CallRunning or CallDone.
	State string `json:"state"`
	// Outcome is one of the tracing.Outcome* values once done, else "".
	Outcome string `json:"outcome"`
	// ErrorCode is the A2C error code of a failed call, 0 when none.
	ErrorCode int `json:"error_code"`
	// Console marks the console's own calls.
	Console bool   `json:"console"`
	TraceID string `json:"trace_id"`
	// Node is the hub node that relayed the call (empty alone).
	Node string `json:"node"`
}

// callLog is the recent and running calls and the stream's subscribers.
type callLog struct {
	mu      sync.Mutex
	running map[*callObs]struct{}
	ended   [MaxEndedCalls]Call // ring; next is the oldest slot once full
	n, next int
	evicted int64 // ended calls pushed out of the ring

	subMu sync.RWMutex
	subs  map[*CallSubscription]struct{}
}

func newCallLog() *callLog {
	return &callLog{running: make(map[*callObs]struct{}), subs: make(map[*CallSubscription]struct{})}
}

// callsStart records a call that starts.
func (s *Server) callsStart(o *callObs) {
	l := s.calls
	if l == nil {
		return
	}
	o.traceID = tracing.TraceID(o.req.Agent, o.req.ReqID).String()
	l.mu.Lock()
	l.running[o] = struct{}{}
	l.mu.Unlock()
	l.publish(o.call(), s.metrics)
}

// call is o's entry in the call log while it runs.
func (o *callObs) call() Call {
	return Call{
		ReqID:    o.req.ReqID,
		Agent:    o.req.Agent,
		Computer: o.req.Computer,
		Office:   o.office,
		Tool:     o.req.ToolName,
		Start:    o.start,
		State:    CallRunning,
		Console:  o.console,
		TraceID:  o.traceID,
		Node:     o.s.NodeID(),
	}
}

// callsEnd records a call's end and tells the stream.
func (s *Server) callsEnd(o *callObs, e callEnd) {
	l := s.calls
	if l == nil {
		return
	}
	c := o.call()
	c.State = CallDone
	c.DurationMS = msSince(c.Start, time.Now())
	c.Outcome = e.Outcome
	c.ErrorCode = e.Code
	l.mu.Lock()
	delete(l.running, o)
	l.ended[l.next] = c
	l.next = (l.next + 1) % MaxEndedCalls
	if l.n < MaxEndedCalls {
		l.n++
	} else {
		l.evicted++
	}
	l.mu.Unlock()
	l.publish(c, s.metrics)
}

func msSince(start, now time.Time) float64 {
	return float64(now.Sub(start)) / float64(time.Millisecond)
}

// publish hands c to every subscriber that wants its office, never
// waiting: a full buffer loses the event, counted.
func (l *callLog) publish(c Call, m *metrics) {
	l.subMu.RLock()
	for sub := range l.subs {
		if sub.office != "" && sub.office != c.Office {
			continue
		}
		select {
		case sub.ch <- c:
		default:
			sub.dropped.Add(1)
			m.consoleDropped.Inc()
		}
	}
	l.subMu.RUnlock()
}

// Calls returns the running calls and the last [MaxEndedCalls] ended
// ones, newest first, of office (all offices when empty), and how many
// ended calls have fallen out of the log since the server started.
func (s *Server) Calls(office string) (calls []Call, evicted int64, err error) {
	l := s.calls
	if l == nil {
		return nil, 0, ErrNoCallLog
	}
	now := time.Now()
	// Copies under the lock, which every relayed call takes; the sort
	// waits until it is released.
	l.mu.Lock()
	running := make([]Call, 0, len(l.running))
	for o := range l.running {
		if office == "" || o.office == office {
			c := o.call()
			c.DurationMS = msSince(c.Start, now)
			running = append(running, c)
		}
	}
	ended := make([]Call, 0, l.n)
	for i := 1; i <= l.n; i++ {
		c := &l.ended[(l.next-i+MaxEndedCalls)%MaxEndedCalls]
		if office == "" || c.Office == office {
			ended = append(ended, *c)
		}
	}
	evicted = l.evicted
	l.mu.Unlock()
	slices.SortStableFunc(running, func(a, b Call) int { return b.Start.Compare(a.Start) }) // the latest first
	return append(running, ended...), evicted, nil
}

// Call returns the call of agent with reqID from the log: the running
// one, else the most recent ended one.
func (s *Server) Call(agent, reqID string) (Call, bool) {
	l := s.calls
	if l == nil {
		return Call{}, false
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for o := range l.running {
		if o.req.Agent == agent && o.req.ReqID == reqID {
			c := o.call()
			c.DurationMS = msSince(c.Start, now)
			return c, true
		}
	}
	for i := 1; i <= l.n; i++ {
		c := &l.ended[(l.next-i+MaxEndedCalls)%MaxEndedCalls]
		if c.Agent == agent && c.ReqID == reqID {
			return *c, true
		}
	}
	return Call{}, false
}

// CallSubscription is one live stream of the call log: a Call at each
// start and end of a call of its office, in order, as long as its reader
// keeps up; what does not fit in its buffer is dropped and counted.
type CallSubscription struct {
	l       *callLog
	office  string
	ch      chan Call
	dropped atomic.Int64
	once    sync.Once
}

// SubscribeCalls opens a live stream of the calls of office (every
// office when empty) with a buffer of buf events (<= 0:
// [DefaultCallBuffer]). The caller must Close it.
func (s *Server) SubscribeCalls(office string, buf int) (*CallSubscription, error) {
	l := s.calls
	if l == nil {
		return nil, ErrNoCallLog
	}
	if buf <= 0 {
		buf = DefaultCallBuffer
	}
	sub := &CallSubscription{l: l, office: office, ch: make(chan Call, buf)}
	l.subMu.Lock()
	defer l.subMu.Unlock()
	if len(l.subs) >= MaxCallSubscribers {
		return nil, ErrTooManySubscribers
	}
	l.subs[sub] = struct{}{}
	return sub, nil
}

// Events is the stream's channel. It is never closed: stop reading after
// Close.
func (sub *CallSubscription) Events() <-chan Call { return sub.ch }

// TakeDropped returns how many events were dropped for this stream since
// the last call, and resets the count.
func (sub *CallSubscription) TakeDropped() int64 { return sub.dropped.Swap(0) }

// Close ends the stream: no more events are sent to it.
func (sub *CallSubscription) Close() {
	sub.once.Do(func() {
		sub.l.subMu.Lock()
		delete(sub.l.subs, sub)
		sub.l.subMu.Unlock()
	})
}
