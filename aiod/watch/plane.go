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
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
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
// plus POST /v1/file/watch/wait. A path problem answers as the files
// plane does (v2 by its type's status, v1 200 with success false); the
// engine's own refusals answer their kind's status on both.
func (p *Plane) Mount(mux *http.ServeMux) {
	v1 := []api.Override{fserr.Failed200}
	for _, r := range []struct {
		prefix string
		over   []api.Override
	}{{"/v2/watch", nil}, {"/v1/file/watch", v1}} {
		mux.Handle("POST "+r.prefix, api.Route[CreateWatchRequest, *WatcherCreatedResult]{
			Op: p.create, Reply: created, Override: r.over, Log: p.log})
		mux.Handle("GET "+r.prefix, api.Route[struct{}, []WatcherInfo]{From: api.FromNothing, Op: p.list})
		mux.Handle("GET "+r.prefix+"/{watcher_id}/events", api.Route[streamQuery, stream]{
			From: api.FromQuery, Op: p.stream, Reply: p.events, Log: p.log})
		mux.Handle("DELETE "+r.prefix+"/{watcher_id}", api.Route[struct{}, *WatcherStoppedResult]{
			From: api.FromNothing, Op: p.stop, Override: r.over, Log: p.log})
	}
	mux.Handle("GET /v2/watch/{watcher_id}/poll", api.Route[PollWatchRequest, *PollWatchResult]{
		From: api.FromQuery, Op: p.poll, Log: p.log})
	mux.Handle("POST /v1/file/watch/{watcher_id}/poll", api.Route[PollWatchRequest, *PollWatchResult]{
		Op: p.poll, Override: v1, Log: p.log})
	mux.Handle("POST /v1/file/watch/wait", api.Route[WaitWatchRequest, *WaitWatchResult]{
		Op: p.wait, Override: v1, Log: p.log})
}

func (p *Plane) create(r *http.Request, req CreateWatchRequest) (*WatcherCreatedResult, error) {
	return p.e.Create(r.Context(), req)
}

// created answers a create; a warning (the watcher does not cover its
// whole tree) is the envelope's message.
func created(w http.ResponseWriter, _ *http.Request, res *WatcherCreatedResult) {
	if res.warning != "" {
		api.OKMessage(w, res.warning, res)
		return
	}
	api.OK(w, res)
}

func (p *Plane) list(*http.Request, struct{}) ([]WatcherInfo, error) { return p.e.List(), nil }

// poll is GET /v2/watch/{id}/poll (query) and POST /v1/file/watch/{id}/poll
// (body).
func (p *Plane) poll(r *http.Request, req PollWatchRequest) (*PollWatchResult, error) {
	return p.e.Poll(r.Context(), r.PathValue("watcher_id"), req)
}

func (p *Plane) stop(r *http.Request, _ struct{}) (*WatcherStoppedResult, error) {
	return p.e.Stop(r.PathValue("watcher_id"))
}

// wait is POST /v1/file/watch/wait; an unknown event type is a 422 of
// the body field, in serde's words.
func (p *Plane) wait(r *http.Request, req WaitWatchRequest) (*WaitWatchResult, error) {
	for _, t := range req.EventTypes {
		if !slices.Contains(eventTypes, t) {
			return nil, &serde.Error{Location: []string{"body", "event_types"}, Type: serde.TypeValue,
				Message: fmt.Sprintf("unknown variant `%s`, expected one of `%s`", t, strings.Join(eventTypes, "`, `"))}
		}
	}
	return p.e.Wait(r.Context(), req)
}

// streamQuery is the query of an event stream.
type streamQuery struct {
	Cursor *uint64 `json:"cursor"`
}

// stream is an event stream about to start: its watcher and the cursor
// it starts after.
type stream struct {
	id     string
	wt     *watcher
	cursor uint64
}

// stream finds the watcher of an event stream (404 when unknown) and the
// cursor to start after: Last-Event-ID's, else ?cursor=, clamped.
func (p *Plane) stream(r *http.Request, q streamQuery) (stream, error) {
	id := r.PathValue("watcher_id")
	wt := p.e.get(id)
	if wt == nil {
		return stream{}, notFound(id)
	}
	var cursor uint64
	if q.Cursor != nil {
		cursor = *q.Cursor
	}
	if seq, ok := parseEventID(r.Header.Get("Last-Event-ID"), id); ok {
		cursor = seq
	}
	// once: a stale high cursor must not skip what comes next
	return stream{id: id, wt: wt, cursor: wt.clamp(cursor)}, nil
}

// events is the SSE stream of a watcher (v1 and v2 alike). It ends with
// a watch_stopped event when the watcher stops, and when the client
// leaves or a write fails.
func (p *Plane) events(w http.ResponseWriter, r *http.Request, st stream) {
	id, wt, cursor := st.id, st.wt, st.cursor
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
