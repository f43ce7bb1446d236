package computer

import (
	"encoding/json"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// SetManagement records the management plane's state of this Computer
// (where each server comes from, each plugin's state) and sends it to
// the Server with [smcp.EventManagementState] if joined; every later join
// sends it again, so the hub of a new session has it too. The state's
// Computer is set to this Computer's name. The management plane calls it
// (see package market's Projector); a Computer that is never given a
// state never sends the event.
//
// The event asks for no ack, so a Server that does not know it simply
// drops it; it carries no server parameters.
func (c *Computer) SetManagement(st smcp.ManagementState) {
	st.Computer = c.opts.Name
	c.mgmt.Lock()
	defer c.mgmt.Unlock()
	c.management = &st
	c.sendManagementLocked()
}

// sendManagement sends the recorded state, if any, on the current
// connection (after a join).
func (c *Computer) sendManagement() {
	c.mgmt.Lock()
	defer c.mgmt.Unlock()
	c.sendManagementLocked()
}

// sendManagementLocked sends the recorded state if there is one and the
// Computer is joined. The caller holds c.mgmt, so a join's send and a
// change's send reach the Server in the order the states were recorded.
func (c *Computer) sendManagementLocked() {
	if c.management == nil {
		return
	}
	c.mu.RLock()
	s := c.sock
	c.mu.RUnlock()
	if s == nil {
		return
	}
	b, err := json.Marshal(c.management)
	if err != nil {
		c.log.Warn("management state not sent", "err", err)
		return
	}
	_ = s.Emit(smcp.EventManagementState, sio.Message{Args: []json.RawMessage{b}})
}
