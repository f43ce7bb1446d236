package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Fingerprint bounds: how many entries and how deep below a folder
// [Fingerprint] looks. Past them a change may go unseen until something
// nearer the top changes too.
const (
	maxFingerprintEntries = 20000
	maxFingerprintDepth   = 8
)

// ScanUser reads the user's skills folder: each child directory of root
// (hidden ones, whose name starts with '.', skipped) that holds a
// SKILL.md is a skill, named by its frontmatter name, which must equal
// the directory's name. A malformed skill is left out with an ERROR log.
// Skills come in directory-name order. A missing root is no skills.
func ScanUser(root string, log *slog.Logger) []Package {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if root == "" {
		return nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		if !os.IsNotExist(err) {
			log.Error("skill: user folder unreadable", "dir", root, "err", err)
		}
		return nil
	}
	var out []Package
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, FileName)); err != nil {
			log.Debug("skill: user folder entry without SKILL.md skipped", "dir", dir)
			continue
		}
		m, real, err := LoadMeta(dir, log)
		if err != nil {
			log.Error("skill: malformed skill left out", "source", SourceUser, "dir", dir, "err", err)
			continue
		}
		out = append(out, Package{Ref: m.Ref(m.Name, SourceUser, real), Root: real, Digest: Fingerprint(real)})
	}
	return out
}

// Fingerprint is a cheap digest of the tree at root for change
// detection: the names, sizes, modes and modification times of its
// entries (symbolic links not followed, hidden entries included), not
// their content. A missing root has the fingerprint "".
func Fingerprint(root string) string {
	if _, err := os.Stat(root); err != nil {
		return ""
	}
	h := sha256.New()
	n := 0
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if n++; n > maxFingerprintEntries {
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(root, p)
		if err != nil {
			fmt.Fprintf(h, "%s\x00error\n", rel)
			return nil
		}
		writeStat(h, p, rel, d)
		if d.IsDir() && rel != "." && strings.Count(rel, string(filepath.Separator)) >= maxFingerprintDepth {
			return filepath.SkipDir
		}
		return nil
	})
	if p, err := filepath.EvalSymlinks(root); err == nil && p != root {
		// A root that is a link: follow it once.
		fmt.Fprintf(h, "->%s\n", Fingerprint(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeStat(h hash.Hash, p, rel string, d fs.DirEntry) {
	info, err := d.Info()
	if err != nil {
		fmt.Fprintf(h, "%s\x00gone\n", rel)
		return
	}
	fmt.Fprintf(h, "%s\x00%d\x00%o\x00%d\n", rel, info.Size(), info.Mode(), info.ModTime().UnixNano())
	if info.Mode()&os.ModeSymlink != 0 {
		t, _ := os.Readlink(p)
		fmt.Fprintf(h, "%s\x00link\x00%s\n", rel, t)
	}
}

// Find lists skill package directories under root for tools that accept
// a looser layout than the SKILL channel (aiod's sandbox_load_skill):
// root itself when it holds a SKILL.md, else every directory at most
// depth levels below root that holds one (hidden directories skipped, a
// package's own subdirectories not searched), at most max of them, in
// path order.
func Find(root string, depth, max int) []string {
	if root == "" {
		return nil
	}
	root = filepath.Clean(root)
	if isRegular(filepath.Join(root, FileName)) {
		return []string{root}
	}
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || len(found) >= max {
			return nil
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= depth {
			return filepath.SkipDir
		}
		if isRegular(filepath.Join(p, FileName)) {
			found = append(found, p)
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
