// Command aiod is the sandbox daemon. See "aiod -h".
package main

import (
	"os"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

func main() {
	aiod.AddCommand(pool.Command)
	os.Exit(aiod.Main(os.Args[1:], os.Stdout, os.Stderr))
}
