package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BinPkg returns the path of a binary built from the package at pkg, a
// path relative to the module root ("./test/interop/a2c/testdata/toolsrv"),
// building it on first use. Suites use it for the small fixture programs
// they host (an MCP server, for instance); [Bin] is its shorthand for the
// project's own commands. A build failure fails the test.
func BinPkg(t testing.TB, pkg string) string {
	t.Helper()
	binOnce.Do(func() {
		d, err := os.MkdirTemp("", "a2c-interop-")
		if err != nil {
			panic(err)
		}
		binDir = d
	})
	binMu.Lock()
	defer binMu.Unlock()
	rel := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(pkg)), "./")
	path := filepath.Join(binDir, "pkg-"+strings.ReplaceAll(rel, "/", "_"))
	err, ok := built["pkg:"+rel]
	if !ok {
		build := exec.Command("go", "build", "-o", path, "./"+rel)
		build.Dir = Root()
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("build %s: %v\n%s", rel, berr, out)
		}
		built["pkg:"+rel] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}
