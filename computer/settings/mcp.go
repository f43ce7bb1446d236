package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Embed is the origin of the servers a host program gives its Computer
// itself (between local and flag; never a file, never written).
const Embed Scope = "embed"

// mcpOrder are the origins of MCP servers, lowest first.
var mcpOrder = []Scope{User, Project, Local, Embed, Flag, Policy}

// Trusted reports whether a server of origin s starts without the
// approval gate's question: user, embed, flag and policy are the
// operator's own; project and local come with a working directory.
func (s Scope) Trusted() bool { return s == User || s == Embed || s == Flag || s == Policy }

// MCPServer is one server of the resolved mcp.json scopes.
type MCPServer struct {
	// Key is its key in "servers", which is its name.
	Key string
	// Origin is the highest scope that defines it; File, that scope's
	// file ("" for embed).
	Origin Scope
	File   string
	// Server is the definition, parsed and validated by package config
	// (placeholders literal: they render only at spawn).
	Server config.Server
}

// MCP is the servers and inputs of every mcp.json scope, resolved: a
// higher scope's server replaces a lower's of the same key whole, and an
// input a lower's of the same id.
type MCP struct {
	Servers []MCPServer // by key
	Inputs  []smcp.MCPServerInput
	Errors  []Error
}

// Server returns the resolved server with key key.
func (m *MCP) Server(key string) (MCPServer, bool) {
	for _, s := range m.Servers {
		if s.Key == key {
			return s, true
		}
	}
	return MCPServer{}, false
}

// LoadMCP reads and resolves the mcp.json of every scope: user,
// project, local, the host's embedded servers (embed), the flag file
// (flagFile, --mcp-config; "" for none) and policy (managed-mcp.json).
// A server that is not valid, or whose body names it otherwise than its
// key, is dropped with an [Error]; a file that is not a JSON object with
// "servers" and "inputs" is left out with one. Nothing here stops a
// Computer from starting.
func LoadMCP(p Paths, flagFile string, embed []config.Server) *MCP {
	m := &MCP{}
	byKey := map[string]MCPServer{}
	inputs := map[string]int{} // id → index in m.Inputs
	type file struct {
		scope Scope
		path  string
		doc   map[string]any
		err   error // unreadable: reported in its scope's turn
	}
	var files []file
	for _, s := range mcpOrder {
		path := p.MCPFile(s)
		if s == Flag {
			path = flagFile
		}
		if s == Embed || path == "" {
			files = append(files, file{scope: s})
			continue
		}
		doc, err := readObject(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		files = append(files, file{s, path, doc, err})
	}
	// The working directory's inputs are its own: pooled as
	// "workspace/ID", and only the project's and local servers' ${input:ID}
	// name them, so that a committed file can neither replace nor supply
	// an input of a trusted server (or a plugin's).
	workspace := map[string]string{}
	for _, f := range files {
		if f.scope == Project || f.scope == Local {
			for _, id := range inputIDs(f.doc) {
				workspace[id] = WorkspaceInputPrefix + id
			}
		}
	}
	for _, f := range files {
		if f.err != nil {
			m.Errors = append(m.Errors, Error{Scope: f.scope, Field: "<file>", Reason: f.err.Error(), SourcePath: f.path})
			continue
		}
		if f.scope == Embed {
			for _, srv := range embed {
				byKey[srv.Name] = MCPServer{Key: srv.Name, Origin: Embed, Server: srv}
			}
			continue
		}
		var rename map[string]string
		if f.scope == Project || f.scope == Local {
			rename = workspace
		}
		servers, ins, errs := parseMCP(f.scope, f.path, f.doc, rename)
		m.Errors = append(m.Errors, errs...)
		for _, srv := range servers {
			byKey[srv.Key] = srv
		}
		for _, in := range ins {
			if i, ok := inputs[in.ID]; ok {
				m.Inputs[i] = in
				continue
			}
			inputs[in.ID] = len(m.Inputs)
			m.Inputs = append(m.Inputs, in)
		}
	}
	for _, k := range sortedKeys(byKey) {
		m.Servers = append(m.Servers, byKey[k])
	}
	return m
}

// WorkspaceInputPrefix starts the pooled id of an input of the project's
// or local mcp.json ("workspace/ID"; its variable is
// A2C_SMCP_workspace_ID).
const WorkspaceInputPrefix = "workspace/"

// inputIDs are the ids of doc's inputs, as written.
func inputIDs(doc map[string]any) []string {
	list, _ := doc["inputs"].([]any)
	var out []string
	for _, x := range list {
		if o, ok := x.(map[string]any); ok {
			if id, ok := o["id"].(string); ok && validInputID(id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// validInputID: an mcp.json input's id may not hold '@' or '/', which
// pooled ids use (a plugin's "<plugin>@<mp>/ID", the working
// directory's "workspace/ID"), so that no file can take a pooled id.
func validInputID(id string) bool { return id != "" && !strings.ContainsAny(id, "@/") }

// CheckMCPPath checks the file path given with --mcp-config (see
// CheckMCPFile); its error names the flag and the file.
func CheckMCPPath(path string) error {
	b, err := ReadFile(path)
	if err != nil {
		return fmt.Errorf("--mcp-config %s: cannot be read", path)
	}
	if err := CheckMCPFile(b); err != nil {
		return fmt.Errorf("--mcp-config %s: %w", path, err)
	}
	return nil
}

// CheckMCPFile reports whether doc, a file's content given with
// --mcp-config, is an mcp.json: a JSON object holding "servers" or
// "inputs". The CLI exits 2 before connecting otherwise.
func CheckMCPFile(doc []byte) error {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(doc, &v); err != nil || v == nil {
		return errors.New("not a JSON object")
	}
	if _, ok := v["servers"]; !ok {
		if _, ok := v["inputs"]; !ok {
			return errors.New(`holds neither "servers" nor "inputs"`)
		}
	}
	return nil
}

// parseMCP parses one scope's mcp.json object: each server on its own
// (one bad server drops only itself), then the inputs.
//
// rename maps an input id to its pooled id: each ${input:ID} of the
// file's servers, and each of its inputs, takes it.
func parseMCP(s Scope, file string, doc map[string]any, rename map[string]string) ([]MCPServer, []smcp.MCPServerInput, []Error) {
	var errs []Error
	bad := func(field, reason string) {
		errs = append(errs, Error{Scope: s, Field: field, Reason: reason, SourcePath: file})
	}
	servers, ok := doc["servers"].(map[string]any)
	if _, present := doc["servers"]; present && !ok {
		bad("servers", "must be an object of servers by name")
	}
	var out []MCPServer
	for _, key := range sortedKeys(servers) {
		body, ok := servers[key].(map[string]any)
		if !ok {
			bad("servers."+key, "must be a server object")
			continue
		}
		if n, has := body["name"]; has && n != key {
			bad("servers."+key+".name", fmt.Sprintf("%v is not the server's key %q", asJSONString(n), key))
			continue
		}
		one, _ := json.Marshal(map[string]any{"servers": map[string]any{key: body}})
		for id, pooled := range rename {
			one = bytes.ReplaceAll(one, []byte("${input:"+id+"}"), []byte("${input:"+pooled+"}"))
		}
		f, err := config.Parse(one, file+".json")
		if err != nil {
			var ce *config.Error
			reason := err.Error()
			if errors.As(err, &ce) {
				reason = ce.Message
				if ce.Field != "" {
					reason = ce.Field + ": " + ce.Message
				}
			}
			bad("servers."+key, reason)
			continue
		}
		if len(f.Servers) != 1 {
			bad("servers."+key, "not a server")
			continue
		}
		out = append(out, MCPServer{Key: key, Origin: s, File: file, Server: f.Servers[0]})
	}
	var ins []smcp.MCPServerInput
	if raw, present := doc["inputs"]; present {
		b, _ := json.Marshal(map[string]any{"inputs": raw})
		f, err := config.Parse(b, file+".json")
		if err != nil {
			bad("inputs", "not valid inputs: "+err.Error())
		} else {
			for i, in := range f.Inputs {
				if !validInputID(in.ID) {
					bad(fmt.Sprintf("inputs[%d].id", i), fmt.Sprintf("%q may not hold '@' or '/'", in.ID))
					continue
				}
				if pooled, ok := rename[in.ID]; ok {
					in.ID = pooled
				}
				ins = append(ins, in)
			}
		}
	}
	return out, ins, errs
}

func asJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
