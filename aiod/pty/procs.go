package pty

import (
	"os"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// tagVar is set in every shell's environment to the session's nonce: a
// process that left the terminal session and lost its parent (setsid
// and a double fork) still carries it, unless it cleared its
// environment.
const tagVar = "AIO_PTY_SESSION"

// sessionTree lists the live processes of terminal session sid (the
// shell's pid) or carrying nonce in tagVar and, recursively, their
// children. Without /proc it is empty.
func sessionTree(sid int, nonce string) []child.Proc {
	t := child.Scan()
	set := t.Tagged(tagVar, map[string]bool{nonce: true}, selfPgid)
	for pid, p := range t.Procs {
		if p.SID == sid {
			set[pid] = p
		}
	}
	t.Closure(set)
	var out []child.Proc
	for pid, p := range set {
		if pid != self && p.State != 'Z' { // zombies are past signalling
			out = append(out, p)
		}
	}
	return out
}

var (
	self     = os.Getpid()
	selfPgid = syscall.Getpgrp()
)

// killSession SIGKILLs terminal session sid: the leader's group, then
// every process found in the session, tagged with nonce, and below
// them, round after round until a scan finds nothing left (a tree may
// fork while it dies).
func killSession(sid int, nonce string) {
	if sid <= 1 || sid == self {
		return
	}
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	for round := 0; round < 8; round++ {
		tree := sessionTree(sid, nonce)
		if len(tree) == 0 {
			return
		}
		for _, p := range tree {
			if p.PGID > 1 && p.PGID != selfPgid {
				_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
			}
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}
