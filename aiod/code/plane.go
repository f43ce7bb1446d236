package code

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/janitor"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
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
	e := newEngine(cfg)
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
	mux.HandleFunc("POST /v2/code/execute", p.execute)
	mux.HandleFunc("GET /v2/code/info", p.info)
	mux.HandleFunc("POST /v2/code/sessions", p.createSession)
	mux.HandleFunc("GET /v2/code/sessions", p.listSessions)
	mux.HandleFunc("DELETE /v2/code/sessions", p.deleteSessions(""))
	mux.HandleFunc("GET /v2/code/sessions/{session_id}", p.getSession(""))
	mux.HandleFunc("DELETE /v2/code/sessions/{session_id}", p.deleteSession)
	p.mountV1(mux)
}

// fail answers an engine error: on v1 a field refusal is a 422 errors[]
// entry (type enum for the language), on v2 its message.
func fail(w http.ResponseWriter, err error, v1 bool) {
	e := asError(err)
	if v1 && errors.Is(err, ErrInvalid) {
		typ := serde.TypeValue
		if e.Field == "language" {
			typ = "enum"
		}
		api.Invalid(w, &serde.Error{Location: []string{"body", e.Field}, Message: e.Message, Type: typ})
		return
	}
	api.Fail(w, statusOf(err), e.Message, nil, e.Hint)
}

// seconds converts an optional timeout in seconds (0: the default).
func seconds(f *float64) (time.Duration, error) {
	if f == nil {
		return 0, nil
	}
	if math.IsNaN(*f) || *f < 1 || *f > MaxTimeout.Seconds() {
		return 0, invalid("timeout", "timeout must be between 1 and 900 seconds")
	}
	return time.Duration(*f * float64(time.Second)), nil
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

// run executes req, having answered on failure.
func (p *Plane) run(w http.ResponseWriter, r *http.Request, req Request, err error, v1 bool) (*Result, bool) {
	var res *Result
	if err == nil {
		res, err = p.e.Execute(r.Context(), req)
	}
	if err != nil {
		fail(w, err, v1)
		return nil, false
	}
	return res, true
}

// result answers a run: success follows its status.
func result(w http.ResponseWriter, res *Result, data any) {
	msg := map[string]string{StatusOK: "ok", StatusError: "Code execution failed", StatusTimeout: "Code execution timed out"}[res.Status]
	api.JSON(w, http.StatusOK, api.Envelope{Success: res.Status == StatusOK, Message: msg, Data: data})
}

func (p *Plane) execute(w http.ResponseWriter, r *http.Request) {
	var b executeBody
	if !api.Body(w, r, &b) {
		return
	}
	req, err := b.request()
	if _, ok := ParseLanguage(b.Language); !ok {
		err = invalid("language", UnsupportedLanguage(b.Language))
	} else if err == nil && b.Code == "" {
		err = invalid("code", "code must not be empty")
	}
	if res, ok := p.run(w, r, req, err, false); ok {
		result(w, res, res)
	}
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

func (p *Plane) info(w http.ResponseWriter, _ *http.Request) { api.OK(w, p.e.Info()) }

// sessionBody is POST /v2/code/sessions.
type sessionBody struct {
	Language  string `json:"language"`
	SessionID string `json:"session_id"`
	Cwd       string `json:"cwd"`
	User      string `json:"user"`
}

func (p *Plane) createSession(w http.ResponseWriter, r *http.Request) {
	var b sessionBody
	if !api.Body(w, r, &b) {
		return
	}
	info, _, err := p.e.CreateSession(r.Context(), SessionOptions(b))
	if err != nil {
		fail(w, err, false)
		return
	}
	api.OK(w, info)
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

// listSessions answers {sessions: {id: session}} for lang ("" all).
func (p *Plane) listSessionsOf(lang string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		api.OK(w, map[string]any{"sessions": sessionMap(p.e.Sessions(lang))})
	}
}

func (p *Plane) listSessions(w http.ResponseWriter, r *http.Request) { p.listSessionsOf("")(w, r) }

// getSession answers one session of lang ("" any), 404 when unknown.
func (p *Plane) getSession(lang string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		info, err := p.e.Session(lang, r.PathValue("session_id"))
		if err != nil {
			fail(w, err, false)
			return
		}
		api.OK(w, info)
	}
}

func (p *Plane) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	api.OK(w, map[string]any{"session_id": id, "deleted": p.e.DeleteSession("", id)})
}

// deleteSessions ends every session of lang ("" all).
func (p *Plane) deleteSessions(lang string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		api.OK(w, map[string]int{"cleaned_sessions": p.e.DeleteSessions(lang)})
	}
}
