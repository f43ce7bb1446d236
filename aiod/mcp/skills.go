package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/a2c-smcp/a2c-go/skill"
)

// Skill discovery bounds: how deep below AIO_SKILLS_PATH a SKILL.md is
// looked for, how many are read, and how large one may be.
const (
	maxSkillDepth = 4
	maxSkills     = 1000
	maxSkillBytes = 1 << 20
)

// skillEntry is one skill found under the skills path.
type skillEntry struct {
	name, description string
	dir               string
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
			_, body, err := readSkill(sk.dir)
			if err != nil {
				return failure(fmt.Sprintf("skill %s cannot be read: %s", sk.name, err))
			}
			return textResult(fmt.Sprintf("Skill: %s\nDirectory: %s\n\n%s", sk.name, sk.dir, body))
		}
	}
	return failure("skill not found: " + *a.Name)
}

// discoverSkills finds the skills under root (see skill.Find), sorted by
// name; of two with one name the first by path is kept.
func discoverSkills(root string) []skillEntry {
	root = strings.Trim(strings.TrimSpace(root), `"'`)
	var found []skillEntry
	for _, dir := range skill.Find(root, maxSkillDepth, maxSkills) {
		meta, _, err := readSkill(dir)
		if err != nil {
			continue
		}
		sk := skillEntry{name: filepath.Base(dir), dir: dir}
		if n, ok := meta["name"].(string); ok && strings.TrimSpace(n) != "" {
			sk.name = strings.TrimSpace(n)
		}
		if d, ok := meta["description"].(string); ok {
			sk.description = strings.Join(strings.Fields(d), " ")
		}
		found = append(found, sk)
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

// readSkill reads dir's SKILL.md through package skill, the reader the
// Computer's SKILL channel uses: its frontmatter (split by skill.Split;
// none, or YAML that is not a mapping, is an empty one; fields are not
// validated here) and its instructions after it, with CRLF line ends made
// LF and the blank lines that follow the frontmatter dropped.
func readSkill(dir string) (map[string]any, string, error) {
	file := filepath.Join(dir, skill.FileName)
	st, err := os.Stat(file)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not readable", file)
	}
	if st.Size() > maxSkillBytes {
		return nil, "", fmt.Errorf("%s is larger than 1 MiB", file)
	}
	doc, err := skill.ReadDoc(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not readable", file)
	}
	meta := map[string]any{}
	body := strings.ReplaceAll(string(doc.Body), "\r\n", "\n")
	if doc.HasFront {
		if m, err := skill.ParseYAML(doc.Front); err == nil {
			meta = m
		}
		body = strings.TrimLeft(body, "\n")
	}
	return meta, body, nil
}
