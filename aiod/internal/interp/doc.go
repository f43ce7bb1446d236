// Package interp is the daemon's one discovery of the code interpreters:
// a python that imports ipykernel (the kernel backend) and node. Both
// GET /v1/capabilities and the code plane ask it, through [Shared], so
// the two can never disagree. A usable interpreter is kept for the life
// of the process; a missing one is looked for again on the first ask
// five seconds or more after the last look, so one installed while the
// daemon runs is found by both at once.
//
// Python: the pinned interpreter when one is set (a path or a name on
// PATH), else the first of /usr/bin/python3 (Debian's), python3 and
// python on PATH that imports ipykernel; when none does, the first that
// exists is reported without the kernel. Node: the pinned binary, else
// node or nodejs on PATH, usable when `--version` answers.
package interp
