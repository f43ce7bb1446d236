package code

import (
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// mountV1 registers the 1.x compatibility routes: /v1/code, /v1/jupyter
// (python on the kernel) and /v1/nodejs, adapted onto the same engine.
func (p *Plane) mountV1(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/code/execute", p.codeExecuteV1)
	mux.HandleFunc("GET /v1/code/info", p.info)

	mux.HandleFunc("POST /v1/jupyter/execute", p.jupyter(p.jupyterExecute))
	mux.HandleFunc("GET /v1/jupyter/info", p.jupyter(p.jupyterInfo))
	mux.HandleFunc("GET /v1/jupyter/sessions", p.jupyter(p.listSessionsOf(Python)))
	mux.HandleFunc("DELETE /v1/jupyter/sessions", p.jupyter(p.deleteSessions(Python)))
	mux.HandleFunc("POST /v1/jupyter/sessions/create", p.jupyter(p.jupyterCreate))
	mux.HandleFunc("GET /v1/jupyter/sessions/{session_id}", p.jupyter(p.getSession(Python)))
	mux.HandleFunc("DELETE /v1/jupyter/sessions/{session_id}", p.jupyter(p.jupyterDelete))
	mux.HandleFunc("POST /v1/jupyter/sessions/{session_id}/interrupt", notImplemented(
		"Session interrupt is not supported: a cell past its timeout is interrupted on its own"))
	mux.HandleFunc("POST /v1/jupyter/sessions/{session_id}/restart", notImplemented(
		"Session restart is not supported: delete the session and run in a new one"))

	mux.HandleFunc("POST /v1/nodejs/execute", p.nodeExecute)
	mux.HandleFunc("GET /v1/nodejs/info", p.nodeInfo)
	mux.HandleFunc("GET /v1/nodejs/sessions", p.listSessionsOf(JavaScript))
	mux.HandleFunc("POST /v1/nodejs/sessions", p.nodeCreate)
	mux.HandleFunc("DELETE /v1/nodejs/sessions", p.deleteSessions(JavaScript))
	mux.HandleFunc("GET /v1/nodejs/sessions/{session_id}", p.nodeSession)
	mux.HandleFunc("DELETE /v1/nodejs/sessions/{session_id}", p.nodeDelete)
}

func notImplemented(msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		api.Fail(w, http.StatusNotImplemented, msg, nil, "")
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

func (p *Plane) codeExecuteV1(w http.ResponseWriter, r *http.Request) {
	var b executeBody
	if !api.Body(w, r, &b) {
		return
	}
	req, err := b.request()
	res, ok := p.run(w, r, req, err, true)
	if !ok {
		return
	}
	d := codeResultV1{Code: res.Code, Language: res.Language, Status: res.Status, ExecutionCount: res.ExecutionCount,
		ExitCode: res.ExitCode, Outputs: v1Outputs(res.Outputs), Stdout: nullable(res.Stdout), Stderr: nullable(res.Stderr),
		SessionID: res.SessionID}
	for _, o := range res.Outputs {
		if o.OutputType == OutputError {
			d.Traceback = o.traceback()
		}
	}
	result(w, res, d)
}

// jupyter guards a /v1/jupyter route: without a kernel interpreter the
// plane is not implemented here (501, with what to install).
func (p *Plane) jupyter(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if py := p.e.pythonProbe(); !py.ok {
			api.Fail(w, http.StatusNotImplemented, "Jupyter is not available on this daemon: "+py.err.Message, nil, py.err.Hint)
			return
		}
		h(w, r)
	}
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

func (p *Plane) jupyterExecute(w http.ResponseWriter, r *http.Request) {
	var b jupyterBody
	if !api.Body(w, r, &b) {
		return
	}
	d, err := seconds(b.Timeout)
	if err == nil {
		err = checkKernel(b.KernelName)
	}
	req := Request{Language: Python, Code: b.Code, SessionID: b.SessionID, Stateful: b.Stateful, Timeout: d, Cwd: b.Cwd}
	if err == nil {
		if _, cerr := p.e.cwd(b.Cwd); cerr != nil { // a run-time failure on this route, not a refusal
			res := p.e.finish(&Result{Code: b.Code, Language: Python},
				outcome{Status: StatusError, Outputs: []Output{errorOutput("DirectoryError", "cwd is not a directory: "+b.Cwd)}}, nil)
			result(w, res, jupyterResult{KernelName: KernelName, Status: res.Status, Outputs: v1Outputs(res.Outputs), Code: b.Code})
			return
		}
	}
	res, ok := p.run(w, r, req, err, true)
	if ok {
		result(w, res, jupyterResult{KernelName: KernelName, SessionID: res.SessionID, Status: res.Status,
			ExecutionCount: res.ExecutionCount, Outputs: v1Outputs(res.Outputs), Code: res.Code, MsgID: nullable(res.MsgID)})
	}
}

func (p *Plane) jupyterInfo(w http.ResponseWriter, _ *http.Request) {
	api.OK(w, map[string]any{
		"default_kernel": KernelName, "available_kernels": []string{KernelName},
		"active_sessions":         len(p.e.Sessions(Python)),
		"session_timeout_seconds": int(p.e.cfg.KernelIdle.Seconds()), "max_sessions": p.e.cfg.MaxKernelSessions,
		"description":      "Python " + p.e.pythonProbe().version + " on an embedded ipykernel (" + p.e.pythonProbe().path + ")",
		"kernel_detection": "probed: the daemon's python imports ipykernel",
	})
}

// jupyterCreateBody is the published JupyterCreateSessionRequest.
type jupyterCreateBody struct {
	SessionID  string `json:"session_id"`
	KernelName string `json:"kernel_name"`
	Cwd        string `json:"cwd"`
}

func (p *Plane) jupyterCreate(w http.ResponseWriter, r *http.Request) {
	var b jupyterCreateBody
	if !api.Body(w, r, &b) {
		return
	}
	if err := checkKernel(b.KernelName); err != nil {
		fail(w, err, true)
		return
	}
	info, created, err := p.e.CreateSession(r.Context(), SessionOptions{Language: Python, SessionID: b.SessionID, Cwd: b.Cwd})
	if err != nil {
		fail(w, err, true)
		return
	}
	api.OK(w, map[string]string{"session_id": info.SessionID, "kernel_name": KernelName, "message": createdMessage(created)})
}

func createdMessage(created bool) string {
	if created {
		return "Session created"
	}
	return "Session already exists"
}

func (p *Plane) jupyterDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	if !p.e.DeleteSession(Python, id) {
		api.Fail(w, http.StatusOK, "Session not found: "+id, nil)
		return
	}
	api.OKMessage(w, "Session "+id+" deleted", nil)
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

func (p *Plane) nodeExecute(w http.ResponseWriter, r *http.Request) {
	var b nodeBody
	if !api.Body(w, r, &b) {
		return
	}
	req, err := executeBody{Language: JavaScript, Code: b.Code, SessionID: b.SessionID, Stateful: b.Stateful,
		Timeout: b.Timeout, Cwd: b.Cwd, User: b.User}.request()
	if res, ok := p.run(w, r, req, err, true); ok {
		result(w, res, nodeResult{Language: JavaScript, Status: res.Status, ExecutionCount: res.ExecutionCount,
			Outputs: v1Outputs(res.Outputs), Code: res.Code, Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode,
			SessionID: res.SessionID})
	}
}

func (p *Plane) nodeInfo(w http.ResponseWriter, _ *http.Request) {
	n := p.e.nodeProbe()
	if !n.ok {
		fail(w, n.err, true)
		return
	}
	api.OK(w, map[string]any{
		"node_version": "v" + n.version, "npm_version": p.e.npmVersion(), "supported_languages": []string{JavaScript},
		"description":       "JavaScript on a persistent node REPL per session (" + n.path + ")",
		"runtime_directory": nil, "global_npm_directory": nil, "runtime_packages": []any{}, "global_packages": []any{},
		"error": nil, "available_versions": []string{}, "current_version": "v" + n.version,
	})
}

// nodeCreateBody is the published NodeJSCreateSessionRequest;
// max_idle_time is accepted and ignored (the plane's idle limit holds).
type nodeCreateBody struct {
	SessionID string `json:"session_id"`
	Cwd       string `json:"cwd"`
	User      string `json:"user"`
}

func (p *Plane) nodeCreate(w http.ResponseWriter, r *http.Request) {
	var b nodeCreateBody
	if !api.Body(w, r, &b) {
		return
	}
	info, created, err := p.e.CreateSession(r.Context(), SessionOptions{Language: JavaScript, SessionID: b.SessionID, Cwd: b.Cwd, User: b.User})
	if err != nil {
		fail(w, err, true)
		return
	}
	api.OK(w, map[string]any{"session_id": info.SessionID, "created": created, "message": createdMessage(created), "session": info})
}

func (p *Plane) nodeSession(w http.ResponseWriter, r *http.Request) {
	info, err := p.e.Session(JavaScript, r.PathValue("session_id"))
	if err != nil {
		fail(w, err, true)
		return
	}
	api.OK(w, map[string]any{"session": info})
}

func (p *Plane) nodeDelete(w http.ResponseWriter, r *http.Request) {
	api.OK(w, map[string]bool{"deleted": p.e.DeleteSession(JavaScript, r.PathValue("session_id"))})
}
