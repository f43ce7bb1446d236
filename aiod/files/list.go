package files

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Walk caps: list and name search stop at ListCap entries, a metadata
// glob at GlobCap unless it asks for more.
const (
	ListCap = 10000
	GlobCap = 5000
)

// FsListQuery is a listing: GET /v2/fs/list's query; the fields tagged
// "-" are /v1/file/list's extras.
type FsListQuery struct {
	Path      string `json:"path" serde:"required"`
	Recursive bool   `json:"recursive"`
	// ShowHidden (default true) includes dot names.
	ShowHidden *bool `json:"show_hidden"`
	// MaxDepth bounds recursion: entries at most MaxDepth levels below Path.
	MaxDepth *uint64 `json:"max_depth"`
	// FileTypes keeps only files with these extensions (directories stay).
	FileTypes []string `json:"-"`
	// IncludeSize (default true) reports sizes.
	IncludeSize *bool `json:"-"`
	// IncludePermissions reports each entry's octal mode.
	IncludePermissions bool `json:"-"`
	// SortBy is name (default), size, modified or type; SortDesc reverses.
	SortBy    string `json:"-"`
	SortDesc  bool   `json:"-"`
	Ownership `json:"-"`
}

// FileInfo is one listed entry. A symlink counts as what it points at.
type FileInfo struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	IsDirectory  bool    `json:"is_directory"`
	Size         *int64  `json:"size"`
	Extension    *string `json:"extension"`
	ModifiedTime *string `json:"modified_time"`
	Permissions  *string `json:"permissions,omitempty"`
	IsHidden     bool    `json:"is_hidden,omitempty"`
}

// FileListResult is a listing's answer.
type FileListResult struct {
	Path           string     `json:"path"`
	Files          []FileInfo `json:"files"`
	TotalCount     int        `json:"total_count"`
	FileCount      int        `json:"file_count"`
	DirectoryCount int        `json:"directory_count"`
	Truncated      bool       `json:"truncated"`
}

// List lists a directory, depth first in name order, at most ListCap
// entries (then Truncated). A link to a directory is listed as a
// directory and not descended.
func (e *Engine) List(ctx context.Context, req FsListQuery) (*FileListResult, *fserr.Error) {
	const op = "list"
	abs, _, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	return inView(e, op, req.Path, func() (*FileListResult, *fserr.Error) { return list(ctx, op, req, abs) })
}

// list is List in the engine's view.
func list(ctx context.Context, op string, req FsListQuery, abs string) (*FileListResult, *fserr.Error) {
	if ferr := requireDir(op, req.Path, abs); ferr != nil {
		return nil, ferr
	}
	sortKey, ok := sorters[strings.ToLower(req.SortBy)]
	if !ok {
		return nil, fserr.New(op, req.Path, fserr.BadRequest,
			fmt.Sprintf("%s: unknown sort_by %q: expected name, size, modified or type", fserr.Phrase(op), req.SortBy))
	}
	showHidden := req.ShowHidden == nil || *req.ShowHidden
	depth := 1
	if req.Recursive {
		depth = -1
		if req.MaxDepth != nil {
			depth = int(min(*req.MaxDepth, 1<<20))
		}
	}
	types := map[string]bool{}
	for _, t := range req.FileTypes {
		types[strings.TrimPrefix(t, ".")] = true
	}
	res := &FileListResult{Path: req.Path, Files: []FileInfo{}}
	err := walk(ctx, abs, depth, !showHidden, func(p, _ string, d fs.DirEntry, isDir bool, info func() fs.FileInfo) error {
		ent := FileInfo{Name: d.Name(), Path: p, IsDirectory: isDir, Extension: extension(d.Name()), IsHidden: hidden(d.Name())}
		if !isDir && len(types) > 0 && (ent.Extension == nil || !types[*ent.Extension]) {
			return nil
		}
		if len(res.Files) == ListCap {
			res.Truncated = true
			return fs.SkipAll
		}
		if fi := info(); fi != nil {
			if req.IncludeSize == nil || *req.IncludeSize {
				ent.Size = ptr(fi.Size())
			}
			ent.ModifiedTime = timeString(fi)
			if req.IncludePermissions {
				ent.Permissions = ptr(permString(fi))
			}
		}
		res.Files = append(res.Files, ent)
		if isDir {
			res.DirectoryCount++
		} else {
			res.FileCount++
		}
		return nil
	})
	if err != nil {
		return nil, fserr.From(op, req.Path, err)
	}
	if sortKey != nil {
		sort.SliceStable(res.Files, func(i, j int) bool {
			if req.SortDesc {
				i, j = j, i
			}
			return sortKey(&res.Files[i], &res.Files[j])
		})
	} else if req.SortDesc {
		for i, j := 0, len(res.Files)-1; i < j; i, j = i+1, j-1 {
			res.Files[i], res.Files[j] = res.Files[j], res.Files[i]
		}
	}
	res.TotalCount = len(res.Files)
	return res, nil
}

// sorters orders v1 listings; nil keeps the walk's name order.
var sorters = map[string]func(a, b *FileInfo) bool{
	"": nil, "name": nil,
	"size":          func(a, b *FileInfo) bool { return deref(a.Size) < deref(b.Size) },
	"modified":      func(a, b *FileInfo) bool { return deref(a.ModifiedTime) < deref(b.ModifiedTime) },
	"modified_time": func(a, b *FileInfo) bool { return deref(a.ModifiedTime) < deref(b.ModifiedTime) },
	"type":          func(a, b *FileInfo) bool { return deref(a.Extension) < deref(b.Extension) },
	"extension":     func(a, b *FileInfo) bool { return deref(a.Extension) < deref(b.Extension) },
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// requireDir checks that abs is a directory (following links).
func requireDir(op, shown, abs string) *fserr.Error {
	fi, err := os.Stat(abs)
	if err != nil {
		return fserr.From(op, shown, err)
	}
	if !fi.IsDir() {
		return fserr.Errno(op, shown, syscall.ENOTDIR)
	}
	return nil
}

// visitFn sees one entry under a walk's root: its path, its '/'-separated
// path relative to the root, whether it counts as a directory (a link is
// classified by its target), and its followed metadata on demand (nil for
// a dangling link). fs.SkipDir skips a directory, fs.SkipAll ends the
// walk.
type visitFn func(path, rel string, d fs.DirEntry, isDir bool, info func() fs.FileInfo) error

// walk visits the entries under root in depth-first name order, at most
// depth levels deep (negative: unbounded), skipping dot names when asked.
// Links are never descended; unreadable subdirectories are skipped.
func walk(ctx context.Context, root string, depth int, skipHidden bool, fn visitFn) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p == root {
			return err
		}
		if err != nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if skipHidden && hidden(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel := strings.TrimPrefix(filepath.ToSlash(p[len(root):]), "/")
		var (
			fi     fs.FileInfo
			loaded bool
		)
		info := func() fs.FileInfo {
			if !loaded {
				loaded = true
				if d.Type()&fs.ModeSymlink != 0 {
					fi, _ = os.Stat(p)
				} else {
					fi, _ = d.Info()
				}
			}
			return fi
		}
		isDir := d.IsDir()
		if d.Type()&fs.ModeSymlink != 0 {
			isDir = info() != nil && fi.IsDir()
		}
		verr := fn(p, rel, d, isDir, info)
		if verr == nil && d.IsDir() && depth >= 0 && strings.Count(rel, "/")+1 >= depth {
			return fs.SkipDir
		}
		return verr
	})
	if err == fs.SkipAll {
		return nil
	}
	return err
}

// FsSearchQuery is a name search: GET /v2/fs/search's query, and
// /v1/file/find once its `glob` is mapped to Pattern.
type FsSearchQuery struct {
	Path string `json:"path" serde:"required"`
	// Pattern is a glob: with a '/' (as in **/*.py) it matches the path
	// relative to Path, without one the file name.
	Pattern   string `json:"pattern" serde:"required"`
	Ownership `json:"-"`
}

// FileFindResult is a name search's answer.
type FileFindResult struct {
	Path      string   `json:"path"`
	Files     []string `json:"files"`
	Truncated bool     `json:"truncated"`
}

// Find lists the files under Path matching the glob, sorted, skipping dot
// names, at most ListCap (then Truncated). A malformed glob is
// bad_request.
func (e *Engine) Find(ctx context.Context, req FsSearchQuery) (*FileFindResult, *fserr.Error) {
	const op = "find"
	return inView(e, op, req.Path, func() (*FileFindResult, *fserr.Error) {
		abs, g, ferr := e.globRoot(ctx, op, req.Path, req.Pattern, req.Ownership)
		if ferr != nil {
			return nil, ferr
		}
		res := &FileFindResult{Path: req.Path, Files: []string{}}
		err := walk(ctx, abs, -1, true, func(p, rel string, d fs.DirEntry, isDir bool, _ func() fs.FileInfo) error {
			if isDir || !g.match(rel, d.Name()) {
				return nil
			}
			if len(res.Files) == ListCap {
				res.Truncated = true
				return fs.SkipAll
			}
			res.Files = append(res.Files, p)
			return nil
		})
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		sort.Strings(res.Files)
		return res, nil
	})
}

// globRoot prepares a glob walk: the resolved root, which must be a
// directory, and the compiled pattern. It touches the root: call it in
// the engine's view.
func (e *Engine) globRoot(ctx context.Context, op, root, pattern string, o Ownership) (string, *globSet, *fserr.Error) {
	abs, _, ferr := e.prepare(ctx, op, root, o)
	if ferr != nil {
		return "", nil, ferr
	}
	g, ferr := compileGlobs(op, root, []string{pattern})
	if ferr != nil {
		return "", nil, ferr
	}
	return abs, g, requireDir(op, root, abs)
}

// compileGlobs is newGlobSet with a bad_request for a malformed glob.
func compileGlobs(op, shown string, globs []string) (*globSet, *fserr.Error) {
	g, err := newGlobSet(globs)
	if err != nil {
		return nil, fserr.New(op, shown, fserr.BadRequest, fmt.Sprintf("%s: %v", fserr.Phrase(op), err))
	}
	return g, nil
}

// FileGlobRequest is /v1/file/glob's body.
type FileGlobRequest struct {
	Path    string   `json:"path" serde:"required"`
	Pattern string   `json:"pattern" serde:"required"`
	Exclude []string `json:"exclude"`
	// FilesOnly leaves directories out.
	FilesOnly bool `json:"files_only"`
	// IncludeHidden walks dot names too.
	IncludeHidden bool `json:"include_hidden"`
	// IncludeMetadata (default true) reports size and modified_time.
	IncludeMetadata *bool `json:"include_metadata"`
	// MaxResults defaults to GlobCap.
	MaxResults *uint64 `json:"max_results"`
	// SortBy is path (default), name, size or modified; SortDesc reverses.
	SortBy    *string `json:"sort_by"`
	SortDesc  bool    `json:"sort_desc"`
	Ownership `json:"-"`
}

// GlobFileInfo is one glob match.
type GlobFileInfo struct {
	Path         string  `json:"path"`
	Name         string  `json:"name"`
	IsDirectory  bool    `json:"is_directory"`
	Size         *int64  `json:"size"`
	ModifiedTime *string `json:"modified_time"`
}

// FileGlobResult is a glob's answer.
type FileGlobResult struct {
	Path       string         `json:"path"`
	Pattern    string         `json:"pattern"`
	Files      []GlobFileInfo `json:"files"`
	TotalCount int            `json:"total_count"`
	Truncated  bool           `json:"truncated"`
}

// Glob lists the entries under Path matching the glob, with metadata, at
// most MaxResults (default GlobCap; then Truncated).
func (e *Engine) Glob(ctx context.Context, req FileGlobRequest) (*FileGlobResult, *fserr.Error) {
	const op = "glob"
	return inView(e, op, req.Path, func() (*FileGlobResult, *fserr.Error) { return e.glob(ctx, op, req) })
}

// glob is Glob in the engine's view.
func (e *Engine) glob(ctx context.Context, op string, req FileGlobRequest) (*FileGlobResult, *fserr.Error) {
	abs, g, ferr := e.globRoot(ctx, op, req.Path, req.Pattern, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	ex, ferr := compileGlobs(op, req.Path, req.Exclude)
	if ferr != nil {
		return nil, ferr
	}
	sortBy := strings.ToLower(deref(req.SortBy))
	less, ok := globSorters[sortBy]
	if !ok {
		return nil, fserr.New(op, req.Path, fserr.BadRequest,
			fmt.Sprintf("%s: unknown sort_by %q: expected path, name, size or modified", fserr.Phrase(op), sortBy))
	}
	limit := uint64(GlobCap)
	if req.MaxResults != nil {
		limit = *req.MaxResults
	}
	meta := req.IncludeMetadata == nil || *req.IncludeMetadata
	res := &FileGlobResult{Path: req.Path, Pattern: req.Pattern, Files: []GlobFileInfo{}}
	err := walk(ctx, abs, -1, !req.IncludeHidden, func(p, rel string, d fs.DirEntry, isDir bool, info func() fs.FileInfo) error {
		if ex.match(rel, d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if (isDir && req.FilesOnly) || !g.match(rel, d.Name()) {
			return nil
		}
		if uint64(len(res.Files)) >= limit {
			res.Truncated = true
			return fs.SkipAll
		}
		m := GlobFileInfo{Path: p, Name: d.Name(), IsDirectory: isDir}
		if fi := info(); meta && fi != nil {
			m.Size, m.ModifiedTime = ptr(fi.Size()), timeString(fi)
		}
		res.Files = append(res.Files, m)
		return nil
	})
	if err != nil {
		return nil, fserr.From(op, req.Path, err)
	}
	sort.SliceStable(res.Files, func(i, j int) bool {
		if req.SortDesc {
			i, j = j, i
		}
		return less(&res.Files[i], &res.Files[j])
	})
	res.TotalCount = len(res.Files)
	return res, nil
}

// globSorters orders glob matches.
var globSorters = map[string]func(a, b *GlobFileInfo) bool{
	"":         func(a, b *GlobFileInfo) bool { return a.Path < b.Path },
	"path":     func(a, b *GlobFileInfo) bool { return a.Path < b.Path },
	"name":     func(a, b *GlobFileInfo) bool { return a.Name < b.Name },
	"size":     func(a, b *GlobFileInfo) bool { return deref(a.Size) < deref(b.Size) },
	"modified": func(a, b *GlobFileInfo) bool { return deref(a.ModifiedTime) < deref(b.ModifiedTime) },
}
