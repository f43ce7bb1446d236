package smcp

import (
	"encoding/json"
	"fmt"
)

// Keys of [SMCPTool].Meta written by the Computer.
const (
	// MetaKeyToolMeta holds the tool's merged [ToolMeta], encoded as a JSON
	// string (see [ToolMeta.Encode] and [DecodeToolMeta]).
	MetaKeyToolMeta = "a2c_tool_meta"
	// MetaKeyToolAnnotation holds the MCP tool annotations.
	MetaKeyToolAnnotation = "MCP_TOOL_ANNOTATION"
)

// ToolMeta is the per-tool configuration a Computer applies and publishes.
// Every field is optional; a nil field falls back to the server's default.
type ToolMeta struct {
	// AutoApply skips user confirmation when true.
	AutoApply *bool `json:"auto_apply,omitempty"`
	// RetObjectMapper renames fields of the tool's result (original → target).
	RetObjectMapper map[string]any `json:"ret_object_mapper,omitempty"`
	// Alias replaces the original tool name in the exposed name.
	Alias *string `json:"alias,omitempty"`
	// Tags are free-form labels.
	Tags []string `json:"tags,omitempty"`
}

// Encode returns m as the JSON string stored under [MetaKeyToolMeta].
func (m ToolMeta) Encode() (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// DecodeToolMeta parses the JSON string stored under [MetaKeyToolMeta].
func DecodeToolMeta(s string) (ToolMeta, error) {
	var m ToolMeta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return ToolMeta{}, fmt.Errorf("smcp: decoding %s: %w", MetaKeyToolMeta, err)
	}
	return m, nil
}

// ToolMeta returns the decoded [ToolMeta] stored under [MetaKeyToolMeta].
// ok is false when the key is absent or null; err is set when it holds
// something other than a JSON string encoding a ToolMeta object.
func (t SMCPTool) ToolMeta() (m ToolMeta, ok bool, err error) {
	v, present := t.Meta[MetaKeyToolMeta]
	if !present || v == nil {
		return ToolMeta{}, false, nil
	}
	s, isString := v.(string)
	if !isString {
		return ToolMeta{}, false, fmt.Errorf("smcp: %s is %T, want a JSON string", MetaKeyToolMeta, v)
	}
	m, err = DecodeToolMeta(s)
	return m, err == nil, err
}

// Server connection types of [MCPServerConfig].Type and [Identity].Type.
const (
	ServerTypeStdio      = "stdio"
	ServerTypeStreamable = "streamable"
	ServerTypeSSE        = "sse"
)

// MCPServerConfig is the wire shape of one value of
// [GetComputerConfigRet].Servers. ServerParameters depends on Type: see
// [StdioParameters] and [HTTPParameters].
//
// Producers should set ForbiddenTools and ToolMeta to non-nil values: the
// keys are required and nil encodes as null.
type MCPServerConfig struct {
	// Name is for display only; it may collide and is never a key.
	Name string `json:"name"`
	// BundleID is the explicit bundle_id, if the configuration gave one.
	BundleID        *string             `json:"bundle_id,omitempty"`
	Type            string              `json:"type"`
	Disabled        bool                `json:"disabled"`
	ForbiddenTools  []string            `json:"forbidden_tools"`
	ToolMeta        map[string]ToolMeta `json:"tool_meta"`
	DefaultToolMeta *ToolMeta           `json:"default_tool_meta,omitempty"`
	VRL             *string             `json:"vrl,omitempty"`
	// ServerParameters is kept raw because its shape depends on Type.
	ServerParameters json.RawMessage `json:"server_parameters"`
}

// StdioParameters is the server_parameters object of a "stdio" server.
type StdioParameters struct {
	Command              string            `json:"command"`
	Args                 []string          `json:"args"`
	Env                  map[string]string `json:"env"`
	Cwd                  *string           `json:"cwd,omitempty"`
	Encoding             string            `json:"encoding,omitempty"`
	EncodingErrorHandler string            `json:"encoding_error_handler,omitempty"`
}

// HTTPParameters is the server_parameters object of a "streamable" or "sse"
// server. Its timeouts are ISO-8601 duration strings for "streamable" and
// seconds for "sse", so they are kept raw.
type HTTPParameters struct {
	URL              string            `json:"url"`
	Headers          map[string]string `json:"headers"`
	Timeout          json.RawMessage   `json:"timeout,omitempty"`
	SSEReadTimeout   json.RawMessage   `json:"sse_read_timeout,omitempty"`
	TerminateOnClose *bool             `json:"terminate_on_close,omitempty"`
}

// Identity returns the connection identity of c, the input of
// [DeriveBundleID]. It fails when ServerParameters does not decode as the
// parameters of c.Type.
func (c MCPServerConfig) Identity() (Identity, error) {
	switch c.Type {
	case ServerTypeStdio:
		var p StdioParameters
		if err := json.Unmarshal(c.ServerParameters, &p); err != nil {
			return Identity{}, fmt.Errorf("smcp: stdio server_parameters: %w", err)
		}
		return Identity{Type: c.Type, Command: p.Command, Args: p.Args, Env: p.Env}, nil
	default:
		var p HTTPParameters
		if err := json.Unmarshal(c.ServerParameters, &p); err != nil {
			return Identity{}, fmt.Errorf("smcp: %s server_parameters: %w", quoteShort(c.Type, 32), err)
		}
		return Identity{Type: c.Type, URL: p.URL, Headers: p.Headers}, nil
	}
}

// Input types of [MCPServerInput].Type.
const (
	InputPromptString = "promptString"
	InputPickString   = "pickString"
	InputCommand      = "command"
)

// MCPServerInput is the wire shape of one element of
// [GetComputerConfigRet].Inputs: a value the Computer asks its user for and
// substitutes for ${input:ID} placeholders. The fields after Description
// apply to some types only.
type MCPServerInput struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Description string `json:"description"`
	// Default is the raw JSON default (a string for promptString and
	// pickString).
	Default json.RawMessage `json:"default,omitempty"`
	// Password marks a promptString whose value must never be shown.
	Password *bool `json:"password,omitempty"`
	// Options are the choices of a pickString.
	Options []string `json:"options,omitempty"`
	// Command and Args define a command input.
	Command string            `json:"command,omitempty"`
	Args    map[string]string `json:"args,omitempty"`
}

// DecodeServers decodes every value of r.Servers as an [MCPServerConfig].
func (r GetComputerConfigRet) DecodeServers() (map[string]MCPServerConfig, error) {
	out := make(map[string]MCPServerConfig, len(r.Servers))
	for id, raw := range r.Servers {
		var c MCPServerConfig
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("smcp: server %s: %w", quoteShort(id, 64), err)
		}
		out[id] = c
	}
	return out, nil
}

// DecodeInputs decodes every element of r.Inputs as an [MCPServerInput].
func (r GetComputerConfigRet) DecodeInputs() ([]MCPServerInput, error) {
	out := make([]MCPServerInput, 0, len(r.Inputs))
	for i, raw := range r.Inputs {
		var in MCPServerInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("smcp: input %d: %w", i, err)
		}
		out = append(out, in)
	}
	return out, nil
}
