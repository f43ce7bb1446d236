package code

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// mountV1 registers the 1.x compatibility routes: /v1/code, /v1/jupyter
// (python on the kernel) and /v1/nodejs, adapted onto the same engine.
// A field refusal answers as the validation body ([fieldFail]).
func (p *Plane) mountV1(mux *http.ServeMux) {
	mux.Handle("POST /v1/code/execute", api.Route[executeBody, *Result]{Op: p.codeExecuteV1, Reply: runReply(codeResultV1Of), Fail: fieldFail})
	mux.Handle("GET /v1/code/info", api.Route[struct{}, InfoV1]{From: api.FromNothing, Op: p.infoV1})

	mux.Handle("POST /v1/jupyter/execute", p.jupyter(api.Route[jupyterBody, *Result]{Op: p.jupyterExecute, Reply: runReply(jupyterResultOf), Fail: fieldFail}))
	mux.Handle("GET /v1/jupyter/info", p.jupyter(api.Route[struct{}, map[string]any]{From: api.FromNothing, Op: p.jupyterInfo}))
	mux.Handle("GET /v1/jupyter/sessions", p.jupyter(api.Route[struct{}, sessionList]{From: api.FromNothing, Op: p.listSessions(Python)}))
	mux.Handle("DELETE /v1/jupyter/sessions", p.jupyter(api.Route[struct{}, cleaned]{From: api.FromNothing, Op: p.closeSessions(Python)}))
	mux.Handle("POST /v1/jupyter/sessions/create", p.jupyter(api.Route[jupyterCreateBody, map[string]string]{Op: p.jupyterCreate, Fail: fieldFail}))
	mux.Handle("GET /v1/jupyter/sessions/{session_id}", p.jupyter(api.Route[struct{}, SessionInfo]{From: api.FromNothing, Op: p.getSession(Python)}))
	mux.Handle("DELETE /v1/jupyter/sessions/{session_id}", p.jupyter(api.Route[struct{}, string]{From: api.FromNothing, Op: p.jupyterDelete,
		Reply: func(w http.ResponseWriter, _ *http.Request, msg string) { api.OKMessage(w, msg, nil) },
		// the published 1.x answer to an unknown session
		Override: []api.Override{api.AsStatus(ErrNotFound, http.StatusOK)}}))
	// The published daemon answers 501 to both (kernel interrupt and
	// restart are not implemented there); clients written for it expect
	// that answer.
	mux.Handle("POST /v1/jupyter/sessions/{session_id}/interrupt", notImplemented(
		"Session interrupt is not supported: a cell past its timeout is interrupted on its own"))
	mux.Handle("POST /v1/jupyter/sessions/{session_id}/restart", notImplemented(
		"Session restart is not supported: delete the session and run in a new one"))

	mux.Handle("POST /v1/nodejs/execute", api.Route[nodeBody, *Result]{Op: p.nodeExecute, Reply: runReply(nodeResultOf), Fail: fieldFail})
	mux.Handle("GET /v1/nodejs/info", api.Route[struct{}, map[string]any]{From: api.FromNothing, Op: p.nodeInfo})
	mux.Handle("GET /v1/nodejs/sessions", api.Route[struct{}, sessionList]{From: api.FromNothing, Op: p.listSessions(JavaScript)})
	mux.Handle("POST /v1/nodejs/sessions", api.Route[nodeCreateBody, map[string]any]{Op: p.nodeCreate, Fail: fieldFail})
	mux.Handle("DELETE /v1/nodejs/sessions", api.Route[struct{}, cleaned]{From: api.FromNothing, Op: p.closeSessions(JavaScript)})
	mux.Handle("GET /v1/nodejs/sessions/{session_id}", api.Route[struct{}, map[string]any]{From: api.FromNothing, Op: p.nodeSession, Fail: fieldFail})
	mux.Handle("DELETE /v1/nodejs/sessions/{session_id}", api.Route[struct{}, map[string]bool]{From: api.FromNothing, Op: p.nodeDelete})
}

// InfoV1 is GET /v1/code/info: [Info] with languages as the 1.x
// clients' objects (the AIO SDKs' CodeInfoResponse: their Python and Go
// SDKs decode each entry as {language, description, runtime_version,
// default_timeout, max_timeout, details} and fail on a bare string).
// The outer Languages field shadows Info's list of names.
type InfoV1 struct {
	Info
	Languages []LanguageInfo `json:"languages"`
}

// LanguageInfo is one language of [InfoV1]. Both languages are always
// listed (the daemon serves both); details.available says whether an
// interpreter was found, and RuntimeVersion is the probed version
// ("3.11.2", "20.19.2"), null when none was found.
type LanguageInfo struct {
	Language       string         `json:"language"`
	Description    string         `json:"description"`
	RuntimeVersion *string        `json:"runtime_version"`
	DefaultTimeout int            `json:"default_timeout"`
	MaxTimeout     int            `json:"max_timeout"`
	Details        map[string]any `json:"details"`
}

func (p *Plane) infoV1(*http.Request, struct{}) (InfoV1, error) {
	in := p.e.Info()
	py, node := p.e.pythonProbe(), p.e.nodeProbe()
	return InfoV1{Info: in, Languages: []LanguageInfo{
		languageInfo(Python, "Python on a persistent ipykernel per session", py, in),
		languageInfo(JavaScript, "JavaScript on a persistent node REPL per session", node, in),
	}}, nil
}

// languageInfo describes lang as its probe i found it.
func languageInfo(lang, what string, i interpreter, in Info) LanguageInfo {
	ri := runtimeInfo(i)
	l := LanguageInfo{Language: lang, RuntimeVersion: ri.Version, DefaultTimeout: in.DefaultTimeout, MaxTimeout: in.MaxTimeout,
		Details: map[string]any{"available": i.ok, "path": nullable(i.path)}}
	switch {
	case i.ok:
		l.Description = what + " (" + i.version + ", " + i.path + ")"
	case i.err != nil:
		l.Description = what + ": not available: " + i.err.Message
		l.Details["hint"] = i.err.Hint
	default:
		l.Description = what + ": not available"
	}
	return l
}

// fieldFail answers a v1 refusal: a field refusal (ErrInvalid) as a 422
// errors[] entry (type enum for the language), anything else by its
// kind.
func fieldFail(w http.ResponseWriter, _ *http.Request, err error) {
	if errors.Is(err, ErrInvalid) {
		e := api.Refusal(err)
		typ := serde.TypeValue
		if e.Field == "language" {
			typ = "enum"
		}
		api.Invalid(w, &serde.Error{Location: []string{"body", e.Field}, Message: e.Message, Type: typ})
		return
	}
	api.WriteError(w, err)
}

func notImplemented(msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		api.WriteError(w, api.NewError(ErrNotImplemented, msg))
	}
}

// v1Outputs converts outputs to their all-keys form.
func v1Outputs(outs []Output) []V1Output {
	v := make([]V1Output, len(outs))
	for i, o := range outs {
		v[i] = o.V1()
	}
	return v
}

// nullable is s, or nil when empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// codeResultV1 is /v1/code/execute's data: empty streams are null, and
// 1.x's top-level traceback is kept.
type codeResultV1 struct {
	Code           string     `json:"code"`
	Language       string     `json:"language"`
	Status         string     `json:"status"`
	ExecutionCount *int       `json:"execution_count"`
	ExitCode       int        `json:"exit_code"`
	Outputs        []V1Output `json:"outputs"`
	Stdout         *string    `json:"stdout"`
	Stderr         *string    `json:"stderr"`
	Traceback      []string   `json:"traceback"`
	SessionID      *string    `json:"session_id"`
}

func (p *Plane) codeExecuteV1(r *http.Request, b executeBody) (*Result, error) {
	req, err := b.request()
	return p.run(r, req, err)
}

// codeResultV1Of is /v1/code/execute's data.
func codeResultV1Of(res *Result) any {
	d := codeResultV1{Code: res.Code, Language: res.Language, Status: res.Status, ExecutionCount: res.ExecutionCount,
		ExitCode: res.ExitCode, Outputs: v1Outputs(res.Outputs), Stdout: nullable(res.Stdout), Stderr: nullable(res.Stderr),
		SessionID: res.SessionID}
	for _, o := range res.Outputs {
		if o.OutputType == OutputError {
			d.Traceback = o.traceback()
		}
	}
	return d
}

// jupyter guards a /v1/jupyter route: without a kernel interpreter the
// plane is not implemented here (501, with what to install).
func (p *Plane) jupyter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if py := p.e.pythonProbe(); !py.ok {
			api.WriteError(w, api.NewError(ErrNotImplemented, "Jupyter is not available on this daemon: "+py.err.Message).WithHint(py.err.Hint))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkKernel refuses a kernel_name other than the one served.
func checkKernel(name string) error {
	if name == "" || name == KernelName {
		return nil
	}
	return invalid("kernel_name", "unknown kernel '"+name+"'; available: "+KernelName)
}

// jupyterBody is the published JupyterExecuteRequest (plus stateful).
type jupyterBody struct {
	Code       string   `json:"code" serde:"required"`
	Timeout    *float64 `json:"timeout"`
	KernelName string   `json:"kernel_name"`
	SessionID  string   `json:"session_id"`
	Stateful   bool     `json:"stateful"`
	Cwd        string   `json:"cwd"`
}

// jupyterResult is the published JupyterExecuteResponse.
type jupyterResult struct {
	KernelName     string     `json:"kernel_name"`
	SessionID      *string    `json:"session_id"`
	Status         string     `json:"status"`
	ExecutionCount *int       `json:"execution_count"`
	Outputs        []V1Output `json:"outputs"`
	Code           string     `json:"code"`
	MsgID          *string    `json:"msg_id"`
}

func (p *Plane) jupyterExecute(r *http.Request, b jupyterBody) (*Result, error) {
	d, err := seconds(b.Timeout)
	if err == nil {
		err = checkKernel(b.KernelName)
	}
	req := Request{Language: Python, Code: b.Code, SessionID: b.SessionID, Stateful: b.Stateful, Timeout: d, Cwd: b.Cwd}
	if err == nil {
		if _, cerr := p.e.cwd(b.Cwd); cerr != nil { // a run-time failure on this route, not a refusal
			return p.e.finish(&Result{Code: b.Code, Language: Python},
				outcome{Status: StatusError, Outputs: []Output{errorOutput("DirectoryError", "cwd is not a directory: "+b.Cwd)}}, nil), nil
		}
	}
	return p.run(r, req, err)
}

// jupyterResultOf is /v1/jupyter/execute's data.
func jupyterResultOf(res *Result) any {
	return jupyterResult{KernelName: KernelName, SessionID: res.SessionID, Status: res.Status,
		ExecutionCount: res.ExecutionCount, Outputs: v1Outputs(res.Outputs), Code: res.Code, MsgID: nullable(res.MsgID)}
}

func (p *Plane) jupyterInfo(*http.Request, struct{}) (map[string]any, error) {
	return map[string]any{
		"default_kernel": KernelName, "available_kernels": []string{KernelName},
		"active_sessions":         len(p.e.Sessions(Python)),
		"session_timeout_seconds": int(p.e.cfg.KernelIdle.Seconds()), "max_sessions": p.e.cfg.MaxKernelSessions,
		"description":      "Python " + p.e.pythonProbe().version + " on an embedded ipykernel (" + p.e.pythonProbe().path + ")",
		"kernel_detection": "probed: the daemon's python imports ipykernel",
	}, nil
}

// jupyterCreateBody is the published JupyterCreateSessionRequest.
type jupyterCreateBody struct {
	SessionID  string `json:"session_id"`
	KernelName string `json:"kernel_name"`
	Cwd        string `json:"cwd"`
}

func (p *Plane) jupyterCreate(r *http.Request, b jupyterCreateBody) (map[string]string, error) {
	if err := checkKernel(b.KernelName); err != nil {
		return nil, err
	}
	info, created, err := p.e.CreateSession(r.Context(), SessionOptions{Language: Python, SessionID: b.SessionID, Cwd: b.Cwd})
	if err != nil {
		return nil, err
	}
	return map[string]string{"session_id": info.SessionID, "kernel_name": KernelName, "message": createdMessage(created)}, nil
}

func createdMessage(created bool) string {
	if created {
		return "Session created"
	}
	return "Session already exists"
}

// jupyterDelete answers the route's own message; an unknown session is
// a not-found refusal, which this route answers 200.
func (p *Plane) jupyterDelete(r *http.Request, _ struct{}) (string, error) {
	id := r.PathValue("session_id")
	if !p.e.CloseSession(Python, id) {
		return "", api.NewError(ErrNotFound, "Session not found: "+id)
	}
	return "Session " + id + " deleted", nil
}

// nodeBody is the published NodeJSExecuteRequest; stdin, files and
// version are accepted and ignored.
type nodeBody struct {
	Code      string   `json:"code" serde:"required"`
	Timeout   *float64 `json:"timeout"`
	Stateful  bool     `json:"stateful"`
	SessionID string   `json:"session_id"`
	Cwd       string   `json:"cwd"`
	User      string   `json:"user"`
}

// nodeResult is the published NodeJSExecuteResponse: empty streams are
// "" here.
type nodeResult struct {
	Language       string     `json:"language"`
	Status         string     `json:"status"`
	ExecutionCount *int       `json:"execution_count"`
	Outputs        []V1Output `json:"outputs"`
	Code           string     `json:"code"`
	Stdout         string     `json:"stdout"`
	Stderr         string     `json:"stderr"`
	ExitCode       int        `json:"exit_code"`
	SessionID      *string    `json:"session_id"`
}

func (p *Plane) nodeExecute(r *http.Request, b nodeBody) (*Result, error) {
	req, err := executeBody{Language: JavaScript, Code: b.Code, SessionID: b.SessionID, Stateful: b.Stateful,
		Timeout: b.Timeout, Cwd: b.Cwd, User: b.User}.request()
	return p.run(r, req, err)
}

// nodeResultOf is /v1/nodejs/execute's data.
func nodeResultOf(res *Result) any {
	return nodeResult{Language: JavaScript, Status: res.Status, ExecutionCount: res.ExecutionCount,
		Outputs: v1Outputs(res.Outputs), Code: res.Code, Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode,
		SessionID: res.SessionID}
}

func (p *Plane) nodeInfo(*http.Request, struct{}) (map[string]any, error) {
	n := p.e.nodeProbe()
	if !n.ok {
		return nil, n.err
	}
	return map[string]any{
		"node_version": "v" + n.version, "npm_version": p.e.npmVersion(), "supported_languages": []string{JavaScript},
		"description":       "JavaScript on a persistent node REPL per session (" + n.path + ")",
		"runtime_directory": nil, "global_npm_directory": nil, "runtime_packages": []any{}, "global_packages": []any{},
		"error": nil, "available_versions": []string{}, "current_version": "v" + n.version,
	}, nil
}

// nodeCreateBody is the published NodeJSCreateSessionRequest;
// max_idle_time (ms) replaces the plane's idle limit for the session.
type nodeCreateBody struct {
	SessionID   string  `json:"session_id"`
	Cwd         string  `json:"cwd"`
	User        string  `json:"user"`
	MaxIdleTime *uint64 `json:"max_idle_time"`
}

func (p *Plane) nodeCreate(r *http.Request, b nodeCreateBody) (map[string]any, error) {
	o := SessionOptions{Language: JavaScript, SessionID: b.SessionID, Cwd: b.Cwd, User: b.User}
	if b.MaxIdleTime != nil {
		o.MaxIdle = time.Duration(min(*b.MaxIdleTime, uint64(math.MaxInt64/time.Millisecond))) * time.Millisecond
	}
	info, created, err := p.e.CreateSession(r.Context(), o)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session_id": info.SessionID, "created": created, "message": createdMessage(created), "session": info}, nil
}

func (p *Plane) nodeSession(r *http.Request, _ struct{}) (map[string]any, error) {
	info, err := p.e.Session(JavaScript, r.PathValue("session_id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": info}, nil
}

func (p *Plane) nodeDelete(r *http.Request, _ struct{}) (map[string]bool, error) {
	return map[string]bool{"deleted": p.e.CloseSession(JavaScript, r.PathValue("session_id"))}, nil
}
