package commands

import (
	"github.com/a2c-smcp/a2c-go/sandbox/child"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Process trees. A command is its process group, plus every process
// forked below it, including those that left the group (setsid,
// setpgid) and those whose parent died: the daemon is a child subreaper
// (see setSubreaper), so such orphans are reparented to it, not to init,
// and each command remembers the processes it has been seen with.

// procInfo is one process as /proc/<pid>/stat describes it.
type procInfo struct {
	pid, ppid, pgid, sid int
	state                byte
	// start is the process's start time in clock ticks since boot: with
	// the pid it names one process, whatever pid reuse happens later.
	start uint64
}

// procTable is one scan of /proc: every process, and the children of
// each parent.
type procTable struct {
	procs map[int]procInfo
	kids  map[int][]int
}

// parseStat parses /proc/<pid>/stat. The command name is in
// parentheses and may hold spaces and parentheses itself.
func parseStat(b []byte) (procInfo, bool) {
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return procInfo{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	fs := strings.Fields(s[end+1:])
	// From field 3 on: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime(22).
	if err != nil || len(fs) < 20 || len(fs[0]) != 1 {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, state: fs[0][0]}
	p.ppid, _ = strconv.Atoi(fs[1])
	p.pgid, _ = strconv.Atoi(fs[2])
	p.sid, _ = strconv.Atoi(fs[3])
	p.start, _ = strconv.ParseUint(fs[19], 10, 64)
	return p, true
}

// scanProcs reads every /proc/<pid>/stat once. Without /proc (not
// Linux) the table is empty and only process groups are signalled.
func scanProcs() procTable {
	t := procTable{procs: map[int]procInfo{}, kids: map[int][]int{}}
	d, err := os.Open("/proc")
	if err != nil {
		return t
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var buf [1024]byte
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, ok := readSmall("/proc/"+n+"/stat", buf[:])
		if !ok {
			continue // gone meanwhile
		}
		if p, ok := parseStat(b); ok {
			t.procs[p.pid] = p
			t.kids[p.ppid] = append(t.kids[p.ppid], p.pid)
		}
	}
	return t
}

// readSmall reads a small /proc file into buf with three system calls
// (os.ReadFile adds a stat and allocations, on every process of a scan).
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	n, err := syscall.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// ownChildren lists the daemon's children from the per-thread children
// files (a few reads instead of a scan of every process); ok is false
// where the kernel does not have them.
func ownChildren() (pids []int, ok bool) {
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(selfPid) + "/children"); err != nil {
		return nil, false
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, false
	}
	var buf [4096]byte
	for _, t := range tasks {
		b, _ := readSmall("/proc/self/task/"+t.Name()+"/children", buf[:])
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, true
}

// reapOrphans reaps the zombies among the daemon's children that no
// exec.Cmd owns, reading only the daemon's children; it falls back to a
// full scan where the children files are missing.
func reapOrphans() {
	pids, ok := ownChildren()
	if !ok {
		reapZombies(scanProcs())
		return
	}
	t := procTable{procs: map[int]procInfo{}}
	var buf [1024]byte
	for _, pid := range pids {
		if child.Owned(pid) {
			continue
		}
		if b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:]); ok {
			if p, ok := parseStat(b); ok {
				t.procs[pid] = p
			}
		}
	}
	reapZombies(t)
}

// closure adds to set, recursively, every process whose parent is in it.
func (t procTable) closure(set map[int]procInfo) {
	queue := make([]int, 0, len(set))
	for pid := range set {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, k := range t.kids[pid] {
			if _, ok := set[k]; !ok {
				set[k] = t.procs[k]
				queue = append(queue, k)
			}
		}
	}
}

// selfPid and selfPgid are the daemon's: never signalled, whatever a
// command does to its process group.
var (
	selfPid  = os.Getpid()
	selfPgid = syscall.Getpgrp()
)

// orphan reports whether p was reparented to the daemon by its
// subreaper role: its parent is the daemon, it is no command's leader,
// and it is outside the daemon's process group (the daemon's own
// exec.Cmd children, which stay in its group, are someone else's to
// wait for).
func orphan(p procInfo) bool {
	return p.ppid == selfPid && p.pid != selfPid && p.pgid != selfPgid && !child.Owned(p.pid)
}

// reapZombies waits for the zombies reparented to the daemon that no
// exec.Cmd owns, one pid at a time (never wait4(-1), which would take
// exit statuses from os/exec).
func reapZombies(t procTable) {
	var zombies []int
	for _, p := range t.procs {
		if p.state == 'Z' && p.ppid == selfPid && p.pgid != selfPgid {
			zombies = append(zombies, p.pid)
		}
	}
	child.Reap(zombies)
}

// treeLocked is c's process tree in t: the members of its process group
// (while the group is still c's), the processes it was seen with that
// still run, and recursively their children. Guarded by c.mu.
func (c *Command) treeLocked(t procTable) map[int]procInfo {
	set := map[int]procInfo{}
	for pid, start := range c.seen {
		if p, ok := t.procs[pid]; ok && p.start == start && pid != selfPid {
			set[pid] = p
		}
	}
	// The group number is the leader's pid: until the leader is reaped it
	// cannot be reused, and after that the group is c's only while a
	// member it was seen with lives on.
	own := !c.reaped || c.groupLeft
	for _, p := range set {
		own = own || p.pgid == c.pgid
	}
	if own {
		for _, p := range t.procs {
			if p.pgid == c.pgid && p.pid != selfPid {
				set[p.pid] = p
			}
		}
	}
	t.closure(set)
	return set
}

// track records c's current tree as the processes it is seen with and
// returns it.
func (c *Command) track(t procTable) map[int]procInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	tree := c.treeLocked(t)
	seen := make(map[int]uint64, len(tree))
	for pid, p := range tree {
		seen[pid] = p.start
	}
	c.seen = seen
	return tree
}

// liveIn reports whether a tree has a process that is not a zombie.
func liveIn(tree map[int]procInfo) bool {
	for _, p := range tree {
		if p.state != 'Z' {
			return true
		}
	}
	return false
}

// orphanTrees is every orphan reparented to the daemon and its
// descendants: what Close ends beyond the trees it can attribute.
func orphanTrees(t procTable) map[int]procInfo {
	set := map[int]procInfo{}
	for _, p := range t.procs {
		if orphan(p) {
			set[p.pid] = p
		}
	}
	t.closure(set)
	return set
}

// tagVar names the environment variable that carries a command's id
// into every process it starts.
const tagVar = "AIO_COMMAND_ID"

// taggedTrees is every live process (and its descendants) whose
// environment carries the id of one of cmds: what left the group and
// lost its parent before the tracker saw it.
func taggedTrees(t procTable, cmds []*Command) map[int]procInfo {
	set := map[int]procInfo{}
	if len(cmds) == 0 {
		return set
	}
	want := make(map[string]bool, len(cmds))
	for _, c := range cmds {
		want[c.ID] = true
	}
	for pid, p := range t.procs {
		if pid == selfPid || p.pgid == selfPgid || p.state == 'Z' {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, tagVar+"="); ok && want[v] {
				set[pid] = p
				break
			}
		}
	}
	t.closure(set)
	return set
}

// signalTrees sends sig to the trees of cmds (and, with orphans, to
// every orphan tree): each process and each distinct process group
// found, round after round until a scan finds nothing new (a tree may
// fork while it is being signalled). Each round scans before it signals,
// so what a dying parent leaves behind is found by its parent link
// first. Zombies the signal leaves are reaped.
func (e *Engine) signalTrees(cmds []*Command, sig syscall.Signal, orphans bool) {
	groups := map[int]bool{selfPgid: true, 0: true, 1: true}
	signalled := map[int]uint64{}
	for round := 0; round < 16; round++ {
		t := scanProcs()
		var trees []map[int]procInfo
		for _, c := range cmds {
			trees = append(trees, c.track(t))
		}
		if orphans {
			trees = append(trees, orphanTrees(t))
		}
		trees = append(trees, taggedTrees(t, cmds))
		fresh := false
		for _, tree := range trees {
			for pid, p := range tree {
				if start, ok := signalled[pid]; ok && start == p.start {
					continue
				}
				signalled[pid] = p.start
				fresh = true
				if pid > 1 && pid != selfPid && p.state != 'Z' {
					e.kill(pid, sig)
				}
				if !groups[p.pgid] {
					groups[p.pgid] = true
					e.kill(-p.pgid, sig)
				}
			}
		}
		if round == 0 {
			// The groups of the leaders not reaped yet, found in /proc or
			// not (without /proc this is all there is).
			for _, c := range cmds {
				c.mu.Lock()
				pgid, reaped := c.pgid, c.reaped
				c.mu.Unlock()
				if !reaped && !groups[pgid] {
					groups[pgid] = true
					e.kill(-pgid, sig)
				}
			}
		}
		if !fresh {
			reapZombies(t)
			return
		}
	}
	reapZombies(scanProcs())
}

// kill sends one signal; a process already gone is no failure.
func (e *Engine) kill(pid int, sig syscall.Signal) {
	if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
		errno, _ := err.(syscall.Errno)
		e.log.Warn("commands: signal failed", "pid", pid, "signal", sig.String(), "errno", int(errno), "error", err.Error())
	}
}
