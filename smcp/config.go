package smcp

import (
	"encoding/json"
	"errors"
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
// Every field is optional. A nil field is unset: it inherits from the
// layer below in [MergeToolMeta]. Tags distinguishes nil (unset, inherit)
// from an empty, non-nil slice (explicitly no tags, clearing lower layers).
type ToolMeta struct {
	// AutoApply skips user confirmation when true. Only the Computer's
	// configuration sets it, never an MCP server.
	AutoApply *bool `json:"auto_apply,omitempty"`
	// RetObjectMapper renames fields of the tool's result (original → target).
	RetObjectMapper map[string]any `json:"ret_object_mapper,omitempty"`
	// Alias replaces the original tool name in the exposed name.
	Alias *string `json:"alias,omitempty"`
	// Tags are free-form labels.
	Tags []string `json:"tags,omitempty"`
}

// canonicalToolMeta is the wire form of [ToolMeta.Encode]: every key
// present, null when unset, as every SDK writes it.
type canonicalToolMeta struct {
	AutoApply       *bool          `json:"auto_apply"`
	RetObjectMapper map[string]any `json:"ret_object_mapper"`
	Alias           *string        `json:"alias"`
	Tags            []string       `json:"tags"`
}

// Encode returns m as the JSON string stored under [MetaKeyToolMeta]: an
// object with all four ToolMeta keys, null for an unset field (so an
// empty, non-nil Tags encodes as [] and a nil one as null). Peers compare
// the parsed values, not the text.
func (m ToolMeta) Encode() (string, error) {
	b, err := json.Marshal(canonicalToolMeta(m))
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

// ServerToolMeta is what a Computer takes from an MCP server's own
// declaration in Tool._meta["a2c_tool_meta"] (0.4.0): the tags, and
// nothing else. auto_apply in particular is never honoured, since a server
// that could set it would approve its own calls. Tags nil means the
// declaration has none.
type ServerToolMeta struct {
	Tags []string
}

// ErrMalformedToolMeta reports a server declaration that is not a JSON
// object or whose tags are not a list of strings. A Computer drops such a
// declaration (with a local warning); it never fails the tool listing.
var ErrMalformedToolMeta = errors.New("malformed a2c_tool_meta declaration")

// ParseServerToolMeta reads a server's declaration, the value of
// Tool._meta["a2c_tool_meta"] as decoded from JSON. It must be an object
// (a JSON string, even one holding an object, is malformed); of its keys
// only "tags" is read, which must be absent, null or a list of strings.
// Other keys (auto_apply, alias, ret_object_mapper, anything else) are
// ignored field by field and do not make the declaration malformed. The
// error wraps [ErrMalformedToolMeta] and holds none of the declared values.
func ParseServerToolMeta(v any) (ServerToolMeta, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return ServerToolMeta{}, fmt.Errorf("%w: %s, want an object", ErrMalformedToolMeta, decodedKind(v))
	}
	var out ServerToolMeta
	switch tags := obj["tags"].(type) {
	case nil:
	case []string:
		out.Tags = append([]string{}, tags...)
	case []any:
		out.Tags = make([]string, 0, len(tags))
		for i, t := range tags {
			s, ok := t.(string)
			if !ok {
				return ServerToolMeta{}, fmt.Errorf("%w: tags[%d] is %s, want a string", ErrMalformedToolMeta, i, decodedKind(t))
			}
			out.Tags = append(out.Tags, s)
		}
	default:
		return ServerToolMeta{}, fmt.Errorf("%w: tags is %s, want a list of strings", ErrMalformedToolMeta, decodedKind(tags))
	}
	return out, nil
}

// decodedKind names the JSON type of a decoded value, for messages that must
// not quote it.
func decodedKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, json.Number, int, int64:
		return "a number"
	case []any, []string:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// MergeToolMeta is the ToolMeta merge of 0.4.0, the one rule behind both
// the published a2c_tool_meta and the Computer's own use of a tool's
// settings (alias, auto_apply). Its layers, most specific first, are
// tool (the configuration's tool_meta entry of the tool), def
// (default_tool_meta) and server (the MCP server's declaration); nil means
// the layer is absent. A field takes the value of the most specific layer
// that sets it (non-nil): the merge is shallow, so tags are replaced
// whole, never joined, and an empty, non-nil tags clears the lower
// layers. The server layer contributes tags only.
//
// ok reports whether there is anything to publish: a configuration layer
// is present, or the server's declaration is (valid). When ok is false
// the tool's a2c_tool_meta key is removed from its meta.
func MergeToolMeta(tool, def *ToolMeta, server *ServerToolMeta) (m ToolMeta, ok bool) {
	if server != nil {
		m.Tags = server.Tags
	}
	for _, l := range []*ToolMeta{def, tool} {
		if l == nil {
			continue
		}
		if l.AutoApply != nil {
			m.AutoApply = l.AutoApply
		}
		if l.RetObjectMapper != nil {
			m.RetObjectMapper = l.RetObjectMapper
		}
		if l.Alias != nil {
			m.Alias = l.Alias
		}
		if l.Tags != nil {
			m.Tags = l.Tags
		}
	}
	return m, tool != nil || def != nil || server != nil
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

// PickStringOption is one choice of a pickString input (0.3.2): Label is
// what a person is shown, Value what is substituted for ${input:ID}. Both
// are required and non-empty; neither needs to be unique, and a value
// never identifies a label.
type PickStringOption struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// UnmarshalJSON decodes the object form {"label": ..., "value": ...} and,
// for peers that speak 0.3.0 or 0.3.1, a plain string, which becomes both
// the label and the value. (A Computer's configuration file accepts the
// object form only; that check is the config package's.)
func (o *PickStringOption) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*o = PickStringOption{Label: s, Value: s}
		return nil
	}
	type plain PickStringOption
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*o = PickStringOption(p)
	return nil
}

// MCPServerInput is the wire shape of one element of
// [GetComputerConfigRet].Inputs: a value the Computer asks its user for and
// substitutes for ${input:ID} placeholders. The fields after Description
// apply to some types only. It encodes the 0.3.2 form (options as
// objects); see [EncodeInput] for the form of an older version.
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
	Options []PickStringOption `json:"options,omitempty"`
	// Command and Args define a command input.
	Command string            `json:"command,omitempty"`
	Args    map[string]string `json:"args,omitempty"`
}

// OptionValues returns the values of in.Options, in order.
func (in MCPServerInput) OptionValues() []string {
	if in.Options == nil {
		return nil
	}
	vs := make([]string, len(in.Options))
	for i, o := range in.Options {
		vs[i] = o.Value
	}
	return vs
}

// HasOption reports whether v is the value of one of in.Options.
func (in MCPServerInput) HasOption(v string) bool {
	for _, o := range in.Options {
		if o.Value == v {
			return true
		}
	}
	return false
}

// EncodeInput encodes in as client:get_config carries it in p's version:
// a pickString's options as {label, value} objects when
// p.PickOptionObjects, else (0.3.0, 0.3.1) as their values, plain strings.
func EncodeInput(in MCPServerInput, p Profile) (json.RawMessage, error) {
	if p.PickOptionObjects || in.Options == nil {
		return json.Marshal(in)
	}
	type legacy struct {
		MCPServerInput
		Options []string `json:"options,omitempty"`
	}
	return json.Marshal(legacy{MCPServerInput: in, Options: in.OptionValues()})
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
// A pickString's options may be {label, value} objects (0.3.2 and later)
// or plain strings (0.3.0, 0.3.1); see [PickStringOption].
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
