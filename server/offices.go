package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// OfficeMember is one member in the answer of GET /api/offices/{office}:
// what server:list_room reports, plus the node that holds the member's
// connection in a cluster (empty on a server that runs alone).
type OfficeMember struct {
	SID        string    `json:"sid"`
	Name       string    `json:"name"`
	Role       smcp.Role `json:"role"`
	A2CVersion string    `json:"a2c_version,omitempty"`
	Node       string    `json:"node,omitempty"`
	// ConnectedSince is when the member took its seat; the console shows
	// it (GET /api/offices/{office} does not). Zero (omitted) when
	// unknown: a member another node holds.
	ConnectedSince time.Time `json:"connected_since,omitzero"`
}

// OfficeInfo is the answer of GET /api/offices/{office}.
type OfficeInfo struct {
	OfficeID string         `json:"office_id"`
	Members  []OfficeMember `json:"members"`
}

// MaxOfficeID bounds, in bytes, the office id a request of the hub's
// HTTP API or console names (400 past it): the cluster's records bound
// it the same way.
const MaxOfficeID = cluster.MaxField

// officeInfo serves GET /api/offices/{office}: the office's members
// across the cluster, for operators (`a2c room` shows the node column
// from it). It asks for the same credential as a Socket.IO connection. It
// is not part of the protocol: server:list_room keeps its exact shape.
func (s *Server) officeInfo(w http.ResponseWriter, r *http.Request) {
	if !s.Authorized(r) {
		writeJSONError(w, http.StatusUnauthorized, smcp.NewError(smcp.CodeUnauthorized, "Authentication failed"))
		return
	}
	id := r.PathValue("office")
	if id == "" || len(id) > MaxOfficeID {
		writeJSONError(w, http.StatusBadRequest, smcp.NewError(smcp.CodeBadRequest, "invalid office id"))
		return
	}
	ctx, cancel := opContext()
	info, err := s.office(ctx, id, false)
	cancel()
	if err != nil {
		writeJSONError(w, http.StatusServiceUnavailable, smcp.NewError(http.StatusServiceUnavailable, cluster.RefuseUnavailable))
		return
	}
	body, _ := json.Marshal(info)
	writeJSON(w, http.StatusOK, body)
}

// ErrClusterUnavailable is returned by [Server.Office] when the cluster's
// state cannot be read.
var ErrClusterUnavailable = errors.New("server: " + cluster.RefuseUnavailable)

// Offices returns the offices where this node holds members (every office
// of a server that runs alone), sorted by id, with their members (in a
// cluster: every node's, from this node's copy), each with the time it
// took its seat when this node holds it.
func (s *Server) Offices() []OfficeInfo {
	s.mu.RLock()
	ids := make([]string, 0, len(s.offices))
	for id := range s.offices {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	sort.Strings(ids)
	out := make([]OfficeInfo, 0, len(ids))
	for _, id := range ids {
		var info OfficeInfo
		if s.hub != nil {
			info = s.clusterOffice(id, s.hub.node.Members(id), true)
		} else {
			info = s.localOffice(id, true)
		}
		if len(info.Members) > 0 {
			out = append(out, info)
		}
	}
	return out
}

// Office returns one office and its members as [Server.Offices] does; in
// a cluster it may be an office this node does not follow (read from
// Redis, or ErrClusterUnavailable). An office nobody is in has no
// members.
func (s *Server) Office(ctx context.Context, id string) (OfficeInfo, error) {
	return s.office(ctx, id, true)
}

func (s *Server) office(ctx context.Context, id string, joined bool) (OfficeInfo, error) {
	if s.hub == nil {
		return s.localOffice(id, joined), nil
	}
	ms, err := s.hub.node.Office(ctx, id)
	if err != nil {
		return OfficeInfo{}, fmt.Errorf("%w: %w", ErrClusterUnavailable, err)
	}
	return s.clusterOffice(id, ms, joined), nil
}

// localOffice lists an office of a server that runs alone.
func (s *Server) localOffice(id string, joined bool) OfficeInfo {
	info := OfficeInfo{OfficeID: id, Members: []OfficeMember{}}
	s.mu.RLock()
	if o := s.offices[id]; o != nil {
		o.each(func(x *member) {
			om := OfficeMember{SID: x.sock.ID(), Name: x.name, Role: x.role, A2CVersion: x.version}
			if joined {
				om.ConnectedSince = x.joined.UTC().Truncate(time.Millisecond)
			}
			info.Members = append(info.Members, om)
		})
	}
	s.mu.RUnlock()
	sortMembers(info.Members)
	return info
}

// clusterOffice lists an office of a cluster from its members ms, with
// the join times of the members this node holds.
func (s *Server) clusterOffice(id string, ms []cluster.Member, joined bool) OfficeInfo {
	info := OfficeInfo{OfficeID: id, Members: make([]OfficeMember, 0, len(ms))}
	var mine map[string]time.Time
	if joined {
		mine = make(map[string]time.Time)
		s.mu.RLock()
		if o := s.offices[id]; o != nil {
			o.each(func(x *member) { mine[x.sock.ID()] = x.joined })
		}
		s.mu.RUnlock()
	}
	for _, m := range ms {
		om := OfficeMember{SID: m.SID, Name: m.Name, Role: m.Role, A2CVersion: m.Version, Node: m.Node}
		if t, ok := mine[m.SID]; ok {
			om.ConnectedSince = t.UTC().Truncate(time.Millisecond)
		}
		info.Members = append(info.Members, om)
	}
	sortMembers(info.Members)
	return info
}

// sortMembers puts the Agent first, then the others by name.
func sortMembers(ms []OfficeMember) {
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if (a.Role == smcp.RoleAgent) != (b.Role == smcp.RoleAgent) {
			return a.Role == smcp.RoleAgent
		}
		return a.Name < b.Name
	})
}

// writeJSONError answers an HTTP request with the flat ErrorPayload.
func writeJSONError(w http.ResponseWriter, status int, e *smcp.Error) {
	body, _ := json.Marshal(e)
	writeJSON(w, status, body)
}

// writeJSON answers an API request with body, JSON never cached: one
// way for the hub's JSON API (offices, traces) to answer.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
