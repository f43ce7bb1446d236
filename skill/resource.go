package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Defaults of [ReadOptions]. They are the reference SDKs' values; the
// protocol leaves both to the implementation.
const (
	// DefaultInlineBudget is the largest text resource answered inline;
	// it keeps one ack well under the signalling server's 1 MB buffer.
	DefaultInlineBudget = 32 << 10
	// MaxInlineBudget caps a configured inline budget for the same reason.
	MaxInlineBudget = 512 << 10
	// DefaultMaxSize is the largest resource served at all.
	DefaultMaxSize = 100 << 20
)

// SkillEnv is the credential file of a skill package: never served,
// whether or not it exists.
const SkillEnv = ".skillenv"

// ReadOptions bound client:get_skill; zero values take the defaults.
type ReadOptions struct {
	// InlineBudget is the largest text resource (bytes) answered in body;
	// at most [MaxInlineBudget].
	InlineBudget int64
	// MaxSize is the largest resource served: larger is 4017 too_large.
	MaxSize int64
}

func (o ReadOptions) withDefaults() ReadOptions {
	if o.InlineBudget <= 0 {
		o.InlineBudget = DefaultInlineBudget
	}
	o.InlineBudget = min(o.InlineBudget, MaxInlineBudget)
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	return o
}

// Resource is one file of a package as served: SKILL.md without its
// frontmatter, any other file as it is.
type Resource struct {
	MIME   string
	Data   []byte
	SHA256 string // lower-case hex of Data
}

// Mint stores data (of type mime) for client:get_blob and returns its
// handle.
type Mint func(data []byte, mime string) string

// NotFound is the 4014 ErrorPayload for a skill name the lexer accepts
// but the registry does not hold (never installed, removed, or orphaned).
// The 4014 schema was written for MCP servers; for a skill the name goes
// in details.name and the server fields are left out, since a skill name
// need not belong to any server.
func NotFound(name string) *smcp.Error {
	return &smcp.Error{Code: smcp.CodeMCPServerNotFound, Message: "Skill not found",
		Details: map[string]any{"name": truncate(name, smcp.MaxNameLen)}}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Get answers client:get_skill, in the specification's order: the name
// lexer (4016), the registry (4014), the rel_path sandbox (4017
// traversal, forbidden, not_found), the size cap (4017 too_large), then
// body or handle. rel "" means SKILL.md; the answer echoes rel as asked.
// A text resource (see [IsText]) of at most o.InlineBudget bytes that is
// valid UTF-8 comes back in body; anything else is stored through mint
// and comes back as blob_handle (a JSON string cannot carry other bytes
// faithfully). The caller sets ReqID.
func Get(reg *Registry, name, rel string, o ReadOptions, mint Mint) (smcp.GetSkillRet, *smcp.Error) {
	o = o.withDefaults()
	if _, err := ParseName(name); err != nil {
		return smcp.GetSkillRet{}, smcp.InvalidSkillName(name)
	}
	pkg, ok := reg.Lookup(name)
	if !ok {
		return smcp.GetSkillRet{}, NotFound(name)
	}
	echo := rel
	if echo == "" {
		echo = FileName
	}
	res, e := Read(pkg.Root, rel, o.MaxSize)
	if e != nil {
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		e.Details["rel_path"] = truncate(echo, smcp.MaxOpaqueLen)
		return smcp.GetSkillRet{}, e
	}
	ret := smcp.GetSkillRet{Name: name, RelPath: echo, MimeType: res.MIME, TotalSize: int64(len(res.Data)), SHA256: res.SHA256}
	if IsText(res.MIME) && ret.TotalSize <= o.InlineBudget && utf8.Valid(res.Data) && inlineFits(res.Data) {
		body := string(res.Data)
		ret.Body = &body
	} else {
		h := mint(res.Data, res.MIME)
		ret.BlobHandle = &h
	}
	return ret, nil
}

// Read returns the file rel of the package rooted at root (see
// [Resolve]), as served: every SKILL.md (the package's own, or one in
// a subdirectory) without its frontmatter (see [Split]), any other file
// as it is. A resource of more than max bytes is 4017
// too_large with details.total_size, and is not read whole.
func Read(root, rel string, max int64) (Resource, *smcp.Error) {
	p, clean, e := Resolve(root, rel)
	if e != nil {
		return Resource{}, e
	}
	f, err := os.Open(p)
	if err != nil {
		return Resource{}, smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return Resource{}, smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
	}
	// Every SKILL.md is served without its frontmatter, in a subdirectory
	// too, as the reference SDK does, so that total_size and sha256 agree
	// across implementations.
	entry := path.Base(clean) == FileName
	size := st.Size()
	if size > max && entry {
		// The served size is the file minus its frontmatter block, which
		// lies within the head.
		head, _ := io.ReadAll(io.LimitReader(f, MaxSkillFileRead))
		if _, body, ok := Split(head); ok {
			size -= int64(len(head) - len(body))
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return Resource{}, smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
		}
	}
	if size > max {
		return Resource{}, tooLarge(size)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+MaxSkillFileRead+1))
	if err != nil {
		return Resource{}, smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
	}
	if entry {
		_, data, _ = Split(data)
	}
	if int64(len(data)) > max { // the file grew while being read
		return Resource{}, tooLarge(int64(len(data)))
	}
	sum := sha256.Sum256(data)
	return Resource{MIME: MIMEType(clean), Data: data, SHA256: hex.EncodeToString(sum[:])}, nil
}

// maxInlineWire bounds a body as it travels: JSON-escaped, it must leave
// the ack well under the signalling server's 1 MB message limit, or the
// answer would be dropped on the way and the Agent would wait in vain.
const maxInlineWire = 768 << 10

// inlineFits reports whether data, encoded as the JSON string of an ack,
// stays within maxInlineWire. Escaping can make text up to six times
// longer (a control byte becomes \u00XX), so a budget in raw bytes alone
// does not guarantee it.
func inlineFits(data []byte) bool {
	n := 0
	for _, c := range data {
		switch {
		case c == '"' || c == '\\':
			n += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		case c >= 0x80: // U+2028 and U+2029 (3 bytes) are escaped as 6
			n += 2
		default:
			n++
		}
	}
	return n <= maxInlineWire
}

func tooLarge(size int64) *smcp.Error {
	return smcp.SkillNotAccessible(smcp.ReasonTooLarge, map[string]any{"total_size": size})
}

// Resolve is the rel_path sandbox. rel is a POSIX path relative to the
// package root ("" is SKILL.md). In order:
//
//   - an absolute path, a backslash or NUL, or any ".." element: 4017
//     traversal (before the filesystem is touched);
//   - any element named .skillenv (compared without case, for
//     case-insensitive filesystems): 4017 forbidden, whether or not it
//     exists, so existence never leaks;
//   - the path is then walked element by element from root, each
//     symbolic link resolved: a link that leads out of root is 4017
//     traversal (a dangling one too, when its target is outside), one
//     that leads to a .skillenv is forbidden, and a missing element or a
//     result that is not a regular file is not_found.
//
// It returns the resolved file and rel cleaned (path.Clean).
func Resolve(root, rel string) (string, string, *smcp.Error) {
	if rel == "" {
		rel = FileName
	}
	if strings.HasPrefix(rel, "/") || strings.ContainsAny(rel, "\\\x00") {
		return "", "", smcp.SkillNotAccessible(smcp.ReasonTraversal, nil)
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." {
			return "", "", smcp.SkillNotAccessible(smcp.ReasonTraversal, nil)
		}
	}
	clean := path.Clean(rel)
	elems := strings.Split(clean, "/")
	if forbidden(elems) {
		return "", "", smcp.SkillNotAccessible(smcp.ReasonForbidden, nil)
	}
	if clean == "." {
		return "", "", smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
	}
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", "", smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
	}
	cur := rootReal
	for _, el := range elems {
		next := filepath.Join(cur, el)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", "", smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := filepath.EvalSymlinks(next)
		if err != nil { // dangling, or a loop: judge the link texts
			return "", "", dangling(rootReal, next)
		}
		if !within(rootReal, target) {
			return "", "", smcp.SkillNotAccessible(smcp.ReasonTraversal, nil)
		}
		cur = target
	}
	if r, err := filepath.Rel(rootReal, cur); err == nil && forbidden(strings.Split(filepath.ToSlash(r), "/")) {
		return "", "", smcp.SkillNotAccessible(smcp.ReasonForbidden, nil)
	}
	if fi, err := os.Stat(cur); err != nil || !fi.Mode().IsRegular() {
		return "", "", smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
	}
	return cur, clean, nil
}

// maxLinkHops bounds how many links dangling follows, as the kernel's
// own limit (ELOOP) does.
const maxLinkHops = 40

// dangling judges a link at p that does not resolve (its target, or a
// link further on, is missing; or the links loop). Each link's text is
// followed by hand: a target outside root is traversal, a target whose
// path names a .skillenv is forbidden (so a dangling link to a missing
// .skillenv says forbidden, exactly as a link to an existing one: the
// answer never tells whether the credential file exists), and the end of
// the chain is not_found.
func dangling(root, p string) *smcp.Error {
	for range maxLinkHops {
		t, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		t = filepath.Clean(t)
		if !within(root, t) {
			return smcp.SkillNotAccessible(smcp.ReasonTraversal, nil)
		}
		if r, err := filepath.Rel(root, t); err == nil && forbidden(strings.Split(filepath.ToSlash(r), "/")) {
			return smcp.SkillNotAccessible(smcp.ReasonForbidden, nil)
		}
		fi, err := os.Lstat(t)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		p = t
	}
	return smcp.SkillNotAccessible(smcp.ReasonNotFound, nil)
}

func forbidden(elems []string) bool {
	for _, el := range elems {
		if strings.EqualFold(el, SkillEnv) {
			return true
		}
	}
	return false
}

// within reports whether p is root or lies under it (both cleaned).
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}
