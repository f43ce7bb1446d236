package mcp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestToolFailures: every failure inside a tool, bad arguments included,
// is a result with isError and the exact text.
func TestToolFailures(t *testing.T) {
	f := newFixture(t, nil)
	missing := filepath.Join(f.ws, "agent-missing.txt")
	cases := []struct {
		tool string
		args any
		want string
	}{
		{"sandbox_execute_bash", map[string]any{}, "cmd is required"},
		{"sandbox_execute_bash", map[string]any{"cmd": ""}, "cmd is required"},
		{"sandbox_execute_bash", map[string]any{"cmd": "true", "timeout": "soon"}, "invalid argument timeout: expected a number"},
		{"sandbox_execute_bash", map[string]any{"cmd": "true", "timeout": 0}, "timeout must be more than 0 and at most 86400 seconds"},
		{"sandbox_execute_bash", map[string]any{"cmd": "true", "cwd": "/nonexistent-dir"},
			"cannot use cwd /nonexistent-dir: No such file or directory (os error 2)"},
		{"sandbox_execute_bash", "not an object", "arguments must be a JSON object"},
		{"sandbox_execute_code", map[string]any{}, "code is required"},
		{"sandbox_execute_code", map[string]any{"code": "1", "language": "ruby"}, "Unsupported language 'ruby'. Supported: python, javascript"},
		{"sandbox_execute_code", map[string]any{"code": "1", "timeout": 901}, "timeout must be between 1 and 900 seconds"},
		{"sandbox_file_operations", map[string]any{"path": "x"}, "action is required"},
		{"sandbox_file_operations", map[string]any{"action": "read"}, "path is required"},
		{"sandbox_file_operations", map[string]any{"action": "chmod", "path": "x"},
			`unknown action "chmod": expected read, write, replace, search, find, list, grep or glob`},
		{"sandbox_file_operations", map[string]any{"action": "write", "path": "x"}, "content is required for write"},
		{"sandbox_file_operations", map[string]any{"action": "replace", "path": "x", "content": "a"}, "target (the replacement) is required for replace"},
		{"sandbox_file_operations", map[string]any{"action": "glob", "path": "x"}, "pattern is required for glob"},
		{"sandbox_file_operations", map[string]any{"action": "read", "path": "x", "start_line": -1}, "invalid argument start_line: expected a non-negative integer"},
		{"sandbox_file_operations", map[string]any{"action": "read", "path": missing},
			`{"action":"read","error":{"errno":2,"errno_name":"ENOENT","error_type":"not_found","exception_type":"FileNotFoundError",` +
				`"message":"Failed to read file: No such file or directory (os error 2)","operation":"read","path":"` + missing + `","retryable":false},` +
				`"message":"Failed to read file: No such file or directory (os error 2)","path":"` + missing + `","success":false}`},
		{"sandbox_str_replace_editor", map[string]any{"path": "x"}, "command is required"},
		{"sandbox_get_packages", map[string]any{"language": "ruby"}, `unknown lang "ruby": expected python or nodejs`},
		{"sandbox_load_skill", map[string]any{"name": "pdf"}, "skill not found: pdf"},
		{"browser_get_info", nil, noBrowser},
		{"browser_gui_screenshot", nil, noBrowser},
		{"browser_gui_execute_action", map[string]any{"action": map[string]any{"action_type": "CLICK"}}, noBrowser},
		{"browser_gui_execute_action", map[string]any{}, "action is required: an object with action_type"},
	}
	for _, c := range cases {
		t.Run(c.tool+" "+c.want, func(t *testing.T) {
			text, isErr := f.callTool(t, c.tool, c.args)
			if !isErr || text != c.want {
				t.Errorf("got isError %v %q\nwant %q", isErr, text, c.want)
			}
		})
	}
	// An editor failure carries the structured file error.
	text, isErr := f.callTool(t, "sandbox_str_replace_editor", map[string]any{"command": "str_replace", "path": missing, "old_str": "a", "new_str": "b"})
	m := jsonText(t, text)
	if e, _ := m["error"].(map[string]any); !isErr || m["success"] != false || m["command"] != "str_replace" || e["error_type"] != "not_found" {
		t.Errorf("editor failure: %v %s", isErr, text)
	}
}

// TestToolsWork: each tool's happy path through the engines.
func TestToolsWork(t *testing.T) {
	f := newFixture(t, nil)
	data := filepath.Join(f.ws, "agent-data.txt")

	// The documented four-step workflow, file part.
	text, isErr := f.callTool(t, "sandbox_file_operations", map[string]any{"action": "write", "path": data, "content": "3\n7\n12\n5\n"})
	if want := `{"action":"write","bytes_written":9,"path":"` + data + `","success":true}`; isErr || text != want {
		t.Errorf("write: %v %s\nwant %s", isErr, text, want)
	}
	text, isErr = f.callTool(t, "sandbox_file_operations", map[string]any{"action": "read", "path": data})
	if want := `{"action":"read","content":"3\n7\n12\n5\n","path":"` + data + `","success":true}`; isErr || text != strings.ReplaceAll(want, "\n", `\n`) {
		t.Errorf("read: %v %s", isErr, text)
	}
	for _, c := range []struct {
		args map[string]any
		key  string
	}{
		{map[string]any{"action": "replace", "path": data, "content": "12", "target": "13"}, `"replaced_count":1`},
		{map[string]any{"action": "search", "path": data, "content": "^1"}, `"matches":["13"]`},
		{map[string]any{"action": "find", "path": f.ws, "pattern": "*.txt"}, `"files":["` + data + `"]`},
		{map[string]any{"action": "list", "path": f.ws}, `"name":"agent-data.txt"`},
		{map[string]any{"action": "grep", "path": f.ws, "pattern": "13"}, `"line_content":"13"`},
		{map[string]any{"action": "glob", "path": f.ws, "pattern": "*.txt"}, `"name":"agent-data.txt"`},
	} {
		text, isErr := f.callTool(t, "sandbox_file_operations", c.args)
		if isErr || !strings.Contains(text, c.key) || !strings.Contains(text, `"success":true`) {
			t.Errorf("%v: %v %s", c.args["action"], isErr, text)
		}
	}

	// The editor: create, view, replace.
	ed := filepath.Join(f.ws, "ed.txt")
	for _, c := range []struct {
		args map[string]any
		key  string
	}{
		{map[string]any{"command": "create", "path": ed, "file_text": "alpha\nbeta\n"}, "File created successfully"},
		{map[string]any{"command": "view", "path": ed, "view_range": []int{2, -1}}, "beta"},
		{map[string]any{"command": "str_replace", "path": ed, "old_str": "beta", "new_str": "gamma"}, `"new_content":"alpha\ngamma\n"`},
	} {
		text, isErr := f.callTool(t, "sandbox_str_replace_editor", c.args)
		m := jsonText(t, text)
		if isErr || m["success"] != true || m["command"] != c.args["command"] || !strings.Contains(strings.ReplaceAll(text, `\n`, "\n"), strings.ReplaceAll(c.key, `\n`, "\n")) {
			t.Errorf("%v: %v %s", c.args["command"], isErr, text)
		}
	}

	// Commands: output, exit code as data, the cwd the shell ended in,
	// remembered by the shared session.
	text, isErr = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "echo hi; echo err >&2; exit 3"})
	m := jsonText(t, text)
	if isErr || m["status"] != "completed" || m["exit_code"] != 3.0 || m["output"] != "hi\nerr\n" || m["cwd"] != f.ws {
		t.Errorf("bash: %v %s", isErr, text)
	}
	sub := filepath.Join(f.ws, "sub")
	_ = os.Mkdir(sub, 0o755)
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "cd sub"})
	if m := jsonText(t, text); m["cwd"] != sub {
		t.Errorf("after cd: %s", text)
	}
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "pwd"})
	if m := jsonText(t, text); m["output"] != sub+"\n" || m["cwd"] != sub {
		t.Errorf("shared session did not start where the last command ended: %s", text)
	}
	// Through a symbolic link: the physical directory unless
	// preserve_symlinks asks for the shell's logical one.
	link := filepath.Join(f.ws, "link")
	if err := os.Symlink(sub, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		preserve bool
		want     string
	}{{false, sub}, {true, link}} {
		text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "cd link", "new_session": true, "preserve_symlinks": c.preserve})
		if m := jsonText(t, text); m["cwd"] != c.want {
			t.Errorf("cd link, preserve_symlinks %v: %s, want cwd %s", c.preserve, text, c.want)
		}
	}
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "pwd", "new_session": true})
	if m := jsonText(t, text); m["output"] != f.ws+"\n" {
		t.Errorf("a new session starts in the workspace: %s", text)
	}
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "exec true", "cwd": "/tmp"})
	if m := jsonText(t, text); m["cwd"] != "/tmp" {
		t.Errorf("exec: the start directory is reported: %s", text)
	}
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "sleep 30", "timeout": 0.5})
	if m := jsonText(t, text); m["status"] != "timed_out" || m["exit_code"] != -1.0 {
		t.Errorf("timeout: %s", text)
	}
	// A timeout under a nanosecond still bounds the command (it rounds up
	// to 1 ms; a zero duration would mean no limit to the engine).
	start := time.Now()
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "sleep 30", "timeout": 1e-10, "new_session": true})
	if m := jsonText(t, text); m["status"] != "timed_out" || m["exit_code"] != -1.0 || time.Since(start) > 10*time.Second {
		t.Errorf("timeout 1e-10: %s after %s", text, time.Since(start))
	}
	for _, c := range []struct {
		in   float64
		want time.Duration
	}{{1e-10, time.Millisecond}, {0.0005, time.Millisecond}, {0.0011, 2 * time.Millisecond}, {0.5, 500 * time.Millisecond}, {30, 30 * time.Second}, {86400, 24 * time.Hour}} {
		if got := bashTimeout(c.in); got != c.want {
			t.Errorf("bashTimeout(%v) = %s, want %s", c.in, got, c.want)
		}
	}
	text, _ = f.callTool(t, "sandbox_execute_bash", map[string]any{"cmd": "head -c 60000 /dev/zero | tr '\\0' a"})
	if m := jsonText(t, text); !strings.Contains(m["output"].(string), "\n... output truncated ...\n") || len(m["output"].(string)) > 50100 {
		t.Errorf("truncation: %d bytes", len(m["output"].(string)))
	}

	// Context and packages come from the daemon.
	if text, isErr := f.callTool(t, "sandbox_get_context", nil); isErr || jsonText(t, text)["version"] != "test" {
		t.Errorf("context: %v %s", isErr, text)
	}
	if text, isErr := f.callTool(t, "sandbox_get_packages", nil); isErr || text != "  - demo==1.0\n" {
		t.Errorf("packages: %v %q", isErr, text)
	}
}

// TestCodeTool runs a cell on each language whose interpreter is here.
func TestCodeTool(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := exec.LookPath("node"); err == nil {
		text, isErr := f.callTool(t, "sandbox_execute_code", map[string]any{"language": "javascript", "code": "console.log('sum', 3+4)"})
		if isErr || text != "sum 7\n" {
			t.Errorf("javascript: %v %q", isErr, text)
		}
		text, isErr = f.callTool(t, "sandbox_execute_code", map[string]any{"language": "javascript", "code": "throw new Error('boom')"})
		if !isErr || !strings.Contains(text, "boom") {
			t.Errorf("javascript error: %v %q", isErr, text)
		}
	}
	text, isErr := f.callTool(t, "sandbox_execute_code", map[string]any{"code": "print('sum', 3+4)\n1/0"})
	switch {
	case strings.Contains(text, "not available") || strings.Contains(text, "no python"):
		t.Logf("python: %s", text)
	case !isErr || !strings.HasPrefix(text, "sum 7\nZeroDivisionError: division by zero\n"):
		t.Errorf("python: %v %q", isErr, text)
	}
}

// TestSkills: a tree of skills, listed and loaded; a single skill path.
func TestSkills(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pdf/SKILL.md", "---\nname: pdf-tools\ndescription: Work with\n  PDF files\n---\n\n# PDF\nRun scripts/x.py\n")
	write("team/csv/SKILL.md", "# CSV\nNo front matter.\n")
	write(".hidden/SKILL.md", "---\nname: hidden\n---\n")
	f := newFixture(t, func(c *Config) { c.SkillsPath = root })
	text, isErr := f.callTool(t, "sandbox_load_skill", nil)
	want := "Skills Count: 2\n- csv:  (" + filepath.Join(root, "team/csv") + ")\n- pdf-tools: Work with PDF files (" + filepath.Join(root, "pdf") + ")\n"
	if isErr || text != want {
		t.Errorf("list: %v %q\nwant %q", isErr, text, want)
	}
	text, isErr = f.callTool(t, "sandbox_load_skill", map[string]any{"name": "pdf-tools"})
	if want := "Skill: pdf-tools\nDirectory: " + filepath.Join(root, "pdf") + "\n\n# PDF\nRun scripts/x.py\n"; isErr || text != want {
		t.Errorf("load: %v %q", isErr, text)
	}
	// A path that is one skill.
	one := newFixture(t, func(c *Config) { c.SkillsPath = filepath.Join(root, "pdf") })
	if text, _ := one.callTool(t, "sandbox_load_skill", map[string]any{}); !strings.HasPrefix(text, "Skills Count: 1\n- pdf-tools:") {
		t.Errorf("single: %q", text)
	}
	none := newFixture(t, nil)
	if text, _ := none.callTool(t, "sandbox_load_skill", nil); text != "Skills Count: 0\n(AIO_SKILLS_PATH is not set)\n" {
		t.Errorf("unset: %q", text)
	}
}

// TestEmptyText: a text item carries text even when it is empty (MCP's
// TextContent requires the member; the TypeScript SDK's client throws
// without it), on the plain path, in a streamable-HTTP session and in
// memory; an image item carries data and mimeType, no text.
func TestEmptyText(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Packages = func(context.Context, string) (string, error) { return "", nil }
	})
	want := `{"content":[{"type":"text","text":""}],"isError":false}`
	_, body := post(t, f.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_get_packages","arguments":{}}}`)
	if body != `{"jsonrpc":"2.0","id":1,"result":`+want+`}` {
		t.Errorf("plain: %s", body)
	}
	sid := openSession(t, f.url)
	if _, _, msg := sessionPost(t, f.url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_get_packages","arguments":{}}}`); msg != `{"jsonrpc":"2.0","id":2,"result":`+want+`}` {
		t.Errorf("session: %s", msg)
	}
	if got := pipeCall(t, f.s, "sandbox_get_packages", `{}`); got != want {
		t.Errorf("in memory: %s", got)
	}
	if got := string(marshal(imageResult([]byte{1}, "image/png"))); got != `{"content":[{"type":"image","data":"AQ==","mimeType":"image/png"}],"isError":false}` {
		t.Errorf("image: %s", got)
	}
}

// TestEditorUnknownCommand: an unknown command names all five commands
// the tool takes, in the message and in the structured error.
func TestEditorUnknownCommand(t *testing.T) {
	f := newFixture(t, nil)
	text, isErr := f.callTool(t, "sandbox_str_replace_editor", map[string]any{"command": "delete", "path": "a.txt"})
	msg := "Unrecognized command delete. The allowed commands are: view, create, str_replace, insert, undo_edit"
	m := jsonText(t, text)
	if e, _ := m["error"].(map[string]any); !isErr || m["message"] != msg || e["message"] != msg || e["error_type"] != "bad_request" || m["command"] != "delete" || m["success"] != false {
		t.Errorf("%v %s", isErr, text)
	}
}
