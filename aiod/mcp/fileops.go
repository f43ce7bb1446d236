package mcp

import (
	"context"
	"encoding/json"

	"github.com/a2c-smcp/a2c-go/aiod/files"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

type fileArgs struct {
	Action          *string  `json:"action"`
	Path            *string  `json:"path"`
	Content         *string  `json:"content"`
	Target          *string  `json:"target"`
	Pattern         *string  `json:"pattern"`
	Encoding        *string  `json:"encoding"`
	StartLine       *uint64  `json:"start_line"`
	EndLine         *uint64  `json:"end_line"`
	Append          bool     `json:"append"`
	Recursive       *bool    `json:"recursive"`
	ShowHidden      *bool    `json:"show_hidden"`
	FileTypes       []string `json:"file_types"`
	Sudo            bool     `json:"sudo"`
	Include         []string `json:"include"`
	Exclude         []string `json:"exclude"`
	CaseInsensitive bool     `json:"case_insensitive"`
	FixedStrings    bool     `json:"fixed_strings"`
	ContextBefore   uint64   `json:"context_before"`
	ContextAfter    uint64   `json:"context_after"`
	MaxResults      *uint64  `json:"max_results"`
	IncludeMetadata *bool    `json:"include_metadata"`
	FilesOnly       bool     `json:"files_only"`
}

// fileOperations is sandbox_file_operations over the files engine: each
// action is the engine call of its /v1/file route (read, write, replace,
// search, find, list, grep, glob). The text is JSON: action, path (as
// given), success, and the route's result fields; a failure is isError
// with message and, under error, the structured file error the HTTP
// plane answers.
func (s *Server) fileOperations(ctx context.Context, args []byte) result {
	var a fileArgs
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	switch {
	case a.Action == nil || *a.Action == "":
		return failure("action is required")
	case a.Path == nil:
		return failure("path is required")
	case s.cfg.Files == nil:
		return failure("files are not available on this daemon")
	}
	e, action, path := s.cfg.Files, *a.Action, *a.Path
	var own files.Ownership
	if a.Sudo {
		own.User = "root"
	}
	need := func(v *string, what string) string {
		if v == nil {
			return what + " is required for " + action
		}
		return ""
	}
	switch action {
	case "read":
		res, err := e.Read(ctx, files.FsReadQuery{Path: path, StartLine: a.StartLine, EndLine: a.EndLine})
		return fileOutcome("action", action, path, res, err)
	case "write":
		if msg := need(a.Content, "content"); msg != "" {
			return failure(msg)
		}
		res, err := e.Write(ctx, files.FsWriteRequest{Path: path, Content: *a.Content, Encoding: a.Encoding, Append: a.Append, Ownership: own})
		return fileOutcome("action", action, path, res, err)
	case "replace":
		if msg := need(a.Content, "content (the text to replace)"); msg != "" {
			return failure(msg)
		}
		if msg := need(a.Target, "target (the replacement)"); msg != "" {
			return failure(msg)
		}
		res, err := e.Replace(ctx, files.FileReplaceRequest{File: path, OldStr: *a.Content, NewStr: *a.Target, Ownership: own})
		return fileOutcome("action", action, path, res, err)
	case "search":
		if msg := need(a.Content, "content (the regular expression)"); msg != "" {
			return failure(msg)
		}
		res, err := e.SearchFile(ctx, files.FileSearchRequest{File: path, Regex: *a.Content, Ownership: own})
		return fileOutcome("action", action, path, res, err)
	case "find":
		if msg := need(a.Pattern, "pattern"); msg != "" {
			return failure(msg)
		}
		res, err := e.Find(ctx, files.FsSearchQuery{Path: path, Pattern: *a.Pattern})
		return fileOutcome("action", action, path, res, err)
	case "list":
		res, err := e.List(ctx, files.FsListQuery{Path: path, Recursive: a.Recursive != nil && *a.Recursive, ShowHidden: a.ShowHidden, FileTypes: a.FileTypes})
		return fileOutcome("action", action, path, res, err)
	case "grep":
		if msg := need(a.Pattern, "pattern"); msg != "" {
			return failure(msg)
		}
		res, err := e.Grep(ctx, files.FileGrepRequest{Path: path, Pattern: *a.Pattern, Include: a.Include, Exclude: a.Exclude,
			CaseInsensitive: a.CaseInsensitive, FixedStrings: a.FixedStrings, ContextBefore: a.ContextBefore, ContextAfter: a.ContextAfter,
			MaxResults: a.MaxResults, Recursive: a.Recursive})
		return fileOutcome("action", action, path, res, err)
	case "glob":
		if msg := need(a.Pattern, "pattern"); msg != "" {
			return failure(msg)
		}
		res, err := e.Glob(ctx, files.FileGlobRequest{Path: path, Pattern: *a.Pattern, Exclude: a.Exclude, FilesOnly: a.FilesOnly,
			IncludeHidden: a.ShowHidden != nil && *a.ShowHidden, IncludeMetadata: a.IncludeMetadata, MaxResults: a.MaxResults})
		return fileOutcome("action", action, path, res, err)
	}
	return failure(`unknown action "` + action + `": expected read, write, replace, search, find, list, grep or glob`)
}

type editArgs struct {
	Command     *string `json:"command"`
	Path        *string `json:"path"`
	FileText    *string `json:"file_text"`
	OldStr      *string `json:"old_str"`
	NewStr      *string `json:"new_str"`
	InsertLine  *uint64 `json:"insert_line"`
	ViewRange   []int64 `json:"view_range"`
	ReplaceMode *string `json:"replace_mode"`
}

// strReplaceEditor is sandbox_str_replace_editor over the files engine's
// Edit, the call behind /v1/file/str_replace_editor (view and create
// included). The text is JSON: command, path, success and the editor's
// result (output, prev_exist, old_content, new_content, error); a failure
// is isError with message and the structured file error.
func (s *Server) strReplaceEditor(ctx context.Context, args []byte) result {
	var a editArgs
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	switch {
	case a.Command == nil || *a.Command == "":
		return failure("command is required")
	case a.Path == nil:
		return failure("path is required")
	case s.cfg.Files == nil:
		return failure("files are not available on this daemon")
	}
	res, err := s.cfg.Files.Edit(ctx, files.FsEditRequest{Command: *a.Command, Path: *a.Path, OldStr: a.OldStr, NewStr: a.NewStr,
		InsertLine: a.InsertLine, ReplaceMode: a.ReplaceMode, FileText: a.FileText, ViewRange: a.ViewRange})
	return fileOutcome("command", *a.Command, *a.Path, res, err)
}

// fileOutcome words a files-engine outcome: the result's fields with
// verb (action or command), path (as the caller gave it) and success, or
// the failure with its structured error. The result's own "file" and
// "path" give way to the path as given, which the error echoes too.
func fileOutcome[T any](verbKey, verb, path string, res *T, ferr *fserr.Error) result {
	if ferr != nil {
		return jsonResult(map[string]any{verbKey: verb, "path": path, "success": false, "message": ferr.Message, "error": ferr}, true)
	}
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(marshal(res), &m)
	delete(m, "file")
	m[verbKey] = marshal(verb)
	m["path"] = marshal(path)
	m["success"] = json.RawMessage("true")
	return jsonResult(m, false)
}
