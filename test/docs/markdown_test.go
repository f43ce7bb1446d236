package docs

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    []Command // of the last block
		wantErr string
	}{
		{
			name: "commands and outputs",
			src:  "text\n```console\n$ echo hi\nhi\n$ false\n[exit 1]\n$ printf 'a\\\nb'\n```\n",
			want: []Command{
				{Line: 3, Text: "echo hi", Want: []string{"hi"}},
				{Line: 5, Text: "false", Want: nil, Exit: 1},
				{Line: 7, Text: "printf 'a\\\nb'"},
			},
		},
		{
			name: "indented in a list item",
			src:  "- item\n\n  ```console\n  $ echo hi\n  hi\n  ```\n",
			want: []Command{{Line: 4, Text: "echo hi", Want: []string{"hi"}}},
		},
		{name: "sh block without output", src: "```sh\ngo run ./cmd/a2c up   # a comment\n```\n"},
		{name: "file block", src: "```python file=agent.py\nprint(1)\n```\n"},
		{name: "bare fence", src: "```\nx\n```\n", wantErr: "line 1: a fence with no language"},
		{name: "unclosed", src: "```console\n$ echo\n", wantErr: "line 1: the block is not closed"},
		{name: "output first", src: "```console\nhi\n$ echo hi\n```\n", wantErr: "line 2: a console block must start"},
		{name: "empty block", src: "```console\n```\n", wantErr: "line 1: an empty console block"},
		{name: "empty command", src: "```console\n$  \n```\n", wantErr: "line 2: an empty command"},
		{name: "continuation at end", src: "```console\n$ echo \\\n```\n", wantErr: "line 2: a continued command ends the block"},
		{name: "prompt in sh", src: "```sh\n$ echo hi\n```\n", wantErr: "line 2: a sh block shows a prompt or output"},
		{name: "output comment in sh", src: "```sh\necho '{}'\n# {}\n```\n", wantErr: "line 3: a sh block shows a prompt or output"},
		{name: "file leaves the folder", src: "```go file=../x.go\n```\n", wantErr: "file=\"../x.go\" must be a clean relative path"},
		{name: "absolute file", src: "```go file=/x.go\n```\n", wantErr: "must be a clean relative path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks, err := Parse(tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(blocks) == 0 {
				t.Fatal("no block")
			}
			got := blocks[len(blocks)-1].Commands
			if len(got) != len(tt.want) {
				t.Fatalf("commands = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Line != w.Line || g.Text != w.Text || g.Exit != w.Exit || strings.Join(g.Want, "|") != strings.Join(w.Want, "|") {
					t.Errorf("command %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	blocks, err := Parse("```python file=a/agent.py extra\nprint(1)\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if b := blocks[0]; b.Lang != "python" || b.File != "a/agent.py" || b.Body != "print(1)\n" {
		t.Fatalf("block = %+v", b)
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name string
		want []string
		got  string
		ok   bool
	}{
		{"exact", []string{"hi"}, "hi\n", true},
		{"trailing blanks", []string{"a"}, "a   \n", true},
		{"wrong text", []string{"hi"}, "ho\n", false},
		{"missing line", []string{"a", "b"}, "a\n", false},
		{"extra line", []string{"a"}, "a\nb\n", false},
		{"no output", nil, "", true},
		{"output where none shown", nil, "x\n", false},
		{"dots match none", []string{"a", "...", "b"}, "a\nb\n", true},
		{"dots match many", []string{"a", "...", "b"}, "a\nx\ny\nb\n", true},
		{"dots at the end", []string{"a", "..."}, "a\nx\n", true},
		{"dots only", []string{"..."}, "x\ny\n", true},
		{"any", []string{`{"cwd":"<any>","exit_code":0}`}, `{"cwd":"/w","exit_code":0}` + "\n", true},
		{"any stays in its line", []string{"a<any>", "c"}, "ab\nb\nc\n", false},
		{"number", []string{"ready in <n>ms"}, "ready in 430ms\n", true},
		{"number refuses text", []string{"ready in <n>ms"}, "ready in fastms\n", false},
		{"hex", []string{"trace <hex>"}, "trace b4dde238\n", true},
		{"uuid", []string{"<uuid>"}, "45258910-5e37-4f2b-a6c7-0c7a372f04a8\n", true},
		{"id", []string{"agent a2c-cli-<n> <id>"}, "agent a2c-cli-23383 AtU0lMBbb4b1M5HeaFP2\n", true},
		{"path", []string{"workspace=<path>"}, "workspace=/tmp/x/workspace\n", true},
		{"regexp characters are literal", []string{"a.c (x)*"}, "a.c (x)*\n", true},
		{"regexp characters do not match others", []string{"a.c"}, "abc\n", false},
		{"unknown placeholder is literal", []string{"<b>"}, "<b>\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Match(tt.want, tt.got)
			if (err == nil) != tt.ok {
				t.Fatalf("Match = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	a := Anchors("# Tests\n## Autobahn|Testsuite\n## `a2c call --trace`\n## What it stops and what it does not\ntext # not a heading\n")
	for _, want := range []string{"tests", "autobahntestsuite", "a2c-call---trace", "what-it-stops-and-what-it-does-not"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
}

func TestLinks(t *testing.T) {
	got := Links("[a](docs/up.md) [b](#x) [c](https://example.com) <http://127.0.0.1:8000/> ![i](img/a.png)")
	if strings.Join(got, " ") != "docs/up.md #x img/a.png" {
		t.Fatalf("Links = %q", got)
	}
}
