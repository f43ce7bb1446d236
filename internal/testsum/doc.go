// Package testsum reads the event stream of `go test -json` and writes
// what a plain `go test` run would write (each package's ok/FAIL line,
// the output of failed tests, build errors) as it arrives, then a closing
// summary: the tests that failed, the skipped tests that an allowlist does
// not name, and a last line "N passed, N failed, N skipped".
//
// It is what makes `make test` fail on a skip: a suite that skips because
// root, a cgroup, Landlock, a user namespace or a test peer is missing
// would otherwise pass CI untested. Every skip must match a line of the
// allowlist (scripts/skips.txt), each with its reason; anything else fails
// the run like a failed test. A package that fails without a failed test
// (a build error, a panic outside any test, a timeout) counts as one
// failure.
package testsum
