package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Load is the calls of a set of Agents in progress. Latencies are kept
// only while Measuring is set; Stop ends the calls.
type Load struct {
	// Measuring records the latency of each call answered while set.
	Measuring atomic.Bool

	stop    atomic.Bool
	errs    atomic.Int64
	wg      sync.WaitGroup
	samples [][]time.Duration
}

// Start makes each Agent call the Computer "c" of its office with
// client:tool_call (tool b__echo) back to back. An answer that is not a
// successful CallToolResult counts as an error.
func Start(agents []*sio.Socket) *Load {
	l := &Load{samples: make([][]time.Duration, len(agents))}
	for i, a := range agents {
		l.wg.Add(1)
		n := 0
		var fire func()
		fire = func() {
			if l.stop.Load() {
				l.wg.Done()
				return
			}
			n++
			// The payload of smcp.ToolCallReq, built without reflection so
			// that the load client spends as little as it can.
			b := fmt.Appendf(nil, `{"agent":"a","req_id":"%d-%d","computer":"c","tool_name":"b__echo","params":{"text":"hello"},"timeout":30}`, i, n)
			t0 := time.Now()
			a.RequestDirect(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{b}}, 40*time.Second, func(m sio.Message, err error) {
				if err == nil && (len(m.Args) == 0 || !strings.Contains(string(m.Args[0]), `"isError":false`)) {
					err = fmt.Errorf("bad answer %q", m.Args)
				}
				if err != nil {
					l.errs.Add(1)
				} else if l.Measuring.Load() {
					l.samples[i] = append(l.samples[i], time.Since(t0))
				}
				fire()
			})
		}
		fire()
	}
	return l
}

// Stop ends the calls and waits, at most wait, for the last answers. It
// returns every latency measured (unsorted), the errors, and whether all
// the Agents stopped in time.
func (l *Load) Stop(wait time.Duration) (lat []time.Duration, errs int64, ok bool) {
	l.stop.Store(true)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		return nil, l.errs.Load(), false
	}
	for _, s := range l.samples {
		lat = append(lat, s...)
	}
	return lat, l.errs.Load(), true
}

// Computer is the benchmarks' Computer: it answers every request at once
// with a successful tool result, so the relay is all that is measured.
type Computer struct{}

var toolResult = []json.RawMessage{json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"isError":false}`)}

// Event answers e.
func (Computer) Event(_ *sio.Socket, e *sio.Event) {
	if e.WantsAck() {
		_ = e.Ack(sio.Message{Args: toolResult})
	}
}

// Disconnect does nothing.
func (Computer) Disconnect(*sio.Socket, string) {}

// Dial connects to an a2c server's /smcp namespace over WebSocket (the
// default protocol version) with h handling what the server sends (nil:
// nothing expected).
func Dial(ctx context.Context, srvURL string, h sio.ClientHandler) (*sio.Socket, error) {
	return sio.Dial(ctx, srvURL, sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Transport: sio.WebSocketOnly,
		Handler:   h,
	})
}

// Join takes a seat in an office and waits (at most 30 s) for the answer.
func Join(s *sio.Socket, role smcp.Role, name, office string) error {
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office})
	done := make(chan error, 1)
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{b}}, 30*time.Second, func(m sio.Message, err error) {
		if err == nil && (len(m.Args) == 0 || string(m.Args[0]) != "true") {
			err = fmt.Errorf("join refused: %q", m.Args)
		}
		done <- err
	})
	return <-done
}
