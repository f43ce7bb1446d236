package smcp

import (
	"fmt"
	"slices"
	"strings"
)

// supportedVersions are the protocol versions a process of this project
// can be started with, oldest first. The last one is [ProtocolVersion].
var supportedVersions = []string{"0.3.0", "0.3.1", "0.3.2", "0.4.0"}

// SupportedVersions returns the protocol versions a server, Computer or
// Agent of this project can speak, oldest first. The caller owns the
// returned slice.
func SupportedVersions() []string { return slices.Clone(supportedVersions) }

// Profile is everything that differs between the protocol versions this
// project speaks, decided once from the version a process was started
// with. Code elsewhere asks the profile ("does this version have
// client:put_blob?") and never compares versions itself, so that adding or
// dropping a version changes this file only.
//
// The zero Profile is not valid; use [NewProfile] or [DefaultProfile].
type Profile struct {
	// Version is the version spoken, as sent in a2c_version and compared by
	// the handshake gate.
	Version string

	// PutBlob: client:put_blob exists (0.4.0). A server routes it, a
	// Computer lands uploads, an Agent may send it. Without it the event
	// is unknown, as to a 0.3 peer.
	PutBlob bool
	// SkillTags: A2CSkillRef carries the frontmatter's tags (0.4.0).
	SkillTags bool
	// ServerToolTags: a Computer honours the tags an MCP server declares in
	// Tool._meta["a2c_tool_meta"] as the lowest layer of the ToolMeta
	// merge (0.4.0). Without it the server's declaration is dropped.
	ServerToolTags bool
	// PickOptionObjects: a pickString input's options are {label, value}
	// objects on the wire (client:get_config), 0.3.2 and later; before,
	// they are the option values as plain strings.
	PickOptionObjects bool
}

// NewProfile returns the profile of version, which must be one of
// [SupportedVersions]; any other version is an error naming the supported
// ones.
func NewProfile(version string) (Profile, error) {
	v, err := ParseVersion(version)
	if err != nil {
		return Profile{}, err
	}
	if !slices.Contains(supportedVersions, v.String()) {
		return Profile{}, fmt.Errorf("smcp: protocol version %s is not supported; supported: %s", v, strings.Join(supportedVersions, ", "))
	}
	at := func(minor, patch int) bool {
		return v.Minor > minor || (v.Minor == minor && v.Patch >= patch)
	}
	return Profile{
		Version:           v.String(),
		PutBlob:           at(4, 0),
		SkillTags:         at(4, 0),
		ServerToolTags:    at(4, 0),
		PickOptionObjects: at(3, 2),
	}, nil
}

// DefaultProfile returns the profile of [ProtocolVersion].
func DefaultProfile() Profile {
	p, err := NewProfile(ProtocolVersion)
	if err != nil {
		panic(err) // ProtocolVersion is always supported
	}
	return p
}

// ClientEvents returns the client:* events of p's version in the order
// the specification lists them. The caller owns the returned slice.
func (p Profile) ClientEvents() []string {
	evs := ClientEvents()
	if !p.PutBlob {
		evs = slices.DeleteFunc(evs, func(e string) bool { return e == EventPutBlob })
	}
	return evs
}

// IsClientEvent reports whether name is a client:* event of p's version:
// one a server routes to a Computer.
func (p Profile) IsClientEvent(name string) bool {
	if name == EventPutBlob {
		return p.PutBlob
	}
	return IsClientEvent(name)
}
