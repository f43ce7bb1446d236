package files

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Editor commands.
const (
	CmdView       = "view"
	CmdCreate     = "create"
	CmdStrReplace = "str_replace"
	CmdInsert     = "insert"
	CmdUndoEdit   = "undo_edit"
)

// Replace modes of str_replace.
const (
	ModeAll   = "ALL"
	ModeFirst = "FIRST"
	ModeLast  = "LAST"
)

// FsEditRequest is an editor call: POST /v2/fs/edit's body, and
// /v1/file/str_replace_editor's (whose view and create use FileText and
// ViewRange).
type FsEditRequest struct {
	// Command is str_replace, insert or undo_edit (and view, create).
	Command string `json:"command" serde:"required"`
	Path    string `json:"path" serde:"required"`
	// OldStr is str_replace's anchor, matched verbatim.
	OldStr *string `json:"old_str"`
	// NewStr is str_replace's replacement (absent: delete the anchor) and
	// insert's text.
	NewStr *string `json:"new_str"`
	// InsertLine is insert's position: the text goes after the first
	// InsertLine lines (0 = at the top).
	InsertLine *uint64 `json:"insert_line"`
	// ReplaceMode is ALL, FIRST or LAST; absent, the anchor must be unique.
	ReplaceMode *string `json:"replace_mode"`
	// FileText is create's content (v1 only).
	FileText *string `json:"-"`
	// ViewRange is view's [first, last] 1-based line range, last -1 for
	// the end (v1 only).
	ViewRange []int64 `json:"-"`
	Ownership `json:"-"`
}

// StrReplaceEditorResult is an editor call's answer.
type StrReplaceEditorResult struct {
	// Output is what the tool shows a model: a `cat -n` snippet.
	Output    string `json:"output"`
	Path      string `json:"path"`
	PrevExist bool   `json:"prev_exist"`
	// OldContent and NewContent are the whole file before and after.
	OldContent *string `json:"old_content"`
	NewContent *string `json:"new_content"`
	Error      *string `json:"error"`
	Metadata   any     `json:"metadata"`
}

// snippetLines is the context around an edit in Output.
const snippetLines = 4

// maxHistory bounds undo: edits kept per file, and files remembered.
const (
	maxHistory      = 10
	maxHistoryFiles = 1000
)

// history is undo_edit's memory: the content each edit replaced, per
// resolved path. One lock also serialises the edits themselves.
type history struct {
	mu sync.Mutex
	m  map[string][]string
}

func newHistory() *history { return &history{m: map[string][]string{}} }

func (h *history) push(path, old string) {
	s := append(h.m[path], old)
	if len(s) > maxHistory {
		s = s[len(s)-maxHistory:]
	}
	if _, ok := h.m[path]; !ok && len(h.m) >= maxHistoryFiles {
		for k := range h.m {
			delete(h.m, k)
			break
		}
	}
	h.m[path] = s
}

func (h *history) pop(path string) (string, bool) {
	s := h.m[path]
	if len(s) == 0 {
		return "", false
	}
	old := s[len(s)-1]
	if len(s) == 1 {
		delete(h.m, path)
	} else {
		h.m[path] = s[:len(s)-1]
	}
	return old, true
}

// Edit runs an editor command. Anchor problems are bad_request with
// "old_str not found in file" or "old_str has multiple occurrences;
// replace_mode is required"; file problems carry their errno.
func (e *Engine) Edit(ctx context.Context, req FsEditRequest) (*StrReplaceEditorResult, *fserr.Error) {
	const op = "edit"
	abs, own, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	e.hist.mu.Lock()
	defer e.hist.mu.Unlock()
	return inView(e, op, req.Path, func() (*StrReplaceEditorResult, *fserr.Error) { return e.edit(op, req, abs, own) })
}

// edit is Edit once the request is resolved, in the engine's view, with
// the history locked.
func (e *Engine) edit(op string, req FsEditRequest, abs string, own *owner) (*StrReplaceEditorResult, *fserr.Error) {
	bad := func(msg string) *fserr.Error { return fserr.New(op, req.Path, fserr.BadRequest, msg) }
	switch req.Command {
	case CmdView:
		return e.view(op, req, abs)
	case CmdCreate:
		if req.FileText == nil {
			return nil, bad("Parameter `file_text` is required for command: create")
		}
		return e.create(op, req, abs, own)
	case CmdUndoEdit:
		return e.undo(op, req, abs)
	case CmdStrReplace, CmdInsert:
	default:
		return nil, bad(fmt.Sprintf("Unrecognized command %s. The allowed commands are: %s, %s, %s, %s, %s", req.Command, CmdView, CmdCreate, CmdStrReplace, CmdInsert, CmdUndoEdit))
	}
	old, ferr := readText(op, req.Path, abs)
	if ferr != nil {
		return nil, ferr
	}
	var (
		text, out string
		msg       string
	)
	if req.Command == CmdStrReplace {
		text, out, msg = strReplace(req, old)
	} else {
		text, out, msg = insertText(req, old)
	}
	if msg != "" {
		return nil, bad(msg)
	}
	if err := replaceFile(abs, []byte(text), own, e.keepOwner()); err != nil {
		return nil, fserr.From(op, req.Path, err)
	}
	e.hist.push(abs, old)
	return &StrReplaceEditorResult{Output: out, Path: req.Path, PrevExist: true, OldContent: &old, NewContent: &text}, nil
}

// strReplace applies str_replace to text: the new text and output, or a
// refusal message.
func strReplace(req FsEditRequest, text string) (string, string, string) {
	if req.OldStr == nil || *req.OldStr == "" {
		return "", "", "Parameter `old_str` is required for command: str_replace"
	}
	oldStr, newStr := *req.OldStr, ""
	if req.NewStr != nil {
		newStr = *req.NewStr
	}
	mode := ""
	if req.ReplaceMode != nil {
		mode = strings.ToUpper(*req.ReplaceMode)
	}
	count := strings.Count(text, oldStr)
	switch {
	case mode != "" && mode != ModeAll && mode != ModeFirst && mode != ModeLast:
		return "", "", fmt.Sprintf("invalid replace_mode %q: expected ALL, FIRST or LAST", *req.ReplaceMode)
	case count == 0:
		return "", "", "old_str not found in file"
	case count > 1 && mode == "":
		return "", "", "old_str has multiple occurrences; replace_mode is required"
	}
	at := strings.Index(text, oldStr)
	var out string
	switch mode {
	case ModeAll:
		out = strings.ReplaceAll(text, oldStr, newStr)
	case ModeLast:
		at = strings.LastIndex(text, oldStr)
		out = text[:at] + newStr + text[at+len(oldStr):]
	default:
		out = strings.Replace(text, oldStr, newStr, 1)
	}
	line := strings.Count(text[:at], "\n")
	start := max(0, line-snippetLines)
	end := line + snippetLines + strings.Count(newStr, "\n")
	lines := strings.Split(out, "\n")
	snippet := strings.Join(lines[start:min(end+1, len(lines))], "\n")
	msg := "The file " + req.Path + " has been edited. " + catOutput(snippet, "a snippet of "+req.Path, start+1) +
		"Review the changes and make sure they are as expected. Edit the file again if necessary."
	return out, msg, ""
}

// insertText applies insert to text, writing new lines with the file's
// own line ending.
func insertText(req FsEditRequest, text string) (string, string, string) {
	if req.InsertLine == nil {
		return "", "", "Parameter `insert_line` is required for command: insert"
	}
	if req.NewStr == nil {
		return "", "", "Parameter `new_str` is required for command: insert"
	}
	eol := "\n"
	if strings.Contains(text, "\r\n") {
		eol = "\r\n"
	}
	lines := strings.Split(text, eol)
	n := *req.InsertLine
	if n > uint64(len(lines)) {
		return "", "", fmt.Sprintf("Invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", n, len(lines))
	}
	ins := strings.Split(strings.ReplaceAll(*req.NewStr, "\r\n", "\n"), "\n")
	merged := make([]string, 0, len(lines)+len(ins))
	merged = append(append(append(merged, lines[:n]...), ins...), lines[n:]...)
	lo := max(0, int(n)-snippetLines)
	snip := append(append(append([]string{}, lines[lo:n]...), ins...), lines[n:min(int(n)+snippetLines, len(lines))]...)
	msg := "The file " + req.Path + " has been edited. " +
		catOutput(strings.Join(snip, "\n"), "a snippet of the edited file", max(1, int(n)-snippetLines+1)) +
		"Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
	return strings.Join(merged, eol), msg, ""
}

// undo restores the content the last edit of the file replaced.
func (e *Engine) undo(op string, req FsEditRequest, abs string) (*StrReplaceEditorResult, *fserr.Error) {
	prev, ok := e.hist.pop(abs)
	if !ok {
		return nil, fserr.New(op, req.Path, fserr.BadRequest, "No edit history found for "+req.Path+".")
	}
	cur, ferr := readText(op, req.Path, abs)
	if ferr != nil {
		e.hist.push(abs, prev)
		return nil, ferr
	}
	if err := replaceFile(abs, []byte(prev), nil, e.keepOwner()); err != nil {
		e.hist.push(abs, prev)
		return nil, fserr.From(op, req.Path, err)
	}
	out := "Last edit to " + req.Path + " undone successfully. " + catOutput(prev, req.Path, 1)
	return &StrReplaceEditorResult{Output: out, Path: req.Path, PrevExist: true, OldContent: &cur, NewContent: &prev}, nil
}

// create writes a whole file (v1); an existing file's content goes to
// the undo history.
func (e *Engine) create(op string, req FsEditRequest, abs string, own *owner) (*StrReplaceEditorResult, *fserr.Error) {
	old, ferr := readText(op, req.Path, abs)
	prev := ferr == nil
	if ferr != nil && ferr.ErrorType != fserr.NotFound {
		return nil, ferr
	}
	target, err := writeTarget(abs, own)
	if err != nil {
		return nil, fserr.From(op, req.Path, err)
	}
	if err := replaceFile(target, []byte(*req.FileText), own, e.keepOwner()); err != nil {
		return nil, fserr.From(op, req.Path, err)
	}
	res := &StrReplaceEditorResult{Output: "File created successfully at: " + req.Path, Path: req.Path, PrevExist: prev, NewContent: req.FileText}
	if prev {
		e.hist.push(abs, old)
		res.OldContent = &old
	}
	return res, nil
}

// view shows a file with line numbers, or a directory two levels deep
// (v1).
func (e *Engine) view(op string, req FsEditRequest, abs string) (*StrReplaceEditorResult, *fserr.Error) {
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fserr.From(op, req.Path, err)
	}
	res := &StrReplaceEditorResult{Path: req.Path, PrevExist: true}
	if fi.IsDir() {
		res.Output = "Here's the files and directories up to 2 levels deep in " + req.Path + ", excluding hidden items:\n" +
			strings.Join(treeLines(abs, 2), "\n") + "\n"
		return res, nil
	}
	text, ferr := readText(op, req.Path, abs)
	if ferr != nil {
		return nil, ferr
	}
	first := 1
	if len(req.ViewRange) > 0 {
		lines := strings.Split(text, "\n")
		if len(req.ViewRange) != 2 || req.ViewRange[0] < 1 || req.ViewRange[0] > int64(len(lines)) ||
			(req.ViewRange[1] != -1 && req.ViewRange[1] < req.ViewRange[0]) {
			return nil, fserr.New(op, req.Path, fserr.BadRequest,
				fmt.Sprintf("Invalid `view_range` parameter: %v. It should be two 1-based line numbers within [1, %d], the second -1 or not below the first", req.ViewRange, len(lines)))
		}
		first = int(req.ViewRange[0])
		last := len(lines)
		if req.ViewRange[1] != -1 {
			last = min(int(req.ViewRange[1]), len(lines))
		}
		text = strings.Join(lines[first-1:last], "\n")
	}
	res.Output = catOutput(text, req.Path, first)
	return res, nil
}

// treeLines lists the non-hidden paths under dir up to depth levels.
func treeLines(dir string, depth int) []string {
	out := []string{dir}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if p == dir {
			return nil
		}
		if err != nil || hidden(d.Name()) {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, p)
		if d.IsDir() && strings.Count(rel, string(filepath.Separator))+1 >= depth {
			return fs.SkipDir
		}
		return nil
	})
	sort.Strings(out[1:])
	return out
}

// catOutput is the editor's `cat -n` block: a header naming what is shown,
// then each line numbered from first.
func catOutput(text, what string, first int) string {
	var b strings.Builder
	b.WriteString("Here's the result of running `cat -n` on " + what + ":\n")
	for i, l := range strings.Split(text, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", i+first, l)
	}
	b.WriteByte('\n')
	return b.String()
}
