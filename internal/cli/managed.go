package cli

// This file boots a Computer from the management plane's files (no
// --config): the settings and mcp.json scopes, the marketplaces and the
// plugins, with the approval gate; then keeps it in step with them. a2c
// computer, a2c up and aiod --office share it.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/market"
	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// managedBoot is a management-plane boot's parts.
type managedBoot struct {
	m    *market.Manager
	proj *market.Projector
	// LandingRoot is the merged settings' landingRoot ("" when unset).
	LandingRoot string
}

// bootManaged reads the files for a Computer: the flag scope's files
// (a bad --mcp-config is a usage error, exit 2, before anything
// connects), the boot's reconcile (migration, declared marketplaces,
// plugins materialized again), and the approval of PENDING servers
// (asked on the terminal when there is one, y/a/n written to the local
// settings; --approve-all-mcp approves them for this run only). embed
// are the host's own servers.
func bootManaged(ctx context.Context, e *env, flagSettings, mcpConfig string, approveAll bool, embed []config.Server, log *slog.Logger) (*managedBoot, error) {
	if mcpConfig != "" {
		if err := settings.CheckMCPPath(mcpConfig); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	paths, err := settings.CurrentPaths(os.Getenv, flagSettings)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	m := &market.Manager{Paths: paths, Log: log}
	o := market.ResolveOptions{FlagMCP: mcpConfig, Embed: embed, ApproveAll: approveAll}
	pr, rep, err := m.Boot(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("management plane: %w", err)
	}
	if len(rep.Cloned)+len(rep.Recloned)+len(rep.Pulled)+len(rep.Rematerialized)+len(rep.ScopeNormalized)+len(rep.FailedMarketplaces)+len(rep.FailedPlugins) > 0 {
		log.Info("management: boot reconcile", "cloned", rep.Cloned, "recloned", rep.Recloned, "pulled", rep.Pulled,
			"rematerialized", rep.Rematerialized, "scope_normalized", rep.ScopeNormalized,
			"failed_marketplaces", rep.FailedMarketplaces, "failed_plugins", rep.FailedPlugins)
	}
	proj, err := m.Resolve(o)
	if err != nil {
		return nil, fmt.Errorf("management plane: %w", err)
	}
	if !approveAll && stdinTerminal() {
		approvePending(os.Stdin, e.stderr, paths, proj.Pending())
	}
	mb := &managedBoot{m: m, proj: pr}
	if merged, err := settings.Load(paths); err == nil {
		mb.LandingRoot, _ = merged.Values["landingRoot"].(string)
	}
	return mb, nil
}

// approvePending asks about each PENDING server on the terminal: y
// approves it (enabledMcpjsonServers), a approves every project server
// (enableAllProjectMcpServers), n denies it (disabledMcpjsonServers),
// each written to the local settings, so a restart does not ask again.
func approvePending(r io.Reader, w io.Writer, paths settings.Paths, pending []market.ServerState) {
	in := bufio.NewReader(r)
	all := false
	for _, s := range pending {
		if all {
			break
		}
		fmt.Fprintf(w, "⚠ Unapproved workspace MCP server '%s' (bundle_id %s, origin=%s)\n  [y]es this server · [a]ll project servers · [n]o (deny): ",
			printable(s.Name), printable(s.BundleID), s.Origin)
		line, _ := in.ReadString('\n')
		var err error
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "a", "all":
			err = settings.Set(paths, settings.Local, "enableAllProjectMcpServers", true)
			all = true
		case "y", "yes":
			err = appendLocal(paths, "enabledMcpjsonServers", s.BundleID)
		default:
			err = appendLocal(paths, "disabledMcpjsonServers", s.BundleID)
		}
		if err != nil {
			fmt.Fprintf(w, "✗ %v\n", err)
		}
	}
}

// appendLocal adds v to the local settings' list key.
func appendLocal(paths settings.Paths, key, v string) error {
	merged, err := settings.Load(paths)
	if err != nil {
		return err
	}
	var list []string
	if l, ok := merged.Layer(settings.Local).Values[key].([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				list = append(list, s)
			}
		}
	}
	if slices.Contains(list, v) {
		return nil
	}
	return settings.Set(paths, settings.Local, key, append(list, v))
}

// start applies the files to c and keeps it in step with them until ctx
// ends.
func (mb *managedBoot) start(ctx context.Context, c *computer.Computer, log *slog.Logger) error {
	proj, err := mb.proj.Start(ctx, c)
	if proj == nil {
		return fmt.Errorf("management plane: %w", err)
	}
	if err != nil {
		log.Warn("management: some servers' inputs could not be resolved", "err", err)
	}
	log.Info("management plane", "servers", len(proj.Config.Servers), "plugins", len(proj.Plugins), "pending", len(proj.Pending()))
	return nil
}
