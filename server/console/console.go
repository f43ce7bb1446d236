package console

import (
	"errors"
	"log/slog"

	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// Config configures a [Console].
type Config struct {
	// Server is the hub the console shows and mounts itself on; its
	// Config.Calls must be set.
	Server *server.Server
	// Token is the hub's token, asked for at login; empty: the console is
	// open, as the hub is.
	Token string
	// Recorder holds the spans the call pages show (the hub's own, and
	// in a2c up every hop's); nil: calls show no trace.
	Recorder *tracing.Recorder
	// Sandboxes are the aiod daemons whose files, commands and python
	// cells the console offers.
	Sandboxes []Sandbox
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// Sandbox is an aiod daemon the console reaches: Name is how the console
// names it (a2c up: the sandbox Computer's name), URL its HTTP API's
// base URL, Token its API key (empty: none).
type Sandbox struct {
	Name, URL, Token string
}

// Console is the hub's web console, mounted at / on its server.
type Console struct {
	cfg Config
}

// New mounts the console on cfg.Server (see the package documentation
// for its routes) and returns it; Close ends its live streams.
func New(cfg Config) (*Console, error) {
	if cfg.Server == nil {
		return nil, errors.New("console: no server")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Console{cfg: cfg}, nil
}

// Close ends the console's live streams and sessions.
func (c *Console) Close() {}
