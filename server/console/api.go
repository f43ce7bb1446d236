package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// defaultTimeout is a console tool call's timeout when the form gives
// none, in seconds.
const defaultTimeout = 60

// askTimeout bounds the computer page's requests (client:get_tools,
// client:get_config).
const askTimeout = 30 * time.Second

func (c *Console) session(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"auth":    !c.sessions.open,
		"node":    c.srv.NodeID(),
		"pool":    c.cfg.Pool != nil,
		"version": c.srv.Config().Version,
	})
}

func (c *Console) offices(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"offices": c.srv.Offices()})
}

// validName checks a routing name from the URL (office, computer, agent).
func validName(s string) bool { return s != "" && len(s) <= smcp.MaxNameLen }

func (c *Console) office(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("office")
	if !validName(id) {
		writeError(w, http.StatusBadRequest, "invalid office id")
		return
	}
	info, err := c.srv.Office(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "cluster state unavailable; try again shortly")
		return
	}
	if len(info.Members) == 0 {
		writeError(w, http.StatusNotFound, "no such office")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// Tool is a Computer's tool as the console shows it (see the package
// documentation).
type Tool struct {
	Name        string          `json:"name"`
	BundleID    string          `json:"bundle_id"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Meta        ToolMeta        `json:"meta"`
}

// ToolMeta is what the console shows of a tool's meta.
type ToolMeta struct {
	Tags      []string `json:"tags"`
	AutoApply bool     `json:"auto_apply"`
}

// Server is one MCP server of a Computer's configuration.
type Server struct {
	BundleID  string `json:"bundle_id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	Disabled  bool   `json:"disabled"`
	AutoApply bool   `json:"auto_apply"`
	// Origin is where the server comes from (a settings scope, or
	// "plugin"), from the Computer's management state; "" when the
	// Computer sent none.
	Origin string `json:"origin"`
}

// computer serves a Computer's tools and servers, asked of it through
// the relay, with the management state it sent the hub (if any).
func (c *Console) computer(w http.ResponseWriter, r *http.Request) {
	office, computer := r.PathValue("office"), r.PathValue("computer")
	if !validName(office) || !validName(computer) {
		writeError(w, http.StatusBadRequest, "invalid office or computer name")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), askTimeout)
	defer cancel()
	var (
		wg                sync.WaitGroup
		toolsRaw, confRaw json.RawMessage
		toolsErr, confErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		toolsRaw, toolsErr = c.srv.LocalRequest(ctx, office, smcp.EventGetTools, smcp.GetToolsReq{Computer: computer})
	}()
	go func() {
		defer wg.Done()
		confRaw, confErr = c.srv.LocalRequest(ctx, office, smcp.EventGetConfig, smcp.GetComputerConfigReq{Computer: computer})
	}()
	wg.Wait()
	for _, err := range []error{toolsErr, confErr} {
		if err != nil {
			c.relayError(w, err)
			return
		}
	}
	var tr smcp.GetToolsRet
	var cr smcp.GetComputerConfigRet
	if json.Unmarshal(toolsRaw, &tr) != nil || json.Unmarshal(confRaw, &cr) != nil {
		writeError(w, http.StatusBadGateway, "the Computer's answer does not parse")
		return
	}
	tools := make([]Tool, 0, len(tr.Tools))
	for _, t := range tr.Tools {
		tools = append(tools, consoleTool(t))
	}
	var mgmt *smcp.ManagementState
	if st, ok := c.srv.Management(office, computer); ok {
		mgmt = &st
	}
	servers := []Server{}
	if m, err := cr.DecodeServers(); err == nil {
		for id, sc := range m {
			sv := Server{BundleID: id, Name: sc.Name, Type: sc.Type, Disabled: sc.Disabled, Origin: origin(mgmt, id)}
			if sc.DefaultToolMeta != nil && sc.DefaultToolMeta.AutoApply != nil {
				sv.AutoApply = *sc.DefaultToolMeta.AutoApply
			}
			servers = append(servers, sv)
		}
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].BundleID < servers[j].BundleID })
	writeJSON(w, http.StatusOK, map[string]any{"office": office, "computer": computer, "tools": tools, "servers": servers, "management": mgmt})
}

// origin is the origin of the server bundleID in st: that of its served
// declaration, else of the first one (a bundle_id may be declared by a
// scope and by plugins); "" when st is nil or does not list it.
func origin(st *smcp.ManagementState, bundleID string) string {
	if st == nil {
		return ""
	}
	found := ""
	for _, s := range st.Servers {
		switch {
		case s.BundleID != bundleID:
		case s.Served:
			return s.Origin
		case found == "":
			found = s.Origin
		}
	}
	return found
}

// consoleTool turns a client:get_tools entry into the console's Tool.
func consoleTool(t smcp.SMCPTool) Tool {
	out := Tool{Name: t.Name, BundleID: t.BundleID, Description: t.Description, InputSchema: t.ParamsSchema, Meta: ToolMeta{Tags: []string{}}}
	if len(out.InputSchema) == 0 || string(out.InputSchema) == "null" {
		out.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if s, ok := t.Meta[smcp.MetaKeyToolMeta].(string); ok {
		if m, err := smcp.DecodeToolMeta(s); err == nil {
			if m.Tags != nil {
				out.Meta.Tags = m.Tags
			}
			if m.AutoApply != nil {
				out.Meta.AutoApply = *m.AutoApply
			}
		}
	}
	return out
}

// callBody is the tool call form's request.
type callBody struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Timeout   *int            `json:"timeout"`
}

// call runs a tool from the console's form, through the relay.
func (c *Console) call(w http.ResponseWriter, r *http.Request) {
	office, computer := r.PathValue("office"), r.PathValue("computer")
	if !validName(office) || !validName(computer) {
		writeError(w, http.StatusBadRequest, "invalid office or computer name")
		return
	}
	var b callBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(&b); err != nil {
		writeError(w, http.StatusBadRequest, "the body must be a JSON object {\"tool\",\"arguments\",\"timeout\"} of at most 1 MiB")
		return
	}
	timeout := defaultTimeout
	if b.Timeout != nil {
		timeout = *b.Timeout
	}
	args := bytes.TrimSpace(b.Arguments)
	switch {
	case b.Tool == "" || len(b.Tool) > smcp.MaxNameLen:
		writeError(w, http.StatusBadRequest, "tool must be a tool name")
		return
	case len(args) > 0 && string(args) != "null" && args[0] != '{':
		writeError(w, http.StatusBadRequest, "arguments must be a JSON object")
		return
	case timeout < smcp.MinTimeout || timeout > smcp.MaxTimeout:
		writeError(w, http.StatusBadRequest, "timeout must be 1..3600 seconds")
		return
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	req := smcp.ToolCallReq{Agent: server.ConsoleAgent, ReqID: server.NewReqID(), Computer: computer, ToolName: b.Tool, Params: args, Timeout: timeout}
	// The relay ends the call at its own deadline; this one only stops
	// waiting a little after it.
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(timeout)*time.Second+c.srv.Config().ToolCallSlack+5*time.Second)
	defer cancel()
	raw, err := c.srv.LocalRequest(ctx, office, smcp.EventToolCall, req)
	if err != nil {
		c.relayError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"req_id":   req.ReqID,
		"agent":    req.Agent,
		"trace_id": tracing.TraceID(req.Agent, req.ReqID).String(),
		"result":   raw,
	})
}

// relayError answers a LocalRequest that failed with the console's error
// shape: the relay's refusal mapped onto an HTTP status, or 504 when no
// answer came in time.
func (c *Console) relayError(w http.ResponseWriter, err error) {
	var pe *smcp.Error
	switch {
	case errors.As(err, &pe):
		status := http.StatusBadGateway
		switch pe.Code {
		case smcp.CodeBadRequest:
			status = http.StatusBadRequest
		case smcp.CodeNotFound, smcp.CodeCrossRoom, smcp.CodeNotInRoom, smcp.CodeRoomNotFound:
			status = http.StatusNotFound
		case smcp.CodeForbidden:
			status = http.StatusForbidden
		case smcp.CodeTimeout:
			status = http.StatusGatewayTimeout
		case smcp.CodeInternal, http.StatusServiceUnavailable:
			status = http.StatusServiceUnavailable
		}
		writeError(w, status, pe.Message)
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "the Computer did not answer in time")
	case errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "request cancelled")
	default:
		c.log.Warn("console: local request failed", "err", err)
		writeError(w, http.StatusBadRequest, "invalid request")
	}
}

func (c *Console) calls(w http.ResponseWriter, r *http.Request) {
	office := r.URL.Query().Get("office")
	calls, evicted, err := c.srv.Calls(office)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "the hub keeps no call log")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": calls, "dropped": evicted})
}

// callDetail serves one call and its trace.
func (c *Console) callDetail(w http.ResponseWriter, r *http.Request) {
	agent, reqID := r.PathValue("agent"), r.PathValue("req_id")
	if !validName(agent) || reqID == "" || len(reqID) > smcp.MaxReqIDLen {
		writeError(w, http.StatusBadRequest, "invalid agent or req_id")
		return
	}
	call, found := c.srv.Call(agent, reqID)
	spans, dropped := []tracing.Span{}, 0
	if rec := c.srv.Config().Recorder; rec != nil { // the hub's own spans, and in a2c up every hop's
		if s, d := rec.Trace(tracing.TraceID(agent, reqID)); s != nil {
			spans, dropped = s, d
		}
	}
	if !found && len(spans) == 0 {
		writeError(w, http.StatusNotFound, "no such call")
		return
	}
	var cp *server.Call
	if found {
		cp = &call
	}
	writeJSON(w, http.StatusOK, map[string]any{"call": cp, "trace": spans, "dropped_spans": dropped})
}
