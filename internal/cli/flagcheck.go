package cli

import (
	"flag"
	"fmt"
	"time"
)

// positiveFlags refuses, as a usage error, a value of zero or below for
// each named numeric or duration flag of fs: sizes, counts and timeouts
// that mean nothing at zero (a library Config reads zero as "the
// default", so a 0 on the command line would silently become it). The
// check is of the value, given or default, so a default that breaks it
// shows in the tests.
func positiveFlags(fs *flag.FlagSet, names ...string) error {
	return checkFlags(fs, names, func(n float64) bool { return n > 0 }, "greater than zero")
}

// nonNegativeFlags refuses a negative value for each named flag, for
// flags where zero has a meaning (a shutdown that waits for nothing).
func nonNegativeFlags(fs *flag.FlagSet, names ...string) error {
	return checkFlags(fs, names, func(n float64) bool { return n >= 0 }, "zero or more")
}

func checkFlags(fs *flag.FlagSet, names []string, ok func(float64) bool, want string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("cli: no flag --" + name) // a programming error, caught by the tests
		}
		var n float64
		switch v := f.Value.(flag.Getter).Get().(type) {
		case int:
			n = float64(v)
		case int64:
			n = float64(v)
		case uint:
			n = float64(v)
		case uint64:
			n = float64(v)
		case float64:
			n = v
		case time.Duration:
			n = float64(v)
		default:
			panic(fmt.Sprintf("cli: --%s is not a number (%T)", name, v))
		}
		if !ok(n) {
			return usageError{fmt.Sprintf("--%s must be %s, got %s", name, want, f.Value.String())}
		}
	}
	return nil
}
