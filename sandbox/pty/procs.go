package pty

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// proc is one process as /proc/<pid>/stat describes it.
type proc struct{ pid, ppid, pgid, sid int }

// parseStat parses /proc/<pid>/stat; the command name is in parentheses
// and may hold spaces and parentheses itself.
func parseStat(s string) (proc, bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return proc{}, false
	}
	fs := strings.Fields(s[end+1:]) // state ppid pgrp session ...
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil || len(fs) < 4 || fs[0] == "Z" {
		return proc{}, false // zombies are past signalling
	}
	p := proc{pid: pid}
	p.ppid, _ = strconv.Atoi(fs[1])
	p.pgid, _ = strconv.Atoi(fs[2])
	p.sid, _ = strconv.Atoi(fs[3])
	return p, true
}

// tagVar is set in every shell's environment to the session's nonce: a
// process that left the terminal session and lost its parent (setsid
// and a double fork) still carries it, unless it cleared its
// environment.
const tagVar = "AIO_PTY_SESSION"

// tagged reports whether process pid's environment holds tag.
func tagged(pid, tag string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/environ")
	return err == nil && (strings.HasPrefix(string(b), tag) || strings.Contains(string(b), "\x00"+tag))
}

// sessionTree lists the live processes of terminal session sid (the
// shell's pid) or carrying tag (tagVar=nonce NUL) and, recursively,
// their children. Without /proc it is empty.
func sessionTree(sid int, tag string) []proc {
	names, _ := readDirNames("/proc")
	all := map[int]proc{}
	kids := map[int][]int{}
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStat(string(b)); ok {
			if p.sid != sid && tagged(n, tag) {
				p.sid = sid // one of the terminal's, wherever it went
			}
			all[p.pid] = p
			kids[p.ppid] = append(kids[p.ppid], p.pid)
		}
	}
	var out []proc
	seen := map[int]bool{}
	var queue []int
	for pid, p := range all {
		if p.sid == sid {
			queue = append(queue, pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[pid] || pid == self {
			continue
		}
		seen[pid] = true
		out = append(out, all[pid])
		queue = append(queue, kids[pid]...)
	}
	return out
}

func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

var self = os.Getpid()

// killSession SIGKILLs terminal session sid: the leader's group, then
// every process found in the session, tagged with tag, and below them, round after round
// until a scan finds nothing left (a tree may fork while it dies).
func killSession(sid int, tag string) {
	if sid <= 1 || sid == self {
		return
	}
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	for round := 0; round < 8; round++ {
		tree := sessionTree(sid, tag)
		if len(tree) == 0 {
			return
		}
		for _, p := range tree {
			if p.pgid > 1 && p.pgid != selfPgid {
				_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

var selfPgid = syscall.Getpgrp()
