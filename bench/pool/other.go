//go:build !linux

// Command pool measures aiod pool, which needs Linux.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench/pool: aiod pool needs Linux")
	os.Exit(1)
}
