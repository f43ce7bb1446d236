package cli

import (
	"context"
	"errors"
)

// runPut is "a2c put FILE [--to NAME]". SKELETON.
func runPut(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
