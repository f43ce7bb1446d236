// Command a2c is the A2C-SMCP signalling server and the agent side from a
// shell. See "a2c help".
package main

import (
	"os"

	"github.com/a2c-smcp/a2c-go/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
