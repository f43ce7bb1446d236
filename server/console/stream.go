package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/a2c-smcp/a2c-go/server"
)

// Live stream limits.
const (
	// Heartbeat is the interval of the stream's comment lines, which keep
	// proxies from closing an idle stream and tell a page it is alive.
	Heartbeat = 15 * time.Second
	// MaxStreamsPerSession bounds the live streams of one session (of one
	// remote address when the console is open); the hub's own bound on
	// all streams, server.MaxCallSubscribers, holds too.
	MaxStreamsPerSession = 8
	// streamWrite bounds one write to a stream's client: a client that
	// reads nothing for this long is cut off.
	streamWrite = 10 * time.Second
)

// heartbeat is a var for tests.
var heartbeat = Heartbeat

// stream serves the live stream of calls as server-sent events: "call"
// with a Call at each start and end, "dropped" with {"dropped":N} after
// the page lost N events because it did not keep up. It ends when the
// client goes, a write stalls, the session ends (logout, expiry seen at
// the next ping, eviction) or the console closes.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	office := r.URL.Query().Get("office")
	if len(office) > server.MaxOfficeID {
		writeError(w, http.StatusBadRequest, "invalid office id")
		return
	}
	se := sessionOf(r)
	ended := sessionDone(r)
	key, msg := "addr "+loginKey(remoteHost(r)), "too many live streams open from this address"
	if se != nil {
		key, msg = "session "+se.id, "too many live streams open in this session"
	}
	if !c.holdStream(key) {
		writeError(w, http.StatusServiceUnavailable, msg)
		return
	}
	defer c.releaseStream(key)
	rc := http.NewResponseController(w)
	sub, err := c.srv.SubscribeCalls(office, server.DefaultCallBuffer)
	switch {
	case errors.Is(err, server.ErrTooManySubscribers):
		writeError(w, http.StatusServiceUnavailable, "too many live streams open")
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "the hub keeps no call log")
		return
	}
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWrite))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": a2c console call stream\n\n")) {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	gather := time.NewTimer(streamGather)
	gather.Stop()
	defer gather.Stop()
	var buf []byte
	var lost int64 // events this stream lost so far
	// Events gather for a short window, then go in one write and one
	// flush. A page reads at human speed; what costs the hub is a
	// wake-up and a write per event, which at thousands of calls a
	// second cost more than the relay itself. While the window is open
	// (gathering non-nil, events nil) this goroutine waits on its timer
	// and the relay's sends only fill the buffer: they wake nothing.
	events, gathering := sub.Events(), (<-chan time.Time)(nil)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-ended:
			return
		case <-tick.C:
			if !c.sessions.alive(se) { // expired since the last look
				return
			}
			if gathering != nil {
				continue // a write is due within the window anyway
			}
			buf = appendDropped(buf[:0], sub, &lost)
			buf = append(buf, ": ping\n\n"...)
			if !write(buf) {
				return
			}
		case call := <-events:
			buf = appendDropped(buf[:0], sub, &lost)
			buf = appendEvent(buf, "call", call)
			gather.Reset(streamGather)
			events, gathering = nil, gather.C
		case <-gathering:
			// Take what gathered (at most a buffer's worth).
		more:
			for range cap(sub.Events()) {
				select {
				case call := <-sub.Events():
					buf = appendEvent(buf, "call", call)
				default:
					break more
				}
			}
			if !write(buf) {
				return
			}
			events, gathering = sub.Events(), nil
		}
	}
}

// streamGather is how long a stream lets events gather before a write:
// at most this late on a page, one write per window under load. At 5,000
// calls a second (10,000 events) a window holds 100 events, at 50,000
// calls a second 1,000: within the stream's buffer
// (server.DefaultCallBuffer).
const streamGather = 10 * time.Millisecond

// appendDropped adds a "dropped" event with the stream's total of lost
// events when sub lost some since the last one.
func appendDropped(b []byte, sub *server.CallSubscription, lost *int64) []byte {
	if n := sub.TakeDropped(); n > 0 {
		*lost += n
		b = append(b, "event: dropped\ndata: {\"dropped\":"...)
		b = strconv.AppendInt(b, *lost, 10)
		b = append(b, "}\n\n"...)
	}
	return b
}

// appendEvent adds one server-sent event with v as its JSON data (one
// line: JSON holds no raw newline).
func appendEvent(b []byte, name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		return b
	}
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// holdStream counts one more live stream for key (a session or an
// address), or reports false past MaxStreamsPerSession.
func (c *Console) holdStream(key string) bool {
	c.streamsMu.Lock()
	defer c.streamsMu.Unlock()
	if c.streams[key] >= MaxStreamsPerSession {
		return false
	}
	c.streams[key]++
	return true
}

// releaseStream counts one live stream of key less.
func (c *Console) releaseStream(key string) {
	c.streamsMu.Lock()
	defer c.streamsMu.Unlock()
	if c.streams[key]--; c.streams[key] <= 0 {
		delete(c.streams, key)
	}
}
