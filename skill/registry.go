package skill

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// FileName is the entry file of every skill package.
const FileName = "SKILL.md"

// MaxSkillFileRead bounds how much of a SKILL.md is read to find its
// frontmatter: a block that does not close within it is malformed.
const MaxSkillFileRead = 1 << 20

// Package is one installed skill: its reference, the directory it is
// served from and a digest of its content.
type Package struct {
	// Ref is what client:get_skills lists.
	Ref smcp.A2CSkillRef
	// Root is the package directory with every symbolic link resolved:
	// the sandbox of client:get_skill.
	Root string
	// Digest changes when the package's content does (for change
	// notifications); its form is the source's.
	Digest string
}

// Doc is a SKILL.md as read from disk.
type Doc struct {
	// Front is the frontmatter block's YAML text; nil without one.
	Front []byte
	// Body is the bytes after the frontmatter (see [Split]).
	Body []byte
	// HasFront reports whether there is a frontmatter block.
	HasFront bool
}

// ReadDoc reads dir's SKILL.md, at most [MaxSkillFileRead] bytes of it.
func ReadDoc(dir string) (Doc, error) {
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		return Doc{}, fmt.Errorf("no readable %s: %w", FileName, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return Doc{}, fmt.Errorf("%s is not a regular file", FileName)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSkillFileRead))
	if err != nil {
		return Doc{}, fmt.Errorf("read %s: %w", FileName, err)
	}
	front, body, ok := Split(data)
	return Doc{Front: front, Body: body, HasFront: ok}, nil
}

// LoadMeta reads and validates the frontmatter of dir's SKILL.md and
// checks that dir's base name equals the frontmatter name, as every
// staged package must. It returns the validated fields and dir with its
// symbolic links resolved.
func LoadMeta(dir string, log *slog.Logger) (Meta, string, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Meta{}, "", fmt.Errorf("package directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return Meta{}, "", err
	}
	doc, err := ReadDoc(root)
	if err != nil {
		return Meta{}, "", err
	}
	if !doc.HasFront {
		return Meta{}, "", ErrNoFrontmatter
	}
	m, err := ParseMeta(doc.Front, log)
	if err != nil {
		return Meta{}, "", err
	}
	if base := filepath.Base(dir); base != m.Name {
		return Meta{}, "", fmt.Errorf("directory name %q differs from frontmatter name %q", base, m.Name)
	}
	return m, root, nil
}

// Registry maps skill names to packages. It is the only place a name
// becomes a path: client:get_skill finds a package root here by exact
// name, never by building a path from the name.
//
// Packages are grouped by source ("user", "mcp:<bundle_id>"); sources
// keep the order in which they were first set, and each source's
// packages the order it gave them: that is the discovery order
// client:get_skills answers in. A source may be orphaned (its MCP server
// went away): its packages stay, hidden, until it comes back.
//
// A Registry is safe for concurrent use.
type Registry struct {
	log     *slog.Logger
	mu      sync.RWMutex
	order   []string
	sources map[string]*sourceSet
}

type sourceSet struct {
	pkgs   []Package
	orphan bool
}

// NewRegistry returns an empty registry that logs rejected packages on log
// (nil: discard).
func NewRegistry(log *slog.Logger) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{log: log, sources: map[string]*sourceSet{}}
}

// Set replaces the packages of source. A package whose name another
// package of the same set already has is rejected with an ERROR log (the
// first one stays), as is one whose name the lexer refuses. A source set
// for the first time goes after the others. Set reports whether what the
// registry shows (names, references, digests of visible packages)
// changed.
func (r *Registry) Set(source string, pkgs []Package) bool {
	seen := map[string]bool{}
	keep := make([]Package, 0, len(pkgs))
	for _, p := range pkgs {
		if _, err := ParseName(p.Ref.Name); err != nil {
			r.log.Error("skill: not registered: invalid name", "source", source, "name", p.Ref.Name)
			continue
		}
		if seen[p.Ref.Name] {
			r.log.Error("skill: not registered: another skill of the same source has its name", "source", source, "name", p.Ref.Name, "path", p.Ref.Path)
			continue
		}
		seen[p.Ref.Name] = true
		keep = append(keep, p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.stateLocked()
	s := r.sources[source]
	if s == nil {
		s = &sourceSet{}
		r.sources[source] = s
		r.order = append(r.order, source)
	}
	s.pkgs = keep
	return !bytes.Equal(before, r.stateLocked())
}

// SetOrphan hides (orphan true) or shows again the packages of source,
// and reports whether that changed what the registry shows. An unknown
// source is left alone.
func (r *Registry) SetOrphan(source string, orphan bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sources[source]
	if s == nil || s.orphan == orphan {
		return false
	}
	s.orphan = orphan
	return len(s.pkgs) > 0
}

// Sources returns the sources set so far, in the order they were first
// set.
func (r *Registry) Sources() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Packages returns the packages of source, orphaned or not.
func (r *Registry) Packages(source string) []Package {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s := r.sources[source]; s != nil {
		return slices.Clone(s.pkgs)
	}
	return nil
}

// Refs returns the references of the visible (not orphaned) packages in
// discovery order, with no sorting and no deduplication across sources.
func (r *Registry) Refs() []smcp.A2CSkillRef {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []smcp.A2CSkillRef
	for _, src := range r.order {
		s := r.sources[src]
		if s.orphan {
			continue
		}
		for _, p := range s.pkgs {
			out = append(out, p.Ref)
		}
	}
	return out
}

// Lookup returns the visible package named name (exact match).
func (r *Registry) Lookup(name string) (Package, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, src := range r.order {
		s := r.sources[src]
		if s.orphan {
			continue
		}
		for _, p := range s.pkgs {
			if p.Ref.Name == name {
				return p, true
			}
		}
	}
	return Package{}, false
}

// stateLocked encodes what the registry shows, for change detection.
func (r *Registry) stateLocked() []byte {
	type entry struct {
		Ref    smcp.A2CSkillRef
		Digest string
	}
	var all []entry
	for _, src := range r.order {
		s := r.sources[src]
		if s.orphan {
			continue
		}
		for _, p := range s.pkgs {
			all = append(all, entry{p.Ref, p.Digest})
		}
	}
	b, _ := json.Marshal(all)
	return b
}
