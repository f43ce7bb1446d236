package commands

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// Process trees. A command is its process group, plus every process
// forked below it, including those that left the group (setsid,
// setpgid) and those whose parent died: the daemon is a child subreaper
// (see setSubreaper), so such orphans are reparented to it, not to init,
// and each command remembers the processes it has been seen with.

// procInfo and procTable are the daemon's shared view of /proc.
type (
	procInfo  = child.Proc
	procTable = child.Table
)

// scanProcs reads every process once; without /proc (not Linux) the
// table is empty and only process groups are signalled.
func scanProcs() procTable { return child.Scan() }

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
		b, _ := child.ReadSmall("/proc/self/task/"+t.Name()+"/children", buf[:])
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
	t := procTable{Procs: map[int]procInfo{}}
	for _, pid := range pids {
		if p, ok := child.ReadProc(pid); ok && !child.Owned(pid) {
			t.Procs[pid] = p
		}
	}
	reapZombies(t)
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
	return p.PPID == selfPid && p.PID != selfPid && p.PGID != selfPgid && !child.Owned(p.PID)
}

// reapZombies waits for the zombies reparented to the daemon that no
// exec.Cmd owns, one pid at a time (never wait4(-1), which would take
// exit statuses from os/exec).
func reapZombies(t procTable) {
	var zombies []int
	for _, p := range t.Procs {
		if p.State == 'Z' && p.PPID == selfPid && p.PGID != selfPgid {
			zombies = append(zombies, p.PID)
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
		if p, ok := t.Procs[pid]; ok && p.Start == start && pid != selfPid {
			set[pid] = p
		}
	}
	// The group number is the leader's pid: until the leader is reaped it
	// cannot be reused, and after that the group is c's only while a
	// member it was seen with lives on.
	own := !c.reaped || c.groupLeft
	for _, p := range set {
		own = own || p.PGID == c.pgid
	}
	if own {
		for _, p := range t.Procs {
			if p.PGID == c.pgid && p.PID != selfPid {
				set[p.PID] = p
			}
		}
	}
	t.Closure(set)
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
		seen[pid] = p.Start
	}
	c.seen = seen
	return tree
}

// liveIn reports whether a tree has a process that is not a zombie.
func liveIn(tree map[int]procInfo) bool {
	for _, p := range tree {
		if p.State != 'Z' {
			return true
		}
	}
	return false
}

// orphanTrees is every orphan reparented to the daemon and its
// descendants: what Close ends beyond the trees it can attribute.
func orphanTrees(t procTable) map[int]procInfo {
	set := map[int]procInfo{}
	for _, p := range t.Procs {
		if orphan(p) {
			set[p.PID] = p
		}
	}
	t.Closure(set)
	return set
}

// tagVar names the environment variable that carries a command's id
// into every process it starts.
const tagVar = "AIO_COMMAND_ID"

// taggedTrees is every live process (and its descendants) whose
// environment carries the id of one of cmds: what left the group and
// lost its parent before the tracker saw it.
func taggedTrees(t procTable, cmds []*Command) map[int]procInfo {
	ids := make(map[string]bool, len(cmds))
	for _, c := range cmds {
		ids[c.ID] = true
	}
	return t.Tagged(tagVar, ids, selfPgid)
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
				if start, ok := signalled[pid]; ok && start == p.Start {
					continue
				}
				signalled[pid] = p.Start
				fresh = true
				if pid > 1 && pid != selfPid && p.State != 'Z' {
					e.kill(pid, sig)
				}
				if !groups[p.PGID] {
					groups[p.PGID] = true
					e.kill(-p.PGID, sig)
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
