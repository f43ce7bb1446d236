// Command aiod is the sandbox daemon. See "aiod -h".
package main

import (
	"os"

	"github.com/a2c-smcp/a2c-go/internal/aiodcli"
)

func main() { os.Exit(aiodcli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
