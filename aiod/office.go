package aiod

// This file is aiod's office mode (aiod --office ID --server URL, and the
// sandbox of "a2c up"): the daemon joins an A2C-SMCP office as a Computer
// whose tools are its own MCP tools, reached in process.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/market"
	"github.com/a2c-smcp/a2c-go/computer/settings"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// DefaultOfficeServer is the signalling server an office Computer joins
// when [OfficeOptions.Server] is empty: "a2c server"'s default address.
const DefaultOfficeServer = "http://127.0.0.1:8000"

// DefaultSandboxBundleID names the sandbox's tools in an office:
// sandbox__sandbox_execute_bash and so on.
const DefaultSandboxBundleID = "sandbox"

// OfficeOptions say which office the daemon joins as a Computer
// (aiod --office ID --server URL ...).
type OfficeOptions struct {
	// Server is the signalling server's URL (default
	// [DefaultOfficeServer]); Office the office to join (required); Name
	// the Computer's name there (default the host name, else "aiod").
	Server, Office, Name string
	// Token, when set, is presented in the connect auth object (and as a
	// header) under AuthField, as "a2c server --token" expects it.
	Token string
	// AuthField names the auth field and header of Token. Default
	// "x-api-key".
	AuthField string
	// Path is the server's Engine.IO path. Default "/socket.io/".
	Path string
	// Approve is the approval policy for tools without auto_apply: "all"
	// (default: run them) or "none" (refuse them with 4005). A daemon has
	// no terminal to ask on, so "ask" is refused.
	Approve string
	// ConfigFile is an optional Computer configuration (the format of
	// "a2c computer --config") whose MCP servers are served beside the
	// sandbox's tools. Its ${input:...} placeholders must have defaults.
	ConfigFile string
	// BundleID names the sandbox's tools (default
	// [DefaultSandboxBundleID]); it must be a valid bundle_id.
	BundleID string
	// Supervisor is the binary that keeps the process tree of a stdio
	// server of ConfigFile from outliving the daemon (see
	// mcphost.Options.Supervisor); empty: no supervisor.
	Supervisor string
	// OnJoined, if set, is called each time the Computer has joined the
	// office with its tools listed (after a reconnect too).
	OnJoined func()
	// ProtocolVersion is the A2C-SMCP version spoken (default
	// smcp.ProtocolVersion); see computer.Options.ProtocolVersion.
	ProtocolVersion string
	// LandingRoot is where client:put_blob uploads land. Default
	// [DefaultLandingDir] under the daemon's workspace, so that the
	// sandbox's commands find them; "-" refuses every upload.
	LandingRoot string
	// Settings, when set, also serves the Computer management plane of
	// these paths beside the sandbox's tools, as "a2c computer" without
	// --config does: the servers of every mcp.json scope (through the
	// approval gate: a PENDING server is skipped with a warning, a daemon
	// has nobody to ask) and the skills and servers of the enabled
	// plugins, reconciled at the start and followed while the daemon
	// runs. ConfigFile's servers count as the host's own (origin embed).
	Settings *settings.Paths
	// MCPConfig is the flag scope's mcp.json (with Settings).
	MCPConfig string
	// SkillsDir is the folder of the user's skill packages served on the
	// SKILL channel; see computer.Options.SkillsDir. Default the daemon's
	// skills path (AIO_SKILLS_PATH), the folder sandbox_load_skill reads,
	// so that both read the same skills through package skill.
	SkillsDir string
}

// DefaultLandingDir is the folder, under the workspace, where uploads to
// the sandbox Computer land by default.
const DefaultLandingDir = "uploads"

// JoinOffice serves the daemon's tools to an office as a Computer until
// ctx ends, then leaves it. The sandbox's tools (the ones /mcp serves)
// are exposed as <BundleID>__<tool>, reached through [mcp.Server.Connect]
// in this process; a call's cancel (server:tool_call_cancel) or timeout
// cancels the MCP call, which ends the command's process tree. Bad
// options and an unreadable or invalid ConfigFile are returned before any
// connection is made; a lost connection is retried with backoff; a
// protocol version refusal ends JoinOffice with an error.
func (d *Daemon) JoinOffice(ctx context.Context, o OfficeOptions) error {
	c, cfg, err := d.officeComputer(o)
	if err != nil {
		return err
	}
	defer c.Close()
	if o.Settings != nil {
		m := &market.Manager{Paths: *o.Settings, Log: d.log}
		pr, rep, err := m.Boot(ctx, market.ResolveOptions{FlagMCP: o.MCPConfig, Embed: cfg.Servers})
		if err != nil {
			return fmt.Errorf("office: management plane: %w", err)
		}
		if len(rep.FailedMarketplaces)+len(rep.FailedPlugins) > 0 {
			d.log.Warn("office: management plane: some marketplaces or plugins could not be reconciled",
				"failed_marketplaces", rep.FailedMarketplaces, "failed_plugins", rep.FailedPlugins)
		}
		proj, err := pr.Start(ctx, c)
		if proj == nil {
			return fmt.Errorf("office: management plane: %w", err)
		}
		if err != nil {
			d.log.Warn("office: management plane: some servers' inputs could not be resolved", "err", err)
		}
	}
	return c.Run(ctx)
}

// officeComputer validates o and builds the Computer JoinOffice runs.
func (d *Daemon) officeComputer(o OfficeOptions) (*computer.Computer, *config.File, error) {
	if o.Office == "" {
		return nil, nil, usageError("an office is required to join one")
	}
	if o.Server == "" {
		o.Server = DefaultOfficeServer
	}
	if o.Name == "" {
		o.Name = "aiod"
		if host, err := os.Hostname(); err == nil && host != "" {
			o.Name = host
		}
	}
	if o.AuthField == "" {
		o.AuthField = "x-api-key"
	}
	policy := computer.ApproveAll
	switch o.Approve {
	case "", "all":
	case "none":
		policy = computer.ApproveNone
	default:
		return nil, nil, usageError(fmt.Sprintf("--approve must be all or none, got %q", o.Approve))
	}
	if o.BundleID == "" {
		o.BundleID = DefaultSandboxBundleID
	}
	if !smcp.ValidBundleID(o.BundleID) {
		return nil, nil, usageError(fmt.Sprintf("--bundle-id %q is not a valid bundle_id ([A-Za-z0-9_-], no \"__\")", o.BundleID))
	}
	cfg := &config.File{}
	if o.ConfigFile != "" {
		var err error
		if cfg, err = config.Load(o.ConfigFile); err != nil {
			return nil, nil, usageError(fmt.Sprintf("--config: %v", err))
		}
		for _, diag := range cfg.Diagnostics {
			d.log.Warn("office config", "problem", diag.String())
		}
	}
	switch o.LandingRoot {
	case "":
		o.LandingRoot = filepath.Join(d.cfg.Workspace, DefaultLandingDir)
	case "-":
		o.LandingRoot = ""
	}
	if o.SkillsDir == "" {
		o.SkillsDir = strings.Trim(strings.TrimSpace(d.cfg.SkillsPath), `"'`)
	}
	co := computer.Options{Server: o.Server, Path: o.Path, Office: o.Office, Name: o.Name, Config: cfg, Approval: policy,
		Supervisor: o.Supervisor, OnJoined: o.OnJoined, Logger: d.log, TracerProvider: d.cfg.TracerProvider,
		ProtocolVersion: o.ProtocolVersion, LandingRoot: o.LandingRoot, SkillsDir: o.SkillsDir,
		Local: []computer.LocalServer{{BundleID: o.BundleID, Name: "aiod sandbox", Connect: d.MCP().Connect}}}
	if d.sandbox != nil {
		// The landing root is in the workspace, which the sandbox can
		// write: its path work runs in the sandbox's view, as the sandbox
		// account, so no link planted there leads the daemon's writes
		// out, and what an Agent uploads is the sandbox's processes'.
		co.Uploads.Do = d.sandbox.Do
	}
	if o.Token != "" {
		co.Auth = map[string]any{o.AuthField: o.Token}
	}
	c, err := computer.New(co)
	if err != nil {
		return nil, nil, fmt.Errorf("office: %w", err)
	}
	return c, cfg, nil
}
