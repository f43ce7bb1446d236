package browser

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"github.com/chromedp/cdproto/target"
)

// Config configures the plane.
type Config struct {
	// CDPEndpoint is the browser's DevTools HTTP endpoint, such as
	// http://127.0.0.1:9222.
	CDPEndpoint string
	// Dial opens connections to the DevTools endpoint (HTTP and
	// WebSocket). Under isolation the browser listens inside the
	// sandbox's network, which only the daemon's dialer reaches. Nil: a
	// plain dialer.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
}

// Plane serves the browser routes.
type Plane struct {
	cfg Config
}

// New returns the plane. It connects to the browser on first use.
func New(cfg Config) *Plane {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Plane{cfg: cfg}
}

// Mount registers the browser routes on mux.
func (p *Plane) Mount(mux *http.ServeMux) {}

// Close drops the plane's CDP connections; the browser and its tabs stay.
func (p *Plane) Close(context.Context) error { return nil }

// TabID names a tab: a CDP target id.
type TabID = target.ID
