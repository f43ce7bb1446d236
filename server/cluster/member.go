package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Member is one seat of an office as the cluster stores it.
type Member struct {
	SID  string
	Role smcp.Role
	Name string
	// Node is the id of the node that holds the member's connection.
	Node string
	// Version is the a2c_version the connection presented (server:list_room
	// reports it).
	Version string
	// Epoch is the registration of Node under which the member was
	// seated (see [Node.Epoch]): a sweep of a dead node removes the
	// members of the epochs it found dead, never one re-seated later by
	// the node that came back.
	Epoch int64
}

// sameSeat reports whether a and b are the same member in the same seat,
// whatever the epochs they were seated under.
func sameSeat(a, b Member) bool {
	a.Epoch, b.Epoch = 0, 0
	return a == b
}

// Event is one change of an office's membership, published by the join,
// leave and sweep scripts on the office's event channel in the same
// atomic step as the change.
type Event struct {
	Office string
	// Enter is true for an arrival, false for a departure.
	Enter bool
	// Swept marks a departure by a sweep: the member's node died (its
	// lease expired), so no answer will come from it. A plain leave is
	// not one: the Computer's connection may still answer what it was
	// asked, as on one server.
	Swept bool
	// Version is the office's version after the change, as the office
	// event announced it (each change adds one); 0 for the changes a
	// node reports to its handler, which it finds by comparing snapshots.
	Version int64
	Member  Member
}

// errMember is returned (wrapped) for stored content that does not parse.
var errMember = errors.New("cluster: malformed member record")

// encodeMember is the value of a member in the office hash:
// "role|node|epoch|version|name". Role, node, epoch and version hold no
// '|' (checked at the edge); the name comes last, so it may.
func encodeMember(m Member) string {
	return string(m.Role) + "|" + m.Node + "|" + strconv.FormatInt(m.Epoch, 10) + "|" + m.Version + "|" + m.Name
}

// validVersion reports whether an a2c_version may be stored: at most 64
// bytes, no '|'.
func validVersion(v string) bool { return len(v) <= 64 && !strings.Contains(v, "|") }

// parseMember parses a value of the office hash. The content comes from
// Redis and is checked, not trusted.
func parseMember(sid, v string) (Member, error) {
	role, rest, ok := strings.Cut(v, "|")
	if !ok {
		return Member{}, fmt.Errorf("%w: %q", errMember, v)
	}
	node, rest, ok := strings.Cut(rest, "|")
	if !ok {
		return Member{}, fmt.Errorf("%w: %q", errMember, v)
	}
	ep, rest, ok := strings.Cut(rest, "|")
	if !ok {
		return Member{}, fmt.Errorf("%w: %q", errMember, v)
	}
	epoch, err := strconv.ParseInt(ep, 10, 64)
	if err != nil || epoch < 0 {
		return Member{}, fmt.Errorf("%w: %q", errMember, v)
	}
	version, name, ok := strings.Cut(rest, "|")
	if !ok || !smcp.Role(role).Valid() || !validID(node) || !validVersion(version) || name == "" || len(name) > MaxField || !validID(sid) {
		return Member{}, fmt.Errorf("%w: %q", errMember, v)
	}
	return Member{SID: sid, Role: smcp.Role(role), Name: name, Node: node, Version: version, Epoch: epoch}, nil
}

// parseEvent parses a message of an office's event channel:
// "+seq|sid|role|node|epoch|a2c_version|name" for an arrival, '-' for a
// departure, '!' for a departure by a sweep (the scripts build it).
func parseEvent(office, msg string) (Event, error) {
	if len(msg) < 2 || (msg[0] != '+' && msg[0] != '-' && msg[0] != '!') {
		return Event{}, fmt.Errorf("%w: event %q", errMember, msg)
	}
	ev := Event{Office: office, Enter: msg[0] == '+', Swept: msg[0] == '!'}
	ver, rest, ok := strings.Cut(msg[1:], "|")
	if !ok {
		return Event{}, fmt.Errorf("%w: event %q", errMember, msg)
	}
	n, err := strconv.ParseInt(ver, 10, 64)
	if err != nil || n <= 0 {
		return Event{}, fmt.Errorf("%w: event version %q", errMember, ver)
	}
	ev.Version = n
	sid, v, ok := strings.Cut(rest, "|")
	if !ok {
		return Event{}, fmt.Errorf("%w: event %q", errMember, msg)
	}
	if ev.Member, err = parseMember(sid, v); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// validID reports whether s may be a node id or a sid: 1 to 128 bytes of
// letters, digits, '-', '_' and '.'. Such ids cannot break the '|'
// separated records nor a {hash tag}.
func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
