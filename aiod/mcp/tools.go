package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// builtins is the fixed table of built-in tools, in the published order.
// Each adapter decodes its arguments, calls the engine the matching HTTP
// route calls, and words the outcome as a result.
func (s *Server) builtins() []*tool {
	return []*tool{
		{name: "sandbox_execute_bash", run: s.executeBash,
			description: "Run a shell command in the sandbox and return its status, combined output, exit code and the directory the shell ended in. " +
				"Commands share one session unless new_session is set; pass the returned cwd back to keep working in the same directory. " +
				"A command still running after timeout seconds is killed with its children.",
			schema: schema(`{
  "type": "object",
  "properties": {
    "cmd": {"type": "string", "description": "The command line to run (bash when available, else sh)."},
    "cwd": {"type": "string", "description": "Directory to run in (absolute, or relative to the session's). Default: where the shared session's last command ended, else the workspace."},
    "new_session": {"type": "boolean", "default": false, "description": "Run in a fresh session instead of the shared one."},
    "timeout": {"type": "integer", "default": 30, "description": "Seconds before the command and its children are killed."},
    "preserve_symlinks": {"type": "boolean", "default": false, "description": "Report cwd as the shell's logical path (symbolic links kept) instead of the resolved one."},
    "truncate": {"type": "boolean", "default": true, "description": "Cut the middle out of each stream past 50000 bytes."}
  },
  "required": ["cmd"]
}`)},
		{name: "sandbox_execute_code", run: s.executeCode,
			description: "Run a Python or JavaScript snippet in a fresh interpreter and return what it printed, its last value and any error.",
			schema: schema(`{
  "type": "object",
  "properties": {
    "code": {"type": "string", "description": "The source to run."},
    "language": {"type": "string", "enum": ["python", "javascript"], "default": "python", "description": "python or javascript."},
    "timeout": {"type": "integer", "default": 30, "minimum": 1, "maximum": 900, "description": "Seconds the run may take (1-900)."}
  },
  "required": ["code"]
}`)},
		{name: "sandbox_file_operations", run: s.fileOperations,
			description: "Read, write, replace in, search, find, list, grep or glob files in the sandbox. " +
				"The answer is JSON with action, path and success; a failure carries the structured file error.",
			schema: schema(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["read", "write", "replace", "search", "find", "list", "grep", "glob"], "description": "The operation."},
    "path": {"type": "string", "description": "File (read, write, replace, search) or directory (find, list, grep, glob); relative paths start at the workspace."},
    "content": {"type": "string", "description": "write: the content; replace: the text to replace; search: the regular expression."},
    "target": {"type": "string", "description": "replace: the replacement text."},
    "pattern": {"type": "string", "description": "find and glob: a glob such as *.py or **/*.go; grep: the regular expression (or literal with fixed_strings)."},
    "encoding": {"type": "string", "enum": ["utf-8", "base64", "raw"], "description": "write: how content is encoded (default utf-8)."},
    "start_line": {"type": "integer", "minimum": 0, "description": "read: first line, counted from 0."},
    "end_line": {"type": "integer", "minimum": 0, "description": "read: line to stop before, counted from 0."},
    "append": {"type": "boolean", "description": "write: add to the end instead of replacing the file."},
    "recursive": {"type": "boolean", "description": "list: descend into subdirectories; grep: walk subdirectories (default true)."},
    "show_hidden": {"type": "boolean", "description": "list and glob: include names starting with a dot."},
    "file_types": {"type": "array", "items": {"type": "string"}, "description": "list: keep only files with these extensions."},
    "sudo": {"type": "boolean", "description": "write and replace: make root the owner of what is created."},
    "include": {"type": "array", "items": {"type": "string"}, "description": "grep: file name globs to search."},
    "exclude": {"type": "array", "items": {"type": "string"}, "description": "grep and glob: globs to leave out."},
    "case_insensitive": {"type": "boolean", "description": "grep: ignore case."},
    "fixed_strings": {"type": "boolean", "description": "grep: the pattern is a literal."},
    "context_before": {"type": "integer", "minimum": 0, "description": "grep: lines of context before each match."},
    "context_after": {"type": "integer", "minimum": 0, "description": "grep: lines of context after each match."},
    "max_results": {"type": "integer", "minimum": 0, "description": "grep and glob: most results returned."},
    "include_metadata": {"type": "boolean", "description": "glob: report size and modification time (default true)."},
    "files_only": {"type": "boolean", "description": "glob: leave directories out."}
  },
  "required": ["action", "path"]
}`)},
		{name: "sandbox_str_replace_editor", run: s.strReplaceEditor,
			description: "Edit files the way coding agents do: view a file or a line range, create a file, replace a unique string, insert text after a line, or undo the last edit.",
			schema: schema(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"], "description": "The edit to make."},
    "path": {"type": "string", "description": "The file."},
    "file_text": {"type": "string", "description": "create: the file's content."},
    "old_str": {"type": "string", "description": "str_replace: the text to find (unique unless replace_mode is given)."},
    "new_str": {"type": "string", "description": "str_replace: the replacement (absent: delete); insert: the text to insert."},
    "insert_line": {"type": "integer", "minimum": 0, "description": "insert: the text goes after this many lines (0: at the top)."},
    "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2, "description": "view: [first, last] lines counted from 1; last -1 for the end."},
    "replace_mode": {"type": "string", "enum": ["ALL", "FIRST", "LAST"], "description": "str_replace: which occurrences to replace when old_str is not unique."}
  },
  "required": ["command", "path"]
}`)},
		{name: "sandbox_get_context", run: s.getContext,
			description: "Describe the sandbox: daemon version, workspace (home) directory, operating system, user, time zone, installed runtimes and tools.",
			schema:      schema(`{"type": "object", "properties": {}}`)},
		{name: "sandbox_get_packages", run: s.getPackages,
			description: "List the installed Python or Node.js packages, one per line.",
			schema: schema(`{
  "type": "object",
  "properties": {
    "language": {"type": "string", "enum": ["python", "nodejs"], "default": "python", "description": "python or nodejs."}
  }
}`)},
		{name: "sandbox_load_skill", run: s.loadSkill,
			description: "Load a skill's instructions (its SKILL.md) by name, or list the available skills when no name is given.",
			schema: schema(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "The skill to load; omit to list them."}
  }
}`)},
		{name: "browser_get_info", run: s.browserInfo,
			description: "Describe the sandbox's browser: user agent, DevTools (CDP) URL and viewport.",
			schema:      schema(`{"type": "object", "properties": {}}`)},
		{name: "browser_gui_screenshot", run: s.browserScreenshot,
			description: "Take a screenshot of the whole display the browser runs on.",
			schema:      schema(`{"type": "object", "properties": {}}`)},
		{name: "browser_gui_execute_action", run: s.browserAction,
			description: "Perform one GUI action on the display: move, click, drag, scroll, type, press keys, wait, set the clipboard, activate or minimise a window.",
			schema: schema(strings.Replace(`{
  "type": "object",
  "properties": {
    "action": {
      "type": "object",
      "description": "The action: action_type plus its own fields, as POST /v2/computer/actions takes them (x, y, x_offset, y_offset, button, num_clicks, dx, dy, text, use_clipboard, key, keys, duration, window_id, node_id, value).",
      "properties": {
        "action_type": {"type": "string", "enum": ACTION_TYPES}
      },
      "required": ["action_type"]
    }
  },
  "required": ["action"]
}`, "ACTION_TYPES", string(marshal(ActionTypes)), 1))},
	}
}

// schema compacts a JSON Schema literal (a mistake in one is a bug
// caught by the tests, which decode every schema).
func schema(s string) json.RawMessage { return compact(json.RawMessage(s)) }

// decodeArgs decodes a tool's arguments (a JSON object) into the struct v
// points to. It returns what to tell the caller when a field has the
// wrong type, worded by this package, never Go's text.
func decodeArgs(args json.RawMessage, v any) string {
	dec := json.NewDecoder(bytes.NewReader(args))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Sprintf("invalid argument %s: expected %s", te.Field, typeName(te.Type))
		}
		return "arguments must be a JSON object"
	}
	return ""
}

// typeName words a Go type as the JSON Schema type it stands for.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
