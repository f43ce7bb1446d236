package mcp

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Skill discovery bounds: how deep below AIO_SKILLS_PATH a SKILL.md is
// looked for, how many are read, and how large one may be.
const (
	maxSkillDepth = 4
	maxSkills     = 1000
	maxSkillBytes = 1 << 20
)

// skill is one SKILL.md found under the skills path.
type skill struct {
	name, description string
	dir, file         string
}

// loadSkill is sandbox_load_skill: with a name, that skill's instructions
// (its SKILL.md after the front matter, headed by its name and directory,
// so that files it mentions resolve); without one, the list of skills.
// Skills are read from Config.SkillsPath on every call, so one added
// while the daemon runs is found: the path is one skill (it holds a
// SKILL.md) or a tree of them (each directory holding a SKILL.md, at most
// four levels down). A skill's name is its front matter's name, else its
// directory's.
func (s *Server) loadSkill(_ context.Context, args []byte) result {
	var a struct {
		Name *string `json:"name"`
	}
	if msg := decodeArgs(args, &a); msg != "" {
		return failure(msg)
	}
	skills := discoverSkills(s.cfg.SkillsPath)
	if a.Name == nil || *a.Name == "" {
		var b strings.Builder
		fmt.Fprintf(&b, "Skills Count: %d\n", len(skills))
		if s.cfg.SkillsPath == "" {
			b.WriteString("(AIO_SKILLS_PATH is not set)\n")
		}
		for _, sk := range skills {
			fmt.Fprintf(&b, "- %s: %s (%s)\n", sk.name, sk.description, sk.dir)
		}
		return textResult(b.String())
	}
	for _, sk := range skills {
		if sk.name == *a.Name {
			_, body, err := readSkill(sk.file)
			if err != nil {
				return failure(fmt.Sprintf("skill %s cannot be read: %s", sk.name, err))
			}
			return textResult(fmt.Sprintf("Skill: %s\nDirectory: %s\n\n%s", sk.name, sk.dir, body))
		}
	}
	return failure("skill not found: " + *a.Name)
}

// discoverSkills finds the skills under root, sorted by name; of two with
// one name the first by path is kept.
func discoverSkills(root string) []skill {
	root = strings.Trim(strings.TrimSpace(root), `"'`)
	if root == "" {
		return nil
	}
	root = filepath.Clean(root)
	var found []skill
	add := func(file string) {
		meta, _, err := readSkill(file)
		if err != nil {
			return
		}
		dir := filepath.Dir(file)
		sk := skill{name: filepath.Base(dir), dir: dir, file: file}
		if n, ok := meta["name"].(string); ok && strings.TrimSpace(n) != "" {
			sk.name = strings.TrimSpace(n)
		}
		if d, ok := meta["description"].(string); ok {
			sk.description = strings.Join(strings.Fields(d), " ")
		}
		found = append(found, sk)
	}
	if _, err := os.Stat(filepath.Join(root, "SKILL.md")); err == nil {
		add(filepath.Join(root, "SKILL.md"))
	} else {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || len(found) >= maxSkills {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			if p != root && (strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= maxSkillDepth) {
				return filepath.SkipDir
			}
			if f := filepath.Join(p, "SKILL.md"); p != root && isFile(f) {
				add(f)
				return filepath.SkipDir
			}
			return nil
		})
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].dir < found[j].dir })
	seen := map[string]bool{}
	out := found[:0]
	for _, sk := range found {
		if !seen[sk.name] {
			seen[sk.name] = true
			out = append(out, sk)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// readSkill splits a SKILL.md into its YAML front matter (between two
// "---" lines at the top; none is an empty one) and its body.
func readSkill(file string) (map[string]any, string, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not readable", file)
	}
	if st.Size() > maxSkillBytes {
		return nil, "", fmt.Errorf("%s is larger than 1 MiB", file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not readable", file)
	}
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	meta := map[string]any{}
	lines := strings.Split(text, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return meta, text, nil
	}
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "---" {
			_ = yaml.Unmarshal([]byte(strings.Join(lines[1:i], "\n")), &meta)
			return meta, strings.TrimLeft(strings.Join(lines[i+1:], "\n"), "\n"), nil
		}
	}
	return meta, text, nil
}
