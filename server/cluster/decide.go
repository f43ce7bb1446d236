package cluster

import (
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Seat is where a member sits, or asks to: an office, a role and a name.
// The zero Seat is "in no office".
type Seat struct {
	Office string
	Role   smcp.Role
	Name   string
}

// Decision is what the office rules decide about one join, cluster-wide.
// It mirrors server/rooms.go's joinDecision field for field.
type Decision struct {
	// Refuse, when not empty, refuses the join with this message (the
	// same text the single-node server answers).
	Refuse string
	// Already: the member holds exactly this seat; nothing changed.
	Already bool
	// SwitchOffice: a Computer left its former office (already done in
	// Redis when Join returns) before it entered the new one.
	SwitchOffice bool
}

// The refusals, word for word those of the single-node server.
const (
	RefuseRole         = "A connection cannot change its role"
	RefuseAgentElsewhr = "Agent is already in an office; leave it first"
	RefuseOtherName    = "Already in this office under another name; leave it first"
	RefuseAgentTaken   = "Room already has an agent"
	RefuseNameTaken    = "Computer name already in use in this office"
	// RefuseUnavailable is answered when Redis cannot be reached: the
	// office rules cannot be checked cluster-wide, so no join is taken.
	RefuseUnavailable = "Cluster state unavailable; try again shortly"
)

// decideLocal applies the part of the office rules that depends on the
// member alone. A connection lives on one node, so its role and current
// seat are that node's knowledge: role changes, a second office for an
// Agent, a second name in the same office and the no-op rejoin are
// decided here without Redis, exactly as server/rooms.go decides them.
// done is false when the seat rules of the office (Redis) must decide.
func decideLocal(role smcp.Role, cur, req Seat) (d Decision, done bool) {
	if role != "" && role != req.Role {
		return Decision{Refuse: RefuseRole}, true
	}
	if cur.Office != "" {
		switch {
		case cur.Office == req.Office && cur.Name == req.Name:
			return Decision{Already: true}, true
		case cur.Role == smcp.RoleAgent:
			return Decision{Refuse: RefuseAgentElsewhr}, true
		case cur.Office == req.Office:
			return Decision{Refuse: RefuseOtherName}, true
		}
	}
	return Decision{}, false
}
