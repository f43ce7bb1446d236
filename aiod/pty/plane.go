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
	prefix  string // Config.PathPrefix
}

// New returns a plane with its engine and a running janitor; stop both
// with [Plane.Close].
func New(cfg Config) *Plane {
	e := NewEngine(cfg)
	return &Plane{e: e, janitor: janitor.Start(janitor.Every(e.idle/4, e.reclaim)), prefix: cfg.PathPrefix}
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

// Mount registers the v2 routes and the v1 compatibility routes. Every
// refusal answers api's status of its kind, except where the published
// API differs: a full table is a 400 on the routes that create
// terminals, and a DELETE of a gone terminal a 200 with success false.
// The WebSocket routes keep plain handlers (they answer after the
// upgrade in frames).
func (p *Plane) Mount(mux *http.ServeMux) {
	log := p.e.log
	mux.Handle("POST /v2/pty/sessions", api.Route[createBody, Created]{Op: p.create, Override: []api.Override{capacity400}, Log: log})
	mux.Handle("GET /v2/pty/sessions", api.Route[struct{}, listResult]{From: api.FromNothing, Op: p.list})
	mux.Handle("GET /v2/pty/sessions/{id}", api.Route[struct{}, Info]{From: api.FromNothing, Op: p.get})
	mux.Handle("PATCH /v2/pty/sessions/{id}", api.Route[patchBody, *sizeResult]{Op: p.patch, Log: log})
	mux.Handle("DELETE /v2/pty/sessions/{id}", p.removeRoute())
	mux.Handle("POST /v2/pty/sessions/{id}/exec", api.Route[execBody, Result]{Op: p.exec, Reply: executed, Log: log})
	mux.Handle("GET /v2/pty/sessions/{id}/screen", api.Route[struct{}, Result]{From: api.FromNothing, Op: p.screen})
	mux.Handle("POST /v2/pty/sessions/{id}/input", api.Route[inputBody, statusResult]{Op: p.input, Log: log})
	mux.Handle("POST /v2/pty/sessions/{id}/signal", api.Route[struct{}, KillResult]{From: api.FromNothing,
		Op: func(r *http.Request, _ struct{}) (KillResult, error) { return p.signal(r, r.PathValue("id")) }})
	mux.HandleFunc("GET /v2/pty/sessions/{id}/ws", p.attachWS)
	mux.HandleFunc("GET /v2/pty/ws", func(w http.ResponseWriter, r *http.Request) { p.anonymousWS(w, r, false) })
	p.mountV1(mux)
	p.mountPage(mux)
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

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

func (p *Plane) create(_ *http.Request, b createBody) (Created, error) {
	cols, rows, err := size(b.Cols, b.Rows)
	if err != nil {
		return Created{}, err
	}
	o := Options{ID: b.ID, Cwd: b.Cwd, Cols: cols, Rows: rows, User: b.User, Env: b.Env}
	if b.Retention != nil {
		o.Retention = *b.Retention
	}
	if d := wholeSeconds(b.NoChangeTimeout); d != nil {
		o.NoChangeTimeout = noChangeOption(*d)
	}
	return p.e.Create(o)
}

// listResult is the published PtySessionsResult.
type listResult struct {
	Sessions map[string]Info `json:"sessions"`
	Stats    Stats           `json:"stats"`
}

func (p *Plane) list(*http.Request, struct{}) (listResult, error) {
	return listResult{Sessions: p.e.Sessions(), Stats: p.e.Stats()}, nil
}

func (p *Plane) get(r *http.Request, _ struct{}) (Info, error) { return p.e.Session(r.PathValue("id")) }

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

// patch sets the no_change_timeout and resizes; data is null when it
// did not resize.
func (p *Plane) patch(r *http.Request, b patchBody) (*sizeResult, error) {
	id := r.PathValue("id")
	cols, rows, err := size(b.Cols, b.Rows)
	if err == nil {
		_, err = p.e.Session(id)
	}
	if err == nil && b.NoChangeTimeout != nil {
		err = p.e.SetNoChangeTimeout(id, *wholeSeconds(b.NoChangeTimeout))
	}
	if err != nil || cols == 0 {
		return nil, err
	}
	if err := p.e.Resize(id, cols, rows); err != nil {
		return nil, err
	}
	st, _ := p.e.Wait(r.Context(), id, 0)
	return &sizeResult{SessionID: id, Cols: cols, Rows: rows, Status: st}, nil
}

// removeRoute closes a terminal (DELETE /v2/pty/sessions/{id} and
// /v1/shell/sessions/{id}); one already gone is a 200 with success
// false. A shell slow to die has been killed: that is a success.
func (p *Plane) removeRoute() api.Route[struct{}, any] {
	return api.Route[struct{}, any]{From: api.FromNothing, Override: []api.Override{gone200},
		Op: func(r *http.Request, _ struct{}) (any, error) {
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			if err := p.e.CloseSession(ctx, r.PathValue("id")); isNotFound(err) {
				return nil, err
			}
			return nil, nil
		}}
}

// execBody is the published PtyExecRequest.
type execBody struct {
	Command         string   `json:"command" serde:"required"`
	Async           bool     `json:"async"`
	Timeout         *float64 `json:"timeout"`
	HardTimeout     *float64 `json:"hard_timeout"`
	NoChangeTimeout *uint64  `json:"no_change_timeout"`
}

// runExec fills req's timeouts and runs it.
func (p *Plane) runExec(r *http.Request, id string, req ExecRequest, timeout, hard *float64) (Result, error) {
	var err error
	if req.Timeout, err = seconds(timeout); err == nil {
		req.HardTimeout, err = seconds(hard)
	}
	if err != nil {
		return Result{}, err
	}
	return p.e.Exec(r.Context(), id, req)
}

// executed answers an exec with its own success message.
func executed(w http.ResponseWriter, _ *http.Request, res Result) {
	api.OKMessage(w, "Command executed", res)
}

func (p *Plane) exec(r *http.Request, b execBody) (Result, error) {
	req := ExecRequest{Command: b.Command, Async: b.Async, NoChangeTimeout: wholeSeconds(b.NoChangeTimeout)}
	return p.runExec(r, r.PathValue("id"), req, b.Timeout, b.HardTimeout)
}

func (p *Plane) screen(r *http.Request, _ struct{}) (Result, error) {
	return p.e.Screen(r.PathValue("id"))
}

// inputBody is the published PtyInputRequest (v2: press_enter off).
type inputBody struct {
	Input      string `json:"input" serde:"required"`
	PressEnter bool   `json:"press_enter"`
}

type statusResult struct {
	Status string `json:"status"`
}

func (p *Plane) input(r *http.Request, b inputBody) (statusResult, error) {
	st, err := p.e.Input(r.PathValue("id"), b.Input, b.PressEnter)
	return statusResult{st}, err
}

// signal kills terminal id; only an unknown id is refused (a shell slow
// to die is still signalled).
func (p *Plane) signal(r *http.Request, id string) (KillResult, error) {
	res, err := p.e.Signal(r.Context(), id)
	if isNotFound(err) {
		return KillResult{}, err
	}
	return res, nil
}
