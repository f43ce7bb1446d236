// Package proctree reads the process tree from /proc (Linux), for the
// benchmarks and black-box tests that measure what a tree of processes
// costs or check that none is left behind. The daemon's own view of its
// children lives in aiod/internal/child; this one is for code outside
// aiod, which may not import that.
package proctree

import (
	"os"
	"strconv"
	"strings"
)

// Descendants returns every process below pid (its children, theirs, and
// so on) as one scan of /proc saw them, zombies included: a caller that
// needs live processes filters them. It returns nil where /proc cannot
// be read.
func Descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parent(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	for todo := children[pid]; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		out = append(out, p)
		todo = append(todo, children[p]...)
	}
	return out
}

// parent reads pid's parent from /proc/<pid>/stat. The command name is
// in parentheses and may hold spaces and parentheses itself, so the
// fields are counted from the last ')': state, then the parent's pid.
func parent(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseParent(string(b))
}

// parseParent is [parent] on the text of a stat file.
func parseParent(s string) (int, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}
