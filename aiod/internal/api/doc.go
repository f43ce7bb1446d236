// Package api is the kit every aiod plane answers with.
//
// Answers: the {success, message, data, hint} envelope ([OK], [Fail]),
// the 422 validation body in the daemon's serde wording ([Invalid]), the
// 2 MiB JSON body limit, body and query decoding into request structs.
// The middleware the daemon and its computer-use worker share: the mux's
// 404/405 as envelopes ([EnvelopeErrors]), the stalled-body guard
// ([BodyProgress]) and the status a handler answered ([StatusWriter]).
//
// One error model: a plane's engine returns an [*Error] whose Kind is one
// of the shared kinds ([ErrInvalid], [ErrNotFound], [ErrConflict],
// [ErrBusy], [ErrLimit], [ErrUnavailable], ...) or a plane's sub-kind of
// one ([NewKind]); a structured error kept in its own type (fserr.Error)
// implements [Answerer]. [Status] is the one kind → HTTP status table;
// a route whose published status differs declares an [Override] (v1
// routes answering 200 with success false, the commands plane's "all
// sessions busy" 400). Engines hold no status codes.
//
// One way to declare a route: [Route] decodes the input, runs the
// operation and answers the result or the refusal, so a plane's HTTP side
// is a table of routes:
//
//	mux.Handle("GET /v2/code/sessions/{session_id}", api.Route[struct{}, SessionInfo]{
//		From: api.FromNothing,
//		Op:   func(r *http.Request, _ struct{}) (SessionInfo, error) { return e.Session("", r.PathValue("session_id")) },
//	})
//
// # Adopting the kit (commands, pty)
//
// A plane still on its own helpers moves over in three steps, each
// leaving its answers unchanged:
//
//  1. Its sentinel kinds become the shared ones (ErrNotFound =
//     api.ErrNotFound) or sub-kinds (ErrNotRunning =
//     api.NewKind("command not running", api.ErrInvalid)); the exported
//     names stay, so callers matching them with errors.Is keep working.
//  2. Its statusOf goes; its fail helper becomes [WriteError] with the
//     route's overrides (commands: api.AsStatus(api.ErrBusy, 400) on
//     POST /v2/commands once "all sessions busy" is an ErrBusy).
//  3. Its handlers become [Route] values; streams and WebSockets keep a
//     plain handler, or a Route whose Reply writes the stream.
package api
