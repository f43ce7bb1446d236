package skill

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name, in    string
		front, body string
		ok          bool
	}{
		{"plain", "---\nname: a\n---\n# A\n", "name: a\n", "# A\n", true},
		{"body keeps its blank line", "---\nname: a\n---\n\n# A\n", "name: a\n", "\n# A\n", true},
		{"crlf", "---\r\nname: a\r\n---\r\n# A\r\n", "name: a\r\n", "# A\r\n", true},
		{"bom", "\xef\xbb\xbf---\nname: a\n---\nbody", "name: a\n", "body", true},
		{"trailing blanks on delimiters", "--- \t\nname: a\n---  \nbody", "name: a\n", "body", true},
		{"closing at eof", "---\nname: a\n---", "name: a\n", "", true},
		{"empty block", "---\n---\nbody", "", "body", true},
		{"no frontmatter", "# A\n---\nx\n---\n", "", "# A\n---\nx\n---\n", false},
		{"blank first line", "\n---\nname: a\n---\nbody", "", "\n---\nname: a\n---\nbody", false},
		{"unclosed", "---\nname: a\nbody\n", "", "---\nname: a\nbody\n", false},
		{"opening alone", "---", "", "---", false},
		{"indented closing is not one", "---\na: |\n  ---\n---\nb", "a: |\n  ---\n", "b", true},
		{"four dashes is not one", "----\nx\n---\n", "", "----\nx\n---\n", false},
		{"dashes then text", "--- x\nname: a\n---\n", "", "--- x\nname: a\n---\n", false},
		{"empty", "", "", "", false},
		{"only the second delimiter counts", "---\na: 1\n---\nb\n---\nc", "a: 1\n", "b\n---\nc", true},
	}
	for _, tt := range tests {
		front, body, ok := Split([]byte(tt.in))
		if string(front) != tt.front || string(body) != tt.body || ok != tt.ok {
			t.Errorf("%s: Split = %q, %q, %v; want %q, %q, %v", tt.name, front, body, ok, tt.front, tt.body, tt.ok)
		}
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"---\nname: a\n---\nb", "\xef\xbb\xbf---\r\n---\r\n", "---", "x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		front, body, ok := Split(b)
		if !ok {
			if !bytes.Equal(body, b) || front != nil {
				t.Fatal("no frontmatter must leave the data whole")
			}
			return
		}
		// The body is a suffix of the data and the block a part of what
		// precedes it.
		if !bytes.HasSuffix(b, body) || !bytes.Contains(b[:len(b)-len(body)], front) {
			t.Fatalf("Split(%q) = %q, %q", b, front, body)
		}
		_, _ = ParseYAML(front) // must not panic
	})
}

func TestParseMeta(t *testing.T) {
	long := func(n int) string { return strings.Repeat("é", n) }
	tests := []struct {
		name, yaml string
		want       Meta
		err        bool
	}{
		{"minimal", "name: a\ndescription: does a", Meta{Name: "a", Description: "does a"}, false},
		{"all seven", `name: csv-tool
description: Aggregates CSV files.
license: MIT
compatibility: python 3.10+
metadata: {author: me, n: 3, nested: {k: [1, 2]}}
allowed-tools: Read  Bash(python:*)
tags: [data, csv]
version: 9`, Meta{Name: "csv-tool", Description: "Aggregates CSV files.", License: "MIT", Compatibility: "python 3.10+",
			Metadata:     map[string]any{"author": "me", "n": 3, "nested": map[string]any{"k": []any{1, 2}}},
			AllowedTools: []string{"Read", "Bash(python:*)"}, Tags: []string{"data", "csv"}}, false},
		{"allowed-tools list", "name: a\ndescription: d\nallowed-tools: [x, y]", Meta{Name: "a", Description: "d", AllowedTools: []string{"x", "y"}}, false},
		{"null fields are absent", "name: a\ndescription: d\nlicense:\nmetadata:\ntags:", Meta{Name: "a", Description: "d"}, false},
		{"scalar license", "name: a\ndescription: d\nlicense: 2", Meta{Name: "a", Description: "d", License: "2"}, false},
		{"tags not a list: dropped", "name: a\ndescription: d\ntags: x", Meta{Name: "a", Description: "d"}, false},
		{"tags with a number: dropped", "name: a\ndescription: d\ntags: [x, 1]", Meta{Name: "a", Description: "d"}, false},
		{"description at the limit", "name: a\ndescription: " + long(1024), Meta{Name: "a", Description: long(1024)}, false},
		{"compatibility at the limit", "name: a\ndescription: d\ncompatibility: " + long(500), Meta{Name: "a", Description: "d", Compatibility: long(500)}, false},
		{"non-string mapping keys", "name: a\ndescription: d\nmetadata: {1: one}", Meta{Name: "a", Description: "d", Metadata: map[string]any{"1": "one"}}, false},

		{"no name", "description: d", Meta{}, true},
		{"bad name", "name: A_b\ndescription: d", Meta{}, true},
		{"name too long", "name: " + strings.Repeat("a", 65) + "\ndescription: d", Meta{}, true},
		{"name not a string", "name: 12\ndescription: d", Meta{}, true},
		{"no description", "name: a", Meta{}, true},
		{"blank description", "name: a\ndescription: '  '", Meta{}, true},
		{"description too long", "name: a\ndescription: " + long(1025), Meta{}, true},
		{"compatibility too long", "name: a\ndescription: d\ncompatibility: " + long(501), Meta{}, true},
		{"metadata not a map", "name: a\ndescription: d\nmetadata: [1]", Meta{}, true},
		{"allowed-tools bad", "name: a\ndescription: d\nallowed-tools: {a: 1}", Meta{}, true},
		{"allowed-tools list of numbers", "name: a\ndescription: d\nallowed-tools: [1]", Meta{}, true},
		{"license a list", "name: a\ndescription: d\nlicense: [MIT]", Meta{}, true},
		{"not a mapping", "- a\n- b", Meta{}, true},
		{"bad yaml", "name: [a", Meta{}, true},
		{"empty", "", Meta{}, true},
	}
	for _, tt := range tests {
		var logs bytes.Buffer
		got, err := ParseMeta([]byte(tt.yaml), slog.New(slog.NewTextHandler(&logs, nil)))
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: ParseMeta = %#v, %v; want %#v err=%v", tt.name, got, err, tt.want, tt.err)
		}
		if strings.HasPrefix(tt.name, "tags ") && !strings.Contains(logs.String(), "tags") {
			t.Errorf("%s: no diagnostic logged", tt.name)
		}
	}
}

func TestMetaRef(t *testing.T) {
	m := Meta{Name: "a", Description: "d", AllowedTools: []string{}, Tags: []string{"t"}}
	r := m.Ref("mcp:b:a", "mcp:b", "/p")
	if r.Name != "mcp:b:a" || r.Source != "mcp:b" || r.Path != "/p" || r.Description != "d" || r.AllowedTools != nil || r.Tags[0] != "t" {
		t.Fatalf("%+v", r)
	}
}
