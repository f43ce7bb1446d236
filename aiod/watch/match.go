package watch

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// DefaultExclude is what a watcher ignores when a request gives no
// exclude list: VCS and dependency trees, virtualenvs, byte code and
// editor leftovers. A request's exclude replaces it.
var DefaultExclude = []string{
	".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".DS_Store",
	"*.pyc", "*.pyo", "*.swp", "*.swo", "*.swx", "*~", ".#*",
}

// globs is a compiled list of globs. A glob without "/" matches one path
// component (path.Match syntax); one with "/" matches the relative path
// from the root, where "**" spans directories.
type globs struct {
	base []string
	full []*regexp.Regexp
}

// compileGlobs compiles list; the error names the field and the glob.
func compileGlobs(field string, list []string) (*globs, error) {
	g := &globs{}
	for _, p := range list {
		p = strings.Trim(p, "/")
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("invalid glob %q in %s", p, field)
			}
			g.base = append(g.base, p)
			continue
		}
		re, err := regexp.Compile(globRegexp(p))
		if err != nil {
			return nil, fmt.Errorf("invalid glob %q in %s", p, field)
		}
		g.full = append(g.full, re)
	}
	return g, nil
}

// globRegexp translates a slash glob to an anchored regexp.
func globRegexp(glob string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			if strings.HasPrefix(glob[i:], "**/") {
				b.WriteString("(?:.*/)?")
				i += 2
			} else if strings.HasPrefix(glob[i:], "**") {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := glob[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}

// empty reports whether g matches nothing.
func (g *globs) empty() bool { return g == nil || len(g.base)+len(g.full) == 0 }

// anyPart reports whether a glob matches rel or one of its ancestors: a
// base glob any component, a slash glob any leading part.
func (g *globs) anyPart(rel string) bool {
	if g.empty() || rel == "." {
		return false
	}
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		start := strings.LastIndexByte(rel[:i], '/') + 1
		if g.matchBase(rel[start:i]) || g.matchFull(rel[:i]) {
			return true
		}
	}
	return false
}

// leaf reports whether a base glob matches rel's last component or a
// slash glob the whole of rel.
func (g *globs) leaf(rel string) bool {
	return g.matchBase(path.Base(rel)) || g.matchFull(rel)
}

func (g *globs) matchBase(name string) bool {
	for _, p := range g.base {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (g *globs) matchFull(rel string) bool {
	for _, re := range g.full {
		if re.MatchString(rel) {
			return true
		}
	}
	return false
}
