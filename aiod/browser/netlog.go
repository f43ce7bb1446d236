package browser

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// netCap is how many requests the ring keeps.
const netCap = 300

// Request is one entry of GET network/requests: a request a tab sent
// while capture was on, updated with its response or failure.
type Request struct {
	ID           string  `json:"id"`
	TabID        string  `json:"tab_id"`
	URL          string  `json:"url"`
	Method       string  `json:"method"`
	ResourceType string  `json:"resource_type"`
	Status       *int64  `json:"status"`
	MimeType     *string `json:"mime_type"`
	Failed       bool    `json:"failed"`
	ErrorText    *string `json:"error_text"`
	// Timestamp is when the request was sent, in seconds since the
	// epoch (CDP's wallTime).
	Timestamp float64 `json:"timestamp"`
	// key is the CDP request id the entry was recorded under (a
	// redirect's hops share one; the newest hop holds it).
	key string
}

// netLog is the ring of captured requests. Capture starts at the first
// read (GET network/requests): from then on every session the plane
// attaches has Network enabled and its requests recorded.
type netLog struct {
	on   atomic.Bool
	mu   sync.Mutex
	ring []*Request // oldest first, at most max
	max  int
	// byID maps a CDP request id to its newest entry.
	byID map[string]*Request
}

func newNetLog(max int) *netLog {
	return &netLog{max: max, byID: map[string]*Request{}}
}

// start turns capture on; it reports whether it was off.
func (n *netLog) start() bool { return n.on.CompareAndSwap(false, true) }

// attach enables Network on session when capture is on.
func (n *netLog) attach(ctx context.Context, c *conn, session string) error {
	if !n.on.Load() {
		return nil
	}
	return c.enable(ctx, session, "Network.enable", map[string]any{})
}

// list is the newest-first copy of at most limit entries (limit < 0:
// all); reset empties the ring after reading.
func (n *netLog) list(limit int, reset bool) []Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := len(n.ring)
	if limit >= 0 && limit < k {
		k = limit
	}
	out := make([]Request, 0, k)
	for i := len(n.ring) - 1; i >= 0 && len(out) < k; i-- {
		out = append(out, *n.ring[i])
	}
	if reset {
		n.ring = n.ring[:0]
		clear(n.byID)
	}
	return out
}

// add appends r under its key, dropping the oldest past max (and its
// key only while the key still names it, not a newer hop).
func (n *netLog) add(r *Request) {
	if len(n.ring) == n.max {
		old := n.ring[0]
		if n.byID[old.key] == old {
			delete(n.byID, old.key)
		}
		copy(n.ring, n.ring[1:])
		n.ring[n.max-1] = nil
		n.ring = n.ring[:n.max-1]
	}
	n.ring = append(n.ring, r)
	n.byID[r.key] = r
}

// cdpResponse is the part of CDP's Network.Response the ring keeps.
type cdpResponse struct {
	Status   int64  `json:"status"`
	MimeType string `json:"mimeType"`
}

func (r *Request) respond(res *cdpResponse) {
	st, mt := res.Status, res.MimeType
	r.Status, r.MimeType = &st, &mt
}

// onEvent records the Network events of attached sessions. It runs on
// the connection's reader, so it only decodes and updates.
func (n *netLog) onEvent(c *conn, ev *event) {
	if !n.on.Load() {
		return
	}
	switch ev.Method {
	case "Network.requestWillBeSent":
		var p struct {
			RequestID string `json:"requestId"`
			Request   struct {
				URL    string `json:"url"`
				Method string `json:"method"`
			} `json:"request"`
			Type             string       `json:"type"`
			WallTime         float64      `json:"wallTime"`
			FrameID          string       `json:"frameId"`
			RedirectResponse *cdpResponse `json:"redirectResponse"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		tab := c.tabOf(ev.SessionID)
		n.mu.Lock()
		defer n.mu.Unlock()
		id := p.RequestID
		if old, ok := n.byID[id]; ok {
			// A redirect reuses the id: the hop before it ends with the
			// redirect's response, and the id names the new hop.
			if p.RedirectResponse != nil {
				old.respond(p.RedirectResponse)
			}
			id += "#" + p.Request.URL
		}
		n.add(&Request{ID: id, key: p.RequestID, TabID: tab, URL: p.Request.URL, Method: p.Request.Method, ResourceType: p.Type, Timestamp: p.WallTime})
	case "Network.responseReceived":
		var p struct {
			RequestID string      `json:"requestId"`
			Response  cdpResponse `json:"response"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if r, ok := n.byID[p.RequestID]; ok {
			r.respond(&p.Response)
		}
	case "Network.loadingFailed":
		var p struct {
			RequestID string `json:"requestId"`
			ErrorText string `json:"errorText"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if r, ok := n.byID[p.RequestID]; ok {
			r.Failed, r.ErrorText = true, &p.ErrorText
		}
	}
}

// tabOf is the tab a session is attached to.
func (c *conn) tabOf(session string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, s := range c.sessions {
		if s == session {
			return t
		}
	}
	return ""
}
