// Command aiod is the sandbox daemon. See "aiod -h".
package main

import (
	"os"

	"github.com/a2c-smcp/a2c-go/aiod"
)

func main() { os.Exit(aiod.Main(os.Args[1:], os.Stdout, os.Stderr)) }
