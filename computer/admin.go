package computer

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// ServerStatus is one hosted MCP server as the management plane reports it.
type ServerStatus struct {
	BundleID string `json:"bundle_id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Disabled bool   `json:"disabled"`
	State    string `json:"state"`
	Tools    int    `json:"tools"`
}

// Status is the Computer's state for its local operator.
type Status struct {
	Name    string         `json:"name"`
	Office  string         `json:"office"`
	Joined  bool           `json:"joined"`
	Servers []ServerStatus `json:"servers"`
}

// Status reports the office connection and each server's state.
func (c *Computer) Status() Status {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := Status{Name: c.opts.Name, Office: c.opts.Office, Joined: c.sock != nil, Servers: []ServerStatus{}}
	for _, s := range c.order {
		ss := ServerStatus{BundleID: s.BundleID, Name: s.Name, Type: s.Type, Disabled: s.Disabled, State: "disabled"}
		if h := c.servers[s.BundleID]; h != nil && h.up != nil {
			state, _ := h.up.State()
			ss.State = string(state)
			if state == mcphost.Ready {
				ss.Tools = len(h.up.Tools())
			}
		}
		st.Servers = append(st.Servers, ss)
	}
	return st
}

// AdminHandler is the Computer's local management plane, for its operator
// and the a2c CLI (never for Agents): GET /status and GET /history?last=N.
// Serve it on a loopback address only; it has no authentication. Every
// request meets origins' Host and Origin rule first (nil: the loopback
// names only), so no web page reaches it, by DNS rebinding or from
// another site; a refusal is answered {"code":421|403,"message":...}.
func (c *Computer) AdminHandler(origins *origin.Policy) http.Handler {
	if origins == nil {
		origins = origin.Loopback()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, c.Status()) })
	mux.HandleFunc("GET /history", func(w http.ResponseWriter, r *http.Request) {
		h := c.History()
		if n, err := strconv.Atoi(r.URL.Query().Get("last")); err == nil && n >= 0 && n < len(h) {
			h = h[len(h)-n:]
		}
		if h == nil {
			h = []Record{}
		}
		writeJSON(w, h)
	})
	return origins.Handler(mux, origin.Allow{}, func(w http.ResponseWriter, _ *http.Request, status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{status, msg})
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
