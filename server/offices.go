package server

import (
	"context"
	"encoding/json"
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
}

// OfficeInfo is the answer of GET /api/offices/{office}.
type OfficeInfo struct {
	OfficeID string         `json:"office_id"`
	Members  []OfficeMember `json:"members"`
}

// maxOfficeID bounds the office id of an inspection request (the
// cluster's records bound it the same way).
const maxOfficeID = cluster.MaxField

// officeInfo serves GET /api/offices/{office}: the office's members
// across the cluster, for operators (`a2c room` shows the node column
// from it). It asks for the same credential as a Socket.IO connection. It
// is not part of the protocol: server:list_room keeps its exact shape.
func (s *Server) officeInfo(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Auth != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		err := s.cfg.Auth.Authenticate(ctx, &AuthRequest{Header: r.Header, Query: r.URL.Query(), RemoteAddr: r.RemoteAddr})
		cancel()
		if err != nil {
			s.metrics.rejected("auth")
			writeJSONError(w, http.StatusUnauthorized, smcp.NewError(smcp.CodeUnauthorized, "Authentication failed"))
			return
		}
	}
	id := r.PathValue("office")
	if id == "" || len(id) > maxOfficeID {
		writeJSONError(w, http.StatusBadRequest, smcp.NewError(smcp.CodeBadRequest, "invalid office id"))
		return
	}
	info := OfficeInfo{OfficeID: id, Members: []OfficeMember{}}
	if s.hub != nil {
		ctx, cancel := opContext()
		ms, err := s.hub.node.Office(ctx, id)
		cancel()
		if err != nil {
			writeJSONError(w, http.StatusServiceUnavailable, smcp.NewError(http.StatusServiceUnavailable, cluster.RefuseUnavailable))
			return
		}
		for _, m := range ms {
			info.Members = append(info.Members, OfficeMember{SID: m.SID, Name: m.Name, Role: m.Role, A2CVersion: m.Version, Node: m.Node})
		}
	} else {
		s.mu.RLock()
		if o := s.offices[id]; o != nil {
			o.each(func(x *member) {
				info.Members = append(info.Members, OfficeMember{SID: x.sock.ID(), Name: x.name, Role: x.role, A2CVersion: x.version})
			})
		}
		s.mu.RUnlock()
	}
	sort.SliceStable(info.Members, func(i, j int) bool {
		a, b := info.Members[i], info.Members[j]
		if (a.Role == smcp.RoleAgent) != (b.Role == smcp.RoleAgent) {
			return a.Role == smcp.RoleAgent
		}
		return a.Name < b.Name
	})
	body, _ := json.Marshal(info)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// writeJSONError answers an HTTP request with the flat ErrorPayload.
func writeJSONError(w http.ResponseWriter, status int, e *smcp.Error) {
	body, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
