package mcp

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSkillFrontmatterRules: sandbox_load_skill splits SKILL.md with
// package skill's rules, the ones the Computer's SKILL channel serves by:
// CRLF and a byte order mark are accepted, an indented "---" does not
// close, and a file without frontmatter is all instructions.
func TestSkillFrontmatterRules(t *testing.T) {
	root := t.TempDir()
	for rel, body := range map[string]string{
		"crlf/SKILL.md":     "---\r\nname: crlf-skill\r\ndescription: With CRLF\r\n---\r\n\r\n# CRLF\r\nline\r\n",
		"bom/SKILL.md":      "\xef\xbb\xbf---\nname: bom-skill\ndescription: With a BOM\n---\n# BOM\n",
		"indented/SKILL.md": "---\nname: indented\ndescription: |\n  a\n  ---\n  b\n---\n# I\n",
		"plain/SKILL.md":    "# Plain\n---\nnot: frontmatter\n---\n",
	} {
		p := filepath.Join(root, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, func(c *Config) { c.SkillsPath = root })
	text, isErr := f.callTool(t, "sandbox_load_skill", nil)
	want := "Skills Count: 4\n- bom-skill: With a BOM (" + filepath.Join(root, "bom") + ")\n- crlf-skill: With CRLF (" + filepath.Join(root, "crlf") +
		")\n- indented: a --- b (" + filepath.Join(root, "indented") + ")\n- plain:  (" + filepath.Join(root, "plain") + ")\n"
	if isErr || text != want {
		t.Errorf("list: %v %q\nwant %q", isErr, text, want)
	}
	for name, body := range map[string]string{
		"crlf-skill": "# CRLF\nline\n",
		"bom-skill":  "# BOM\n",
		"indented":   "# I\n",
		"plain":      "# Plain\n---\nnot: frontmatter\n---\n",
	} {
		dir := map[string]string{"crlf-skill": "crlf", "bom-skill": "bom", "indented": "indented", "plain": "plain"}[name]
		text, isErr := f.callTool(t, "sandbox_load_skill", map[string]any{"name": name})
		if want := "Skill: " + name + "\nDirectory: " + filepath.Join(root, dir) + "\n\n" + body; isErr || text != want {
			t.Errorf("%s: %v %q\nwant %q", name, isErr, text, want)
		}
	}
}
