package pty

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/janitor"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Plane is the terminals plane's HTTP surface over one [Engine]. It owns
// the engine's idle-reclaim janitor.
type Plane struct {
	e       *Engine
	janitor *janitor.Janitor
}

// New returns a plane with its engine and a running janitor; stop both
// with [Plane.Close].
func New(cfg Config) *Plane {
	e := newEngine(cfg)
	return &Plane{e: e, janitor: janitor.Start(janitor.Every(e.idle/4, e.reclaim))}
}

// Engine returns the engine behind the routes, for other callers.
func (p *Plane) Engine() *Engine { return p.e }

// Close stops the janitor, kills every terminal and every process in it,
// and returns when they have ended or ctx ends.
func (p *Plane) Close(ctx context.Context) error {
	jerr := p.janitor.Stop(ctx)
	err := p.e.Close(ctx)
	if jerr != nil {
		return errors.Join(err, fmt.Errorf("pty: janitor: %w", jerr))
	}
	return err
}

// Mount registers the v2 routes and the v1 compatibility routes.
func (p *Plane) Mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /v2/pty/sessions", p.create)
	mux.HandleFunc("GET /v2/pty/sessions", p.list)
	mux.HandleFunc("GET /v2/pty/sessions/{id}", p.get)
	mux.HandleFunc("PATCH /v2/pty/sessions/{id}", p.patch)
	mux.HandleFunc("DELETE /v2/pty/sessions/{id}", p.remove)
	mux.HandleFunc("POST /v2/pty/sessions/{id}/exec", p.exec)
	mux.HandleFunc("GET /v2/pty/sessions/{id}/screen", p.screen)
	mux.HandleFunc("POST /v2/pty/sessions/{id}/input", p.input)
	mux.HandleFunc("POST /v2/pty/sessions/{id}/signal", p.signal)
	mux.HandleFunc("GET /v2/pty/sessions/{id}/ws", p.attachWS)
	mux.HandleFunc("GET /v2/pty/ws", func(w http.ResponseWriter, r *http.Request) { p.anonymousWS(w, r, false) })
	p.mountV1(mux)
}

// fail answers an engine error with its status, message and hint.
func fail(w http.ResponseWriter, err error) {
	msg, hint := api.MessageOf(err)
	api.Fail(w, statusOf(err), msg, nil, hint)
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// answer writes data or the error.
func answer[T any](w http.ResponseWriter, data T, err error) {
	if err != nil {
		fail(w, err)
		return
	}
	api.OK(w, data)
}

// seconds converts an optional seconds field; absent is 0 (no bound).
func seconds(f *float64) (time.Duration, error) {
	switch {
	case f == nil:
		return 0, nil
	case *f < 0 || math.IsNaN(*f):
		return 0, invalid("timeouts must not be negative")
	case *f*1e9 >= math.MaxInt64:
		return math.MaxInt64, nil
	}
	return max(time.Duration(*f*1e9), 1), nil
}

// wholeSeconds converts an optional integer seconds field.
func wholeSeconds(n *uint64) *time.Duration {
	if n == nil {
		return nil
	}
	d := time.Duration(min(*n, 1<<32)) * time.Second
	return &d
}

// createBody is the published PtyCreateRequest.
type createBody struct {
	ID              string            `json:"id"`
	Cwd             string            `json:"cwd"`
	Cols            *uint32           `json:"cols"`
	Rows            *uint32           `json:"rows"`
	Retention       *string           `json:"retention"`
	User            string            `json:"user"`
	NoChangeTimeout *uint64           `json:"no_change_timeout"`
	Env             map[string]string `json:"env"`
}

// size reads an optional cols/rows pair: both or neither.
func size(cols, rows *uint32) (int, int, error) {
	if (cols == nil) != (rows == nil) {
		return 0, 0, invalid("cols and rows must be given together")
	}
	if cols == nil {
		return 0, 0, nil
	}
	if *cols == 0 || *rows == 0 || *cols > 0xffff || *rows > 0xffff {
		return 0, 0, invalid("cols and rows must be between 1 and 65535")
	}
	return int(*cols), int(*rows), nil
}

func (p *Plane) create(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if !api.Body(w, r, &b) {
		return
	}
	cols, rows, err := size(b.Cols, b.Rows)
	if err != nil {
		fail(w, err)
		return
	}
	o := Options{ID: b.ID, Cwd: b.Cwd, Cols: cols, Rows: rows, User: b.User, Env: b.Env}
	if b.Retention != nil {
		o.Retention = *b.Retention
	}
	if d := wholeSeconds(b.NoChangeTimeout); d != nil {
		o.NoChangeTimeout = noChangeOption(*d)
	}
	c, err := p.e.Create(o)
	answer(w, c, err)
}

// listResult is the published PtySessionsResult.
type listResult struct {
	Sessions map[string]Info `json:"sessions"`
	Stats    Stats           `json:"stats"`
}

func (p *Plane) list(w http.ResponseWriter, _ *http.Request) {
	api.OK(w, listResult{Sessions: p.e.Sessions(), Stats: p.e.Stats()})
}

func (p *Plane) get(w http.ResponseWriter, r *http.Request) {
	info, err := p.e.Session(r.PathValue("id"))
	answer(w, info, err)
}

// patchBody is the published PtyPatchRequest.
type patchBody struct {
	Cols            *uint32 `json:"cols"`
	Rows            *uint32 `json:"rows"`
	NoChangeTimeout *uint64 `json:"no_change_timeout"`
}

// sizeResult is what PATCH answers when it resized.
type sizeResult struct {
	SessionID string `json:"session_id"`
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
	Status    string `json:"status"`
}

func (p *Plane) patch(w http.ResponseWriter, r *http.Request) {
	var b patchBody
	if !api.Body(w, r, &b) {
		return
	}
	id := r.PathValue("id")
	cols, rows, err := size(b.Cols, b.Rows)
	if err == nil {
		_, err = p.e.Session(id)
	}
	if err == nil && b.NoChangeTimeout != nil {
		err = p.e.SetNoChangeTimeout(id, *wholeSeconds(b.NoChangeTimeout))
	}
	if err != nil || cols == 0 {
		answer[any](w, nil, err)
		return
	}
	if err := p.e.Resize(id, cols, rows); err != nil {
		fail(w, err)
		return
	}
	st, _ := p.e.Wait(r.Context(), id, 0)
	api.OK(w, sizeResult{SessionID: id, Cols: cols, Rows: rows, Status: st})
}

// remove closes a terminal; one already gone is a 200 with success
// false.
func (p *Plane) remove(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := p.e.CloseSession(ctx, r.PathValue("id")); isNotFound(err) {
		msg, _ := api.MessageOf(err)
		api.Fail(w, http.StatusOK, msg, nil)
		return
	}
	api.OK(w, nil)
}

// execBody is the published PtyExecRequest.
type execBody struct {
	Command         string   `json:"command" serde:"required"`
	Async           bool     `json:"async"`
	Timeout         *float64 `json:"timeout"`
	HardTimeout     *float64 `json:"hard_timeout"`
	NoChangeTimeout *uint64  `json:"no_change_timeout"`
}

// runExec fills req's timeouts and runs it, answering the result.
func (p *Plane) runExec(w http.ResponseWriter, r *http.Request, id string, req ExecRequest, timeout, hard *float64) {
	var err error
	if req.Timeout, err = seconds(timeout); err == nil {
		req.HardTimeout, err = seconds(hard)
	}
	var res Result
	if err == nil {
		res, err = p.e.Exec(r.Context(), id, req)
	}
	if err != nil {
		fail(w, err)
		return
	}
	api.OKMessage(w, "Command executed", res)
}

func (p *Plane) exec(w http.ResponseWriter, r *http.Request) {
	var b execBody
	if !api.Body(w, r, &b) {
		return
	}
	req := ExecRequest{Command: b.Command, Async: b.Async, NoChangeTimeout: wholeSeconds(b.NoChangeTimeout)}
	p.runExec(w, r, r.PathValue("id"), req, b.Timeout, b.HardTimeout)
}

func (p *Plane) screen(w http.ResponseWriter, r *http.Request) {
	res, err := p.e.Screen(r.PathValue("id"))
	answer(w, res, err)
}

// inputBody is the published PtyInputRequest (v2: press_enter off).
type inputBody struct {
	Input      string `json:"input" serde:"required"`
	PressEnter bool   `json:"press_enter"`
}

type statusResult struct {
	Status string `json:"status"`
}

func (p *Plane) input(w http.ResponseWriter, r *http.Request) {
	var b inputBody
	if !api.Body(w, r, &b) {
		return
	}
	st, err := p.e.Input(r.PathValue("id"), b.Input, b.PressEnter)
	answer(w, statusResult{st}, err)
}

func (p *Plane) signal(w http.ResponseWriter, r *http.Request) {
	res, err := p.e.Signal(r.Context(), r.PathValue("id"))
	if isNotFound(err) {
		fail(w, err)
		return
	}
	api.OK(w, res) // a shell slow to die is still signalled
}
