package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestNoGhostMembers opens thousands of connections that connect, join and
// vanish at once (the TCP connection dropped right after the join is
// sent). Every one must leave: no member, no office, and every office can
// be joined again by a new Agent.
func TestNoGhostMembers(t *testing.T) {
	for _, mode := range []struct {
		name      string
		goroutine bool
	}{{"event-loop", false}, {"goroutine-per-conn", true}} {
		t.Run(mode.name, func(t *testing.T) {
			s, url := newTestServer(t, Config{GoroutinePerConn: mode.goroutine})
			const conns, workers, offices = 2000, 32, 20
			u := "ws" + strings.TrimPrefix(url, "http") + "/socket.io/?EIO=4&transport=websocket&" + smcp.QueryVersion + "=" + smcp.ProtocolVersion
			jobs := make(chan int)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
					for i := range jobs {
						ws, _, err := d.Dial(u, nil)
						if err != nil {
							t.Errorf("dial: %v", err)
							continue
						}
						_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
						_, _, _ = ws.ReadMessage() // the open packet
						role, name := "agent", "a"
						if i%2 == 1 {
							role, name = "computer", fmt.Sprintf("c%d", i%7)
						}
						join := fmt.Sprintf(`42/smcp,0["%s",{"role":"%s","name":"%s","office_id":"o%d"}]`, smcp.EventJoinOffice, role, name, i%offices)
						_ = ws.WriteMessage(websocket.TextMessage, []byte("40/smcp,"))
						_ = ws.WriteMessage(websocket.TextMessage, []byte(join))
						_ = ws.UnderlyingConn().Close() // vanish
					}
				}()
			}
			for i := 0; i < conns; i++ {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			eventually(t, "every connection to end", func() bool { return s.io.Conns() == 0 })
			eventually(t, "every member to leave", func() bool {
				s.mu.RLock()
				defer s.mu.RUnlock()
				return len(s.offices) == 0 && len(s.names) == 0
			})
			expect(t, url, `a2c_office_members{role="agent"}`, 0)
			expect(t, url, `a2c_office_members{role="computer"}`, 0)
			expect(t, url, "a2c_offices", 0)
			for i := 0; i < offices; i++ {
				a := connect(t, url, nil)
				if got := a.join(smcp.RoleAgent, "a", fmt.Sprintf("o%d", i)); got != "true,null" {
					t.Errorf("office o%d after the churn: join = %s", i, got)
				}
			}
		})
	}
}
