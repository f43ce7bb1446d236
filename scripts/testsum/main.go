// Command testsum is make test's reader of `go test -json`: it prints the
// usual go test output as it arrives and a closing summary whose last line
// is "N passed, N failed, N skipped", and exits 1 when a test failed, a
// package failed to build or run, or a test skipped without a line in the
// allowlist (see internal/testsum).
//
//	go test -json ./... | go run ./scripts/testsum -allow scripts/skips.txt
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/a2c-smcp/a2c-go/internal/testsum"
)

func main() {
	allow := flag.String("allow", "scripts/skips.txt", "the skip allowlist: PACKAGE TEST REASON a line")
	flag.Parse()
	f, err := os.Open(*allow)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	rules, err := testsum.ParseAllowlist(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsum: %s: %v\n", *allow, err)
		os.Exit(2)
	}
	module := "github.com/a2c-smcp/a2c-go"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path != "" {
		module = bi.Main.Path
	}
	sum, err := testsum.Summarize(os.Stdin, os.Stdout, module, rules)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !sum.OK() {
		os.Exit(1)
	}
}
