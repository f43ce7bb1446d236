package config

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Timeouts of an HTTP server whose configuration does not set them. They
// are the defaults of the reference MCP client.
const (
	DefaultSSETimeout               = 5 * time.Second
	DefaultSSEReadTimeout           = 5 * time.Minute
	DefaultStreamableTimeout        = 30 * time.Second
	DefaultStreamableSSEReadTimeout = 5 * time.Minute
)

// MaxFileSize is the largest configuration file [Load] reads.
const MaxFileSize = 8 << 20

// File is a parsed configuration file.
type File struct {
	// Path is the path given to Load, or "" for Parse.
	Path string
	// Inputs are the declared inputs, in file order.
	Inputs []smcp.MCPServerInput
	// Servers are the servers in file order. Of several servers with the same
	// bundle_id only the first is here; Diagnostics reports the others.
	Servers []Server
	// Diagnostics are the problems that did not stop loading, such as a
	// duplicate bundle_id or an alias in default_tool_meta.
	Diagnostics []Diagnostic
}

// Server is one validated MCP server configuration. Its fields hold the text
// of the file, with placeholders literal, until [Resolver.Render] returns a
// copy with them substituted.
type Server struct {
	// Key is the server's key in a "servers" object; it is "" for servers
	// given as a single object or in a list.
	Key string
	// Index is the position of the server in the file, counting from 0.
	Index int
	// Name is the display name: the "name" field, or Key when that is absent.
	Name string
	// BundleID is the server's identity: the explicit bundle_id, or the one
	// derived by [smcp.DeriveBundleID] from Name and the raw connection
	// identity. It is always valid ([smcp.ValidBundleID]).
	BundleID string
	// Explicit reports whether the file gave the bundle_id.
	Explicit bool
	// Type is [smcp.ServerTypeStdio], [smcp.ServerTypeSSE] or
	// [smcp.ServerTypeStreamable]; the label "http" (or "HTTP") of other
	// SDKs is stored as streamable.
	Type string
	// Disabled servers get no connection and expose no tools.
	Disabled bool
	// ForbiddenTools lists tools that are hidden and may not be called, by
	// original or exposed name (see [Server.Forbidden]).
	ForbiddenTools []string
	// ToolMeta holds per-tool settings by original tool name.
	ToolMeta map[string]smcp.ToolMeta
	// DefaultToolMeta holds the settings of tools without their own; see
	// [Server.MergedToolMeta].
	DefaultToolMeta *smcp.ToolMeta
	// Stdio is set for a stdio server, HTTP for an sse or streamable one.
	Stdio *Stdio
	HTTP  *HTTP
	// Secrets, set by [Resolver.Render], are the values its inputs gave:
	// whatever reports on the rendered server (an upstream's errors,
	// logs) masks them. Never serialized.
	Secrets []string `json:"-"`
	// Raw is the configuration as written, placeholders and secrets
	// included; Name is filled in from Key when the file has no name. Never
	// send it anywhere: [Server.Redact] gives the view for client:get_config.
	Raw smcp.MCPServerConfig
}

// Stdio holds the parameters of a server run as a child process that speaks
// MCP on its standard input and output.
type Stdio struct {
	// Command is the program to run; it is never empty.
	Command string
	Args    []string
	// Env holds variables added to the child's environment; nil if none.
	Env map[string]string
	// Cwd is the working directory, or "" for the Computer's own.
	Cwd string
}

// HTTP holds the parameters of a server reached over SSE or streamable HTTP.
type HTTP struct {
	// URL is an absolute http or https URL. A URL with placeholders is
	// checked only once [Resolver.Render] has substituted them.
	URL string
	// Headers are sent with every request; nil if none.
	Headers map[string]string
	// Timeout bounds each HTTP request, and SSEReadTimeout the wait for the
	// next event on an open stream. An absent value takes the default of
	// the server type (see [DefaultSSETimeout] and the related constants);
	// a zero value was written as zero.
	Timeout        time.Duration
	SSEReadTimeout time.Duration
	// TerminateOnClose asks a streamable server to end the session when the
	// client closes; it is true unless the file says false, and always false
	// for sse.
	TerminateOnClose bool
}

// Load reads and parses the configuration file at path; see [Parse]. A file
// named *.yaml or *.yml is YAML; any other is JSON when its first byte other
// than white space (and a byte order mark) is '{' or '[', else YAML. A file
// that cannot be read gives the [*io/fs.PathError] of the os package; every
// other error is an [*Error].
func Load(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	data, err := io.ReadAll(io.LimitReader(fd, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: path, Index: -1, Message: fmt.Sprintf("larger than %d bytes", MaxFileSize)}
	}
	f, err := Parse(data, path)
	if f != nil {
		f.Path = path
	}
	return f, err
}

// Parse parses a configuration document, JSON or YAML (chosen as by [Load],
// from name's extension or the content). name only labels messages. An
// empty document, null or {} gives a File without servers. The returned
// error is an [*Error].
func Parse(data []byte, name string) (*File, error) {
	p := &parser{file: name, f: &File{}}
	var root *node
	var err error
	if isJSON(name, data) {
		if root, err = decodeJSON(data); err != nil {
			return nil, &Error{File: name, Index: -1, Message: "invalid JSON", Err: err}
		}
	} else if root, err = decodeYAML(data); err != nil {
		return nil, &Error{File: name, Index: -1, Message: "invalid YAML", Err: trimYAMLPrefix(err)}
	}
	if err := p.document(root); err != nil {
		return nil, err
	}
	return p.f, nil
}

func isJSON(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		return false
	}
	data = bytes.TrimLeft(bytes.TrimPrefix(data, utf8BOM), " \t\r\n")
	return len(data) > 0 && (data[0] == '{' || data[0] == '[')
}

type plainError string

func (e plainError) Error() string { return string(e) }

func trimYAMLPrefix(err error) error {
	return plainError(strings.TrimPrefix(err.Error(), "yaml: "))
}

// parser holds the state of one Parse.
type parser struct {
	file string
	f    *File
}

// fail returns a document-level *Error.
func (p *parser) fail(field, format string, args ...any) error {
	return &Error{File: p.file, Index: -1, Field: field, Message: fmt.Sprintf(format, args...)}
}

// document dispatches on the shape of the top-level value.
func (p *parser) document(root *node) error {
	switch root.kind {
	case kindNull:
		return nil
	case kindArray:
		return p.servers(root, "", false)
	case kindObject:
	default:
		return p.fail("", "expected a server object, a list of servers or an object with \"servers\", got %s", root.kind.describe())
	}
	switch {
	case root.has("servers") || root.has("mcp_servers") || root.has("inputs"):
		// the document shape, below
	case root.has("mcpServers"):
		return p.fail("mcpServers", `not supported: use "servers", whose values are A2C server objects with "type" and "server_parameters"`)
	case root.has("type") || root.has("server_parameters") || root.has("name") || root.has("bundle_id"):
		return p.servers(&node{kind: kindArray, items: []*node{root}}, "", false)
	case len(root.keys) == 0:
		return nil
	default:
		return p.fail("", `expected a server object, a list of servers or an object with "servers"`)
	}
	if v, ok := root.get("inputs"); ok {
		if err := p.inputs(v); err != nil {
			return err
		}
	}
	field := "servers"
	sv, ok := root.get("servers")
	if mv, ok2 := root.get("mcp_servers"); ok2 {
		if ok {
			return p.fail("mcp_servers", `cannot be used together with "servers"`)
		}
		field, sv, ok = "mcp_servers", mv, true
	}
	if !ok {
		return p.checkEnvNames()
	}
	switch sv.kind {
	case kindObject:
		if err := p.servers(sv, field, true); err != nil {
			return err
		}
	case kindArray:
		if err := p.servers(sv, field, false); err != nil {
			return err
		}
	default:
		return p.fail(field, "expected an object or an array, got %s", sv.kind.describe())
	}
	return p.checkEnvNames()
}

// servers decodes the elements of list (an array, or an object when keyed)
// in order and applies no-double-open: in a list the first server with a
// bundle_id wins and the later ones become diagnostics; in an object two
// keys with one bundle_id are an error.
func (p *parser) servers(list *node, field string, keyed bool) error {
	first := map[string]int{} // bundle_id → index in p.f.Servers
	n := len(list.items)
	if keyed {
		n = len(list.keys)
	}
	for i := 0; i < n; i++ {
		var key string
		var v *node
		if keyed {
			key, v = list.keys[i], list.vals[i]
		} else {
			v = list.items[i]
		}
		s, diags, err := p.server(v, key, i)
		if err != nil {
			return err
		}
		if j, dup := first[s.BundleID]; dup {
			prev := p.f.Servers[j]
			if keyed {
				return &Error{File: p.file, Server: key, Index: i, Field: "bundle_id",
					Message: fmt.Sprintf("%s is also the bundle_id of server %s; keys of one file must resolve to distinct bundle_ids", quote(s.BundleID), quote(prev.Key))}
			}
			p.f.Diagnostics = append(p.f.Diagnostics, Diagnostic{Server: s.BundleID, Field: "bundle_id",
				Message: fmt.Sprintf("duplicate bundle_id: server #%d%s is ignored; server #%d%s, the first in the file, is used",
					i, nameNote(s.Name), prev.Index, nameNote(prev.Name))})
			continue
		}
		first[s.BundleID] = len(p.f.Servers)
		p.f.Servers = append(p.f.Servers, s)
		p.f.Diagnostics = append(p.f.Diagnostics, diags...)
	}
	return nil
}

func nameNote(name string) string {
	if name == "" {
		return ""
	}
	return " (" + quote(name) + ")"
}

// reader decodes the fields of one object, reporting problems as copies of
// its template error.
type reader struct {
	tmpl Error
}

func (r *reader) fail(field, format string, args ...any) error {
	e := r.tmpl
	e.Field, e.Message = field, fmt.Sprintf(format, args...)
	return &e
}

func (r *reader) typeErr(field, want string, got *node) error {
	return r.fail(field, "expected %s, got %s", want, got.kind.describe())
}

// str returns the string at key of obj; ok is false when it is absent or null.
func (r *reader) str(obj *node, key, field string) (s string, ok bool, err error) {
	v, ok := obj.get(key)
	if !ok {
		return "", false, nil
	}
	if v.kind != kindString {
		return "", false, r.typeErr(field, "a string", v)
	}
	return v.str, true, nil
}

func (r *reader) boolean(obj *node, key, field string) (b bool, ok bool, err error) {
	v, ok := obj.get(key)
	if !ok {
		return false, false, nil
	}
	if v.kind != kindBool {
		return false, false, r.typeErr(field, "a boolean", v)
	}
	return v.b, true, nil
}

// strings returns the array of strings at key of obj, or nil when absent.
func (r *reader) strings(obj *node, key, field string) ([]string, error) {
	v, ok := obj.get(key)
	if !ok {
		return nil, nil
	}
	if v.kind != kindArray {
		return nil, r.typeErr(field, "an array of strings", v)
	}
	out := make([]string, len(v.items))
	for i, it := range v.items {
		if it.kind != kindString {
			return nil, r.typeErr(field+"["+strconv.Itoa(i)+"]", "a string", it)
		}
		out[i] = it.str
	}
	return out, nil
}

// stringMap returns the object of strings at key of obj, or nil when absent.
func (r *reader) stringMap(obj *node, key, field string) (map[string]string, error) {
	v, ok := obj.get(key)
	if !ok {
		return nil, nil
	}
	if v.kind != kindObject {
		return nil, r.typeErr(field, "an object of strings", v)
	}
	out := make(map[string]string, len(v.keys))
	for i, k := range v.keys {
		it := v.vals[i]
		if it.kind != kindString {
			return nil, r.typeErr(joinPath([]string{field, pathKey(k)}), "a string", it)
		}
		out[k] = it.str
	}
	return out, nil
}

// server decodes and validates one server object.
func (p *parser) server(n *node, key string, index int) (Server, []Diagnostic, error) {
	s := Server{Key: key, Index: index}
	r := &reader{tmpl: Error{File: p.file, Server: key, Index: index}}
	if n.kind != kindObject {
		return s, nil, r.typeErr("", "an object", n)
	}
	name, hasName, err := r.str(n, "name", "name")
	if err != nil {
		return s, nil, err
	}
	s.Name = key
	if hasName {
		s.Name = name
	}
	if r.tmpl.Server == "" {
		r.tmpl.Server = s.Name
	}
	explicit, _, err := r.str(n, "bundle_id", "bundle_id")
	if err != nil {
		return s, nil, err
	}
	if explicit != "" && !smcp.ValidBundleID(explicit) {
		return s, nil, r.fail("bundle_id", `invalid bundle_id %s: only ASCII letters, digits, '_' and '-' are allowed, and no "__"`, quote(explicit))
	}
	rawType, ok, err := r.str(n, "type", "type")
	if err != nil {
		return s, nil, err
	}
	if !ok {
		return s, nil, r.fail("type", "required")
	}
	switch rawType {
	case smcp.ServerTypeStdio, smcp.ServerTypeSSE, smcp.ServerTypeStreamable:
		s.Type = rawType
	case "http", "HTTP":
		s.Type = smcp.ServerTypeStreamable
	default:
		return s, nil, r.fail("type", `unknown server type %s; expected "stdio", "sse" or "streamable"`, quote(rawType))
	}
	if s.Disabled, _, err = r.boolean(n, "disabled", "disabled"); err != nil {
		return s, nil, err
	}
	if s.ForbiddenTools, err = r.strings(n, "forbidden_tools", "forbidden_tools"); err != nil {
		return s, nil, err
	}
	var diags []Diagnostic
	if v, ok := n.get("tool_meta"); ok {
		if v.kind != kindObject {
			return s, nil, r.typeErr("tool_meta", "an object", v)
		}
		s.ToolMeta = make(map[string]smcp.ToolMeta, len(v.keys))
		for i, tool := range v.keys {
			m, err := r.toolMeta(v.vals[i], joinPath([]string{"tool_meta", pathKey(tool)}))
			if err != nil {
				return s, nil, err
			}
			s.ToolMeta[tool] = m
		}
	}
	if v, ok := n.get("default_tool_meta"); ok {
		m, err := r.toolMeta(v, "default_tool_meta")
		if err != nil {
			return s, nil, err
		}
		s.DefaultToolMeta = &m
	}
	vrl, hasVRL, err := r.str(n, "vrl", "vrl")
	if err != nil {
		return s, nil, err
	}
	sp, ok := n.get("server_parameters")
	if !ok {
		return s, nil, r.fail("server_parameters", "required")
	}
	if sp.kind != kindObject {
		return s, nil, r.typeErr("server_parameters", "an object", sp)
	}
	id := smcp.Identity{Type: s.Type}
	if s.Type == smcp.ServerTypeStdio {
		st, err := r.stdio(sp)
		if err != nil {
			return s, nil, err
		}
		s.Stdio = st
		id.Command, id.Args, id.Env = st.Command, st.Args, st.Env
	} else {
		h, err := r.http(sp, s.Type)
		if err != nil {
			return s, nil, err
		}
		s.HTTP = h
		id.URL, id.Headers = h.URL, h.Headers
	}
	s.BundleID, err = smcp.ResolveBundleID(explicit, s.Name, id)
	if err != nil { // unreachable: explicit was checked above
		return s, nil, r.fail("bundle_id", "invalid bundle_id")
	}
	s.Explicit = explicit != ""

	s.Raw = smcp.MCPServerConfig{
		Name:             s.Name,
		Type:             rawType,
		Disabled:         s.Disabled,
		ForbiddenTools:   append([]string{}, s.ForbiddenTools...),
		ToolMeta:         map[string]smcp.ToolMeta{},
		DefaultToolMeta:  s.DefaultToolMeta,
		ServerParameters: appendJSON(nil, sp),
	}
	for k, v := range s.ToolMeta {
		s.Raw.ToolMeta[k] = v
	}
	if s.Explicit {
		s.Raw.BundleID = &explicit
	}
	if hasVRL {
		s.Raw.VRL = &vrl
	}
	if s.DefaultToolMeta != nil && s.DefaultToolMeta.Alias != nil {
		diags = append(diags, Diagnostic{Server: s.BundleID, Field: "default_tool_meta.alias",
			Message: "an alias in default_tool_meta gives every tool the same exposed name, so only one tool is reachable; set aliases in tool_meta instead"})
	}
	return s, diags, nil
}

// toolMeta decodes a ToolMeta object; unknown keys are ignored.
func (r *reader) toolMeta(v *node, field string) (smcp.ToolMeta, error) {
	var m smcp.ToolMeta
	if v.kind == kindNull {
		return m, nil
	}
	if v.kind != kindObject {
		return m, r.typeErr(field, "an object", v)
	}
	b, ok, err := r.boolean(v, "auto_apply", field+".auto_apply")
	if err != nil {
		return m, err
	}
	if ok {
		m.AutoApply = &b
	}
	if mv, ok := v.get("ret_object_mapper"); ok {
		if mv.kind != kindObject {
			return m, r.typeErr(field+".ret_object_mapper", "an object", mv)
		}
		m.RetObjectMapper = toAny(mv).(map[string]any)
	}
	alias, ok, err := r.str(v, "alias", field+".alias")
	if err != nil {
		return m, err
	}
	if ok {
		if alias == "" {
			return m, r.fail(field+".alias", "must not be empty")
		}
		m.Alias = &alias
	}
	if m.Tags, err = r.strings(v, "tags", field+".tags"); err != nil {
		return m, err
	}
	return m, nil
}

func (r *reader) stdio(sp *node) (*Stdio, error) {
	st := &Stdio{}
	cmd, ok, err := r.str(sp, "command", "server_parameters.command")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, r.fail("server_parameters.command", "required")
	}
	if strings.TrimSpace(cmd) == "" {
		return nil, r.fail("server_parameters.command", "must not be empty")
	}
	st.Command = cmd
	if st.Args, err = r.strings(sp, "args", "server_parameters.args"); err != nil {
		return nil, err
	}
	if st.Env, err = r.stringMap(sp, "env", "server_parameters.env"); err != nil {
		return nil, err
	}
	if st.Cwd, _, err = r.str(sp, "cwd", "server_parameters.cwd"); err != nil {
		return nil, err
	}
	if _, _, err = r.str(sp, "encoding", "server_parameters.encoding"); err != nil {
		return nil, err
	}
	h, ok, err := r.str(sp, "encoding_error_handler", "server_parameters.encoding_error_handler")
	if err != nil {
		return nil, err
	}
	if ok && h != "strict" && h != "ignore" && h != "replace" {
		return nil, r.fail("server_parameters.encoding_error_handler", `must be "strict", "ignore" or "replace"`)
	}
	return st, nil
}

func (r *reader) http(sp *node, typ string) (*HTTP, error) {
	h := &HTTP{}
	u, ok, err := r.str(sp, "url", "server_parameters.url")
	if err != nil {
		return nil, err
	}
	if !ok || u == "" {
		return nil, r.fail("server_parameters.url", "required")
	}
	if !plausibleHTTPURL(u) {
		return nil, r.fail("server_parameters.url", "not an absolute http or https URL")
	}
	h.URL = u
	if h.Headers, err = r.stringMap(sp, "headers", "server_parameters.headers"); err != nil {
		return nil, err
	}
	defTimeout, defRead := DefaultSSETimeout, DefaultSSEReadTimeout
	if typ == smcp.ServerTypeStreamable {
		defTimeout, defRead = DefaultStreamableTimeout, DefaultStreamableSSEReadTimeout
	}
	if h.Timeout, err = r.timeout(sp, "timeout", typ, defTimeout); err != nil {
		return nil, err
	}
	if h.SSEReadTimeout, err = r.timeout(sp, "sse_read_timeout", typ, defRead); err != nil {
		return nil, err
	}
	t, ok, err := r.boolean(sp, "terminate_on_close", "server_parameters.terminate_on_close")
	if err != nil {
		return nil, err
	}
	h.TerminateOnClose = typ == smcp.ServerTypeStreamable && (t || !ok)
	return h, nil
}

// timeout decodes a timeout: float seconds for sse; an ISO 8601 duration
// for streamable, which also takes seconds as a number (as the Python SDK
// does).
func (r *reader) timeout(sp *node, key, typ string, def time.Duration) (time.Duration, error) {
	field := "server_parameters." + key
	v, ok := sp.get(key)
	if !ok {
		return def, nil
	}
	switch {
	case v.kind == kindNumber:
		return r.seconds(v.num, field)
	case v.kind == kindString && typ == smcp.ServerTypeStreamable:
		d, err := ParseISODuration(v.str)
		if err != nil {
			return 0, r.fail(field, `invalid ISO 8601 duration (such as "PT30S"): %s`, err.Error())
		}
		return d, nil
	case typ == smcp.ServerTypeStreamable:
		return 0, r.typeErr(field, `an ISO 8601 duration such as "PT30S"`, v)
	default:
		return 0, r.typeErr(field, "a number of seconds", v)
	}
}

func (r *reader) seconds(f float64, field string) (time.Duration, error) {
	switch {
	case math.IsNaN(f):
		return 0, r.fail(field, "not a number")
	case f < 0:
		return 0, r.fail(field, "must not be negative")
	case f*float64(time.Second) >= math.MaxInt64:
		return 0, r.fail(field, "out of range")
	}
	return time.Duration(f * float64(time.Second)), nil
}

// plausibleHTTPURL reports whether u is an absolute http or https URL or,
// when it holds placeholders, may become one: the text before the first
// "${" must then not name another scheme. Render checks the result.
func plausibleHTTPURL(u string) bool {
	i := strings.Index(u, "${")
	if i < 0 {
		return validHTTPURL(u)
	}
	scheme, _, ok := strings.Cut(u[:i], ":")
	if !ok {
		return true
	}
	scheme = strings.ToLower(scheme)
	return scheme == "http" || scheme == "https"
}

// validHTTPURL reports whether s is an absolute http or https URL with a
// host.
func validHTTPURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme == "http" || scheme == "https"
}

// inputs decodes the "inputs" array.
func (p *parser) inputs(v *node) error {
	r := &reader{tmpl: Error{File: p.file, Index: -1}}
	if v.kind != kindArray {
		return r.typeErr("inputs", "an array", v)
	}
	seen := map[string]bool{}
	for i, n := range v.items {
		field := "inputs[" + strconv.Itoa(i) + "]"
		if n.kind != kindObject {
			return r.typeErr(field, "an object", n)
		}
		var in smcp.MCPServerInput
		var ok bool
		var err error
		if in.Type, ok, err = r.str(n, "type", field+".type"); err != nil {
			return err
		}
		if !ok {
			return r.fail(field+".type", "required")
		}
		switch in.Type {
		case smcp.InputPromptString, smcp.InputPickString, smcp.InputCommand:
		default:
			return r.fail(field+".type", `unknown input type %s; expected "promptString", "pickString" or "command"`, quote(in.Type))
		}
		if in.ID, ok, err = r.str(n, "id", field+".id"); err != nil {
			return err
		}
		if !ok || in.ID == "" {
			return r.fail(field+".id", "required")
		}
		if seen[in.ID] {
			return r.fail(field+".id", "duplicate input id %s", quote(in.ID))
		}
		seen[in.ID] = true
		if in.Description, _, err = r.str(n, "description", field+".description"); err != nil {
			return err
		}
		def, hasDef, err := r.str(n, "default", field+".default")
		if err != nil {
			return err
		}
		if hasDef {
			in.Default = appendJSONString(nil, def)
		}
		pw, ok, err := r.boolean(n, "password", field+".password")
		if err != nil {
			return err
		}
		if ok {
			in.Password = &pw
		}
		if in.Type == smcp.InputPickString {
			if in.Options, err = r.pickOptions(n, field+".options"); err != nil {
				return err
			}
		}
		if in.Command, _, err = r.str(n, "command", field+".command"); err != nil {
			return err
		}
		if in.Args, err = r.stringMap(n, "args", field+".args"); err != nil {
			return err
		}
		switch in.Type {
		case smcp.InputPickString:
			if hasDef && !in.HasOption(def) {
				return r.fail(field+".default", "not the value of any option")
			}
		case smcp.InputCommand:
			if in.Command == "" {
				return r.fail(field+".command", "required")
			}
		}
		p.f.Inputs = append(p.f.Inputs, in)
	}
	return nil
}

// optionForm is how a pickString option must be written, quoted in the
// errors about options.
const optionForm = `[{"label": "...", "value": "..."}]`

// pickOptions decodes the options of a pickString: a non-empty array of
// {label, value} objects whose label and value are non-empty strings.
// Duplicate labels and values are allowed. The 0.3.0 form, an array of
// strings, is refused with an error that shows the new form (0.3.2 has no
// transition period).
func (r *reader) pickOptions(obj *node, field string) ([]smcp.PickStringOption, error) {
	v, ok := obj.get("options")
	if !ok {
		return nil, r.fail(field, "required: a list of options %s", optionForm)
	}
	if v.kind != kindArray {
		return nil, r.fail(field, "must be %s, got %s", optionForm, v.kind.describe())
	}
	if len(v.items) == 0 {
		return nil, r.fail(field, "must be %s with at least one option, got an empty list", optionForm)
	}
	strs := true
	for _, it := range v.items {
		strs = strs && it.kind == kindString
	}
	if strs {
		return nil, r.fail(field, "must be %s, got a list of strings (the form before protocol 0.3.2); write each option as {\"label\": \"shown\", \"value\": \"used\"}", optionForm)
	}
	out := make([]smcp.PickStringOption, len(v.items))
	for i, it := range v.items {
		f := field + "[" + strconv.Itoa(i) + "]"
		if it.kind != kindObject {
			return nil, r.fail(f, `must be {"label": "...", "value": "..."}, got %s`, it.kind.describe())
		}
		for _, k := range []string{"label", "value"} {
			s, ok, err := r.str(it, k, f+"."+k)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, r.fail(f+"."+k, "required")
			}
			if s == "" {
				return nil, r.fail(f+"."+k, "must not be empty")
			}
			if k == "label" {
				out[i].Label = s
			} else {
				out[i].Value = s
			}
		}
	}
	return out, nil
}

// checkEnvNames fails when two identities would read the same environment
// variable: two input ids, or an input id and an (input, bundle_id) pair
// that a kept server actually uses, with the same [EnvName].
func (p *parser) checkEnvNames() error {
	owner := map[string]string{}
	claim := func(name, who string) error {
		if prev, ok := owner[name]; ok && prev != who {
			return p.fail("inputs", "environment variable %s would name both %s and %s", name, prev, who)
		}
		owner[name] = who
		return nil
	}
	declared := map[string]bool{}
	for _, in := range p.f.Inputs {
		declared[in.ID] = true
		if err := claim(EnvName(in.ID, "", ""), "input "+quote(in.ID)); err != nil {
			return err
		}
	}
	for _, s := range p.f.Servers {
		for _, id := range s.referencedInputs() {
			if !declared[id] {
				continue
			}
			if err := claim(EnvName(id, s.BundleID, ""), "input "+quote(id)+" of server "+quote(s.BundleID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// referencedInputs returns the ids of the ${input:ID} placeholders in the
// fields of s that Render substitutes.
func (s Server) referencedInputs() []string {
	var ids []string
	s.eachTemplate(func(_ string, v string) {
		phs, _ := scanPlaceholders(v)
		for _, ph := range phs {
			if ph.input {
				ids = append(ids, ph.name)
			}
		}
	})
	return ids
}

// eachTemplate calls fn with the field path and value of every field that
// may hold placeholders.
func (s Server) eachTemplate(fn func(field, value string)) {
	if st := s.Stdio; st != nil {
		fn("server_parameters.command", st.Command)
		for i, a := range st.Args {
			fn("server_parameters.args["+strconv.Itoa(i)+"]", a)
		}
		for _, k := range sortedKeys(st.Env) {
			fn(joinPath([]string{"server_parameters.env", pathKey(k)}), st.Env[k])
		}
		fn("server_parameters.cwd", st.Cwd)
	}
	if h := s.HTTP; h != nil {
		fn("server_parameters.url", h.URL)
		for _, k := range sortedKeys(h.Headers) {
			fn(joinPath([]string{"server_parameters.headers", pathKey(k)}), h.Headers[k])
		}
	}
}
