package code

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/janitor"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Plane is the code plane's HTTP surface over one [Engine]. It owns the
// engine's idle-session janitor.
type Plane struct {
	e       *Engine
	janitor *janitor.Janitor
}

// New returns a plane with its engine and a running janitor; stop both
// with [Plane.Close]. Interpreters are probed on first need.
func New(cfg Config) *Plane {
	e := NewEngine(cfg)
	every := max(min(e.cfg.KernelIdle, e.cfg.SessionIdle)/4, 100*time.Millisecond)
	return &Plane{e: e, janitor: janitor.Start(janitor.Every(every, func(time.Time) { e.reclaim() }))}
}

// Engine returns the engine behind the routes, for other callers (the
// MCP tool, the Computer).
func (p *Plane) Engine() *Engine { return p.e }

// Close refuses new runs, kills every kernel and node process and stops
// the janitor. It returns when they are gone or ctx ends.
func (p *Plane) Close(ctx context.Context) error {
	err := p.e.Close(ctx)
	if jerr := p.janitor.Stop(ctx); jerr != nil {
		return errors.Join(err, fmt.Errorf("code: janitor: %w", jerr))
	}
	return err
}

// Mount registers the v2 routes and the v1 compatibility routes.
func (p *Plane) Mount(mux *http.ServeMux) {
	mux.Handle("POST /v2/code/execute", api.Route[executeBody, *Result]{Op: p.execute, Reply: runReply(func(r *Result) any { return r })})
	mux.Handle("GET /v2/code/info", api.Route[struct{}, Info]{From: api.FromNothing, Op: p.info})
	mux.Handle("POST /v2/code/sessions", api.Route[sessionBody, SessionInfo]{Op: p.createSession})
	mux.Handle("GET /v2/code/sessions", api.Route[struct{}, sessionList]{From: api.FromNothing, Op: p.listSessions("")})
	mux.Handle("DELETE /v2/code/sessions", api.Route[struct{}, cleaned]{From: api.FromNothing, Op: p.closeSessions("")})
	mux.Handle("GET /v2/code/sessions/{session_id}", api.Route[struct{}, SessionInfo]{From: api.FromNothing, Op: p.getSession("")})
	mux.Handle("DELETE /v2/code/sessions/{session_id}", api.Route[struct{}, closed]{From: api.FromNothing, Op: p.closeSession})
	p.mountV1(mux)
}

// seconds converts an optional timeout in seconds (absent: 0, the
// engine's default).
func seconds(f *float64) (time.Duration, error) {
	d, err := sessions.Seconds(f, 0, time.Second, MaxTimeout)
	if err != nil {
		return 0, invalid("timeout", "timeout must be between 1 and 900 seconds")
	}
	return d, nil
}

// executeBody is POST /v2/code/execute and /v1/code/execute.
type executeBody struct {
	Language  string   `json:"language" serde:"required"`
	Code      string   `json:"code" serde:"required"`
	SessionID string   `json:"session_id"`
	Stateful  bool     `json:"stateful"`
	Timeout   *float64 `json:"timeout"`
	Cwd       string   `json:"cwd"`
	User      string   `json:"user"`
}

// request checks the fields every execute route shares.
func (b executeBody) request() (Request, error) {
	d, err := seconds(b.Timeout)
	return Request{Language: b.Language, Code: b.Code, SessionID: b.SessionID, Stateful: b.Stateful, Timeout: d,
		Cwd: b.Cwd, User: b.User}, err
}

// run checks a request's fields (err: the first refusal) and runs it.
func (p *Plane) run(r *http.Request, req Request, err error) (*Result, error) {
	if err != nil {
		return nil, err
	}
	return p.e.Execute(r.Context(), req)
}

// messages are the envelope messages of a run by its status.
var messages = map[string]string{StatusOK: "ok", StatusError: "Code execution failed", StatusTimeout: "Code execution timed out"}

// runReply answers a run with the data a route shapes from it; success
// follows the run's status.
func runReply(data func(*Result) any) func(http.ResponseWriter, *http.Request, *Result) {
	return func(w http.ResponseWriter, _ *http.Request, res *Result) {
		api.JSON(w, http.StatusOK, api.Envelope{Success: res.Status == StatusOK, Message: messages[res.Status], Data: data(res)})
	}
}

func (p *Plane) execute(r *http.Request, b executeBody) (*Result, error) {
	req, err := b.request()
	if _, ok := ParseLanguage(b.Language); !ok {
		err = invalid("language", UnsupportedLanguage(b.Language))
	} else if err == nil && b.Code == "" {
		err = invalid("code", "code must not be empty")
	}
	return p.run(r, req, err)
}

// RuntimeInfo is an interpreter's availability.
type RuntimeInfo struct {
	Available bool    `json:"available"`
	Version   *string `json:"version"`
}

// Info is GET /v2/code/info (and /v1/code/info).
type Info struct {
	Backend           *string     `json:"backend"`
	Kinds             []string    `json:"kinds"`
	Languages         []string    `json:"languages"`
	Python            RuntimeInfo `json:"python"`
	Node              RuntimeInfo `json:"node"`
	MaxSessions       int         `json:"max_sessions"`
	MaxKernelSessions int         `json:"max_kernel_sessions"`
	DefaultTimeout    int         `json:"default_timeout"`
	MaxTimeout        int         `json:"max_timeout"`
	Prewarmed         int         `json:"prewarmed"`
	// DefaultPython and DefaultNode are the binaries runs spawn.
	DefaultPython *string `json:"default_python"`
	DefaultNode   *string `json:"default_node"`
}

func runtimeInfo(i interpreter) RuntimeInfo {
	ri := RuntimeInfo{Available: i.ok}
	if i.version != "" {
		ri.Version = &i.version
	}
	return ri
}

// Info reports the backends, languages and limits in effect.
func (e *Engine) Info() Info {
	py, node := e.pythonProbe(), e.nodeProbe()
	in := Info{Kinds: []string{}, Languages: []string{Python, JavaScript}, Python: runtimeInfo(py), Node: runtimeInfo(node),
		MaxSessions: e.cfg.MaxSessions, MaxKernelSessions: e.cfg.MaxKernelSessions,
		DefaultTimeout: int(DefaultTimeout.Seconds()), MaxTimeout: int(MaxTimeout.Seconds())}
	if py.ok {
		kernel := "kernel"
		in.Backend, in.DefaultPython, in.Kinds = &kernel, &py.path, append(in.Kinds, "python")
	}
	if node.ok {
		in.DefaultNode, in.Kinds = &node.path, append(in.Kinds, "nodejs")
	}
	if py.ok {
		in.Kinds = append(in.Kinds, "jupyter")
	}
	return in
}

func (p *Plane) info(*http.Request, struct{}) (Info, error) { return p.e.Info(), nil }

// sessionBody is POST /v2/code/sessions.
type sessionBody struct {
	Language  string `json:"language"`
	SessionID string `json:"session_id"`
	Cwd       string `json:"cwd"`
	User      string `json:"user"`
}

func (p *Plane) createSession(r *http.Request, b sessionBody) (SessionInfo, error) {
	info, _, err := p.e.CreateSession(r.Context(), SessionOptions{Language: b.Language, SessionID: b.SessionID, Cwd: b.Cwd, User: b.User})
	return info, err
}

// sessionMap keys sessions by id; a javascript session sharing its id
// with a python one is keyed "javascript:<id>".
func sessionMap(list []SessionInfo) map[string]SessionInfo {
	m := make(map[string]SessionInfo, len(list))
	for _, s := range list {
		k := s.SessionID
		if _, dup := m[k]; dup {
			k = s.Language + ":" + k
		}
		m[k] = s
	}
	return m
}

// sessionList is {sessions: {id: session}}.
type sessionList struct {
	Sessions map[string]SessionInfo `json:"sessions"`
}

// listSessions lists the sessions of lang ("" all).
func (p *Plane) listSessions(lang string) func(*http.Request, struct{}) (sessionList, error) {
	return func(*http.Request, struct{}) (sessionList, error) {
		return sessionList{Sessions: sessionMap(p.e.Sessions(lang))}, nil
	}
}

// getSession describes one session of lang ("" any), 404 when unknown.
func (p *Plane) getSession(lang string) func(*http.Request, struct{}) (SessionInfo, error) {
	return func(r *http.Request, _ struct{}) (SessionInfo, error) {
		return p.e.Session(lang, r.PathValue("session_id"))
	}
}

// closed answers DELETE /v2/code/sessions/{session_id}.
type closed struct {
	SessionID string `json:"session_id"`
	Deleted   bool   `json:"deleted"`
}

func (p *Plane) closeSession(r *http.Request, _ struct{}) (closed, error) {
	id := r.PathValue("session_id")
	return closed{SessionID: id, Deleted: p.e.CloseSession("", id)}, nil
}

// cleaned answers DELETE of a session list.
type cleaned struct {
	CleanedSessions int `json:"cleaned_sessions"`
}

// closeSessions ends every session of lang ("" all).
func (p *Plane) closeSessions(lang string) func(*http.Request, struct{}) (cleaned, error) {
	return func(*http.Request, struct{}) (cleaned, error) {
		return cleaned{CleanedSessions: p.e.CloseSessions(lang)}, nil
	}
}
