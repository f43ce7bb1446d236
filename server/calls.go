package server

import "net/http"

// The console's view of the hub's tool calls (see observe.go for the
// hooks): the recent calls and the live stream.

// callState is a call's entry in the call log.
type callState struct{}

// callLog is the recent and running calls and the stream's subscribers.
type callLog struct{}

// callsStart records a call that starts.
func (s *Server) callsStart(o *callObs) {}

// callsEnd records a call's end and tells the stream.
func (s *Server) callsEnd(o *callObs, e callEnd) {}

func newCallLog() *callLog { return &callLog{} }

// callRoutes adds the call log's HTTP API when Config.Calls is set.
func (s *Server) callRoutes(mux *http.ServeMux) {}
