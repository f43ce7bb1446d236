package smcp

import "encoding/json"

// EventManagementState is an extension of this implementation, not an
// A2C-SMCP event: a Computer that runs the management plane (settings
// scopes, marketplaces, plugins) tells the Server where each of its MCP
// servers comes from and what state each plugin is in, so that the hub's
// console can show it. The client:* answers cannot carry it (their
// shapes are the protocol's), hence an event of its own.
//
// It travels from a Computer to the Server only, with no ack (payload
// [ManagementState]): the Server keeps the last one of each joined
// Computer and never relays or broadcasts it, so no Agent ever sees it. A
// Server that does not know the event drops it; a Computer that has no
// management plane never sends it. The Computer sends it again after
// every join, and each time the state changes.
const EventManagementState = "a2c:management_state"

// ManagementState is the payload of [EventManagementState]: one
// Computer's servers as the management plane resolved them, and its
// plugins. It carries names, origins and states only, never a server's
// parameters (commands, URLs, headers, environment), which may hold
// secrets. A nil Servers or Plugins encodes as an empty array.
type ManagementState struct {
	// Computer is the sending Computer's name. The Server files the
	// state under the member that sent it, whatever this says.
	Computer string          `json:"computer"`
	Servers  []ManagedServer `json:"servers"`
	Plugins  []ManagedPlugin `json:"plugins"`
}

// MarshalJSON encodes s, writing a nil Servers or Plugins as [].
func (s ManagementState) MarshalJSON() ([]byte, error) {
	type wire ManagementState
	if s.Servers == nil {
		s.Servers = []ManagedServer{}
	}
	if s.Plugins == nil {
		s.Plugins = []ManagedPlugin{}
	}
	return json.Marshal(wire(s))
}

// ManagedServer is one MCP server the management plane met, served or
// not. A bundle_id may appear more than once (a scope and a plugin may
// both declare it); at most one of them is served.
type ManagedServer struct {
	BundleID string `json:"bundle_id"`
	Name     string `json:"name"`
	// Origin is the settings scope that declares the server (user,
	// project, local, embed, flag, policy), or "plugin".
	Origin string `json:"origin"`
	// Plugin is the declaring plugin, "<plugin>@<marketplace>", for
	// origin plugin; empty otherwise.
	Plugin string `json:"plugin,omitempty"`
	// Verdict is the approval gate's: enabled, disabled or pending (a
	// person must approve it).
	Verdict string `json:"verdict"`
	// Served reports whether the Computer hosts it.
	Served bool `json:"served"`
}

// ManagedPlugin is one installed plugin of a Computer.
type ManagedPlugin struct {
	// ID is "<plugin>@<marketplace>".
	ID string `json:"id"`
	// State is installed_enabled, installed_disabled or not_installed (a
	// record left without intent).
	State string `json:"state"`
	// Enabled is the merged enabledPlugins setting.
	Enabled bool `json:"enabled"`
	// Active reports whether its skills and servers are served; Reason
	// says why an enabled plugin is not.
	Active bool   `json:"active"`
	Reason string `json:"reason,omitempty"`
	// MCPServers are the bundle_ids the plugin declares. A nil
	// MCPServers encodes as an empty array.
	MCPServers []string `json:"mcpServers"`
}

// MarshalJSON encodes p, writing a nil MCPServers as [].
func (p ManagedPlugin) MarshalJSON() ([]byte, error) {
	type wire ManagedPlugin
	if p.MCPServers == nil {
		p.MCPServers = []string{}
	}
	return json.Marshal(wire(p))
}
