package sandbox

import (
	"os"
	"strconv"
	"strings"
)

// ownOOMScore is the daemon's own oom_score_adj (read at each start: a
// supervisor or a test may change it).
func ownOOMScore() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// sandboxOOMScore is the oom_score_adj of every process of the sandbox
// but init. Init asks for -1000 itself, which needs CAP_SYS_RESOURCE; a
// daemon without it (a container's root, an unprivileged aiod) leaves
// init at the daemon's own score, and a 16 MiB init then outranks many
// small processes (a red-team pass saw init killed that way). Raising a
// score needs no privilege, so the sandbox's other processes are raised
// above init's instead: the OOM killer takes one of them first either
// way, never init while any other is left.
const sandboxOOMScore = 500

// unprotect raises a sandboxed process (pid, just started) to
// [sandboxOOMScore], or just above the daemon's own score (which init
// inherits when its -1000 is refused) if that is higher. A process it
// forked in the instant before keeps the daemon's score.
func unprotect(pid int) {
	score := max(sandboxOOMScore, min(ownOOMScore()+1, 1000))
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(score)), 0)
}
