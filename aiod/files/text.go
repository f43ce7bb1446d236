package files

import (
	"context"
	"regexp"
	"strings"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// FileReplaceRequest is /v1/file/replace's body: a plain substitution of
// every occurrence.
type FileReplaceRequest struct {
	File   string `json:"file" serde:"required"`
	OldStr string `json:"old_str" serde:"required"`
	NewStr string `json:"new_str" serde:"required"`
	// Sudo makes root the owner (v1's spelling of user "root").
	Sudo      bool `json:"sudo"`
	Ownership `json:"-"`
}

// FileReplaceResult is a replace's answer.
type FileReplaceResult struct {
	File          string `json:"file"`
	ReplacedCount uint64 `json:"replaced_count"`
}

// Replace substitutes every occurrence of OldStr; none found is a success
// with ReplacedCount 0 and the file untouched. The write is atomic.
func (e *Engine) Replace(ctx context.Context, req FileReplaceRequest) (*FileReplaceResult, *fserr.Error) {
	const op = "replace"
	abs, own, ferr := e.prepare(ctx, op, req.File, sudo(req.Sudo, req.Ownership))
	if ferr != nil {
		return nil, ferr
	}
	if req.OldStr == "" {
		return nil, fserr.New(op, req.File, fserr.BadRequest, fserr.Phrase(op)+": old_str must not be empty")
	}
	e.hist.mu.Lock()
	defer e.hist.mu.Unlock()
	return inView(e, op, req.File, func() (*FileReplaceResult, *fserr.Error) {
		text, ferr := readText(op, req.File, abs)
		if ferr != nil {
			return nil, ferr
		}
		n := strings.Count(text, req.OldStr)
		if n > 0 {
			if err := replaceFile(abs, []byte(strings.ReplaceAll(text, req.OldStr, req.NewStr)), own, e.keepOwner()); err != nil {
				return nil, fserr.From(op, req.File, err)
			}
		}
		return &FileReplaceResult{File: req.File, ReplacedCount: uint64(n)}, nil
	})
}

// FileSearchRequest is /v1/file/search's body: a regexp over one file.
type FileSearchRequest struct {
	File  string `json:"file" serde:"required"`
	Regex string `json:"regex" serde:"required"`
	// Sudo makes root the owner (v1's spelling of user "root").
	Sudo      bool `json:"sudo"`
	Ownership `json:"-"`
}

// FileSearchResult lists the matching lines and their numbers, counted
// from 0.
type FileSearchResult struct {
	File        string   `json:"file"`
	Matches     []string `json:"matches"`
	LineNumbers []uint64 `json:"line_numbers"`
}

// SearchFile returns the lines of one text file that the regexp matches.
// A malformed regexp is bad_request.
func (e *Engine) SearchFile(ctx context.Context, req FileSearchRequest) (*FileSearchResult, *fserr.Error) {
	const op = "search"
	abs, _, ferr := e.prepare(ctx, op, req.File, sudo(req.Sudo, req.Ownership))
	if ferr != nil {
		return nil, ferr
	}
	re, err := regexp.Compile(req.Regex)
	if err != nil {
		return nil, fserr.New(op, req.File, fserr.BadRequest, fserr.Phrase(op)+": "+regexError(req.Regex, err))
	}
	text, ferr := inView(e, op, req.File, func() (string, *fserr.Error) { return readText(op, req.File, abs) })
	if ferr != nil {
		return nil, ferr
	}
	res := &FileSearchResult{File: req.File, Matches: []string{}, LineNumbers: []uint64{}}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if re.MatchString(line) {
			res.Matches = append(res.Matches, line)
			res.LineNumbers = append(res.LineNumbers, uint64(i))
		}
	}
	return res, nil
}

// sudo maps v1's flag onto an ownership identity: root when set.
func sudo(flag bool, o Ownership) Ownership {
	if flag {
		return Ownership{User: "root"}
	}
	return o
}
