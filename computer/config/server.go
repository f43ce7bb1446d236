package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/a2c-smcp/a2c-go/internal/redact"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Mask replaces every redacted value.
const Mask = redact.Mask

// PublishedToolMeta returns the published settings of tool: the configuration's
// tool_meta entry and default_tool_meta, over the MCP server's own
// declaration (nil when it has none, it is malformed, or the protocol
// version ignores declarations), merged by [smcp.MergeToolMeta]. ok is
// false when no layer is present, and the tool's a2c_tool_meta key is then
// removed. This is the one merge behind the tool listing, the exposed
// names and approval; a server's declaration adds tags only.
func (s Server) PublishedToolMeta(tool string, declared *smcp.ServerToolMeta) (m smcp.ToolMeta, ok bool) {
	var t *smcp.ToolMeta
	if v, found := s.ToolMeta[tool]; found {
		t = &v
	}
	return smcp.MergeToolMeta(t, s.DefaultToolMeta, declared)
}

// MergedToolMeta returns the settings of tool from the configuration alone:
// DefaultToolMeta with every non-nil field of ToolMeta[tool] laid over it
// (a shallow merge, so a tool's tags replace the default tags rather than
// adding to them). It is [Server.PublishedToolMeta] without a server declaration,
// which is all that alias and auto_apply may come from.
func (s Server) MergedToolMeta(tool string) smcp.ToolMeta {
	m, _ := s.PublishedToolMeta(tool, nil)
	return m
}

// ExposedName returns the name under which tool is offered to Agents:
// BundleID + "__" + the tool's alias (from [Server.MergedToolMeta]) or, when
// it has none, its original name.
func (s Server) ExposedName(tool string) string {
	if a := s.MergedToolMeta(tool).Alias; a != nil {
		return smcp.ExposedName(s.BundleID, *a)
	}
	return smcp.ExposedName(s.BundleID, tool)
}

// Forbidden reports whether ForbiddenTools lists tool, by its original name
// or by its exposed name.
func (s Server) Forbidden(tool string) bool {
	return slices.Contains(s.ForbiddenTools, tool) || slices.Contains(s.ForbiddenTools, s.ExposedName(tool))
}

// CheckAliases reports the tools of s, given its tool list in the order the
// server listed them, that would share an exposed name with an earlier
// tool; only the earlier one stays reachable. Forbidden tools are not
// exposed and are skipped, and so is a tool listed twice. It returns nil
// when every exposed name is distinct.
func (s Server) CheckAliases(tools []string) []Diagnostic {
	var diags []Diagnostic
	first := map[string]string{} // exposed name → first tool
	for _, t := range tools {
		if s.Forbidden(t) {
			continue
		}
		e := s.ExposedName(t)
		prev, dup := first[e]
		if !dup {
			first[e] = t
			continue
		}
		if prev == t {
			continue
		}
		diags = append(diags, Diagnostic{
			Server:  s.BundleID,
			Field:   s.aliasField(t, prev),
			Message: fmt.Sprintf("tools %s and %s are both exposed as %s; only %s is reachable", quote(prev), quote(t), quote(e), quote(prev)),
		})
	}
	return diags
}

// aliasField names the setting that makes tool collide with prev.
func (s Server) aliasField(tool, prev string) string {
	for _, t := range []string{tool, prev} {
		if m, ok := s.ToolMeta[t]; ok && m.Alias != nil {
			return joinPath([]string{"tool_meta", pathKey(t), "alias"})
		}
	}
	if s.DefaultToolMeta != nil && s.DefaultToolMeta.Alias != nil {
		return "default_tool_meta.alias"
	}
	return "tool_meta"
}

// Redact returns the configuration of s as it may leave the Computer, in
// answer to client:get_config: Raw with the resolved bundle_id filled in,
// the type label normalized ("http" becomes "streamable"), and
// server_parameters reduced to its known fields, with
//
//   - every env and headers value replaced by [Mask] (keys are kept);
//   - the URL's user information, query values and fragment replaced by Mask.
//
// Redact reads only Raw, so a server returned by [Resolver.Render] redacts
// to the same result and no resolved value can appear.
func (s Server) Redact() smcp.MCPServerConfig {
	c := s.Raw
	if s.BundleID != "" {
		id := s.BundleID
		c.BundleID = &id
	}
	if s.Type != "" {
		c.Type = s.Type
	}
	c.ForbiddenTools = append([]string{}, s.Raw.ForbiddenTools...)
	c.ToolMeta = maps.Clone(s.Raw.ToolMeta)
	if c.ToolMeta == nil {
		c.ToolMeta = map[string]smcp.ToolMeta{}
	}
	if s.Raw.DefaultToolMeta != nil {
		m := *s.Raw.DefaultToolMeta
		c.DefaultToolMeta = &m
	}
	c.ServerParameters = redactParams(s.Raw.ServerParameters, c.Type)
	return c
}

// Known server_parameters fields; Redact drops any other, since it cannot
// know whether an unknown field holds a secret.
var (
	stdioParams = []string{"command", "args", "env", "cwd", "encoding", "encoding_error_handler"}
	httpParams  = []string{"url", "headers", "timeout", "sse_read_timeout", "terminate_on_close"}
)

func redactParams(raw json.RawMessage, typ string) json.RawMessage {
	n, err := decodeJSON(raw)
	if err != nil || n.kind != kindObject {
		return json.RawMessage("{}")
	}
	known := httpParams
	if typ == smcp.ServerTypeStdio {
		known = stdioParams
	}
	out := &node{kind: kindObject}
	for i, k := range n.keys {
		if !slices.Contains(known, k) {
			continue
		}
		v := n.vals[i]
		switch {
		case (k == "env" || k == "headers") && v.kind == kindObject:
			m := &node{kind: kindObject, keys: v.keys}
			for range v.keys {
				m.vals = append(m.vals, &node{kind: kindString, str: Mask})
			}
			v = m
		case k == "url" && v.kind == kindString:
			v = &node{kind: kindString, str: redact.URL(v.str)}
		}
		out.keys = append(out.keys, k)
		out.vals = append(out.vals, v)
	}
	return appendJSON(nil, out)
}

// Redacted returns a copy of inputs fit for client:get_config: the default
// of every password input is dropped.
func Redacted(inputs []smcp.MCPServerInput) []smcp.MCPServerInput {
	if inputs == nil {
		return nil
	}
	out := make([]smcp.MCPServerInput, len(inputs))
	for i, in := range inputs {
		in.Options = slices.Clone(in.Options)
		in.Args = maps.Clone(in.Args)
		if in.Password != nil && *in.Password {
			in.Default = nil
		} else {
			in.Default = slices.Clone(in.Default)
		}
		out[i] = in
	}
	return out
}

// Lookup returns the server of f with the given bundle_id.
func (f *File) Lookup(bundleID string) (Server, bool) {
	for _, s := range f.Servers {
		if s.BundleID == bundleID {
			return s, true
		}
	}
	return Server{}, false
}

// ComputerConfig returns the answer to client:get_config for f in the
// protocol version p: the [Redacted] inputs (encoded by [smcp.EncodeInput])
// and every server's [Server.Redact], keyed by bundle_id.
func (f *File) ComputerConfig(p smcp.Profile) (smcp.GetComputerConfigRet, error) {
	ret := smcp.GetComputerConfigRet{Servers: make(map[string]json.RawMessage, len(f.Servers))}
	for _, in := range Redacted(f.Inputs) {
		b, err := smcp.EncodeInput(in, p)
		if err != nil {
			return smcp.GetComputerConfigRet{}, fmt.Errorf("config: encoding input %s: %w", quote(in.ID), err)
		}
		ret.Inputs = append(ret.Inputs, b)
	}
	for _, s := range f.Servers {
		b, err := json.Marshal(s.Redact())
		if err != nil {
			return smcp.GetComputerConfigRet{}, fmt.Errorf("config: encoding server %s: %w", quote(s.BundleID), err)
		}
		ret.Servers[s.BundleID] = b
	}
	return ret, nil
}
