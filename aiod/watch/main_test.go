package watch

import (
	"os"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// TestMain lets this test binary be a sandbox's init (the sandbox tests
// start one).
func TestMain(m *testing.M) {
	sandbox.Dispatch(os.Args)
	os.Exit(m.Run())
}
