package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Grep defaults.
const (
	DefaultMaxResults  = 500
	DefaultMaxFileSize = 1 << 20
	binaryProbe        = 8 << 10
)

// FileGrepRequest is a content search (both versions).
type FileGrepRequest struct {
	// Path is a directory to walk or one file to search.
	Path string `json:"path" serde:"required"`
	// Pattern is a Go (RE2) regexp, or a literal with FixedStrings.
	Pattern string `json:"pattern" serde:"required"`
	// Include and Exclude are globs on the file name (on the relative
	// path when they hold a '/'); a "!glob" in Include excludes.
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
	// Type keeps files of a ripgrep-like type (py, go, js, ...).
	Type *string `json:"type"`
	// MaxFileSize skips bigger files: bytes, or with a K, M or G suffix
	// (default "1M").
	MaxFileSize     *string `json:"max_file_size"`
	CaseInsensitive bool    `json:"case_insensitive"`
	FixedStrings    bool    `json:"fixed_strings"`
	// Multiline lets a match span lines; it is reported at its first line
	// with every line it covers.
	Multiline     bool   `json:"multiline"`
	ContextBefore uint64 `json:"context_before"`
	ContextAfter  uint64 `json:"context_after"`
	// MaxResults (default 500; 0 also means the default) and Offset page
	// through the matches, which are ordered by file path, then line.
	MaxResults *uint64 `json:"max_results"`
	Offset     uint64  `json:"offset"`
	// Recursive (default true) walks subdirectories.
	Recursive *bool `json:"recursive"`
	Ownership `json:"-"`
}

// GrepMatch is one matching line; line numbers count from 1. The context
// lists are null unless asked for.
type GrepMatch struct {
	File          string   `json:"file"`
	LineNumber    uint64   `json:"line_number"`
	LineContent   string   `json:"line_content"`
	ContextBefore []string `json:"context_before"`
	ContextAfter  []string `json:"context_after"`
}

// FileGrepResult is a content search's answer. MatchCount is the number of
// matches returned; Truncated says more were left after them.
type FileGrepResult struct {
	Path          string      `json:"path"`
	Pattern       string      `json:"pattern"`
	Matches       []GrepMatch `json:"matches"`
	MatchCount    int         `json:"match_count"`
	FilesSearched *int        `json:"files_searched"`
	FilesMatched  *int        `json:"files_matched"`
	Truncated     bool        `json:"truncated"`
}

// fileTypes is the type table: ripgrep's names for the common languages.
var fileTypes = map[string][]string{
	"c": {"*.c", "*.h"}, "cpp": {"*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"},
	"cs": {"*.cs"}, "css": {"*.css", "*.scss"}, "go": {"*.go"}, "html": {"*.html", "*.htm"},
	"java": {"*.java"}, "js": {"*.js", "*.mjs", "*.cjs", "*.jsx"}, "json": {"*.json", "*.jsonl"},
	"kotlin": {"*.kt", "*.kts"}, "lua": {"*.lua"}, "md": {"*.md", "*.markdown", "*.mdx"},
	"markdown": {"*.md", "*.markdown", "*.mdx"}, "php": {"*.php"}, "py": {"*.py", "*.pyi"},
	"python": {"*.py", "*.pyi"}, "rb": {"*.rb"}, "ruby": {"*.rb"}, "rust": {"*.rs"},
	"sh": {"*.sh", "*.bash", "*.zsh"}, "sql": {"*.sql"}, "swift": {"*.swift"}, "toml": {"*.toml"},
	"ts": {"*.ts", "*.tsx", "*.mts", "*.cts"}, "typescript": {"*.ts", "*.tsx", "*.mts", "*.cts"},
	"txt": {"*.txt"}, "xml": {"*.xml"}, "yaml": {"*.yaml", "*.yml"},
}

// ParseSize reads a size such as "1M", "512K", "2G" or "1048576"
// (binary multiples; a trailing B or iB is allowed).
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int64(v * float64(mult)), nil
}

// grepPlan is a validated grep: what to read and how to match.
type grepPlan struct {
	m                      *matcher
	include, exclude       *globSet
	types                  *globSet // nil: any type
	maxSize                int64
	before, after          int
	multiline, contextWant bool
	offset, max            uint64
	want                   uint64 // matches one file may need: offset + max + 1
}

// Grep searches file contents under Path, skipping dot names, binary
// files (a NUL in the first 8 KiB) and files over MaxFileSize. Files are
// read by a pool of runtime.NumCPU() workers, in path order, so results
// are deterministic and the walk stops once the page is full.
func (e *Engine) Grep(ctx context.Context, req FileGrepRequest) (*FileGrepResult, *fserr.Error) {
	const op = "grep"
	abs, _, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	plan, ferr := newGrepPlan(op, req)
	if ferr != nil {
		return nil, ferr
	}
	fi, ferr := inView(e, op, req.Path, func() (fs.FileInfo, *fserr.Error) {
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		return fi, nil
	})
	if ferr != nil {
		return nil, ferr
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, fserr.From(op, req.Path, fserr.ErrNotRegular)
	}
	files := make(chan grepJob, 64)
	walkErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, 4*runtime.NumCPU())
	// The walk runs in the engine's view (one bounded Do: it ends with
	// the files or ctx, and sem bounds what it opens ahead). Under a
	// sandbox it also opens each file there and hands the workers the
	// descriptor, since the workers' threads are outside the view.
	go func() {
		defer close(files)
		var werr error
		if err := e.sb.Do(func() error { werr = e.grepWalk(ctx, req, plan, abs, fi, files, sem); return nil }); err != nil {
			werr = fmt.Errorf("%w: %w", errUnavailable, err)
		}
		walkErr <- werr
	}()
	res := plan.collect(ctx, cancel, files, sem)
	res.Path, res.Pattern = req.Path, req.Pattern
	if err := <-walkErr; errors.Is(err, errUnavailable) {
		return nil, unavailable(op, req.Path, err)
	} else if err != nil && ctx.Err() == nil {
		return nil, fserr.From(op, req.Path, err)
	}
	return res, nil
}

// errUnavailable is a walk the sandbox could not run.
var errUnavailable = errors.New("files: the sandbox is unavailable")

// grepWalk feeds files the jobs of a grep rooted at abs (whose stat is
// fi), each after taking a slot of sem.
func (e *Engine) grepWalk(ctx context.Context, req FileGrepRequest, plan *grepPlan, abs string, fi fs.FileInfo, files chan<- grepJob, sem chan struct{}) error {
	if !fi.IsDir() {
		sem <- struct{}{}
		files <- e.grepJob(0, abs)
		return nil
	}
	depth := -1
	if req.Recursive != nil && !*req.Recursive {
		depth = 1
	}
	idx := 0
	return walk(ctx, abs, depth, true, func(p, rel string, d fs.DirEntry, isDir bool, info func() fs.FileInfo) error {
		if plan.exclude.match(rel, d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		// Regular files are sized by the worker's fstat; only links
		// need a stat here.
		if isDir || !d.Type().IsRegular() && (d.Type()&fs.ModeSymlink == 0 || info() == nil || !info().Mode().IsRegular()) ||
			(!plan.include.empty() && !plan.include.match(rel, d.Name())) ||
			(plan.types != nil && !plan.types.match(rel, d.Name())) {
			return nil
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		files <- e.grepJob(idx, p)
		idx++
		return nil
	})
}

// grepJob is the job of the idx-th file, path. Under a sandbox the file
// is opened here, in the view (the caller's thread), and the job carries
// the descriptor; without one the worker opens it.
func (e *Engine) grepJob(idx int, path string) grepJob {
	j := grepJob{idx: idx, path: path, fd: -1}
	if e.sb != nil {
		j.opened = true
		if fd, err := syscall.Open(path, grepOpenFlags, 0); err == nil {
			j.fd = fd
		}
	}
	return j
}

// newGrepPlan validates the request's pattern, globs, type and size.
func newGrepPlan(op string, req FileGrepRequest) (*grepPlan, *fserr.Error) {
	bad := func(format string, a ...any) *fserr.Error {
		return fserr.New(op, req.Path, fserr.BadRequest, fserr.Phrase(op)+": "+fmt.Sprintf(format, a...))
	}
	p := &grepPlan{maxSize: DefaultMaxFileSize, before: int(min(req.ContextBefore, 1<<16)), after: int(min(req.ContextAfter, 1<<16)),
		multiline: req.Multiline, contextWant: req.ContextBefore > 0 || req.ContextAfter > 0}
	if req.MaxFileSize != nil {
		n, err := ParseSize(*req.MaxFileSize)
		if err != nil {
			return nil, bad("invalid max_file_size %q: expected bytes or a size such as 1M", *req.MaxFileSize)
		}
		p.maxSize = n
	}
	max := uint64(DefaultMaxResults)
	if req.MaxResults != nil && *req.MaxResults > 0 {
		max = *req.MaxResults
	}
	p.offset, p.max = min(req.Offset, 1<<40), min(max, 1<<40)
	p.want = p.offset + p.max + 1
	var inc, exc []string
	for _, g := range req.Include {
		if rest, ok := strings.CutPrefix(g, "!"); ok {
			exc = append(exc, rest)
		} else {
			inc = append(inc, g)
		}
	}
	exc = append(exc, req.Exclude...)
	if req.Type != nil && *req.Type != "" {
		globs, ok := fileTypes[strings.ToLower(*req.Type)]
		if !ok {
			return nil, bad("unrecognized file type: %s", *req.Type)
		}
		p.types, _ = newGlobSet(globs)
	}
	var ferr *fserr.Error
	if p.include, ferr = compileGlobs(op, req.Path, inc); ferr != nil {
		return nil, ferr
	}
	if p.exclude, ferr = compileGlobs(op, req.Path, exc); ferr != nil {
		return nil, ferr
	}
	m, err := newMatcher(req.Pattern, req.FixedStrings, req.CaseInsensitive, req.Multiline)
	if err != nil {
		return nil, bad("%v", err)
	}
	p.m = m
	return p, nil
}

type grepJob struct {
	idx  int
	path string
	// opened says the walk opened the file: fd is its descriptor, -1 if
	// the open failed. Otherwise the worker opens path.
	opened bool
	fd     int
}

// grepOpenFlags opens a file to search without ever blocking.
const grepOpenFlags = syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NOCTTY | syscall.O_NONBLOCK

type grepOut struct {
	idx      int
	searched bool
	matches  []GrepMatch
}

// collect runs the workers and gathers their results in job order, until
// the files run out or enough matches are in.
func (p *grepPlan) collect(ctx context.Context, cancel context.CancelFunc, files <-chan grepJob, sem <-chan struct{}) *FileGrepResult {
	out := make(chan grepOut, cap(sem))
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 64<<10)
			for j := range files {
				var o grepOut
				o.idx = j.idx
				if ctx.Err() == nil {
					o.searched, o.matches, buf = p.searchFile(j, buf)
				} else if j.opened && j.fd >= 0 {
					syscall.Close(j.fd)
				}
				select {
				case out <- o:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()

	res := &FileGrepResult{Matches: []GrepMatch{}}
	searched, matched := 0, 0
	pending := map[int]grepOut{}
	next, seen, done := 0, uint64(0), false
	for o := range out {
		pending[o.idx] = o
		for !done {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-sem
			if r.searched {
				searched++
			}
			if len(r.matches) > 0 {
				matched++
			}
			for _, m := range r.matches {
				if seen++; seen <= p.offset {
					continue
				}
				if uint64(len(res.Matches)) == p.max {
					res.Truncated, done = true, true
					cancel()
					break
				}
				res.Matches = append(res.Matches, m)
			}
		}
	}
	res.MatchCount = len(res.Matches)
	res.FilesSearched, res.FilesMatched = &searched, &matched
	return res
}

// searchFile reads one job's file into buf (reused) and returns its
// matches; it closes the descriptor the job carries. It talks to the
// kernel directly: open, fstat, read, close, nothing more.
func (p *grepPlan) searchFile(j grepJob, buf []byte) (bool, []GrepMatch, []byte) {
	path, fd := j.path, j.fd
	if !j.opened {
		var err error
		if fd, err = syscall.Open(path, grepOpenFlags, 0); err != nil {
			return false, nil, buf
		}
	}
	if fd < 0 {
		return false, nil, buf
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size > p.maxSize {
		return false, nil, buf
	}
	size := int(st.Size)
	if cap(buf) < size+1 {
		buf = make([]byte, 0, size+size/4+1)
	}
	data := buf[:cap(buf)]
	n := 0
	for n < len(data) && (size == 0 || n < size) {
		k, err := syscall.Read(fd, data[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false, nil, buf
		}
		if k == 0 {
			break
		}
		n += k
		if n == len(data) && int64(n) <= p.maxSize {
			data = append(data[:n], 0)[:cap(data)*2+1]
			buf = data[:0]
		}
	}
	if int64(n) > p.maxSize {
		return false, nil, buf
	}
	data = data[:n]
	if bytes.IndexByte(data[:min(n, binaryProbe)], 0) >= 0 {
		return true, nil, buf
	}
	return true, p.scan(path, data), buf
}

// scan finds the matching lines of data, at most p.want of them.
func (p *grepPlan) scan(path string, data []byte) []GrepMatch {
	var out []GrepMatch
	line, linePos := uint64(1), 0
	p.m.each(data, p.multiline, func(ls, le int) bool {
		line += uint64(bytes.Count(data[linePos:ls], nl))
		linePos = ls
		m := GrepMatch{File: path, LineNumber: line, LineContent: trimCR(data[ls:le])}
		if p.contextWant {
			m.ContextBefore, m.ContextAfter = contextLines(data, ls, le, p.before, p.after)
		}
		out = append(out, m)
		return uint64(len(out)) < p.want
	})
	return out
}

var nl = []byte{'\n'}

// trimCR is a line's text without a CR before its end.
func trimCR(b []byte) string { return string(bytes.TrimSuffix(b, []byte{'\r'})) }

// contextLines are up to before lines ahead of [ls, le) and after lines
// past it.
func contextLines(data []byte, ls, le, before, after int) ([]string, []string) {
	pre := []string{}
	for s := ls; len(pre) < before && s > 0; {
		prev := bytes.LastIndexByte(data[:s-1], '\n') + 1
		pre = append(pre, trimCR(data[prev:s-1]))
		s = prev
	}
	for i, j := 0, len(pre)-1; i < j; i, j = i+1, j-1 {
		pre[i], pre[j] = pre[j], pre[i]
	}
	post := []string{}
	for s := le + 1; len(post) < after && s <= len(data); {
		if s == len(data) {
			break
		}
		e := bytes.IndexByte(data[s:], '\n')
		if e < 0 {
			e = len(data) - s
		}
		post = append(post, trimCR(data[s:s+e]))
		s += e + 1
	}
	return pre, post
}

// matcher finds matching lines: by a literal alone (fixed strings), by a
// literal every match must contain and then the regexp on that line, or
// by the regexp over the whole buffer.
type matcher struct {
	re  *regexp.Regexp
	lit []byte // a literal every match contains; nil if none is known
	// litOnly means a line matches iff it contains lit.
	litOnly bool
}

// newMatcher compiles the pattern.
func newMatcher(pattern string, fixed, fold, multiline bool) (*matcher, error) {
	expr := pattern
	if fixed {
		expr = regexp.QuoteMeta(pattern)
	}
	flags := "(?m)"
	if fold {
		flags = "(?mi)"
	}
	re, err := regexp.Compile(flags + expr)
	if err != nil {
		return nil, errors.New(regexError(pattern, err))
	}
	m := &matcher{re: re}
	if fixed && !fold && pattern != "" {
		m.lit, m.litOnly = []byte(pattern), !strings.Contains(pattern, "\n")
	} else if !fold && !multiline {
		if t, err := syntax.Parse(expr, syntax.Perl); err == nil {
			if l := requiredLiteral(t.Simplify()); l != "" {
				m.lit = []byte(l)
			}
		}
	}
	return m, nil
}

// regexError is the message for a pattern Go's regexp refused: `invalid
// regex "<pattern>": <what is wrong>`, the syntax error's own text (with
// the fragment at fault when it is only part of the pattern), without
// Go's "error parsing regexp:" prefix or the flags the engine adds.
func regexError(pattern string, err error) string {
	return fmt.Sprintf("invalid regex %q: %s", pattern, syntaxText(pattern, err))
}

// syntaxText is what a regexp syntax error says is wrong in src.
func syntaxText(src string, err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	msg := string(se.Code)
	if se.Expr != "" && se.Expr != src && strings.Contains(src, se.Expr) {
		msg += ": `" + se.Expr + "`"
	}
	return msg
}

// requiredLiteral is a case-sensitive literal that every match of re
// contains, or "".
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 {
			return string(re.Rune)
		}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best := ""
		for _, s := range re.Sub {
			if l := requiredLiteral(s); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return ""
}

// each calls emit with the bounds (without the newline) of every matching
// line, or for multiline of every match's covered lines, in order, until
// emit returns false.
func (m *matcher) each(data []byte, multiline bool, emit func(ls, le int) bool) {
	lineStart := func(i int) int { return bytes.LastIndexByte(data[:i], '\n') + 1 }
	lineEnd := func(i int) int {
		if e := bytes.IndexByte(data[i:], '\n'); e >= 0 {
			return i + e
		}
		return len(data)
	}
	for pos := 0; pos <= len(data); {
		var s, e int
		if m.lit != nil && !multiline {
			i := bytes.Index(data[pos:], m.lit)
			if i < 0 {
				return
			}
			s = pos + i
			ls, le := lineStart(s), lineEnd(s)
			if (m.litOnly || m.re.Match(data[ls:le])) && !emit(ls, le) {
				return
			}
			pos = le + 1
			continue
		}
		loc := m.re.FindIndex(data[pos:])
		if loc == nil {
			return
		}
		s, e = pos+loc[0], pos+loc[1]
		if s == len(data) && (s == 0 || data[s-1] == '\n') {
			return // the empty "line" after a final newline
		}
		ls, le := lineStart(s), lineEnd(s)
		if multiline {
			le = lineEnd(max(s, e-1))
		}
		if (multiline || e <= le || m.re.Match(data[ls:le])) && !emit(ls, le) {
			return
		}
		pos = le + 1
	}
}
