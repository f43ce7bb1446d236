package desktop

import (
	"slices"
	"strings"
)

// Set is a set of window URIs, compared verbatim (byte for byte, query
// included). The Computer keeps the Set of all its active servers' windows
// and, on every notifications/resources/list_changed from any server,
// computes the new one: when the two differ ([Set.Equal] is false) it sends
// server:update_desktop and keeps the new Set; when they are equal it only
// logs.
type Set map[string]struct{}

// NewSet returns the set of the valid window URIs among uris (see
// [IsWindowURI]); other URIs, of any scheme, are left out. Pass the uri of
// every resource the Computer's active servers list. The result is never
// nil.
func NewSet(uris ...string) Set {
	s := make(Set, len(uris))
	for _, u := range uris {
		if IsWindowURI(u) {
			s[u] = struct{}{}
		}
	}
	return s
}

// Equal reports whether s and t hold the same URIs. A nil Set equals an
// empty one.
func (s Set) Equal(t Set) bool {
	if len(s) != len(t) {
		return false
	}
	for u := range s {
		if _, ok := t[u]; !ok {
			return false
		}
	}
	return true
}

// RefreshOnUpdated reports whether a notifications/resources/updated for
// uri must make the Computer send server:update_desktop: it must, at once
// and without comparing sets, exactly when uri is a valid window URI.
func RefreshOnUpdated(uri string) bool {
	return IsWindowURI(uri)
}

// Collision is a window host that windows of more than one server use.
type Collision struct {
	// Host is the shared host, verbatim.
	Host string
	// Servers are the distinct bundle_ids using Host, sorted.
	Servers []string
}

// HostCollisions returns the window hosts used by more than one server
// (distinct [Window.Server] values), sorted by host. Only URI and Server of
// each window are read; invalid URIs are ignored. A host should be unique
// across servers, but a collision is no error: the Computer logs a warning
// when it registers the servers and carries on, since windows are grouped by
// server, not by host. The result is nil when there is no collision.
func HostCollisions(ws []Window) []Collision {
	byHost := make(map[string][]string)
	for _, w := range ws {
		u, err := ParseURI(w.URI)
		if err != nil {
			continue
		}
		if !slices.Contains(byHost[u.Host], w.Server) {
			byHost[u.Host] = append(byHost[u.Host], w.Server)
		}
	}
	var out []Collision
	for h, servers := range byHost {
		if len(servers) > 1 {
			slices.Sort(servers)
			out = append(out, Collision{Host: h, Servers: servers})
		}
	}
	slices.SortFunc(out, func(a, b Collision) int { return strings.Compare(a.Host, b.Host) })
	return out
}
