package cli

import (
	"context"
	"errors"
)

// runSkills is "a2c skills [--computer NAME]". SKELETON.
func runSkills(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}

// runSkill is "a2c skill NAME [REL_PATH]". SKELETON.
func runSkill(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
