package pty

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// mountV1 registers the 1.x compatibility routes /v1/shell/*, adapting
// their field names onto the same engine. They answer as the v2 routes
// do: the status of the refusal's kind, 400 for a full table where a
// terminal is created, 200 with success false for a DELETE of a gone
// terminal.
func (p *Plane) mountV1(mux *http.ServeMux) {
	log := p.e.log
	full := []api.Override{capacity400}
	mux.Handle("POST /v1/shell/exec", api.Route[v1ExecBody, Result]{Op: p.v1Exec, Reply: executed, Override: full, Log: log})
	mux.Handle("POST /v1/shell/view", api.Route[v1IDBody, Result]{Op: p.v1View})
	mux.Handle("POST /v1/shell/wait", api.Route[v1WaitBody, statusResult]{Op: p.v1Wait})
	mux.Handle("POST /v1/shell/write", api.Route[v1WriteBody, statusResult]{Op: p.v1Write, Log: log})
	// kill ends the session, not just its command: the published daemon
	// documents it so ("SIGKILL to the process group; closes the
	// session", and a second kill answers 404), the published v1
	// OpenAPI calls it "Kill shell session", and a PTY session's process
	// is its shell. A client that wants the terminal kept interrupts with
	// hard_timeout or no_change_timeout instead.
	mux.Handle("POST /v1/shell/kill", api.Route[v1IDBody, KillResult]{
		Op: func(r *http.Request, b v1IDBody) (KillResult, error) { return p.signal(r, b.ID) }})
	mux.Handle("GET /v1/shell/sessions", api.Route[struct{}, v1SessionList]{From: api.FromNothing, Op: p.v1Sessions})
	mux.Handle("POST /v1/shell/sessions/create", api.Route[v1CreateBody, Created]{Op: p.v1Create, Override: full, Log: log})
	mux.Handle("POST /v1/shell/sessions/update", api.Route[v1UpdateBody, v1UpdateResult]{Op: p.v1Update})
	mux.Handle("GET /v1/shell/sessions/stats", api.Route[struct{}, Stats]{From: api.FromNothing,
		Op: func(*http.Request, struct{}) (Stats, error) { return p.e.Stats(), nil }})
	mux.Handle("DELETE /v1/shell/sessions/{id}", p.removeRoute())
	mux.Handle("DELETE /v1/shell/sessions", api.Route[struct{}, any]{From: api.FromNothing, Op: p.v1CloseAll})
	mux.Handle("GET /v1/shell/terminal-url", api.Route[terminalURLQuery, string]{From: api.FromQuery, Op: p.v1TerminalURL,
		Override: full, Log: log})
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
func (p *Plane) v1Exec(r *http.Request, b v1ExecBody) (Result, error) {
	dir := b.ExecDir
	if dir != "" {
		var err error
		if dir, err = p.e.resolveCwd(dir, b.PreserveSymlinks); err != nil && b.Strict {
			return Result{}, err
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
		return Result{}, err
	}
	return p.runExec(r, s.id, req, b.Timeout, b.HardTimeout)
}

// v1IDBody is the published v1 ShellViewRequest and ShellKillProcessRequest.
type v1IDBody struct {
	ID string `json:"id" serde:"required"`
}

func (p *Plane) v1View(_ *http.Request, b v1IDBody) (Result, error) { return p.e.Screen(b.ID) }

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

func (p *Plane) v1Wait(r *http.Request, b v1WaitBody) (statusResult, error) {
	d := v1WaitDefault
	if s := wholeSeconds(b.Seconds); s != nil {
		d = *s
	}
	if m := wholeSeconds(b.MaxWaitSeconds); m != nil {
		d = min(d, *m)
	}
	st, err := p.e.Wait(r.Context(), b.ID, max(d, v1WaitMin))
	return statusResult{st}, err
}

// v1WriteBody is the published v1 ShellWriteToProcessRequest (v1:
// press_enter on).
type v1WriteBody struct {
	ID         string `json:"id" serde:"required"`
	Input      string `json:"input" serde:"required"`
	PressEnter *bool  `json:"press_enter"`
}

func (p *Plane) v1Write(_ *http.Request, b v1WriteBody) (statusResult, error) {
	st, err := p.e.Input(b.ID, b.Input, b.PressEnter == nil || *b.PressEnter)
	return statusResult{st}, err
}

// v1SessionList is GET /v1/shell/sessions: {sessions: {id: info}}.
type v1SessionList struct {
	Sessions map[string]Info `json:"sessions"`
}

func (p *Plane) v1Sessions(*http.Request, struct{}) (v1SessionList, error) {
	return v1SessionList{Sessions: p.e.Sessions()}, nil
}

// v1CreateBody is the published v1 ShellCreateSessionRequest.
type v1CreateBody struct {
	ID               string  `json:"id"`
	ExecDir          string  `json:"exec_dir"`
	NoChangeTimeout  *uint64 `json:"no_change_timeout"`
	PreserveSymlinks bool    `json:"preserve_symlinks"`
	User             string  `json:"user"`
}

func (p *Plane) v1Create(_ *http.Request, b v1CreateBody) (Created, error) {
	o := Options{ID: b.ID, Cwd: b.ExecDir, User: b.User, PreserveSymlinks: b.PreserveSymlinks}
	if d := wholeSeconds(b.NoChangeTimeout); d != nil {
		o.NoChangeTimeout = noChangeOption(*d)
	}
	return p.e.Create(o)
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

func (p *Plane) v1Update(_ *http.Request, b v1UpdateBody) (v1UpdateResult, error) {
	var err error
	if d := wholeSeconds(b.NoChangeTimeout); d != nil {
		err = p.e.SetNoChangeTimeout(b.ID, *d)
	} else {
		_, err = p.e.Session(b.ID)
	}
	return v1UpdateResult{SessionID: b.ID, NoChangeTimeout: b.NoChangeTimeout}, err
}

// v1CloseAll closes every listed terminal; what is still dying has been
// killed, so it answers success whatever the wait found.
func (p *Plane) v1CloseAll(r *http.Request, _ struct{}) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	_ = p.e.CloseSessions(ctx)
	return nil, nil
}

// terminalURLQuery is GET /v1/shell/terminal-url's query.
type terminalURLQuery struct {
	SessionID string `json:"session_id"`
}

// v1TerminalURL is the WebShell page's address for a session (unknown:
// 404), or for a new expiring one.
func (p *Plane) v1TerminalURL(r *http.Request, q terminalURLQuery) (string, error) {
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
		return "", err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if fp := r.Header.Get("X-Forwarded-Proto"); fp == "http" || fp == "https" {
		scheme = fp
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: p.prefix + "/terminal", RawQuery: url.Values{"session_id": {id}}.Encode()}
	return u.String(), nil
}
