package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// writeTree writes files (relative path -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pkgFixture is a user skill "demo" with text, binary, nested, credential
// and link entries, registered in a fresh registry.
func pkgFixture(t *testing.T) (*Registry, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "demo")
	writeTree(t, dir, map[string]string{
		"SKILL.md":             "---\nname: demo\ndescription: A demo.\n---\n# Demo\nSee references/a.md.\n",
		"references/a.md":      "# A\n",
		"references/SKILL.md":  "---\nname: x\n---\nkept\n",
		"data/big.txt":         strings.Repeat("x", 40<<10),
		"data/latin1.txt":      "caf\xe9",
		"data/empty.txt":       "",
		"assets/logo.png":      "\x89PNG\r\n\x1a\n",
		"scripts/run.py":       "print(1)\n",
		"conf/.skillenv/x.txt": "nested secret",
		".skillenv":            "TOKEN=secret",
	})
	outside := filepath.Join(root, "outside.txt")
	writeTree(t, root, map[string]string{"outside.txt": "outside"})
	links := map[string]string{
		"escape.txt":      outside,
		"escape-dir":      root,
		"inside.txt":      filepath.Join(dir, "references/a.md"),
		"secret-link":     filepath.Join(dir, ".skillenv"),
		"dangling-out":    filepath.Join(root, "nowhere"),
		"dangling-in":     "nowhere",
		"references/up":   "..",
		"references/loop": "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	reg := NewRegistry(nil)
	pkgs := ScanUser(root, nil)
	if len(pkgs) != 1 {
		t.Fatalf("ScanUser = %+v", pkgs)
	}
	reg.Set(SourceUser, pkgs)
	return reg, dir
}

func TestGet(t *testing.T) {
	reg, _ := pkgFixture(t)
	var minted []string
	mint := func(data []byte, mime string) string {
		minted = append(minted, mime)
		return "h" + string(rune('0'+len(minted)))
	}
	o := ReadOptions{InlineBudget: 32 << 10, MaxSize: 64 << 10}
	type want struct {
		mime   string
		body   string
		handle bool
		size   int64
	}
	ok := []struct {
		rel  string
		want want
	}{
		{"", want{mime: "text/markdown", body: "# Demo\nSee references/a.md.\n"}},
		{"SKILL.md", want{mime: "text/markdown", body: "# Demo\nSee references/a.md.\n"}},
		{"./SKILL.md", want{mime: "text/markdown", body: "# Demo\nSee references/a.md.\n"}},
		{"references/a.md", want{mime: "text/markdown", body: "# A\n"}},
		{"references//a.md", want{mime: "text/markdown", body: "# A\n"}},
		{"references/SKILL.md", want{mime: "text/markdown", body: "kept\n"}}, // every SKILL.md is stripped, as by the reference SDK
		{"inside.txt", want{mime: "text/plain", body: "# A\n"}},
		{"references/up/references/a.md", want{mime: "text/markdown", body: "# A\n"}}, // a link that stays inside
		{"data/empty.txt", want{mime: "text/plain", body: ""}},
		{"data/big.txt", want{mime: "text/plain", handle: true, size: 40 << 10}}, // text over the budget
		{"data/latin1.txt", want{mime: "text/plain", handle: true, size: 4}},     // not UTF-8
		{"assets/logo.png", want{mime: "image/png", handle: true, size: 8}},      // binary
		{"scripts/run.py", want{mime: DefaultMIME, handle: true, size: 9}},       // unknown extension
	}
	for _, tt := range ok {
		ret, err := Get(reg, "demo", tt.rel, o, mint)
		if err != nil {
			t.Errorf("%q: %v", tt.rel, err)
			continue
		}
		echo := tt.rel
		if echo == "" {
			echo = "SKILL.md"
		}
		if ret.Name != "demo" || ret.RelPath != echo || ret.MimeType != tt.want.mime {
			t.Errorf("%q: %+v", tt.rel, ret)
		}
		if (ret.Body != nil) == (ret.BlobHandle != nil) {
			t.Errorf("%q: exactly one of body and blob_handle: %+v", tt.rel, ret)
		}
		if tt.want.handle {
			if ret.BlobHandle == nil || ret.TotalSize != tt.want.size {
				t.Errorf("%q: want a handle of %d bytes, got %+v", tt.rel, tt.want.size, ret)
			}
			continue
		}
		if ret.Body == nil || *ret.Body != tt.want.body || ret.TotalSize != int64(len(tt.want.body)) || ret.SHA256 != hexSum([]byte(tt.want.body)) {
			t.Errorf("%q: body %+v", tt.rel, ret)
		}
	}

	bad := []struct {
		name, rel, wire string
	}{
		{"Bad_Name", "", `{"code":4016,"message":"Invalid skill name format","details":{"name":"Bad_Name"}}`},
		{"a:b:c", "", `{"code":4016,"message":"Invalid skill name format","details":{"name":"a:b:c"}}`},
		{"missing", "", `{"code":4014,"message":"Skill not found","details":{"name":"missing"}}`},
		{"mcp:srv:missing", "../x", `{"code":4014,"message":"Skill not found","details":{"name":"mcp:srv:missing"}}`},
		{"demo", "/etc/passwd", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"/etc/passwd"}}`},
		{"demo", "../demo/SKILL.md", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"../demo/SKILL.md"}}`},
		{"demo", "references/../../x", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"references/../../x"}}`},
		{"demo", "references\\a.md", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"references\\a.md"}}`},
		{"demo", "escape.txt", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"escape.txt"}}`},
		{"demo", "escape-dir/outside.txt", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"escape-dir/outside.txt"}}`},
		{"demo", "dangling-out", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"dangling-out"}}`},
		{"demo", "references/up/../x", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"references/up/../x"}}`},
		{"demo", ".skillenv", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":".skillenv"}}`},
		{"demo", "nested/.skillenv", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":"nested/.skillenv"}}`}, // absent: same answer
		{"demo", "conf/.skillenv/x.txt", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":"conf/.skillenv/x.txt"}}`},
		{"demo", ".SKILLENV", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":".SKILLENV"}}`},
		{"demo", "secret-link", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":"secret-link"}}`},
		{"demo", "nope.md", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"not_found","rel_path":"nope.md"}}`},
		{"demo", "references", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"not_found","rel_path":"references"}}`},
		{"demo", ".", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"not_found","rel_path":"."}}`},
		{"demo", "dangling-in", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"not_found","rel_path":"dangling-in"}}`},
		{"demo", "references/loop", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"not_found","rel_path":"references/loop"}}`},
	}
	for _, tt := range bad {
		ret, err := Get(reg, tt.name, tt.rel, o, mint)
		if err == nil {
			t.Errorf("%s %q: no error: %+v", tt.name, tt.rel, ret)
			continue
		}
		if got := string(smcp.Encode(err)); got != tt.wire {
			t.Errorf("%s %q:\n got %s\nwant %s", tt.name, tt.rel, got, tt.wire)
		}
	}
	// too_large: no handle minted.
	before := len(minted)
	_, err := Get(reg, "demo", "data/big.txt", ReadOptions{MaxSize: 1000}, mint)
	if got := string(smcp.Encode(err)); got != `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"too_large","rel_path":"data/big.txt","total_size":40960}}` {
		t.Errorf("too_large: %s", got)
	}
	if len(minted) != before {
		t.Error("a handle was minted for a too_large resource")
	}
	// The default budget of 32 KiB: exactly at the budget is inline.
	reg2, dir := pkgFixture(t)
	writeTree(t, dir, map[string]string{"b.txt": strings.Repeat("y", 32<<10), "c.txt": strings.Repeat("y", 32<<10+1)})
	if ret, err := Get(reg2, "demo", "b.txt", ReadOptions{}, mint); err != nil || ret.Body == nil {
		t.Errorf("at budget: %+v %v", ret, err)
	}
	if ret, err := Get(reg2, "demo", "c.txt", ReadOptions{}, mint); err != nil || ret.BlobHandle == nil {
		t.Errorf("over budget: %+v %v", ret, err)
	}
}

// TestReadSkillTooLarge: the cap applies to SKILL.md's served bytes (the
// file minus its frontmatter).
func TestReadSkillTooLarge(t *testing.T) {
	dir := t.TempDir()
	front := "---\nname: a\ndescription: " + strings.Repeat("d", 900) + "\n---\n"
	writeTree(t, dir, map[string]string{"SKILL.md": front + strings.Repeat("b", 100)})
	if r, err := Read(dir, "SKILL.md", 100); err != nil || len(r.Data) != 100 {
		t.Fatalf("at the cap: %v %v", len(r.Data), err)
	}
	_, err := Read(dir, "SKILL.md", 99)
	if err == nil || err.Details["total_size"] != int64(100) {
		t.Fatalf("over the cap: %v", err)
	}
}

func TestMIME(t *testing.T) {
	for ext, want := range map[string]string{
		"a.md": "text/markdown", "a.markdown": "text/markdown", "a.txt": "text/plain", "a.json": "application/json",
		"a.xml": "application/xml", "a.yaml": "application/yaml", "a.yml": "application/yaml", "a.toml": "application/toml",
		"a.rst": "text/x-rst", "A.MD": "text/markdown", "x/y.PNG": "image/png", "a.svg": "image/svg+xml",
		"a": DefaultMIME, "a.py": DefaultMIME, "a.sh": DefaultMIME, ".skillenv": DefaultMIME, "a.tar.gz": "application/gzip",
	} {
		if got := MIMEType(ext); got != want {
			t.Errorf("MIMEType(%q) = %q, want %q", ext, got, want)
		}
	}
	text := []string{"text/plain", "text/markdown; charset=utf-8", "TEXT/X-RST", "application/json", "application/xml",
		"application/yaml", "application/toml", "application/javascript", "image/svg+xml", "application/ld+json",
		"application/foo+yaml", " Application/JSON "}
	binary := []string{"application/octet-stream", "image/png", "application/pdf", "application/x-yaml", "application/jsonx",
		"application/json-seq", "application/xhtml", "", "textual/plain", "application/ecmascript"}
	for _, m := range text {
		if !IsText(m) {
			t.Errorf("IsText(%q) = false", m)
		}
	}
	for _, m := range binary {
		if IsText(m) {
			t.Errorf("IsText(%q) = true", m)
		}
	}
}

func TestNotFoundWire(t *testing.T) {
	b, _ := json.Marshal(NotFound("x"))
	if string(b) != `{"code":4014,"message":"Skill not found","details":{"name":"x"}}` {
		t.Fatal(string(b))
	}
}

// TestResolveSkillEnvExistenceNeverLeaks: a link to a .skillenv is
// forbidden whether the credential file exists or not, through a chain of
// links too; a dangling link elsewhere is not_found.
func TestResolveSkillEnvExistenceNeverLeaks(t *testing.T) {
	for _, exists := range []bool{false, true} {
		dir := t.TempDir()
		files := map[string]string{"SKILL.md": "---\nname: x\ndescription: d\n---\n"}
		if exists {
			files[".skillenv"] = "TOKEN=secret"
			files["sub/.skillenv"] = "TOKEN=secret"
		}
		writeTree(t, dir, files)
		for name, target := range map[string]string{"envlink": ".skillenv", "deep": "sub/.SkillEnv", "hop": "envlink", "hop2": "hop", "gone": "missing.txt"} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		for rel, want := range map[string]string{"envlink": smcp.ReasonForbidden, "deep": smcp.ReasonForbidden, "hop": smcp.ReasonForbidden,
			"hop2": smcp.ReasonForbidden, "gone": smcp.ReasonNotFound} {
			if _, _, err := Resolve(dir, rel); err == nil || err.Reason() != want {
				t.Errorf(".skillenv exists=%v: Resolve(%q) = %v, want %s", exists, rel, err, want)
			}
		}
	}
}

// TestInlineFitsTheWire: text whose JSON escaping would make the ack too
// large for the server goes by handle even under the inline budget.
func TestInlineFitsTheWire(t *testing.T) {
	reg, dir := pkgFixture(t)
	writeTree(t, dir, map[string]string{"ctl.txt": strings.Repeat("\x01\"", 200<<10), "plain.txt": strings.Repeat("a", 400<<10)})
	mint := func([]byte, string) string { return "h" }
	o := ReadOptions{InlineBudget: MaxInlineBudget}
	if ret, err := Get(reg, "demo", "ctl.txt", o, mint); err != nil || ret.BlobHandle == nil {
		t.Errorf("escape-heavy text: %+v %v, want a handle", ret, err)
	} else if b := smcp.Encode(ret); len(b) > 1<<20 {
		t.Errorf("ack of %d bytes", len(b))
	}
	if ret, err := Get(reg, "demo", "plain.txt", o, mint); err != nil || ret.Body == nil {
		t.Errorf("plain text under the budget: %+v %v, want inline", ret, err)
	}
	if !inlineFits([]byte(strings.Repeat("a", maxInlineWire))) || inlineFits([]byte(strings.Repeat("<", maxInlineWire/6+1))) {
		t.Error("inlineFits bounds")
	}
}
