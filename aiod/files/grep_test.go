package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

func grepTree(t testing.TB) string {
	dir := t.TempDir()
	files := map[string]string{
		"a.py":           "import os\nfoo = 1\nbar = 2\nFOO = 3\n",
		"b.go":           "package b\n\nfunc foo() {}\n",
		"sub/c.py":       "x\ny\nfoo\nz\n",
		"sub/d.md":       "# foo bar\n",
		".git/config":    "foo\n",
		"bin.dat":        "foo\x00\x01",
		"big.txt":        strings.Repeat("foo\n", 300000),
		"ml.txt":         "start\nmiddle\nend\n",
		"crlf.txt":       "foo\r\nbar\r\n",
		"node/x/deep.js": "let foo;\n",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type hit struct {
	file string
	line uint64
	text string
}

func TestGrep(t *testing.T) {
	dir := grepTree(t)
	e := NewEngine(Config{Workspace: dir})
	u := func(v uint64) *uint64 { return &v }
	s := func(v string) *string { return &v }
	tests := []struct {
		name string
		req  FileGrepRequest
		want []hit
		more func(t *testing.T, r *FileGrepResult)
	}{
		{name: "fixed, hidden and binary and big skipped", req: FileGrepRequest{Pattern: "foo", FixedStrings: true},
			want: []hit{{"a.py", 2, "foo = 1"}, {"b.go", 3, "func foo() {}"}, {"crlf.txt", 1, "foo"}, {"node/x/deep.js", 1, "let foo;"},
				{"sub/c.py", 3, "foo"}, {"sub/d.md", 1, "# foo bar"}},
			more: func(t *testing.T, r *FileGrepResult) {
				if *r.FilesMatched != 6 || r.MatchCount != 6 || r.Truncated || *r.FilesSearched != 8 {
					t.Errorf("counts %d %d %d %v", *r.FilesSearched, *r.FilesMatched, r.MatchCount, r.Truncated)
				}
			}},
		{name: "regex case-insensitive include", req: FileGrepRequest{Pattern: "^fo+", CaseInsensitive: true, Include: []string{"*.py"}},
			want: []hit{{"a.py", 2, "foo = 1"}, {"a.py", 4, "FOO = 3"}, {"sub/c.py", 3, "foo"}}},
		{name: "type and exclude dir", req: FileGrepRequest{Pattern: "foo", Type: s("py"), Exclude: []string{"sub"}},
			want: []hit{{"a.py", 2, "foo = 1"}}},
		{name: "required literal with regex", req: FileGrepRequest{Pattern: `f(oo)+\(\)`},
			want: []hit{{"b.go", 3, "func foo() {}"}}},
		{name: "no literal", req: FileGrepRequest{Pattern: `^[a-z]$`, Include: []string{"c.py"}},
			want: []hit{{"sub/c.py", 1, "x"}, {"sub/c.py", 2, "y"}, {"sub/c.py", 4, "z"}}},
		{name: "class does not cross lines", req: FileGrepRequest{Pattern: `y\sfoo`}, want: nil},
		{name: "multiline", req: FileGrepRequest{Pattern: `start\nmiddle`, Multiline: true},
			want: []hit{{"ml.txt", 1, "start\nmiddle"}}},
		{name: "offset and max_results", req: FileGrepRequest{Pattern: "foo", MaxResults: u(2), Offset: 1},
			want: []hit{{"b.go", 3, "func foo() {}"}, {"crlf.txt", 1, "foo"}},
			more: func(t *testing.T, r *FileGrepResult) {
				if !r.Truncated || r.MatchCount != 2 {
					t.Errorf("truncated %v count %d", r.Truncated, r.MatchCount)
				}
			}},
		{name: "max_file_size", req: FileGrepRequest{Pattern: "foo", MaxFileSize: s("2M"), Include: []string{"big.txt"}, MaxResults: u(3)},
			want: []hit{{"big.txt", 1, "foo"}, {"big.txt", 2, "foo"}, {"big.txt", 3, "foo"}}},
		{name: "not recursive", req: FileGrepRequest{Pattern: "foo", Recursive: new(bool), Include: []string{"*.md", "*.go"}},
			want: []hit{{"b.go", 3, "func foo() {}"}}},
		{name: "context", req: FileGrepRequest{Pattern: "^foo$", Include: []string{"c.py"}, ContextBefore: 3, ContextAfter: 1},
			want: []hit{{"sub/c.py", 3, "foo"}},
			more: func(t *testing.T, r *FileGrepResult) {
				m := r.Matches[0]
				if !reflect.DeepEqual(m.ContextBefore, []string{"x", "y"}) || !reflect.DeepEqual(m.ContextAfter, []string{"z"}) {
					t.Errorf("context %q %q", m.ContextBefore, m.ContextAfter)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Path = dir
			r, ferr := e.Grep(context.Background(), tt.req)
			if ferr != nil {
				t.Fatal(ferr)
			}
			var got []hit
			for _, m := range r.Matches {
				rel, _ := filepath.Rel(dir, m.File)
				got = append(got, hit{rel, m.LineNumber, m.LineContent})
				if (m.ContextBefore != nil) != (tt.req.ContextBefore > 0) {
					t.Errorf("context_before presence %v", m.ContextBefore)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
			if tt.more != nil {
				tt.more(t, r)
			}
		})
	}
	r, ferr := e.Grep(context.Background(), FileGrepRequest{Path: "sub/c.py", Pattern: "y"})
	if ferr != nil || len(r.Matches) != 1 || r.Matches[0].LineNumber != 2 {
		t.Errorf("single file: %v %v", r, ferr)
	}
	for _, bad := range []FileGrepRequest{{Pattern: "("}, {Pattern: "a", Type: func() *string { s := "cobol"; return &s }()},
		{Pattern: "a", MaxFileSize: func() *string { s := "lots"; return &s }()}, {Pattern: "a", Include: []string{"[x"}}} {
		bad.Path = dir
		if _, ferr := e.Grep(context.Background(), bad); ferr == nil || ferr.ErrorType != "bad_request" {
			t.Errorf("%+v: %v", bad, ferr)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1M": 1 << 20, "512K": 512 << 10, "2G": 2 << 30, "100": 100, "1.5k": 1536, "1MB": 1 << 20, "1MiB": 1 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	for _, in := range []string{"", "M", "-1K", "x"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, tt := range []struct {
		glob, path string
		ok         bool
	}{
		{"**/*.py", "a.py", true}, {"**/*.py", "x/y/a.py", true}, {"*.py", "a.py", true}, {"src/*.py", "src/x/a.py", false},
		{"src/**", "src/x/a.py", true}, {"*.{js,ts}", "a.ts", true}, {"[!a]*", "ab", false}, {"?.go", "a.go", true},
	} {
		re, err := globRe(tt.glob)
		if err != nil || re.MatchString(tt.path) != tt.ok {
			t.Errorf("%s ~ %s: %v", tt.glob, tt.path, err)
		}
	}
}

// BenchmarkGrep searches a generated tree of 10,000 small files for a
// literal and for a regexp.
func BenchmarkGrep(b *testing.B) {
	dir := b.TempDir()
	line := "the quick brown fox jumps over the lazy dog 0123456789\n"
	body := strings.Repeat(line, 60)
	for i := range 10000 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%100))
		if i < 100 {
			if err := os.Mkdir(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		c := body
		if i%97 == 0 {
			c += "needle_" + fmt.Sprint(i) + " here\n"
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.txt", i)), []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	e := NewEngine(Config{Workspace: dir})
	for _, tc := range []struct {
		name string
		req  FileGrepRequest
	}{
		{"fixed", FileGrepRequest{Path: dir, Pattern: "needle_", FixedStrings: true}},
		{"regex", FileGrepRequest{Path: dir, Pattern: `needle_\d+ here`}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				r, ferr := e.Grep(context.Background(), tc.req)
				if ferr != nil || r.MatchCount != 104 {
					b.Fatalf("%v %v", ferr, r.MatchCount)
				}
			}
		})
	}
}

// TestSearchFileWording: /v1/file/search is a search in one file.
func TestSearchFileWording(t *testing.T) {
	f := newFixture(t)
	e := f.do("POST", "/v1/file/search", map[string]any{"file": filepath.Join(f.dir, "missing.txt"), "regex": "x"})
	if fe := fileErr(t, e); fe.Message != "Failed to search file: No such file or directory (os error 2)" || fe.Operation != "search" {
		t.Errorf("%s", e.Data)
	}
	e = f.do("GET", "/v2/fs/search?path="+q(filepath.Join(f.dir, "missing"))+"&pattern=*", nil)
	if fe := fileErr(t, e); e.status != 404 || fe.Message != "Failed to find files: No such file or directory (os error 2)" || fe.Operation != "find" {
		t.Errorf("%d %s", e.status, e.Data)
	}
}

// TestGrepMaxResultsZeroAndBinary: max_results 0 is the default (500),
// and binary files are skipped whatever the pattern, the empty one too.
func TestGrepMaxResultsZeroAndBinary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("many.txt", strings.Repeat("hit\n", 600))
	write("bin.dat", "hit\x00\x01\nhit\n")
	write("text.txt", "plain\n")
	e := NewEngine(Config{Workspace: dir})
	ctx := context.Background()
	zero := uint64(0)
	r, ferr := e.Grep(ctx, FileGrepRequest{Path: dir, Pattern: "hit", MaxResults: &zero})
	if ferr != nil || r.MatchCount != DefaultMaxResults || !r.Truncated {
		t.Fatalf("max_results 0: %v %v", r, ferr)
	}
	r, ferr = e.Grep(ctx, FileGrepRequest{Path: filepath.Join(dir, "text.txt"), Pattern: "plain", MaxResults: &zero})
	if ferr != nil || r.MatchCount != 1 || r.Truncated {
		t.Fatalf("max_results 0, one match: %v %v", r, ferr)
	}
	for _, req := range []FileGrepRequest{
		{Path: dir, Pattern: ""},
		{Path: dir, Pattern: "", FixedStrings: true},
		{Path: dir, Pattern: "", Multiline: true},
		{Path: dir, Pattern: "hit", Include: []string{"*.dat"}},
		{Path: filepath.Join(dir, "bin.dat"), Pattern: ""},
	} {
		r, ferr := e.Grep(ctx, req)
		if ferr != nil {
			t.Fatal(ferr)
		}
		for _, m := range r.Matches {
			if strings.HasSuffix(m.File, "bin.dat") {
				t.Errorf("%+v matched the binary file: %+v", req, m)
			}
		}
	}
}

// TestPatternErrorWording: a malformed regex or glob is a bad_request
// naming the pattern and what is wrong, without Go's "error parsing
// regexp" text.
func TestPatternErrorWording(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "x\n")
	file := filepath.Join(f.dir, "a.txt")
	tests := []struct {
		method, target string
		body           any
		msg            string
	}{
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "(unclosed"},
			`Failed to grep files: invalid regex "(unclosed": missing closing )`},
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "a)", "case_insensitive": true},
			`Failed to grep files: invalid regex "a)": unexpected )`},
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": `a\q`},
			"Failed to grep files: invalid regex \"a\\\\q\": invalid escape sequence: `\\q`"},
		{"POST", "/v1/file/search", map[string]any{"file": file, "regex": "(unclosed"},
			`Failed to search file: invalid regex "(unclosed": missing closing )`},
		{"POST", "/v1/file/search", map[string]any{"file": file, "regex": "x{2,1}"},
			"Failed to search file: invalid regex \"x{2,1}\": invalid repeat count: `{2,1}`"},
		{"GET", "/v2/fs/search?path=" + q(f.dir) + "&pattern=" + q("[abc"), nil,
			`Failed to find files: invalid glob "[abc": unclosed character class`},
		{"POST", "/v1/file/glob", map[string]any{"path": f.dir, "pattern": "{a,b"},
			`Failed to glob files: invalid glob "{a,b": unclosed alternation`},
		{"POST", "/v2/fs/grep", map[string]any{"path": f.dir, "pattern": "x", "include": []string{"[z-a]"}},
			"Failed to grep files: invalid glob \"[z-a]\": invalid character class range: `z-a`"},
	}
	for _, tt := range tests {
		e := f.do(tt.method, tt.target, tt.body)
		fe := fileErr(t, e)
		if e.Success || fe.ErrorType != fserr.BadRequest || fe.Message != tt.msg || strings.Contains(fe.Message, "error parsing") {
			t.Errorf("%s %v: %q, want %q", tt.target, tt.body, fe.Message, tt.msg)
		}
	}
}
