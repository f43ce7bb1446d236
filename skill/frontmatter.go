package skill

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Frontmatter limits of the specification, in characters (Unicode code
// points).
const (
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
)

var bom = []byte("\xef\xbb\xbf")

// Split finds the YAML frontmatter of a SKILL.md. It returns the YAML
// text between the delimiters (front), the bytes served for SKILL.md
// (body: everything after the closing delimiter line) and whether there
// was a frontmatter block. Without one, front is nil and body is data.
//
// The block is the opening delimiter line through the closing one, both
// included with their line ends; a delimiter line is "---", optionally
// followed by spaces or tabs, ended by LF or CRLF (the closing one may
// also end the file). The opening line must be the file's first line; a
// UTF-8 byte order mark before it is allowed and goes with the block.
// A "---" line that is indented, or a first line that is blank, does
// not delimit.
func Split(data []byte) (front, body []byte, ok bool) {
	rest := bytes.TrimPrefix(data, bom)
	n, ok := delimiter(rest, false)
	if !ok {
		return nil, data, false
	}
	start := len(data) - len(rest) + n
	for i := start; i < len(data); {
		if n, ok := delimiter(data[i:], true); ok {
			return data[start:i], data[i+n:], true
		}
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil, data, false
}

// delimiter reports whether b starts with a delimiter line and its
// length, line end included. atEOF allows a line that ends the input.
func delimiter(b []byte, atEOF bool) (int, bool) {
	if !bytes.HasPrefix(b, []byte("---")) {
		return 0, false
	}
	i := 3
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	switch {
	case i == len(b):
		return i, atEOF
	case b[i] == '\n':
		return i + 1, true
	case b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n':
		return i + 2, true
	}
	return 0, false
}

// Meta is a validated frontmatter: the seven fields of the specification
// (the marketplace SKILL v1 format), normalised.
type Meta struct {
	Name          string
	Description   string
	License       string
	Compatibility string
	// Metadata is the frontmatter's metadata map, passed through.
	Metadata map[string]any
	// AllowedTools is allowed-tools as a list: a string is split on white
	// space.
	AllowedTools []string
	// Tags is the frontmatter's tags when they are a list of strings; nil
	// otherwise (see [ParseMeta]).
	Tags []string
}

// ErrNoFrontmatter is returned for a SKILL.md without a frontmatter block.
var ErrNoFrontmatter = errors.New("SKILL.md has no frontmatter")

// ParseYAML decodes a frontmatter block into a map, without validating
// any field. An empty block is an empty map; YAML that is not a mapping
// is an error. Nested values are made JSON-compatible (mapping keys that
// are not strings are formatted).
func ParseYAML(front []byte) (map[string]any, error) {
	var v any
	if err := yaml.Unmarshal(front, &v); err != nil {
		return nil, fmt.Errorf("frontmatter is not valid YAML: %w", err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := jsonable(v).(map[string]any)
	if !ok {
		return nil, errors.New("frontmatter is not a YAML mapping")
	}
	return m, nil
}

// jsonable converts what YAML decodes into what encoding/json encodes.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

// ParseMeta decodes and validates a frontmatter block as the
// specification fixes it: name is required and strict kebab-case (see
// [ValidLeaf]); description is required, 1 to 1024 characters and not
// only white space; license and compatibility (at most 500 characters)
// are optional scalars; metadata is an optional mapping; allowed-tools
// an optional string (split on white space) or list of strings. Any
// violation is an error: the skill is malformed. A field set to null
// counts as absent; fields the specification does not name are ignored.
//
// tags is passed through and not validated: when it is present but not
// a list of strings, Tags stays nil and a diagnostic is logged on log (if
// not nil); the skill remains valid.
func ParseMeta(front []byte, log *slog.Logger) (Meta, error) {
	raw, err := ParseYAML(front)
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	var ok bool
	if m.Name, ok = raw["name"].(string); !ok || !ValidLeaf(m.Name) {
		return Meta{}, errors.New("frontmatter name is missing or not kebab-case ([a-z0-9-], 1-64, no leading, trailing or double '-')")
	}
	m.Description, ok = raw["description"].(string)
	if n := utf8.RuneCountInString(m.Description); !ok || strings.TrimSpace(m.Description) == "" || n > MaxDescriptionLen {
		return Meta{}, errors.New("frontmatter description is missing, empty or longer than 1024 characters")
	}
	if m.License, ok = scalar(raw["license"]); !ok {
		return Meta{}, errors.New("frontmatter license is not a string")
	}
	if m.Compatibility, ok = scalar(raw["compatibility"]); !ok || utf8.RuneCountInString(m.Compatibility) > MaxCompatibilityLen {
		return Meta{}, errors.New("frontmatter compatibility is not a string of at most 500 characters")
	}
	switch md := raw["metadata"].(type) {
	case nil:
	case map[string]any:
		m.Metadata = md
	default:
		return Meta{}, errors.New("frontmatter metadata is not a mapping")
	}
	if m.AllowedTools, ok = stringList(raw["allowed-tools"], true); !ok {
		return Meta{}, errors.New("frontmatter allowed-tools is neither a string nor a list of strings")
	}
	if t, present := raw["tags"]; present && t != nil {
		if m.Tags, ok = stringList(t, false); !ok && log != nil {
			log.Warn("skill: frontmatter tags is not a list of strings; tags left out", "skill", m.Name)
		}
	}
	return m, nil
}

// scalar returns a YAML scalar as a string; nil is "".
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

// stringList returns v as a list of strings: a list whose items are all
// strings, or (with split) a string split on white space. nil is nil.
func stringList(v any, split bool) ([]string, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case string:
		if split {
			return strings.Fields(x), true
		}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// Ref returns the A2CSkillRef of a skill with these frontmatter fields;
// the caller sets the source-specific fields (URI, Version).
func (m Meta) Ref(name, source, path string) smcp.A2CSkillRef {
	r := smcp.A2CSkillRef{Name: name, Source: source, Path: path, Description: m.Description,
		License: m.License, Compatibility: m.Compatibility, SkillMetadata: m.Metadata, Tags: m.Tags}
	if len(m.AllowedTools) > 0 {
		r.AllowedTools = m.AllowedTools
	}
	return r
}
