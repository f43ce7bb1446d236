package pty

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// mountV1 registers the 1.x compatibility routes /v1/shell/*, adapting
// their field names onto the same engine.
func (p *Plane) mountV1(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/shell/exec", p.v1Exec)
	mux.HandleFunc("POST /v1/shell/view", p.v1View)
	mux.HandleFunc("POST /v1/shell/wait", p.v1Wait)
	mux.HandleFunc("POST /v1/shell/write", p.v1Write)
	mux.HandleFunc("POST /v1/shell/kill", p.v1Kill)
	mux.HandleFunc("GET /v1/shell/sessions", p.v1Sessions)
	mux.HandleFunc("POST /v1/shell/sessions/create", p.v1Create)
	mux.HandleFunc("POST /v1/shell/sessions/update", p.v1Update)
	mux.HandleFunc("GET /v1/shell/sessions/stats", func(w http.ResponseWriter, _ *http.Request) { api.OK(w, p.e.Stats()) })
	mux.HandleFunc("DELETE /v1/shell/sessions/{id}", p.remove)
	mux.HandleFunc("DELETE /v1/shell/sessions", p.v1CloseAll)
	mux.HandleFunc("GET /v1/shell/terminal-url", p.v1TerminalURL)
	mux.HandleFunc("GET /v1/shell/ws", func(w http.ResponseWriter, r *http.Request) { p.anonymousWS(w, r, true) })
}

// v1ExecBody is the published v1 ShellExecRequest.
type v1ExecBody struct {
	Command          string   `json:"command" serde:"required"`
	ID               string   `json:"id"`
	ExecDir          string   `json:"exec_dir"`
	AsyncMode        bool     `json:"async_mode"`
	Timeout          *float64 `json:"timeout"`
	HardTimeout      *float64 `json:"hard_timeout"`
	NoChangeTimeout  *uint64  `json:"no_change_timeout"`
	User             string   `json:"user"`
	PreserveSymlinks bool     `json:"preserve_symlinks"`
	Strict           bool     `json:"strict"`
	Truncate         *bool    `json:"truncate"`
}

// v1Exec runs in the session named by id (unknown: 404), or in a new
// expiring one; exec_dir is the new session's directory, or where an
// existing one moves first. Without strict an unusable exec_dir is
// ignored.
func (p *Plane) v1Exec(w http.ResponseWriter, r *http.Request) {
	var b v1ExecBody
	if !api.Body(w, r, &b) {
		return
	}
	dir := b.ExecDir
	if dir != "" {
		var err error
		if dir, err = p.e.resolveCwd(dir, b.PreserveSymlinks); err != nil && b.Strict {
			fail(w, err)
			return
		}
	}
	req := ExecRequest{Command: b.Command, Async: b.AsyncMode, NoChangeTimeout: wholeSeconds(b.NoChangeTimeout),
		Full: b.Truncate != nil && !*b.Truncate}
	var s *session
	var err error
	if b.ID != "" {
		s, err = p.e.existing(b.ID, b.User)
		req.Cwd = dir
	} else {
		s, err = p.e.create(Options{Cwd: dir, User: b.User, Retention: RetentionExpiring, PreserveSymlinks: b.PreserveSymlinks})
	}
	if err != nil {
		fail(w, err)
		return
	}
	p.runExec(w, r, s.id, req, b.Timeout, b.HardTimeout)
}

// v1IDBody is the published v1 ShellViewRequest and ShellKillProcessRequest.
type v1IDBody struct {
	ID string `json:"id" serde:"required"`
}

func (p *Plane) v1View(w http.ResponseWriter, r *http.Request) {
	var b v1IDBody
	if !api.Body(w, r, &b) {
		return
	}
	res, err := p.e.Screen(b.ID)
	answer(w, res, err)
}

// v1WaitBody is the published v1 ShellWaitRequest.
type v1WaitBody struct {
	ID             string  `json:"id" serde:"required"`
	Seconds        *uint64 `json:"seconds"`
	MaxWaitSeconds *uint64 `json:"max_wait_seconds"`
}

// Bounds of a v1 wait: 30 s by default, never under 5 s.
const (
	v1WaitDefault = 30 * time.Second
	v1WaitMin     = 5 * time.Second
)

func (p *Plane) v1Wait(w http.ResponseWriter, r *http.Request) {
	var b v1WaitBody
	if !api.Body(w, r, &b) {
		return
	}
	d := v1WaitDefault
	if s := wholeSeconds(b.Seconds); s != nil {
		d = *s
	}
	if m := wholeSeconds(b.MaxWaitSeconds); m != nil {
		d = min(d, *m)
	}
	st, err := p.e.Wait(r.Context(), b.ID, max(d, v1WaitMin))
	answer(w, statusResult{st}, err)
}

// v1WriteBody is the published v1 ShellWriteToProcessRequest (v1:
// press_enter on).
type v1WriteBody struct {
	ID         string `json:"id" serde:"required"`
	Input      string `json:"input" serde:"required"`
	PressEnter *bool  `json:"press_enter"`
}

func (p *Plane) v1Write(w http.ResponseWriter, r *http.Request) {
	var b v1WriteBody
	if !api.Body(w, r, &b) {
		return
	}
	st, err := p.e.Input(b.ID, b.Input, b.PressEnter == nil || *b.PressEnter)
	answer(w, statusResult{st}, err)
}

func (p *Plane) v1Kill(w http.ResponseWriter, r *http.Request) {
	var b v1IDBody
	if !api.Body(w, r, &b) {
		return
	}
	r.SetPathValue("id", b.ID)
	p.signal(w, r)
}

func (p *Plane) v1Sessions(w http.ResponseWriter, _ *http.Request) {
	api.OK(w, map[string]any{"sessions": p.e.Sessions()})
}

// v1CreateBody is the published v1 ShellCreateSessionRequest.
type v1CreateBody struct {
	ID               string  `json:"id"`
	ExecDir          string  `json:"exec_dir"`
	NoChangeTimeout  *uint64 `json:"no_change_timeout"`
	PreserveSymlinks bool    `json:"preserve_symlinks"`
	User             string  `json:"user"`
}

func (p *Plane) v1Create(w http.ResponseWriter, r *http.Request) {
	var b v1CreateBody
	if !api.Body(w, r, &b) {
		return
	}
	o := Options{ID: b.ID, Cwd: b.ExecDir, User: b.User, PreserveSymlinks: b.PreserveSymlinks}
	if d := wholeSeconds(b.NoChangeTimeout); d != nil {
		o.NoChangeTimeout = noChangeOption(*d)
	}
	c, err := p.e.Create(o)
	answer(w, c, err)
}

// v1UpdateBody is the published v1 ShellUpdateSessionRequest.
type v1UpdateBody struct {
	ID              string  `json:"id" serde:"required"`
	NoChangeTimeout *uint64 `json:"no_change_timeout"`
}

type v1UpdateResult struct {
	SessionID       string  `json:"session_id"`
	NoChangeTimeout *uint64 `json:"no_change_timeout"`
}

func (p *Plane) v1Update(w http.ResponseWriter, r *http.Request) {
	var b v1UpdateBody
	if !api.Body(w, r, &b) {
		return
	}
	var err error
	if d := wholeSeconds(b.NoChangeTimeout); d != nil {
		err = p.e.SetNoChangeTimeout(b.ID, *d)
	} else {
		_, err = p.e.Session(b.ID)
	}
	answer(w, v1UpdateResult{SessionID: b.ID, NoChangeTimeout: b.NoChangeTimeout}, err)
}

func (p *Plane) v1CloseAll(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	_ = p.e.CloseAll(ctx) // what is still dying has been killed
	api.OK(w, nil)
}

// v1TerminalURL is the WebShell page's address for a session (unknown:
// 404), or for a new expiring one.
func (p *Plane) v1TerminalURL(w http.ResponseWriter, r *http.Request) {
	var q struct {
		SessionID string `json:"session_id"`
	}
	if !api.Query(w, r, &q) {
		return
	}
	id := q.SessionID
	var err error
	if id != "" {
		_, err = p.e.Session(id)
	} else {
		var c Created
		c, err = p.e.Create(Options{Retention: RetentionExpiring})
		id = c.SessionID
	}
	if err != nil {
		fail(w, err)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if fp := r.Header.Get("X-Forwarded-Proto"); fp == "http" || fp == "https" {
		scheme = fp
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: "/terminal", RawQuery: url.Values{"session_id": {id}}.Encode()}
	api.OK(w, u.String())
}
