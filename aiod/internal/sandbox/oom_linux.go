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

// unprotect gives a sandboxed process (pid, just started) an
// oom_score_adj of 0 when the daemon's own is below (a supervisor's
// OOMScoreAdjust, which every child inherits): only init is spared by
// the OOM killer (-1000, set by init itself), every other process of
// the sandbox is at 0 or above, so the process that fills the sandbox's
// memory is the one killed, never init.
func unprotect(pid int) {
	if ownOOMScore() < 0 {
		_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("0"), 0)
	}
}
