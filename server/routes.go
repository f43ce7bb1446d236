package server

import "net/http"

// routes adds the server's HTTP API beyond the protocol to mux: the trace
// API and the OTLP receiver (traces.go), and the console's data (calls.go,
// local.go). It runs once, in New.
func (s *Server) routes(mux *http.ServeMux) {
	s.traceRoutes(mux)
	s.callRoutes(mux)
}
