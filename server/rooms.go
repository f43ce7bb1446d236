package server

import "github.com/a2c-smcp/a2c-go/smcp"

// joinDecision is what the office rules decide about one join request.
type joinDecision struct {
	// refuse, when not empty, refuses the join with this message.
	refuse string
	// already: the member holds exactly this seat; the join succeeds
	// without any change.
	already bool
	// switchOffice: a Computer leaves its current office before it enters
	// the new one.
	switchOffice bool
}

// decideJoin applies the office rules to member m asking to join office o
// (nil when it does not exist yet) as req says. It is the one place these
// rules live, so that a protocol version that changes them (0.5.0 keeps a
// single Computer per office, for one) changes this function only:
//
//   - a connection keeps the role of its first join;
//   - joining the office and name it already holds is a no-op success;
//   - an Agent is in at most one office and must leave it first; a member
//     may not take a second name in its own office;
//   - an office holds at most one Agent, and Computer names are unique in
//     an office;
//   - a Computer joining another office leaves the first.
//
// It reads m and o and changes nothing; the caller holds the server lock.
func decideJoin(m *member, req smcp.EnterOfficeReq, o *office) joinDecision {
	if m.role != "" && m.role != req.Role {
		return joinDecision{refuse: "A connection cannot change its role"}
	}
	if cur := m.office; cur != nil {
		switch {
		case cur.id == req.OfficeID && m.name == req.Name:
			return joinDecision{already: true}
		case m.role == smcp.RoleAgent:
			return joinDecision{refuse: "Agent is already in an office; leave it first"}
		case cur.id == req.OfficeID:
			return joinDecision{refuse: "Already in this office under another name; leave it first"}
		}
	}
	if o != nil {
		if req.Role == smcp.RoleAgent && o.agent != nil {
			return joinDecision{refuse: "Room already has an agent"}
		}
		if req.Role == smcp.RoleComputer && o.computers[req.Name] != nil {
			return joinDecision{refuse: "Computer name already in use in this office"}
		}
	}
	return joinDecision{switchOffice: m.office != nil}
}
