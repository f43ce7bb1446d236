package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Plane serves the watch routes over one [Engine].
type Plane struct {
	e   *Engine
	log *slog.Logger
}

// New returns a plane ready to [Plane.Mount].
func New(cfg Config) *Plane {
	e := NewEngine(cfg)
	return &Plane{e: e, log: e.log}
}

// Engine is the engine behind the routes, for other callers (MCP tools).
func (p *Plane) Engine() *Engine { return p.e }

// Close stops every watcher, which ends the open event streams and long
// polls, and closes the inotify instance; it waits until ctx ends.
func (p *Plane) Close(ctx context.Context) error { return p.e.Close(ctx) }

// Mount registers the routes: POST|GET /v2/watch, GET
// /v2/watch/{watcher_id}/poll, GET /v2/watch/{watcher_id}/events, DELETE
// /v2/watch/{watcher_id}, and their v1 twins POST|GET /v1/file/watch,
// POST /v1/file/watch/{watcher_id}/poll (JSON body), GET
// /v1/file/watch/{watcher_id}/events, DELETE /v1/file/watch/{watcher_id},
// plus POST /v1/file/watch/wait.
func (p *Plane) Mount(mux *http.ServeMux) {
	for _, r := range []struct {
		prefix string
		v1     bool
	}{{"/v2/watch", false}, {"/v1/file/watch", true}} {
		mux.HandleFunc("POST "+r.prefix, p.create(r.v1))
		mux.HandleFunc("GET "+r.prefix, p.list)
		mux.HandleFunc("GET "+r.prefix+"/{watcher_id}/events", p.events)
		mux.HandleFunc("DELETE "+r.prefix+"/{watcher_id}", p.stop(r.v1))
	}
	mux.HandleFunc("GET /v2/watch/{watcher_id}/poll", p.poll(false))
	mux.HandleFunc("POST /v1/file/watch/{watcher_id}/poll", p.poll(true))
	mux.HandleFunc("POST /v1/file/watch/wait", p.wait)
}

// reply answers an engine result: data on success; a path problem as
// the files plane does (v2 by status, v1 200 with success false); a
// refusal with its status.
func reply[T any](p *Plane, w http.ResponseWriter, r *http.Request, v1 bool, res T, err error) {
	var fe *fserr.Error
	var we *Error
	switch {
	case err == nil:
		api.OK(w, res)
	case errors.As(err, &fe) && v1:
		fserr.WriteV1(w, fe)
	case errors.As(err, &fe):
		fserr.WriteV2(w, fe)
	case errors.As(err, &we):
		api.Fail(w, we.Status, we.Message, nil, we.Hint)
	case errors.Is(err, context.Canceled):
		// the client left; nobody reads an answer
	default:
		p.log.Error("watch: request failed", "route", r.URL.Path, "error", err.Error())
		api.Fail(w, http.StatusInternalServerError, "Internal error", nil)
	}
}

func (p *Plane) create(v1 bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req CreateWatchRequest
		if api.Body(w, r, &req) {
			res, err := p.e.Create(r.Context(), req)
			if err == nil && res.warning != "" {
				api.OKMessage(w, res.warning, res)
				return
			}
			reply(p, w, r, v1, res, err)
		}
	}
}

func (p *Plane) list(w http.ResponseWriter, _ *http.Request) { api.OK(w, p.e.List()) }

// poll is GET /v2/watch/{id}/poll (query) and POST /v1/file/watch/{id}/poll
// (body).
func (p *Plane) poll(v1 bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req PollWatchRequest
		if (v1 && api.Body(w, r, &req)) || (!v1 && api.Query(w, r, &req)) {
			res, err := p.e.Poll(r.Context(), r.PathValue("watcher_id"), req)
			reply(p, w, r, v1, res, err)
		}
	}
}

func (p *Plane) stop(v1 bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := p.e.Stop(r.PathValue("watcher_id"))
		reply(p, w, r, v1, res, err)
	}
}

// wait is POST /v1/file/watch/wait.
func (p *Plane) wait(w http.ResponseWriter, r *http.Request) {
	var req WaitWatchRequest
	if !api.Body(w, r, &req) {
		return
	}
	for _, t := range req.EventTypes {
		if !slices.Contains(eventTypes, t) {
			api.InvalidField(w, "event_types", fmt.Sprintf("unknown variant `%s`, expected one of `%s`", t, strings.Join(eventTypes, "`, `")))
			return
		}
	}
	res, err := p.e.Wait(r.Context(), req)
	reply(p, w, r, true, res, err)
}

// streamQuery is the query of an event stream.
type streamQuery struct {
	Cursor *uint64 `json:"cursor"`
}

// events is the SSE stream of a watcher (v1 and v2 alike).
func (p *Plane) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("watcher_id")
	var q streamQuery
	if !api.Query(w, r, &q) {
		return
	}
	wt := p.e.get(id)
	if wt == nil {
		reply[any](p, w, r, false, nil, notFound(id))
		return
	}
	var cursor uint64
	if q.Cursor != nil {
		cursor = *q.Cursor
	}
	if seq, ok := parseEventID(r.Header.Get("Last-Event-ID"), id); ok {
		cursor = seq
	}
	cursor = wt.clamp(cursor) // once: a stale high cursor must not skip what comes next
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: p.e.cfg.WriteTimeout}
	defer func() { _ = s.rc.SetWriteDeadline(time.Time{}) }() // the connection may serve again
	s.event("watch_started", "", map[string]any{"watcher_id": id, "path": wt.path(), "cursor": cursor})
	s.flush()
	keepAlive := time.NewTicker(p.e.cfg.KeepAlive)
	defer keepAlive.Stop()
	for s.err == nil {
		evs, next, overflow, changed, stopped := wt.since(cursor, MaxPollLimit)
		for i := range evs { // seqs run without gaps but where events were lost
			if evs[i].Seq > cursor+1 {
				s.event("overflow", "", map[string]any{"watcher_id": id, "cursor": cursor})
			}
			s.event("file_change", id+":"+strconv.FormatUint(evs[i].Seq, 10), &evs[i])
			cursor = evs[i].Seq
		}
		if next > cursor {
			s.event("overflow", "", map[string]any{"watcher_id": id, "cursor": cursor})
			cursor = next
		}
		switch {
		case len(evs) > 0 || overflow:
			s.flush()
			continue
		case stopped:
			s.event("watch_stopped", "", map[string]any{"watcher_id": id, "status": StatusStopped, "cursor": cursor})
			s.flush()
			return
		}
		select {
		case <-changed:
		case <-keepAlive.C:
			s.write([]byte(": keep-alive\n\n"))
			s.flush()
		case <-r.Context().Done():
			return
		}
	}
}

// sseWriter writes SSE frames; after the first failure it writes nothing.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
	err     error
}

// event writes one frame: its id (if any), name and data as one JSON line.
func (s *sseWriter) event(name, id string, data any) {
	s.buf.Reset()
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	s.buf.WriteString("event: " + name + "\ndata: ")
	enc := json.NewEncoder(&s.buf) // ends the line
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		s.err = err
		return
	}
	s.buf.WriteString("\n")
	s.write(s.buf.Bytes())
}

func (s *sseWriter) write(b []byte) {
	if s.err != nil {
		return
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return
	}
	_, s.err = s.w.Write(b)
}

func (s *sseWriter) flush() {
	if s.err == nil {
		s.err = s.rc.Flush()
	}
}

// parseEventID reads a Last-Event-ID: "{watcher_id}:{seq}" of this
// watcher, or a bare seq. Anything else is ignored (false).
func parseEventID(v, watcherID string) (uint64, bool) {
	v = strings.TrimSpace(v)
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		if v[:i] != watcherID {
			return 0, false
		}
		v = v[i+1:]
	}
	if v == "" || v[0] == '+' {
		return 0, false
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return seq, true
}
