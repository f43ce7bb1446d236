package sandbox

import "os"

// Dispatch runs the sandbox's init and exits when args (os.Args) ask for
// it, and returns otherwise. Every binary that may create a sandbox
// calls it first in main (a test binary in TestMain), because the
// sandbox's init is that same binary ([Executable]).
func Dispatch(args []string) {
	if len(args) > 1 && args[1] == InitArg {
		os.Exit(Init(args[2:]))
	}
}
