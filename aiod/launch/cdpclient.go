package launch

// This file is one client of the CDP multiplexer (see cdpmux.go for the
// invariants): its queue and writer, and the check and rewrite of every
// command it sends.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// muxClient is one client of the multiplexer.
type muxClient struct {
	g   *generation
	def string // its default session

	wsMu sync.Mutex
	ws   *websocket.Conn // nil until the upgrade; see connected

	out        chan [][]byte // messages (in parts) for the writer
	queued     atomic.Int64  // bytes in out
	inFlight   atomic.Int64
	gone       chan struct{} // closed by kill or stop
	once       sync.Once
	writerDone chan struct{}
}

func newMuxClient(g *generation, def string) *muxClient {
	return &muxClient{g: g, def: def, out: make(chan [][]byte, clientQueue), gone: make(chan struct{}),
		writerDone: make(chan struct{})}
}

// connected gives the client its WebSocket once upgraded; false when the
// client was killed before.
func (c *muxClient) connected(ws *websocket.Conn) bool {
	ws.SetReadLimit(maxClientMessage)
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	select {
	case <-c.gone:
		return false
	default:
	}
	c.ws = ws
	return true
}

// kill disconnects the client (from any goroutine): its reader and
// writer end.
func (c *muxClient) kill() {
	c.once.Do(func() {
		c.wsMu.Lock()
		defer c.wsMu.Unlock()
		close(c.gone)
		if c.ws != nil {
			_ = c.ws.UnderlyingConn().Close()
		}
	})
}

// stop ends the writer once the reader has ended.
func (c *muxClient) stop() {
	c.once.Do(func() {
		c.wsMu.Lock()
		defer c.wsMu.Unlock()
		close(c.gone)
	})
}

// send queues parts as one message; a client whose queue is full is
// disconnected (the reader never waits for a client).
func (c *muxClient) send(parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if c.queued.Add(int64(n)) > clientQueueBytes {
		c.g.mux.log.Debug("cdp mux: a client fell behind; disconnected", "queued", c.queued.Load())
		c.kill()
		return
	}
	select {
	case c.out <- parts:
	case <-c.gone:
	default:
		c.g.mux.log.Debug("cdp mux: a client fell behind; disconnected", "messages", len(c.out))
		c.kill()
	}
}

// answer gives a client the answer rest (the message after its id) to
// its command clientID, the sessionId taken away when it is the default
// session.
func (c *muxClient) answer(clientID, rest []byte, sess string) {
	c.inFlight.Add(-1)
	c.send(append([]byte(`{"id":`), clientID...), c.strip(rest, sess))
}

// event gives a client an event of session sess.
func (c *muxClient) event(msg []byte, sess string) {
	c.send(c.strip(msg, sess))
}

// strip is msg without its trailing `,"sessionId":"<def>"` when sess is
// the client's default session (see sessionTail for the shape). A
// message whose session is not at its end keeps it.
func (c *muxClient) strip(msg []byte, sess string) []byte {
	if sess != c.def {
		return msg
	}
	tail := `,"sessionId":"` + sess + `"}`
	if bytes.HasSuffix(msg, []byte(tail)) {
		out := msg[:len(msg)-len(tail)+1]
		out[len(out)-1] = '}'
		return out
	}
	return msg
}

// writeLoop writes the queued messages to the client until it is gone.
func (c *muxClient) writeLoop() {
	defer close(c.writerDone)
	for {
		select {
		case <-c.gone:
			return
		case parts := <-c.out:
			n := 0
			for _, p := range parts {
				n += len(p)
			}
			c.queued.Add(-int64(n))
			_ = c.ws.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
			w, err := c.ws.NextWriter(websocket.TextMessage)
			if err == nil {
				for _, p := range parts {
					if _, err = w.Write(p); err != nil {
						break
					}
				}
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				c.kill()
				return
			}
		}
	}
}

// readLoop reads the client's commands and forwards them until the
// client or the generation ends.
func (c *muxClient) readLoop() {
	for {
		_, msg, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if err := c.forward(msg); err != nil {
			return
		}
	}
}

// clientError is a command refused by the mux itself, answered as
// Chromium answers a bad command.
type clientError struct {
	code int
	msg  string
}

// forward checks one command of the client and sends it to Chromium
// with the mux's id and the client's session. A command the mux refuses
// is answered with a CDP error; the error returned ends the client (the
// pipe is gone).
func (c *muxClient) forward(msg []byte) error {
	out, pc, cerr := c.rewrite(msg)
	if cerr != nil {
		if pc == nil {
			c.send([]byte(fmt.Sprintf(`{"error":{"code":%d,"message":%q}}`, cerr.code, cerr.msg)))
			return nil
		}
		e := fmt.Sprintf(`,"error":{"code":%d,"message":%q}}`, cerr.code, cerr.msg)
		c.send(append([]byte(`{"id":`), pc.clientID...), []byte(e))
		return nil
	}
	if c.inFlight.Add(1) > maxInFlight {
		c.inFlight.Add(-1)
		e := fmt.Sprintf(`,"error":{"code":-32000,"message":"more than %d commands in flight"}}`, maxInFlight)
		c.send(append([]byte(`{"id":`), pc.clientID...), []byte(e))
		return nil
	}
	id := c.g.nextID.Add(1)
	c.g.mu.Lock()
	if c.g.err != nil {
		c.g.mu.Unlock()
		return errPipeGone
	}
	c.g.pending[id] = pc
	c.g.mu.Unlock()
	// The mux's id goes first, as the rewrite left room for it.
	full := append([]byte(`{"id":`+strconv.FormatInt(id, 10)), out...)
	return c.g.write(full)
}

// rewrite checks a client's command and builds what is sent: the members
// after the id (`,"sessionId":"S",...}`), and the pending call. pc is
// nil when the command has no usable id (its error has no id then).
//
// Rules: a JSON object with an integer id and a string method; no key
// written with an escape and no second id or sessionId (Chromium might
// read `"sess\u0069onId"` as the session the mux did not check); a
// sessionId, when given, names a session the client owns, else the
// default session is added.
func (c *muxClient) rewrite(msg []byte) ([]byte, *pendingCall, *clientError) {
	if !json.Valid(msg) {
		return nil, nil, &clientError{-32700, "Message must be a valid JSON"}
	}
	ms, ok := members(msg)
	if !ok {
		return nil, nil, &clientError{-32600, "Message must be an object"}
	}
	var id, sess, method []byte
	var rest []member
	for _, m := range ms {
		if bytes.IndexByte(m.key, '\\') >= 0 {
			return nil, nil, &clientError{-32600, "Message keys must not be escaped"}
		}
		v := msg[m.valStart:m.end]
		switch string(m.key) {
		case "id":
			if id != nil {
				return nil, nil, &clientError{-32600, "Message must have one 'id' property"}
			}
			id = v
		case "sessionId":
			if sess != nil {
				return nil, nil, &clientError{-32600, "Message must have one 'sessionId' property"}
			}
			sess = v
		default:
			if string(m.key) == "method" {
				method = v
			}
			rest = append(rest, m)
		}
	}
	if id == nil {
		return nil, nil, &clientError{-32600, "Message must have integer 'id' property"}
	}
	if _, err := strconv.ParseInt(string(id), 10, 64); err != nil {
		return nil, nil, &clientError{-32600, "Message must have integer 'id' property"}
	}
	pc := &pendingCall{c: c, clientID: append([]byte(nil), id...)}
	if len(method) < 2 || method[0] != '"' {
		return nil, pc, &clientError{-32600, "Message must have string 'method' property"}
	}
	session := c.def
	if sess != nil {
		if len(sess) < 2 || sess[0] != '"' || sess[len(sess)-1] != '"' || !plainID(sess[1:len(sess)-1]) {
			return nil, pc, &clientError{-32001, "Session with given id not found."}
		}
		session = string(sess[1 : len(sess)-1])
		c.g.mu.Lock()
		owner := c.g.sessions[session]
		c.g.mu.Unlock()
		if owner != c {
			return nil, pc, &clientError{-32001, "Session with given id not found."}
		}
	}
	if string(method) == `"Target.activateTarget"` {
		pc.activates = activateTarget(msg, rest)
	}
	var b bytes.Buffer
	b.Grow(len(msg) + len(session) + 32)
	b.WriteString(`,"sessionId":"` + session + `"`)
	for _, m := range rest {
		b.WriteByte(',')
		b.Write(msg[m.start:m.end])
	}
	b.WriteByte('}')
	return b.Bytes(), pc, nil
}

// activateTarget is the targetId of a Target.activateTarget command.
func activateTarget(msg []byte, ms []member) string {
	for _, m := range ms {
		if string(m.key) == "params" {
			var p struct {
				TargetID string `json:"targetId"`
			}
			if json.Unmarshal(msg[m.valStart:m.end], &p) == nil {
				return p.TargetID
			}
		}
	}
	return ""
}
