package pool

// TEMPORARY until the helpers' branches merge (deleted then).

import (
	"context"
	"log/slog"
	"net/http"
)

type ListFilter struct {
	State, Office string
	Metadata      map[string]string
}

type portTarget interface {
	dialPort(ctx context.Context, port int) (interface{ Close() error }, error)
	touch(ctx context.Context) error
}

type portProxyConfig struct {
	Token  string
	Logger *slog.Logger
	Lookup func(id string) (portTarget, bool)
}

type portProxy struct{}

func newPortProxy(portProxyConfig) *portProxy                        { return &portProxy{} }
func (*portProxy) ServeHost(http.ResponseWriter, *http.Request) bool { return false }
func (*portProxy) ServePath(w http.ResponseWriter, _ *http.Request, _ string, _ int, _ string) {
	writeError(w, 501, "ports: not yet")
}
func (*portProxy) forget(string)                        {}
func (p *Pool) portTarget(id string) (portTarget, bool) { return nil, false }
