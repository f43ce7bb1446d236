package mcp

import (
	"context"
	"errors"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server serves the sandbox's tools. SKELETON: replaced by the MCP work.
type Server struct{}

// ServeHTTP answers /mcp.
func (s *Server) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}

// Connect returns the client end of an in-memory transport whose other end
// is served by s, for a Computer in the same process.
func (s *Server) Connect(ctx context.Context) (sdk.Transport, error) {
	return nil, errors.New("mcp: not implemented")
}

// Warnings lists what was rejected at start (EXTRA_MCP_SERVERS entries).
func (s *Server) Warnings() []string { return nil }
