package files

import "encoding/json"

// The /v1/file wire forms whose fields differ from the engine's requests.
// Each names the path `file` (read, write) or adds v1-only knobs, and
// adapts itself to the engine request.

// FileReadRequest is /v1/file/read's body.
type FileReadRequest struct {
	File      string  `json:"file" serde:"required"`
	StartLine *uint64 `json:"start_line"`
	EndLine   *uint64 `json:"end_line"`
	Sudo      bool    `json:"sudo"`
}

func (v FileReadRequest) engine() FsReadQuery {
	return FsReadQuery{Path: v.File, StartLine: v.StartLine, EndLine: v.EndLine, Ownership: sudo(v.Sudo, Ownership{})}
}

// FileWriteRequest is /v1/file/write's body.
type FileWriteRequest struct {
	File            string  `json:"file" serde:"required"`
	Content         string  `json:"content" serde:"required"`
	Encoding        *string `json:"encoding"`
	Append          bool    `json:"append"`
	LeadingNewline  bool    `json:"leading_newline"`
	TrailingNewline bool    `json:"trailing_newline"`
	Sudo            bool    `json:"sudo"`
}

func (v FileWriteRequest) engine() FsWriteRequest {
	return FsWriteRequest{Path: v.File, Content: v.Content, Encoding: v.Encoding, Append: v.Append,
		LeadingNewline: v.LeadingNewline, TrailingNewline: v.TrailingNewline, Ownership: sudo(v.Sudo, Ownership{})}
}

// FileFindRequest is /v1/file/find's body.
type FileFindRequest struct {
	Path string `json:"path" serde:"required"`
	Glob string `json:"glob" serde:"required"`
}

func (v FileFindRequest) engine() FsSearchQuery { return FsSearchQuery{Path: v.Path, Pattern: v.Glob} }

// FileStatRequest is /v1/file/stat's body.
type FileStatRequest struct {
	Path           string `json:"path" serde:"required"`
	FollowSymlinks *bool  `json:"follow_symlinks"`
}

func (v FileStatRequest) engine() FsStatQuery {
	return FsStatQuery{Path: v.Path, FollowSymlinks: v.FollowSymlinks}
}

// FileListRequest is /v1/file/list's body.
type FileListRequest struct {
	Path               string   `json:"path" serde:"required"`
	Recursive          bool     `json:"recursive"`
	ShowHidden         *bool    `json:"show_hidden"`
	MaxDepth           *uint64  `json:"max_depth"`
	FileTypes          []string `json:"file_types"`
	IncludeSize        *bool    `json:"include_size"`
	IncludePermissions bool     `json:"include_permissions"`
	SortBy             *string  `json:"sort_by"`
	SortDesc           bool     `json:"sort_desc"`
}

func (v FileListRequest) engine() FsListQuery {
	return FsListQuery{Path: v.Path, Recursive: v.Recursive, ShowHidden: v.ShowHidden, MaxDepth: v.MaxDepth,
		FileTypes: v.FileTypes, IncludeSize: v.IncludeSize, IncludePermissions: v.IncludePermissions,
		SortBy: deref(v.SortBy), SortDesc: v.SortDesc}
}

// StrReplaceEditorRequest is /v1/file/str_replace_editor's body; the
// document-format knobs of 1.x are accepted and ignored.
type StrReplaceEditorRequest struct {
	Command     string          `json:"command" serde:"required"`
	Path        string          `json:"path" serde:"required"`
	FileText    *string         `json:"file_text"`
	OldStr      *string         `json:"old_str"`
	NewStr      *string         `json:"new_str"`
	InsertLine  *uint64         `json:"insert_line"`
	ReplaceMode *string         `json:"replace_mode"`
	ViewRange   json.RawMessage `json:"view_range"`
}

func (v StrReplaceEditorRequest) engine() FsEditRequest {
	var vr []int64
	_ = json.Unmarshal(v.ViewRange, &vr) // validated by viewRangeCheck
	return FsEditRequest{Command: v.Command, Path: v.Path, OldStr: v.OldStr, NewStr: v.NewStr, InsertLine: v.InsertLine,
		ReplaceMode: v.ReplaceMode, FileText: v.FileText, ViewRange: vr}
}
