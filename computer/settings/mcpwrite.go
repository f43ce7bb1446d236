package settings

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer/config"
)

// The mcp.json writes' failures a caller tells apart.
var (
	// ErrMCPWriteTarget: the server's winning definition is in a scope
	// that is not written (policy, flag, embed).
	ErrMCPWriteTarget = errors.New("mcp.json write target is read-only")
	// ErrMCPCorrupt: the file to write is not a JSON object; it is left
	// as it is.
	ErrMCPCorrupt = errors.New("mcp.json is corrupt")
)

// UpsertMCP adds or replaces the server key of the mcp.json scopes with
// body (an MCPServerConfig object, whose "name", if any, must be key).
// An existing server is written where it is defined (its origin scope); a
// new one goes to scope s (user, project or local). A body equal to the
// one there writes nothing. A server whose winning definition is in the
// policy or flag file, or the host's own (embed), cannot be written
// ([ErrMCPWriteTarget]). That a plugin brings a server of the same
// bundle_id is no reason to refuse: the declaration wins, and the plugin's
// dependency is satisfied. It returns the scope written (or that holds
// the equal body).
func UpsertMCP(p Paths, flagFile string, embed []config.Server, s Scope, key string, body map[string]any) (Scope, error) {
	if key == "" || strings.ContainsAny(key, ".\x00") {
		return "", fmt.Errorf("mcp.json: %q is not a server name", key)
	}
	if n, ok := body["name"]; ok && n != key {
		return "", fmt.Errorf("mcp.json: the body's name %s is not %q", asJSONString(n), key)
	}
	one, _ := json.Marshal(map[string]any{"servers": map[string]any{key: body}})
	if _, err := config.Parse(one, "server "+key); err != nil {
		return "", fmt.Errorf("mcp.json: server %q: %w", key, err)
	}
	target := s
	if cur, ok := LoadMCP(p, flagFile, embed).Server(key); ok {
		if !cur.Origin.Writable() {
			return "", fmt.Errorf("server %q is defined by the %s scope: %w", key, cur.Origin, ErrMCPWriteTarget)
		}
		target = cur.Origin
	}
	if !target.Writable() {
		return "", ReadOnlyError(target)
	}
	if err := checkWorkspaceDir(p, target); err != nil {
		return "", err
	}
	err := updateMCP(p.MCPFile(target), func(servers map[string]any) bool {
		if old, ok := servers[key]; ok && reflect.DeepEqual(old, jsonValue(body)) {
			return false
		}
		servers[key] = jsonValue(body)
		return true
	})
	return target, err
}

// RemoveMCP removes the server key from every writable mcp.json scope
// that defines it and returns those scopes. When the winning definition
// is the policy's, the flag file's or the host's, nothing is removed
// ([ErrMCPWriteTarget]); when no scope defines it, the error says so.
func RemoveMCP(p Paths, flagFile string, embed []config.Server, key string) ([]Scope, error) {
	cur, ok := LoadMCP(p, flagFile, embed).Server(key)
	if !ok {
		return nil, fmt.Errorf("mcp.json: no server %q is declared", key)
	}
	if !cur.Origin.Writable() {
		return nil, fmt.Errorf("server %q is defined by the %s scope: %w", key, cur.Origin, ErrMCPWriteTarget)
	}
	var done []Scope
	for _, s := range []Scope{User, Project, Local} {
		if err := checkWorkspaceDir(p, s); err != nil {
			return done, err
		}
		removed := false
		err := updateMCP(p.MCPFile(s), func(servers map[string]any) bool {
			_, removed = servers[key]
			delete(servers, key)
			return removed
		})
		if err != nil {
			return done, err
		}
		if removed {
			done = append(done, s)
		}
	}
	return done, nil
}

// updateMCP changes the "servers" object of the mcp.json at path under
// its lock (the rest of the file kept, see update); change reports
// whether it changed anything. A file that is not a JSON object, or whose
// servers are not an object, is not written ([ErrMCPCorrupt]).
func updateMCP(path string, change func(servers map[string]any) bool) error {
	var bad error
	err := update(path, func(m map[string]any) bool {
		servers, ok := m["servers"].(map[string]any)
		if _, present := m["servers"]; present && !ok {
			bad = fmt.Errorf("%s: servers is not an object: %w", path, ErrMCPCorrupt)
			return false
		}
		if servers == nil {
			servers = map[string]any{}
		}
		if !change(servers) {
			return false
		}
		m["servers"] = servers
		return true
	})
	if errors.Is(err, errNotObject) {
		return fmt.Errorf("%s: %w", path, ErrMCPCorrupt)
	}
	return cmp.Or(bad, err)
}

// jsonValue is v as JSON reads it back (for comparison with a file's).
func jsonValue(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
