package sandbox

import (
	"io"
	"os"
)

// holdArg, after InitArg, makes the binary a holder of a user namespace
// (it waits for its standard input to close): the mapping of a user
// namespace is written into a process, and its descriptor outlives it
// (idmap_linux.go).
const holdArg = "hold-userns"

// Dispatch runs the sandbox's init and exits when args (os.Args) ask for
// it, and returns otherwise. Every binary that may create a sandbox
// calls it first in main (a test binary in TestMain), because the
// sandbox's init is that same binary ([Executable]).
func Dispatch(args []string) {
	if len(args) > 2 && args[1] == InitArg && args[2] == holdArg {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if len(args) > 1 && args[1] == InitArg {
		os.Exit(Init(args[2:]))
	}
}
