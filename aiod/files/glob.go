package files

import (
	"fmt"
	"regexp"
	"strings"
)

// globRe compiles a glob to an anchored regexp over '/'-separated paths:
// `**/` is any number of directories, `*` and `?` stay inside one name,
// `[...]` (with `!` or `^` to negate) is a class, `{a,b}` alternatives.
func globRe(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`^`)
	depth := 0
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case c == '*' && strings.HasPrefix(glob[i:], "**"):
			switch {
			case strings.HasPrefix(glob[i:], "**/"):
				b.WriteString(`(?:.*/)?`)
				i += 2
			default:
				b.WriteString(`.*`)
				i++
			}
		case c == '*':
			b.WriteString(`[^/]*`)
		case c == '?':
			b.WriteString(`[^/]`)
		case c == '[':
			j := i + 1
			if j < len(glob) && (glob[j] == '!' || glob[j] == '^') {
				j++
			}
			if j < len(glob) && glob[j] == ']' {
				j++
			}
			for j < len(glob) && glob[j] != ']' {
				j++
			}
			if j >= len(glob) {
				return nil, fmt.Errorf("invalid glob %q: unclosed character class", glob)
			}
			class := glob[i+1 : j]
			if class[0] == '!' {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i = j
		case c == '{':
			depth++
			b.WriteString(`(?:`)
		case c == '}' && depth > 0:
			depth--
			b.WriteString(`)`)
		case c == ',' && depth > 0:
			b.WriteString(`|`)
		case c == '\\' && i+1 < len(glob):
			i++
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("invalid glob %q: unclosed alternation", glob)
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("invalid glob %q: %s", glob, syntaxText(glob, err))
	}
	return re, nil
}

// globSet matches paths relative to a walk's root: a glob holding '/'
// matches the whole relative path, one without matches the base name.
type globSet struct {
	full, base []*regexp.Regexp
}

// newGlobSet compiles globs; an empty set matches nothing.
func newGlobSet(globs []string) (*globSet, error) {
	g := &globSet{}
	for _, s := range globs {
		re, err := globRe(strings.TrimPrefix(s, "./"))
		if err != nil {
			return nil, err
		}
		if strings.Contains(s, "/") {
			g.full = append(g.full, re)
		} else {
			g.base = append(g.base, re)
		}
	}
	return g, nil
}

func (g *globSet) empty() bool { return g == nil || len(g.full)+len(g.base) == 0 }

// match tests a relative '/'-path and its base name.
func (g *globSet) match(rel, name string) bool {
	if g == nil {
		return false
	}
	for _, re := range g.base {
		if re.MatchString(name) {
			return true
		}
	}
	for _, re := range g.full {
		if re.MatchString(rel) {
			return true
		}
	}
	return false
}
