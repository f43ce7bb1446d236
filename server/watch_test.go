package server

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestWatchOffice: a watcher hears every notify:* event of its office
// (and none of another's) until it stops; Cancel reaches the Computer
// as notify:tool_call_cancel naming the Caller and the req_id.
func TestWatchOffice(t *testing.T) {
	s, url := newTestServer(t, Config{})
	var mu sync.Mutex
	var heard []string
	stop := s.WatchOffice("o", func(event string) {
		mu.Lock()
		heard = append(heard, event)
		mu.Unlock()
	})
	// A seat is reported when it is taken and again with its broadcast:
	// repeats in a row count once.
	seen := func(want ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(slices.Compact(slices.Clone(heard)), want)
		}
	}
	c := connect(t, url, echo)
	c.join(smcp.RoleComputer, "c", "o")
	other := connect(t, url, echo)
	other.join(smcp.RoleComputer, "c2", "elsewhere")
	c.call(smcp.EventUpdateToolList, smcp.ComputerRef{Computer: "c"})
	eventually(t, "enter and update", seen(smcp.NotifyEnterOffice, smcp.NotifyUpdateToolList))

	s.Cancel(context.Background(), "o", Caller{Agent: "gw"}, "c", "req-9")
	eventually(t, "the cancel at the Computer", func() bool {
		got := c.got(smcp.NotifyCancelToolCall)
		return len(got) == 1 && got[0] == `{"agent":"gw","req_id":"req-9"}`
	})

	stop()
	// The server reports an update before it acks it: once the ack is
	// in, a watcher still registered would have heard it.
	c.call(smcp.EventUpdateToolList, smcp.ComputerRef{Computer: "c"})
	if !seen(smcp.NotifyEnterOffice, smcp.NotifyUpdateToolList)() {
		t.Errorf("heard after stop: %v", heard)
	}
}
