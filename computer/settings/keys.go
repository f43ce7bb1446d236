package settings

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Error is a settings problem: a key or an item dropped from a layer, or
// a layer that could not be read. It never stops a Computer; `settings
// show` and the boot report it.
type Error struct {
	Scope      Scope  `json:"scope"`
	Field      string `json:"field"` // dotted; "<file>" for the file as a whole
	Reason     string `json:"reason"`
	SourcePath string `json:"source_path"`
}

func (e Error) Error() string {
	return fmt.Sprintf("%s: %s settings: %s: %s", e.SourcePath, e.Scope, e.Field, e.Reason)
}

// namePattern is a marketplace's or a plugin's name: lowercase words of
// letters and digits joined by single dashes, 1 to 64 characters.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidName reports whether s is a marketplace or plugin name.
func ValidName(s string) bool { return len(s) <= 64 && namePattern.MatchString(s) }

// ParsePluginID splits "<plugin>@<marketplace>" and checks both names.
func ParsePluginID(id string) (plugin, marketplace string, err error) {
	p, m, ok := strings.Cut(id, "@")
	if !ok || !ValidName(p) || !ValidName(m) {
		return "", "", fmt.Errorf("invalid plugin id '%s' (expected '<plugin>@<marketplace>')", id)
	}
	return p, m, nil
}

// scpForm is a git remote in scp form, user@host:path.
var scpForm = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/].*|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:/.+`)

// ValidGitURL reports whether s is a remote a marketplace may come
// from: ssh://, git://, http(s)://, file:// with a path, or scp form.
func ValidGitURL(s string) bool {
	if scpForm.MatchString(s) && !strings.Contains(s, "://") {
		return true
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "ssh", "git", "http", "https":
		return u.Host != ""
	case "file":
		return u.Host == "" && filepath.IsAbs(u.Path)
	}
	return false
}

// bundleHint is what a bad bundle_id in a gate list probably meant:
// every run of characters a bundle_id cannot hold becomes "_".
func bundleHint(s string) string {
	var b strings.Builder
	under := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.ReplaceAll(b.String(), "__", "_")
}

// A rule is one known key: the scopes that may supply it, and how its
// value is checked (check drops what is bad from v and reports it
// through bad, with the dotted field).
type rule struct {
	suppliers []Scope
	check     func(v any, bad func(field, reason string)) any
}

// Why a key is refused in a scope.
const (
	policyOnly = "only the policy scope may set it"
	notProject = "a project's settings (committed, anyone's) may not set it; user, local, flag or policy may"
)

// policyOnlyFields and trustedOnlyFields name the keys whose refusal has
// its own reason (above).
var (
	policyOnlyFields  = []string{"allowedMcpServers", "deniedMcpServers"}
	trustedOnlyFields = []string{"enabledMcpjsonServers", "enableAllProjectMcpServers", "landingRoot"}
)

// rules are the known keys (dotted for nested ones).
var rules = map[string]rule{
	"extraKnownMarketplaces":            {[]Scope{User, Project, Local}, checkMarketplaces},
	"installedPlugins":                  {[]Scope{User, Project, Local}, checkList(checkPluginID)},
	"enabledPlugins":                    {[]Scope{User, Project, Local}, checkEnabled},
	"strictKnownMarketplaces":           {[]Scope{User, Project, Policy}, checkBool},
	"trustedMarketplaces":               {[]Scope{User, Project, Local, Policy}, checkList(checkNonEmpty)},
	"blockedMarketplaces":               {[]Scope{User, Project, Policy}, checkList(checkNonEmpty)},
	"enableAllProjectMcpServers":        {[]Scope{User, Local, Flag, Policy}, checkBool},
	"enabledMcpjsonServers":             {[]Scope{User, Local, Flag, Policy}, checkList(checkBundleID)},
	"disabledMcpjsonServers":            {[]Scope{User, Project, Local, Flag, Policy}, checkList(checkBundleID)},
	"allowedMcpServers":                 {[]Scope{Policy}, checkList(checkBundleID)},
	"deniedMcpServers":                  {[]Scope{Policy}, checkList(checkBundleID)},
	"permissions.additionalDirectories": {[]Scope{User, Project, Local}, checkList(checkAbsPath)},
	"landingRoot":                       {[]Scope{User, Local, Flag, Policy}, checkAbsPathValue},
}

func checkBool(v any, bad func(string, string)) any {
	if _, ok := v.(bool); !ok {
		bad("", "must be true or false")
		return nil
	}
	return v
}

// checkList checks a list item by item (item returns a reason, "" for
// a good one); a bad item is dropped, the rest kept.
func checkList(item func(any) string) func(any, func(string, string)) any {
	return func(v any, bad func(string, string)) any {
		list, ok := v.([]any)
		if !ok {
			bad("", "must be a list")
			return nil
		}
		out := make([]any, 0, len(list))
		for i, x := range list {
			if why := item(x); why != "" {
				bad(fmt.Sprintf("[%d]", i), why)
				continue
			}
			out = append(out, x)
		}
		return out
	}
}

func checkNonEmpty(x any) string {
	if s, ok := x.(string); !ok || s == "" {
		return "must be a non-empty string"
	}
	return ""
}

func checkPluginID(x any) string {
	s, ok := x.(string)
	if !ok {
		return "must be a string '<plugin>@<marketplace>'"
	}
	if _, _, err := ParsePluginID(s); err != nil {
		return err.Error()
	}
	return ""
}

func checkBundleID(x any) string {
	s, ok := x.(string)
	if !ok {
		return "must be a bundle_id (a string)"
	}
	if !smcp.ValidBundleID(s) {
		return fmt.Sprintf("%q is not a bundle_id (letters, digits, '_' and '-', no \"__\"); did you mean %q?", s, bundleHint(s))
	}
	return ""
}

func checkAbsPath(x any) string {
	if s, ok := x.(string); !ok || !filepath.IsAbs(s) {
		return "must be an absolute path"
	}
	return ""
}

func checkAbsPathValue(v any, bad func(string, string)) any {
	if why := checkAbsPath(v); why != "" {
		bad("", why)
		return nil
	}
	return v
}

func checkEnabled(v any, bad func(string, string)) any {
	m, ok := v.(map[string]any)
	if !ok {
		bad("", "must be an object of \"<plugin>@<marketplace>\": true or false")
		return nil
	}
	out := map[string]any{}
	for _, id := range sortedKeys(m) {
		b := m[id]
		if why := checkPluginID(id); why != "" {
			bad("."+id, why)
			continue
		}
		if _, ok := b.(bool); !ok {
			bad("."+id, "must be true or false")
			continue
		}
		out[id] = b
	}
	return out
}

func checkMarketplaces(v any, bad func(string, string)) any {
	m, ok := v.(map[string]any)
	if !ok {
		bad("", "must be an object of marketplace names")
		return nil
	}
	out := map[string]any{}
	for _, name := range sortedKeys(m) {
		e, f := m[name], "."+name
		if !ValidName(name) {
			bad(f, "a marketplace name is 1 to 64 of [a-z0-9] in words joined by '-'")
			continue
		}
		entry, ok := e.(map[string]any)
		if !ok {
			bad(f, "must be an object {source, autoUpdate}")
			continue
		}
		src, ok := entry["source"].(map[string]any)
		if !ok {
			bad(f+".source", "must be an object {type: \"git\", url}")
			continue
		}
		if src["type"] != "git" {
			bad(f+".source.type", "only \"git\" is supported")
			continue
		}
		if u, _ := src["url"].(string); !ValidGitURL(u) {
			bad(f+".source.url", "must be a git remote: ssh://, git://, http(s)://, file:///path or user@host:path")
			continue
		}
		if au, ok := entry["autoUpdate"]; ok {
			if _, isBool := au.(bool); !isBool {
				bad(f+".autoUpdate", "must be true or false")
				continue
			}
		}
		out[name] = entry
	}
	return out
}

// checkLayer drops from values (a layer of scope, read from path) what
// its scope may not supply and what is bad, and returns the errors.
func checkLayer(scope Scope, path string, values map[string]any) []Error {
	var errs []Error
	report := func(field, reason string) {
		errs = append(errs, Error{Scope: scope, Field: field, Reason: reason, SourcePath: path})
	}
	for _, key := range sortedKeys(rules) { // errors in a stable order
		r := rules[key]
		parent, leaf := values, key
		if head, rest, nested := strings.Cut(key, "."); nested {
			p, ok := values[head].(map[string]any)
			if !ok {
				continue
			}
			parent, leaf = p, rest
		}
		v, ok := parent[leaf]
		if !ok {
			continue
		}
		if !slices.Contains(r.suppliers, scope) {
			why := fmt.Sprintf("not read from the %s scope", scope)
			switch {
			case slices.Contains(policyOnlyFields, key):
				why = policyOnly
			case scope == Project && slices.Contains(trustedOnlyFields, key):
				why = notProject
			}
			report(key, why)
			delete(parent, leaf)
			continue
		}
		kept := r.check(v, func(field, reason string) { report(key+field, reason) })
		if kept == nil {
			delete(parent, leaf)
		} else {
			parent[leaf] = kept
		}
	}
	return errs
}

// sortedKeys are m's keys in order (errors come in a stable order).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
