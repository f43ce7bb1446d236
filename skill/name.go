package skill

import (
	"errors"
	"strings"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Kind is the form of a skill name, told by its number of segments.
type Kind int

// The three name forms of the specification.
const (
	// KindUser is "<skill>": one segment, a skill of the user's folder.
	KindUser Kind = iota + 1
	// KindMarketplace is "<plugin>:<skill>": two segments. A plugin
	// literally named "mcp" still makes a marketplace name.
	KindMarketplace
	// KindMCP is "mcp:<bundle_id>:<skill>": three segments, the first the
	// literal "mcp".
	KindMCP
)

// MaxLeafLen is the longest <skill> or <plugin> segment.
const MaxLeafLen = 64

// SourceUser is [smcp.A2CSkillRef.Source] of the user folder's skills.
const SourceUser = "user"

// Name is a skill name split into its segments.
type Name struct {
	Kind Kind
	// Plugin is the <plugin> segment of a marketplace name.
	Plugin string
	// Server is the <bundle_id> segment of an MCP name.
	Server string
	// Leaf is the <skill> segment, present in every form.
	Leaf string
}

// ErrInvalidName is returned by [ParseName] for a name the lexer refuses;
// the Computer answers it with 4016.
var ErrInvalidName = errors.New("skill: invalid skill name")

// ParseName runs the specification's name lexer: split on ':', refuse a
// segment count other than 1, 2 or 3 and a 3-segment name whose first
// segment is not "mcp", then check each segment (the <skill> and <plugin>
// segments with [ValidLeaf], the <bundle_id> segment with
// [smcp.ValidBundleID]). It never looks at any registry, so that a name
// that fails it never reaches one.
func ParseName(s string) (Name, error) {
	seg := strings.Split(s, ":")
	var n Name
	switch len(seg) {
	case 1:
		n = Name{Kind: KindUser, Leaf: seg[0]}
	case 2:
		n = Name{Kind: KindMarketplace, Plugin: seg[0], Leaf: seg[1]}
		if !ValidLeaf(n.Plugin) {
			return Name{}, ErrInvalidName
		}
	case 3:
		if seg[0] != "mcp" || !smcp.ValidBundleID(seg[1]) {
			return Name{}, ErrInvalidName
		}
		n = Name{Kind: KindMCP, Server: seg[1], Leaf: seg[2]}
	default:
		return Name{}, ErrInvalidName
	}
	if !ValidLeaf(n.Leaf) {
		return Name{}, ErrInvalidName
	}
	return n, nil
}

// String returns the name in its wire form.
func (n Name) String() string {
	switch n.Kind {
	case KindMarketplace:
		return n.Plugin + ":" + n.Leaf
	case KindMCP:
		return MCPName(n.Server, n.Leaf)
	}
	return n.Leaf
}

// ValidLeaf reports whether s is a strict kebab-case segment: 1 to
// [MaxLeafLen] bytes of [a-z0-9-], neither starting nor ending with '-',
// and without "--". It is the rule of a <skill> and a <plugin> segment,
// and of frontmatter name.
func ValidLeaf(s string) bool {
	if len(s) == 0 || len(s) > MaxLeafLen || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// MCPName is the name of skill leaf published by the MCP server bundleID:
// "mcp:<bundle_id>:<leaf>", the bundle_id copied as it is.
func MCPName(bundleID, leaf string) string { return "mcp:" + bundleID + ":" + leaf }

// MCPSourceName is [smcp.A2CSkillRef.Source] of the skills of the MCP server
// bundleID: "mcp:<bundle_id>".
func MCPSourceName(bundleID string) string { return "mcp:" + bundleID }
