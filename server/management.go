package server

import (
	"slices"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// A Computer that runs the management plane sends its servers' origins
// and its plugins' states with a2c:management_state
// ([smcp.EventManagementState]), an extension of this implementation that
// is not part of the protocol. The server keeps the last one of each
// joined Computer on its member, for the console ([Server.Management]),
// and does nothing else with it: no notification, no relay, nothing an
// Agent can see or ask for. The client:* answers and the notify:* events
// keep their exact shapes.
//
// The state stays with the connection: a Computer sends it again after
// each join of a new session, and each time it changes. In a cluster each
// node knows the states of the Computers it holds only.

// Management bounds: a state holds at most this many servers and this
// many plugins (the rest are dropped). Its size is bounded already by
// Config.MaxRequest.
const (
	maxManagedServers = 512
	maxManagedPlugins = 512
)

// managementState keeps a joined Computer's a2c:management_state. It
// answers an ack with nothing and never an error: a state from an Agent,
// from a member in no office, or one that does not decode is dropped.
// The state is filed under the sender's own name, whatever its computer
// field says.
func (s *Server) managementState(m *member, e *sio.Event) {
	defer ackEmpty(e)
	var st smcp.ManagementState
	if err := smcp.Decode(payload(e), &st); err != nil {
		s.log.Debug("management state dropped", "sid", m.sid(), "err", err)
		return
	}
	if len(st.Servers) > maxManagedServers {
		st.Servers = st.Servers[:maxManagedServers:maxManagedServers]
	}
	if len(st.Plugins) > maxManagedPlugins {
		st.Plugins = st.Plugins[:maxManagedPlugins:maxManagedPlugins]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.office == nil || m.role != smcp.RoleComputer {
		return
	}
	st.Computer = m.name
	m.management = &st
}

// Management returns the last management state (see
// [smcp.EventManagementState]) of the Computer named computer in office,
// for the console; false when this node holds no such Computer, or it
// sent none (it runs no management plane, or is held by another node of
// a cluster). The caller owns the returned value.
func (s *Server) Management(office, computer string) (smcp.ManagementState, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := s.offices[office]
	if o == nil {
		return smcp.ManagementState{}, false
	}
	c := o.computers[computer]
	if c == nil || c.management == nil {
		return smcp.ManagementState{}, false
	}
	st := *c.management
	st.Servers = slices.Clone(st.Servers)
	st.Plugins = slices.Clone(st.Plugins)
	for i := range st.Plugins {
		st.Plugins[i].MCPServers = slices.Clone(st.Plugins[i].MCPServers)
	}
	return st, true
}
