package skill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Staging modes an MCP server declares in a skill root's _meta.source.
const (
	ModeMounted   = "mounted"
	ModeArchive   = "archive"
	ModeResources = "resources"
)

// Scheme is the URI scheme of skill resources.
const Scheme = "skill"

// maxListPages bounds the resources/list pages read from one server, so
// that a server that never ends its cursor cannot hold the Computer.
const maxListPages = 1000

// Resources is what an MCP server must offer to publish skills: the
// Computer's upstream connection (mcphost.Upstream) has these methods.
type Resources interface {
	ListResources(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error)
	ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error)
}

// Root is one skill an MCP server declares: a skill:// resource with one
// path element (skill://<host>/<skill-name>) whose _meta.source names a
// staging mode, with the resources under it (for mode resources).
type Root struct {
	URI  string
	Mode string
	Meta map[string]any
	// Children are the URIs under URI+"/", in list order.
	Children []string
}

// Listing is the skill part of one server's resources/list.
type Listing struct {
	Roots []Root
	// Invalid counts the skill:// roots left out (no or unknown mode).
	Invalid int
}

// key encodes the listing for comparison with an earlier one.
func (l Listing) key() string {
	b, _ := json.Marshal(l)
	return string(b)
}

func (r Root) key() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Covers reports whether uri is the root or one of its resources.
func (r Root) Covers(uri string) bool {
	return uri == r.URI || strings.HasPrefix(uri, r.URI+"/")
}

// List reads every page of src's resources/list (resource templates are
// not read) and keeps the skill:// resources. A resource whose URI has
// one path element is a root; it must declare a staging mode, else it
// is left out with an ERROR log. Deeper resources belong to the root
// they lie under (resources under no root are ignored).
func List(ctx context.Context, src Resources, log *slog.Logger) (Listing, error) {
	var all []*mcp.Resource
	cursor := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return Listing{}, errors.New("resources/list: too many pages")
		}
		res, err := src.ListResources(ctx, cursor)
		if err != nil {
			return Listing{}, fmt.Errorf("resources/list: %w", err)
		}
		all = append(all, res.Resources...)
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	var l Listing
	index := map[string]int{}
	for _, r := range all {
		_, p, ok := splitURI(r.URI)
		if !ok || strings.Contains(p, "/") {
			continue
		}
		mode, _ := r.Meta["source"].(string)
		if mode != ModeMounted && mode != ModeArchive && mode != ModeResources {
			l.Invalid++
			log.Error("skill: skill resource without a valid _meta.source (mounted, archive or resources) left out", "uri", r.URI)
			continue
		}
		if _, dup := index[r.URI]; dup {
			continue
		}
		index[r.URI] = len(l.Roots)
		l.Roots = append(l.Roots, Root{URI: r.URI, Mode: mode, Meta: r.Meta})
	}
	for _, r := range all {
		for i := range l.Roots {
			if strings.HasPrefix(r.URI, l.Roots[i].URI+"/") {
				if _, ok := r.Meta["source"]; ok {
					log.Warn("skill: a resource under a skill root declares _meta.source; it is read as a file of the skill", "uri", r.URI)
				}
				l.Roots[i].Children = append(l.Roots[i].Children, r.URI)
				break
			}
		}
	}
	return l, nil
}

// splitURI splits skill://host/path; ok is false for another scheme, an
// empty host or an empty path.
func splitURI(uri string) (host, p string, ok bool) {
	rest, found := strings.CutPrefix(uri, Scheme+"://")
	if !found {
		return "", "", false
	}
	host, p, found = strings.Cut(rest, "/")
	if !found || host == "" || p == "" {
		return "", "", false
	}
	return host, p, true
}

// Limits bound the materialisation of one MCP skill; zero values take
// the defaults.
type Limits struct {
	// MaxFile is the largest file (default [DefaultMaxSize]).
	MaxFile int64
	// MaxTotal is the largest package, all files together (default 256
	// MiB).
	MaxTotal int64
	// MaxFiles is the most files and directories in a package (default
	// 10000).
	MaxFiles int
	// MaxDownload is the largest archive downloaded (default 64 MiB).
	MaxDownload int64
	// Timeout bounds one resources/read and one archive download
	// (default 60 s).
	Timeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxFile <= 0 {
		l.MaxFile = DefaultMaxSize
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = 256 << 20
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 10000
	}
	if l.MaxDownload <= 0 {
		l.MaxDownload = 64 << 20
	}
	if l.Timeout <= 0 {
		l.Timeout = 60 * time.Second
	}
	return l
}

// MCPSource materialises the skills of one MCP server into a private
// staging folder, <dir>/<bundle_id>/<skill-name>/, and keeps them in step
// with the server. It is not safe for concurrent use: the Computer runs
// every sync of a server on one goroutine.
type MCPSource struct {
	BundleID string
	// SameHost says the server runs on this host (a child process, in
	// process, or an HTTP server on a loopback address): only such a
	// server may ask for mode A (mounted), which copies a folder of this
	// host's disk. A remote server asking for it is refused, so that it
	// cannot make the Computer publish the Computer's own files.
	SameHost bool
	dir      string
	limits   Limits
	client   *http.Client
	log      *slog.Logger

	listing Listing
	synced  bool
	staged  map[string]staged // by root URI
}

type staged struct {
	key string
	pkg Package
}

// NewMCPSource returns the source of the MCP server bundleID, staging
// under dir (created with mode 0700 when missing). client fetches
// archives (nil: a client with the limits' timeout).
func NewMCPSource(bundleID, dir string, limits Limits, client *http.Client, log *slog.Logger) *MCPSource {
	limits = limits.withDefaults()
	if client == nil {
		client = &http.Client{Timeout: limits.Timeout}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &MCPSource{BundleID: bundleID, dir: filepath.Join(dir, bundleID), limits: limits, client: client, log: log, staged: map[string]staged{}}
}

// Roots returns the roots of the last listing.
func (m *MCPSource) Roots() []Root { return m.listing.Roots }

// Root returns the root that covers uri (see [Root.Covers]).
func (m *MCPSource) Root(uri string) (Root, bool) {
	for _, r := range m.listing.Roots {
		if r.Covers(uri) {
			return r, true
		}
	}
	return Root{}, false
}

// Sync lists src's skills and materialises them. Roots whose declaration
// (URI, _meta, files) is unchanged since the last Sync keep their staged
// copy, unless they are in force or all is set. When nothing is forced
// and the listing equals the last one, Sync does nothing and returns
// changed false. A root that fails to materialise, or whose frontmatter
// name another root of this server already took, is left out with an
// ERROR log; staged skills the server no longer declares are removed from
// the staging folder. The packages come in the server's list order.
func (m *MCPSource) Sync(ctx context.Context, src Resources, force map[string]bool, all bool) (pkgs []Package, changed bool, err error) {
	l, err := List(ctx, src, m.log)
	if err != nil {
		return nil, false, err
	}
	if m.synced && !all && len(force) == 0 && l.key() == m.listing.key() {
		m.log.Debug("skill: resource list unchanged", "bundle_id", m.BundleID)
		return m.packages(), false, nil
	}
	if len(l.Roots) > 0 {
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return nil, false, fmt.Errorf("staging folder: %w", err)
		}
	}
	next := map[string]staged{}
	names := map[string]bool{}
	for _, r := range l.Roots {
		old, had := m.staged[r.URI]
		var pkg Package
		if had && old.key == r.key() && !all && !force[r.URI] && !names[old.pkg.Ref.Name] {
			pkg = old.pkg
		} else {
			pkg, err = m.stage(ctx, src, r, names)
			if err != nil {
				m.log.Error("skill: materialisation failed; skill left out", "bundle_id", m.BundleID, "uri", r.URI, "err", err)
				continue
			}
		}
		names[pkg.Ref.Name] = true
		next[r.URI] = staged{key: r.key(), pkg: pkg}
	}
	m.listing, m.staged, m.synced = l, next, true
	m.prune()
	return m.packages(), true, nil
}

// packages returns the staged packages in list order.
func (m *MCPSource) packages() []Package {
	var out []Package
	for _, r := range m.listing.Roots {
		if s, ok := m.staged[r.URI]; ok {
			out = append(out, s.pkg)
		}
	}
	return out
}

// prune removes staged directories that no current package uses.
func (m *MCPSource) prune() {
	keep := map[string]bool{}
	for _, s := range m.staged {
		keep[filepath.Base(s.pkg.Ref.Path)] = true
	}
	entries, _ := os.ReadDir(m.dir)
	for _, e := range entries {
		if !keep[e.Name()] {
			_ = os.RemoveAll(filepath.Join(m.dir, e.Name()))
		}
	}
}

// stage materialises r into a fresh directory, validates it, and puts it
// in place of the skill's previous copy.
func (m *MCPSource) stage(ctx context.Context, src Resources, r Root, taken map[string]bool) (Package, error) {
	tmp := filepath.Join(m.dir, ".stage-"+randomHex())
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return Package{}, err
	}
	defer os.RemoveAll(tmp)
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real
	}
	w := &writer{root: tmp, limits: m.limits}
	var err error
	switch r.Mode {
	case ModeMounted:
		err = m.mounted(r, w)
	case ModeArchive:
		err = m.archive(ctx, r, w)
	case ModeResources:
		err = m.resources(ctx, src, r, w)
	}
	if err != nil {
		return Package{}, err
	}
	pkgDir := tmp
	if r.Mode == ModeArchive {
		pkgDir = unwrap(tmp)
	}
	doc, err := ReadDoc(pkgDir)
	if err != nil {
		return Package{}, err
	}
	if !doc.HasFront {
		return Package{}, ErrNoFrontmatter
	}
	meta, err := ParseMeta(doc.Front, m.log)
	if err != nil {
		return Package{}, err
	}
	if taken[MCPName(m.BundleID, meta.Name)] {
		return Package{}, fmt.Errorf("frontmatter name %q is taken by another skill of this server", meta.Name)
	}
	final := filepath.Join(m.dir, meta.Name)
	old := filepath.Join(m.dir, ".old-"+randomHex())
	if err := os.Rename(final, old); err != nil && !os.IsNotExist(err) {
		return Package{}, err
	}
	if err := os.Rename(pkgDir, final); err != nil {
		_ = os.Rename(old, final)
		return Package{}, err
	}
	_ = os.RemoveAll(old)
	real, err := filepath.EvalSymlinks(final)
	if err != nil {
		return Package{}, err
	}
	ref := meta.Ref(MCPName(m.BundleID, meta.Name), MCPSourceName(m.BundleID), real)
	ref.URI = r.URI
	switch v := r.Meta["version"].(type) {
	case string:
		ref.Version = v
	case float64:
		ref.Version = fmt.Sprint(v)
	}
	return Package{Ref: ref, Root: real, Digest: w.digest()}, nil
}

// unwrap returns dir, or its only subdirectory when dir has no SKILL.md
// but that subdirectory has (an archive packed with a top folder).
func unwrap(dir string) string {
	if isRegular(filepath.Join(dir, FileName)) {
		return dir
	}
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) == 1 && entries[0].IsDir() {
		sub := filepath.Join(dir, entries[0].Name())
		if isRegular(filepath.Join(sub, FileName)) {
			return sub
		}
	}
	return dir
}

// resources is mode C: read every resource under the root and write it
// at its path below the root. The root itself is never read; SKILL.md
// must be the resource <root>/SKILL.md.
func (m *MCPSource) resources(ctx context.Context, src Resources, r Root, w *writer) error {
	if len(r.Children) == 0 {
		return errors.New("mode resources: no resources under the skill root")
	}
	for _, child := range r.Children {
		rel, err := url.PathUnescape(strings.TrimPrefix(child, r.URI+"/"))
		if err != nil {
			return fmt.Errorf("resource %s: undecodable path", child)
		}
		rctx, cancel := context.WithTimeout(ctx, m.limits.Timeout)
		res, err := src.ReadResource(rctx, child)
		cancel()
		if err != nil {
			return fmt.Errorf("resources/read %s: %w", child, err)
		}
		var data []byte
		for _, c := range res.Contents {
			if c.Blob != nil {
				data = append(data, c.Blob...)
			} else {
				data = append(data, c.Text...)
			}
			if int64(len(data)) > m.limits.MaxFile {
				return fmt.Errorf("resource %s: larger than %d bytes", child, m.limits.MaxFile)
			}
		}
		if err := w.file(rel, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// safeRel checks a path from a server or an archive: relative, POSIX,
// no "..", no empty name; it returns it cleaned.
func safeRel(rel string) (string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.ContainsAny(rel, "\\\x00") {
		return "", fmt.Errorf("path %q is not a relative POSIX path", rel)
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q leaves the package", rel)
		}
	}
	clean := path.Clean(rel)
	if clean == "." {
		return "", fmt.Errorf("path %q names the package itself", rel)
	}
	return clean, nil
}
