package aiod

import (
	"context"
	"errors"
)

// OfficeOptions say which office the daemon joins as a Computer
// (aiod --office ID --server URL ...). SKELETON: filled in by the office work.
type OfficeOptions struct {
	Server, Office, Name, Token string
	// Approve is the approval policy: "all" (default) or "none".
	Approve string
	// ConfigFile is an optional Computer configuration whose MCP servers
	// are served beside the sandbox's tools.
	ConfigFile string
	// BundleID names the sandbox's tools (default "sandbox").
	BundleID string
}

// JoinOffice serves the daemon's tools to an office until ctx ends.
func (d *Daemon) JoinOffice(ctx context.Context, o OfficeOptions) error {
	return errors.New("aiod: --office not implemented")
}
